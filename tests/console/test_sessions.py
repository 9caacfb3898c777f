"""A console session's forms and its end: a POST without the session's form token, with a wrong one, or from
another site's page is refused and changes nothing; a session ends when idle or old past the limits, and
every session of a user ends when its password changes or the user is removed."""

import asyncpg
import httpx
import pytest

from service.settings import Settings
from service.users import users
from tests.support.console import PASSWORD, form_token, page_token, sign_in, signed_in, user
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def test_a_post_without_the_right_form_token_or_from_another_site_is_refused(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await user(conn, "root")
    async with http_server(dsn) as base, signed_in(base, "root") as client:
        token = await page_token(client)
        for data, headers in (
            ({}, {}),
            ({"form_token": "0" * 64}, {}),
            ({"form_token": token[:-1] + ("0" if token[-1] != "0" else "1")}, {}),
            ({"form_token": token}, {"Origin": "https://evil.example"}),
            ({"form_token": token}, {"Origin": "null"}),
        ):
            refused = await client.post("/console/logout", data=data, headers=headers)
            assert refused.status_code == 403, (data, headers, refused.status_code)
            assert (await client.get("/console/")).status_code == 200  # still signed in
        assert await conn.fetchval("SELECT count(*) FROM einmal.audit_log WHERE action = 'console.logout'") == 0
        assert (await client.post("/console/logout", data={"form_token": token})).status_code == 303
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base) as client:
        page = (await client.get("/console/login")).text
        good = {"form_token": form_token(page), "name": "root", "password": PASSWORD}
        assert (await client.post("/console/login", data={**good, "form_token": "x" * 43})).status_code == 403
        evil = await client.post("/console/login", data=good, headers={"Origin": "https://evil.example"})
        assert evil.status_code == 403
        client.cookies.clear()  # the sign-in page's cookie gone: its token alone is not enough
        assert (await client.post("/console/login", data=good)).status_code == 403
    assert await conn.fetchval("SELECT count(*) FROM einmal.console_sessions") == 0


async def test_a_session_ends_when_idle_when_old_and_when_its_user_changes(conn: asyncpg.Connection, dsn: str) -> None:
    limits = Settings()
    await user(conn, "ann")
    async with http_server(dsn) as base:
        async with signed_in(base, "ann") as idle, signed_in(base, "ann") as old:
            await conn.execute(
                "UPDATE einmal.console_sessions SET seen_at = now() - make_interval(secs => $1) "
                "WHERE id = (SELECT min(id) FROM einmal.console_sessions)",
                limits.console_session_idle_seconds + 1,
            )
            await conn.execute(
                "UPDATE einmal.console_sessions SET created_at = now() - make_interval(secs => $1) "
                "WHERE id = (SELECT max(id) FROM einmal.console_sessions)",
                limits.console_session_lifetime_seconds + 1,
            )
            assert (await idle.get("/console/")).status_code == 303
            assert (await old.get("/console/")).status_code == 303
            assert await conn.fetchval("SELECT count(*) FROM einmal.console_sessions") == 2  # ended, not yet gone
        async with signed_in(base, "ann"):  # a sign-in removes the sessions that ended
            assert await conn.fetchval("SELECT count(*) FROM einmal.console_sessions") == 1
            await conn.execute("DELETE FROM einmal.console_sessions")
        async with signed_in(base, "ann") as used:  # used near its idle limit: marked used, it goes on
            await conn.execute(
                "UPDATE einmal.console_sessions SET seen_at = now() - make_interval(secs => $1)",
                limits.console_session_idle_seconds - 5,
            )
            assert (await used.get("/console/")).status_code == 200
            assert await conn.fetchval("SELECT now() - seen_at < interval '5 seconds' FROM einmal.console_sessions")
            await conn.execute("UPDATE einmal.console_sessions SET seen_at = now() - interval '30 seconds'")
            assert (await used.get("/console/")).status_code == 200  # marked at most once a minute
            assert await conn.fetchval("SELECT now() - seen_at > interval '29 seconds' FROM einmal.console_sessions")
            assert (await used.post("/console/logout", data={"form_token": await page_token(used)})).status_code == 303
        async with signed_in(base, "ann") as first, signed_in(base, "ann") as second:
            assert (await first.get("/console/")).status_code == (await second.get("/console/")).status_code == 200
            await users.change_password(conn, name="ann", password="another long password", actor="test")
            assert (await first.get("/console/")).status_code == (await second.get("/console/")).status_code == 303
            assert (await sign_in(first, "ann")).status_code == 401  # the old password
            assert (await sign_in(first, "ann", "another long password")).status_code == 303
            assert (await first.get("/console/")).status_code == 200
            await users.remove(conn, name="ann", actor="test")
            assert (await first.get("/console/")).status_code == 303
    assert await conn.fetchval("SELECT count(*) FROM einmal.console_sessions") == 0
