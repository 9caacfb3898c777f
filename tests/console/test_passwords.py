"""Console passwords: a hash made with weaker argon2 parameters than today's is made again at the next
sign-in (check_needs_rehash); sign-ins past the bound waiting for argon2's threads are refused, not queued;
the console's unknown paths and a fragment asked by htmx once signed out."""

import asyncpg
import httpx
import pytest
from argon2 import PasswordHasher

from service.errors import Busy
from service.users import passwords, users
from tests.support.console import PASSWORD, user
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def test_a_hash_of_weaker_parameters_is_made_again_at_sign_in(conn: asyncpg.Connection) -> None:
    await user(conn, "ann")
    weak = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1).hash(PASSWORD)
    await conn.execute("UPDATE einmal.console_users SET password_hash = $1", weak)
    assert passwords.HASHER.check_needs_rehash(weak)
    assert await users.sign_in(conn, name="ann", password=PASSWORD) is not None
    stored = await conn.fetchval("SELECT password_hash FROM einmal.console_users")
    assert stored != weak and not passwords.HASHER.check_needs_rehash(stored)
    assert passwords.HASHER.verify(stored, PASSWORD)
    assert await users.sign_in(conn, name="ann", password=PASSWORD) is not None
    assert await conn.fetchval("SELECT password_hash FROM einmal.console_users") == stored  # made once


async def test_past_the_waiting_bound_a_sign_in_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(passwords, "WAITING", 0)
    with pytest.raises(Busy):
        await passwords.verified(None, PASSWORD)
    monkeypatch.setattr(passwords, "WAITING", 1)
    assert await passwords.verified(None, PASSWORD) == (False, False)


async def test_unknown_paths_are_console_pages_and_htmx_is_sent_to_sign_in(conn: asyncpg.Connection, dsn: str) -> None:
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base) as client:
        missing = await client.get("/console/nosuch")
        assert missing.status_code == 404 and "<h1>Not found</h1>" in missing.text
        assert "script-src 'self'" in missing.headers["content-security-policy"]
        wrong = await client.delete("/console/login")
        assert wrong.status_code == 405 and "<h1>Not allowed</h1>" in wrong.text
        polled = await client.get("/console/campaigns/1/progress", headers={"HX-Request": "true"})
        assert (polled.status_code, polled.headers["hx-redirect"]) == (401, "/console/login")
        assert (await client.get("/console")).status_code == 404  # the console is /console/
