"""One-click unsubscribe over real HTTP (einmal serve on loopback) against a real PostgreSQL:
the event and its suppression once, a GET that never writes, rotated keys, bad input as a 4xx
with nothing written, a burst of the same POST, and a database that goes away and comes back."""

import logging

import anyio
import asyncpg
import httpx
import pytest

from tests.conftest import einmal
from tests.support.pgcluster import PgCluster, cluster_dsn, pg_cluster  # noqa: F401  (fixtures)
from tests.support.web import ONE_CLICK, http_server, subscriber, token, written

pytestmark = pytest.mark.anyio


async def test_a_one_click_post_records_the_event_and_the_suppression_once(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await subscriber(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={token(ids)}"
        first = await client.post(url, data=ONE_CLICK)
        again = await client.post(url, files={"List-Unsubscribe": (None, "One-Click")})  # multipart, as RFC 8058
        empty = await client.post(url)
    assert [r.status_code for r in (first, again, empty)] == [200, 200, 200]
    assert first.content == b""
    events = await conn.fetch("SELECT event_id FROM einmal.inbound_events")
    assert [e["event_id"] for e in events] == [f"unsubscribe:{ids[0]}.{ids[1]}.{ids[2]}"]
    rows = await conn.fetch("SELECT account_id, email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in rows] == [(ids[0], "ann.example@example.org", "unsubscribe")]


async def test_a_get_shows_the_page_and_writes_nothing(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await subscriber(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        page = await client.get(f"{base}/unsubscribe?token={token(ids)}")
        head = await client.head(f"{base}/unsubscribe?token={token(ids)}")
    assert page.status_code == 200 and head.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "A***@Example.org" in page.text and "news@example.com" in page.text  # the message's sender
    assert "Spring news" not in page.text  # the operator's name for the campaign is the operator's
    assert "Ann.Example" not in page.text and "<script" not in page.text
    assert '<form method="post"' in page.text and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert await written(conn) == (0, 0)


async def test_every_key_of_a_rotated_secret_verifies_and_a_removed_key_no_longer_does(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    old = token(ids, "old-key")
    async with http_server(dsn, secret="new-key, old-key") as base, httpx.AsyncClient() as client:
        assert (await client.post(f"{base}/unsubscribe?token={old}", data=ONE_CLICK)).status_code == 200
    assert await written(conn) == (1, 1)
    async with http_server(dsn, secret="new-key") as base, httpx.AsyncClient() as client:
        retired = await client.post(f"{base}/unsubscribe?token={old}", data=ONE_CLICK)
        fresh = await client.post(f"{base}/unsubscribe?token={token(ids, 'new-key')}", data=ONE_CLICK)
    assert (retired.status_code, fresh.status_code) == (400, 200)


async def test_bad_requests_are_a_4xx_with_nothing_written_and_no_traceback(
    conn: asyncpg.Connection, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    ids = await subscriber(conn)
    good = token(ids)
    account, campaign, sub, signature = good.split(".")
    big = b"List-Unsubscribe=One-Click&" + b"x" * (64 * 1024)

    async def chunked():  # no Content-Length: the limit holds while the body streams in
        for _ in range(80):
            yield b"x" * 1024

    caplog.set_level(logging.INFO)
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base) as client:
        form = {
            "content": "List-Unsubscribe=One-Click",
            "headers": {"content-type": "application/x-www-form-urlencoded"},
        }
        cases = {
            "body over 64 KiB": (
                client.post(
                    f"/unsubscribe?token={good}",
                    content=big,
                    headers={"content-type": "application/x-www-form-urlencoded"},
                ),
                413,
            ),
            "chunked body over 64 KiB": (
                client.post(
                    f"/unsubscribe?token={good}",
                    content=chunked(),
                    headers={"content-type": "multipart/form-data; boundary=x"},
                ),
                413,
            ),
            "PUT": (client.put(f"/unsubscribe?token={good}", **form), 405),
            "DELETE": (client.delete(f"/unsubscribe?token={good}"), 405),
            "POST /healthz": (client.post("/healthz"), 405),
            "JSON": (client.post(f"/unsubscribe?token={good}", json={"List-Unsubscribe": "One-Click"}), 415),
            "text/plain": (
                client.post(
                    f"/unsubscribe?token={good}",
                    content="List-Unsubscribe=One-Click",
                    headers={"content-type": "text/plain"},
                ),
                415,
            ),
            "no content type, a body": (client.post(f"/unsubscribe?token={good}", content=b"x"), 415),
            "wrong form value": (client.post(f"/unsubscribe?token={good}", data={"List-Unsubscribe": "no"}), 400),
            "a file in the form": (
                client.post(f"/unsubscribe?token={good}", files={"List-Unsubscribe": ("a.txt", b"One-Click")}),
                400,
            ),
            "multipart without a boundary": (
                client.post(
                    f"/unsubscribe?token={good}", content=b"--x--", headers={"content-type": "multipart/form-data"}
                ),
                400,
            ),
            "unknown path": (client.post(f"/unsubscribe/now?token={good}", **form), 404),
            "unknown GET path": (client.get("/admin"), 404),
            "no token": (client.post("/unsubscribe", **form), 400),
            "two tokens": (client.post(f"/unsubscribe?token={good}&token={good}", **form), 400),
            "truncated token": (client.post(f"/unsubscribe?token={good[:-3]}", **form), 400),
            "tampered id": (
                client.post(f"/unsubscribe?token={account}.{campaign}.{int(sub) + 1}.{signature}", **form),
                400,
            ),
            "another key": (client.post(f"/unsubscribe?token={token(ids, 'other')}", **form), 400),
            "garbage token": (client.post("/unsubscribe?token=%FF%FE%00..%0A", **form), 422),  # not UTF-8
            "garbage GET": (client.get("/unsubscribe?token=<script>"), 400),
            "huge token": (client.get("/unsubscribe?token=" + "9" * 4000), 400),
            "genuine token, unknown subscriber": (
                client.post(f"/unsubscribe?token={token((ids[0], ids[1], ids[2] + 99))}", **form),
                404,
            ),
        }
        for name, (request, expected) in cases.items():
            response = await request
            assert response.status_code == expected, (name, response.status_code, response.text[:200])
            assert "Traceback" not in response.text, name
        port = int(base.rsplit(":", 1)[1])
        for raw in (
            f"POST /unsubscribe?token={good} HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            f"POST /unsubscribe?token={good} HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n\r\nList-Unsub",
            "GARBAGE\x00\xff / HTTP/9\r\n\r\n",
        ):
            assert (await raw_status(port, raw.encode("latin-1")))[:1] == b"4", raw
        assert (await client.get("/healthz")).status_code == 200  # still answering
    assert await written(conn) == (0, 0)
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def raw_status(port: int, request: bytes) -> bytes:
    """The status code a raw (malformed) request gets."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request)
        with anyio.fail_after(30):
            reply = await stream.receive()
    return reply.split(b" ")[1]


@pytest.mark.serial
async def test_a_thousand_concurrent_posts_of_one_token_make_one_event_and_one_suppression(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    statuses: list[int] = []
    async with http_server(dsn) as base:
        url = f"{base}/unsubscribe?token={token(ids)}"
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=0)
        async with httpx.AsyncClient(limits=limits, timeout=120) as client:

            async def post() -> None:
                statuses.append((await client.post(url, data=ONE_CLICK)).status_code)

            with anyio.fail_after(300):
                async with anyio.create_task_group() as tg:
                    for _ in range(1000):
                        tg.start_soon(post)
    assert len(statuses) == 1000 and set(statuses) == {200}, sorted(set(statuses))
    assert await written(conn) == (1, 1)


async def test_a_post_while_the_database_is_down_is_503_and_a_retry_succeeds(
    pg_cluster: PgCluster, cluster_dsn: str
) -> None:
    conn = await asyncpg.connect(cluster_dsn)
    ids = await subscriber(conn)
    await conn.close()
    async with http_server(cluster_dsn) as base, httpx.AsyncClient(timeout=60) as client:
        url = f"{base}/unsubscribe?token={token(ids)}"
        assert (await client.get(f"{base}/readyz")).status_code == 200
        assert (await client.get(url)).status_code == 200  # the pool holds a connection now
        await anyio.to_thread.run_sync(pg_cluster.stop, "fast")
        down = await client.post(url, data=ONE_CLICK)
        ready = await client.get(f"{base}/readyz")
        assert (await client.get(f"{base}/healthz")).status_code == 200
        await anyio.to_thread.run_sync(pg_cluster.start)
        retry = await client.post(url, data=ONE_CLICK)
        ready_again = await client.get(f"{base}/readyz")
    assert down.status_code == 503 and down.headers["retry-after"] == "5"
    assert ready.status_code == 503 and ready.json()["reason"].startswith("database unreachable")
    assert retry.status_code == 200 and ready_again.status_code == 200
    conn = await asyncpg.connect(cluster_dsn)
    try:
        assert await written(conn) == (1, 1)
    finally:
        await conn.close()


def test_unsubscribe_secret_keys_sign_with_the_first_and_verify_with_all() -> None:
    from service.mail.unsubscribe import make_token, verify_token

    assert make_token("new,old", 1, 2, 3) == make_token("new", 1, 2, 3)
    assert verify_token("new, old", make_token("old", 1, 2, 3)) == (1, 2, 3)
    assert verify_token("new", make_token("old", 1, 2, 3)) is None


async def test_a_link_applied_before_for_another_address_is_409_and_changes_nothing(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={token(ids)}"
        assert (await client.post(url, data=ONE_CLICK)).status_code == 200
        await conn.execute("UPDATE einmal.subscribers SET email = 'new@example.org' WHERE id = $1", ids[2])
        again = await client.post(url, data=ONE_CLICK)
    assert again.status_code == 409 and "new@example.org" not in again.text
    assert await written(conn) == (1, 1)


async def test_a_press_after_the_suppression_was_lifted_unsubscribes_again(conn: asyncpg.Connection, dsn: str) -> None:
    """The subscriber unsubscribes, asks to come back (the operator lifts the suppression), and later
    presses the same link again: that is a new decision, honoured, not a repeat of the first."""
    ids = await subscriber(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={token(ids)}"
        assert (await client.post(url, data=ONE_CLICK)).status_code == 200
        lifted = einmal("suppressions", "remove", "--account", "acme", "Ann.Example@Example.org", dsn=dsn)
        assert lifted.stdout == "removed 1, not suppressed 0\n"
        assert await written(conn) == (1, 0)
        again = await client.post(url, data=ONE_CLICK)
        repeat = await client.post(url, data=ONE_CLICK)
    assert (again.status_code, repeat.status_code) == (200, 200)
    assert await written(conn) == (1, 1)  # the one event, and the suppression written again
    assert await conn.fetchval("SELECT reason FROM einmal.suppressions") == "unsubscribe"
