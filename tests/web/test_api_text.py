"""Text that cannot be stored as it was sent, over real HTTP against a real PostgreSQL: a NUL anywhere a
route passes text on (path, query, JSON keys and values at any depth) and percent-encoded bytes that are
not UTF-8 in a path or a query. Each is a 422 before or instead of a write — JSON {"error": …} under
/api/v1, plain text on the site — never a 500, and never a row stored under a name the client did not send
(a decoder's U+FFFD in place of the bytes)."""

import anyio
import asyncpg
import httpx
import pytest

from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

NUL_ERROR = "text with a character that cannot be stored (NUL)"


async def stored(conn: asyncpg.Connection) -> dict[str, list]:
    """Everything of the API's tables the requests below could write, as rows."""
    tables = {
        "subscribers": "email, name, attributes::text",
        "lists": "name",
        "list_members": "list_id, subscriber_id",
        "suppressions": "email_lower, reason",
        "campaigns": "name, subject, status",
        "api_keys": "name, revoked_at",
        "accounts": "name, display_name, contact",
    }
    return {
        table: [tuple(r) for r in await conn.fetch(f"SELECT {columns} FROM einmal.{table} ORDER BY 1")]
        for table, columns in tables.items()
    }


@pytest.fixture
async def acme(conn: asyncpg.Connection, dsn: str) -> tuple[dict[str, str], int]:
    """Account acme with a key, a list news with subscriber ada on it, and a draft campaign to news."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    news = await conn.fetchval("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news') RETURNING id", account)
    ada = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) "
        "VALUES ($1, 'ada@example.org', 'ada@example.org') RETURNING id",
        account,
    )
    await conn.execute("INSERT INTO einmal.list_members (list_id, subscriber_id) VALUES ($1, $2)", news, ada)
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, "
        "list_ids) VALUES ($1, 'c', 's', 'n@example.com', 'b', ARRAY[$2::bigint]) "
        "RETURNING id",
        account,
        news,
    )
    return auth(make_key(dsn, "acme")), campaign


async def test_a_nul_in_a_json_key_or_value_at_any_depth_is_422_and_nothing_is_written(
    conn: asyncpg.Connection, dsn: str, acme: tuple[dict[str, str], int]
) -> None:
    key, campaign = acme
    draft = {"name": "Spring", "subject": "Hello", "from": "news@example.org", "text": "Hi", "lists": ["news"]}
    requests = [
        ("PUT", "/subscribers/eve@example.org", {"attributes": {"plan": "a\x00b"}}),
        ("PUT", "/subscribers/eve@example.org", {"attributes": {"pl\x00an": "pro"}}),
        ("PUT", "/subscribers/ada@example.org", {"attributes": {"plan": "\x00"}}),  # an update, not a create
        ("PUT", "/subscribers/eve@example.org", {"name": "E\x00ve"}),
        ("PUT", "/suppressions/eve@example.org", {"reason": "asked\x00"}),
        ("POST", "/campaigns", {**draft, "name": "Spr\x00ing"}),
        ("POST", "/campaigns", {**draft, "text": "Hi\x00"}),
        ("POST", "/campaigns", {**draft, "lists": ["ne\x00ws"]}),
        ("PATCH", f"/campaigns/{campaign}", {"subject": "S\x00"}),
        ("PATCH", f"/campaigns/{campaign}", {"html": "<p>\x00</p>"}),
        ("POST", "/subscribe", {"list": "ne\x00ws", "email": "eve@example.org"}),
        ("POST", "/keys", {"name": "sh\x00op"}),
        ("PATCH", "/account", {"display_name": "Acme\x00"}),
        ("PATCH", "/account", {"contact": "help\x00@example.org"}),
        ("POST", f"/campaigns/{campaign}/reconcile", {"decision": "resend", "emails": ["ada\x00@example.org"]}),
        ("POST", f"/campaigns/{campaign}/test", {"to": "qa@example.org", "subscriber": "ada\x00@example.org"}),
    ]
    before = await stored(conn)
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        for method, path, body in requests:
            answer = await client.request(method, path, headers=key, json=body)
            assert answer.status_code == 422, (method, path, body, answer.status_code, answer.text)
            assert answer.headers["content-type"] == "application/json", (method, path, answer.text)
            assert answer.json()["error"], (method, path, answer.text)
    assert await stored(conn) == before


async def test_a_nul_or_bytes_not_utf8_in_an_api_path_or_query_are_422_and_nothing_is_stored(
    conn: asyncpg.Connection, dsn: str, acme: tuple[dict[str, str], int]
) -> None:
    key, campaign = acme
    requests = [
        ("PUT", "/lists/%FF%FE", None),
        ("PUT", "/lists/ne%00ws", None),
        ("PUT", "/lists/caf%C3", None),
        ("PUT", "/subscribers/a%C3@x.example", {}),
        ("PUT", "/subscribers/a%00@x.example", {}),
        ("PUT", "/subscribers/%E9ve@example.org", {}),  # Latin-1 for é: not UTF-8
        ("PUT", "/suppressions/a%C3@x.example", {}),
        ("PUT", "/suppressions/eve%00@example.org", {}),
        ("PUT", "/lists/news/members/ada%FF@example.org", None),
        ("PUT", "/lists/n%FFws/members/ada@example.org", None),
        ("DELETE", "/subscribers/ada%FF@example.org", None),
        ("DELETE", "/suppressions/%FF", None),
        ("GET", "/subscribers/ada%00@example.org", None),
        ("GET", "/subscribers?list=n%FFws", None),
        ("GET", "/subscribers?list=ne%00ws", None),
        ("GET", "/suppressions?cursor=%C3", None),
        ("GET", f"/campaigns/{campaign}/preview?subscriber=ada%FF@example.org", None),
    ]
    before = await stored(conn)
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        for method, path, body in requests:
            answer = await client.request(method, path, headers=key, json=body)
            assert answer.status_code == 422, (method, path, answer.status_code, answer.text)
            assert answer.headers["content-type"] == "application/json", (method, path, answer.text)
            said = answer.json()["error"]
            assert said == NUL_ERROR if "%00" in path else "not UTF-8" in said, (method, path, said)
        # the same routes with what a client may send: percent-encoded UTF-8 is decoded and kept as sent
        made = await client.put("/lists/caf%C3%A9", headers=key)
        assert (made.status_code, made.json()["name"]) == (201, "café"), made.text
    after = await stored(conn)
    assert sorted(after["lists"]) == sorted([*before["lists"], ("café",)])
    assert {**after, "lists": before["lists"]} == before
    assert not any("\ufffd" in str(rows) for rows in after.values())


async def test_a_nul_or_bytes_not_utf8_in_a_site_path_or_query_are_422_in_plain_text(
    conn: asyncpg.Connection, dsn: str, acme: tuple[dict[str, str], int]
) -> None:
    list_id = await conn.fetchval("SELECT id FROM einmal.lists")
    before = await stored(conn)
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base) as client:
        for method, url in (
            ("POST", "/unsubscribe?token=%FF%FE"),
            ("GET", "/unsubscribe?token=a%00b"),
            ("POST", "/confirm?token=%C3"),
            ("GET", "/confirm?token=%00"),
            ("GET", f"/lists/{list_id}/subscribe?x=%FF"),
            ("GET", "/healthz%FF"),
            ("POST", "/inbound/postmark%00"),
        ):
            answer = await client.request(method, url, headers={"accept": "text/html"})
            assert answer.status_code == 422, (method, url, answer.status_code, answer.text)
            assert answer.headers["content-type"].startswith("text/plain"), (method, url)
            assert "NUL" in answer.text if "%00" in url else "not UTF-8" in answer.text, (url, answer.text)
        assert (await client.get("/healthz")).status_code == 200
    assert await stored(conn) == before


async def test_a_nul_in_a_header_value_is_refused_by_the_server_before_any_route(
    conn: asyncpg.Connection, dsn: str, acme: tuple[dict[str, str], int]
) -> None:
    """h11 refuses the request line by line: no header value with a NUL reaches the API (Idempotency-Key, the
    key) or the site (the User-Agent a confirmation records)."""
    key, _ = acme
    before = await stored(conn)
    async with http_server(dsn) as base:
        host, port = base.removeprefix("http://").split(":")
        authorization = b"Authorization: " + key["Authorization"].encode()
        for headers in (
            (authorization, b"Idempotency-Key: a\x00b"),
            (authorization, b"User-Agent: x\x00"),
            (authorization + b"\x00",),
        ):
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(
                    b"\r\n".join(
                        [b"PUT /api/v1/lists/fresh HTTP/1.1", b"Host: x", b"Content-Length: 0", *headers, b"", b""]
                    )
                )
                answer = await stream.receive()
            assert answer.startswith(b"HTTP/1.1 400 "), (headers, answer)
    assert await stored(conn) == before
