"""A tracked campaign sent by a real node to a real SMTP server: the message carries signed links of the node's
click route in place of the template's, and following one leads to the template's URL, recorded — as early,
a machine's, seconds after the message went out (what a scanner at delivery does). An open-tracked one carries
a signed pixel in its HTML part alone, and loading it records the open."""

import email
import re
from email.message import Message
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest

from tests.support import pipeline
from tests.support.web import http_server
from tests.web.test_http_clicks import parts_of

pytestmark = pytest.mark.anyio


class Kept(pipeline.Received):
    """Received (tests/support/pipeline.py), keeping each message's bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: list[bytes] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.raw.append(envelope.original_content or b"")
        return await super().handle_DATA(server, session, envelope)


async def sent(conn: asyncpg.Connection, dsn: str, campaign: int, tmp_path: Path) -> bytes:
    """The one message a node sends of the approved `campaign`, tracked through http://127.0.0.1:9/c."""
    received = Kept()
    async with pipeline.recording_server(received) as port:
        node = pipeline.start_node(
            pipeline.node_env(dsn, port, EINMAL_CLICK_URL="http://127.0.0.1:9/c"), tmp_path / "node.log"
        )
        try:
            await pipeline.wait_status(conn, campaign, "sent")
        finally:
            assert await pipeline.stop_node(node) == 0
    (raw,) = received.raw
    return raw


def text_body(raw: bytes) -> str:
    part = email.message_from_bytes(raw)
    assert isinstance(part, Message) and not part.is_multipart()
    return part.get_payload(decode=True).decode()


async def test_a_node_sends_tracked_links_that_lead_to_the_templates_urls(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    campaign = await pipeline.seed(conn, ["a@example.org"], body="Read https://example.org/story?id=7 today.\n")
    await conn.execute("UPDATE einmal.campaigns SET track_clicks = true, status = 'approved' WHERE id = $1", campaign)
    raw = await sent(conn, dsn, campaign, tmp_path)
    body = text_body(raw)
    assert "example.org/story" not in body
    found = re.search(r"Read http://127\.0\.0\.1:9/c/([0-9.]+[A-Za-z0-9_-]+) today\.", body)
    assert found is not None, body
    async with http_server(dsn, secret=pipeline.UNSUBSCRIBE_SECRET) as base, httpx.AsyncClient() as client:
        answer = await client.get(f"{base}/c/{found.group(1)}")
        assert (answer.status_code, answer.headers["location"]) == (302, "https://example.org/story?id=7")
        with anyio.fail_after(15):
            while not (rows := await conn.fetch("SELECT url, tag, reasons FROM einmal.clicks")):
                await anyio.sleep(0.05)
    assert [tuple(r) for r in rows] == [("https://example.org/story?id=7", "machine", ["early"])]


async def test_a_node_sends_an_open_pixel_in_the_html_only_which_records_the_open(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    campaign = await pipeline.seed(conn, ["a@example.org"], body="Spring news.\n")
    await conn.execute(
        "UPDATE einmal.campaigns SET body_html = '<html><body><p>Spring news.</p></body></html>', "
        "track_opens = true, status = 'approved' WHERE id = $1",
        campaign,
    )
    raw = await sent(conn, dsn, campaign, tmp_path)
    parts = parts_of(raw)
    assert parts["text/plain"].strip() == "Spring news."  # the text part as it was
    found = re.search(r'<body><img src="http://127\.0\.0\.1:9/c/o/([0-9.]+[A-Za-z0-9_-]+)"', parts["text/html"])
    assert found is not None, parts["text/html"]
    async with http_server(dsn, secret=pipeline.UNSUBSCRIBE_SECRET) as base, httpx.AsyncClient() as client:
        answer = await client.get(f"{base}/c/o/{found.group(1)}")
        assert (answer.status_code, answer.headers["content-type"]) == (200, "image/gif")
        with anyio.fail_after(15):
            while not (rows := await conn.fetch("SELECT tag, reasons FROM einmal.opens")):
                await anyio.sleep(0.05)
    assert [tuple(r) for r in rows] == [("machine", ["early"])]  # loaded seconds after it went out
