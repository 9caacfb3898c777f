"""Signing in to the console and out again over real HTTP, against a real PostgreSQL: the session's cookie,
its record (a hash of its token only), the audit log's lines, and what a wrong password gets."""

import logging

import asyncpg
import httpx
import pytest

from service.users import sessions
from tests.support.console import PASSWORD, form_token, page_token, sign_in, signed_in, user
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def test_a_user_signs_in_sees_the_dashboard_and_signs_out(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    await user(conn, "ann@example.org", "acme")
    async with http_server(dsn) as base, signed_in(base, "Ann@Example.org") as client:
        cookie = client.cookies["einmal_console"]
        stored = await conn.fetchval("SELECT token_hash FROM einmal.console_sessions")
        assert stored == sessions.digest(cookie) and cookie.encode() not in stored
        dashboard = await client.get("/console/")
        assert dashboard.status_code == 200 and "ann@example.org" in dashboard.text
        assert "script-src 'self'" in dashboard.headers["content-security-policy"]
        token = await page_token(client)
        out = await client.post("/console/logout", data={"form_token": token}, headers={"Origin": base})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        assert await conn.fetchval("SELECT count(*) FROM einmal.console_sessions") == 0
        client.cookies.set("einmal_console", cookie, path="/console")  # the old cookie, kept by someone
        assert (await client.get("/console/")).status_code == 303
    lines = await conn.fetch("SELECT actor, action, account_id FROM einmal.audit_log ORDER BY id")
    acme = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")
    assert [tuple(r) for r in lines] == [
        ("test", "user.add", acme),
        ("console:ann@example.org", "console.login", acme),
        ("console:ann@example.org", "console.logout", acme),
    ]


async def test_a_wrong_password_is_refused_and_no_password_is_stored_or_logged(
    conn: asyncpg.Connection, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await user(conn, "root", password=PASSWORD)
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base) as client:
        wrong = await sign_in(client, "root", "not the password at all")
        assert wrong.status_code == 401 and "Wrong name or password" in wrong.text
        assert "einmal_console" not in client.cookies
        unknown = await sign_in(client, "nobody", PASSWORD)
        assert unknown.status_code == 401 and "Wrong name or password" in unknown.text
        assert (await sign_in(client, "root")).status_code == 303
    stored = await conn.fetchval("SELECT password_hash FROM einmal.console_users")
    assert stored.startswith("$argon2id$") and PASSWORD not in stored
    dump = "\n".join(str(r) for r in await conn.fetch("SELECT * FROM einmal.console_users"))
    assert PASSWORD not in dump and "not the password" not in dump
    logged = caplog.text
    assert "refused" in logged or "failed" in logged
    assert PASSWORD not in logged and "not the password" not in logged


async def test_cookies_are_secure_unless_the_console_is_plain_http_at_a_loopback_address(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await user(conn, "root")
    async with http_server(dsn) as base:
        for host, secure in (("127.0.0.1", False), ("localhost:8080", False), ("console.example.org", True)):
            async with httpx.AsyncClient(base_url=base, headers={"Host": host}) as client:
                page = await client.get("/console/login")
                data = {"form_token": form_token(page.text), "name": "root", "password": PASSWORD}
                # a client keeps no Secure cookie over plain HTTP (so one cannot sign in so): given by hand
                cookie = f"einmal_console_sign_in={data['form_token']}"
                signed = await client.post(
                    "/console/login", data=data, headers={"Origin": f"http://{host}", "Cookie": cookie}
                )
                assert signed.status_code == 303, (host, signed.text)
                for cookie in (page.headers["set-cookie"], *signed.headers.get_list("set-cookie")):
                    attributes = [a.strip().lower() for a in cookie.split(";")]
                    assert {"httponly", "samesite=lax", "path=/console"} <= set(attributes), cookie
                    assert ("secure" in attributes) == secure, (host, cookie)
