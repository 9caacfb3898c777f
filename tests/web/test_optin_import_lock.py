"""A sign-up while an import holds its account's subscribers (einmal serve on loopback, a real PostgreSQL; the
test's own transaction holds the import's lock as `subscribers_import_lock` takes it): past the sign-up's wait
for the lock, the API answers 503 with Retry-After and the form the page of a service briefly unavailable, never
a 500; nothing is queued, and the same sign-up once the import is over queues its confirmation."""

import asyncpg
import httpx
import pytest

from service import db
from service.subscribers import subscriber
from tests.support.optin import FORM, SECRET, SETTINGS, account_with_list, confirmation_rows
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio


async def test_a_sign_up_during_an_import_is_unavailable_not_an_error(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscriber, "LOCK_SECONDS", 0.3)
    account_id, _, key = await account_with_list(conn, dsn)
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def both() -> tuple[httpx.Response, httpx.Response]:
            api = await client.post(
                "/api/v1/subscribe", json={"list": "news", "email": "ann@example.org"}, headers=auth(key)
            )
            return api, await client.post(FORM, data={"email": "bob@example.org"})

        async with conn.transaction():
            await conn.execute(*db.sql("subscribers_import_lock", account_id=account_id))
            api, form = await both()
        assert (api.status_code, api.headers.get("retry-after")) == (503, "5"), api.text
        assert "import" in api.json()["error"], api.text
        assert (form.status_code, form.headers.get("retry-after")) == (503, "5"), form.text
        assert await confirmation_rows(conn) == []
        api, form = await both()
    assert (api.status_code, form.status_code) == (202, 200), (api.text, form.text)
    assert sorted(r["email"] for r in await confirmation_rows(conn)) == ["ann@example.org", "bob@example.org"]
