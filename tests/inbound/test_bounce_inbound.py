"""Bounces and complaints come back over SMTP to einmal's inbound listener, each applied exactly once.

Real parts: a node sends a campaign to a real SMTP server on loopback with VERP on; a real SMTP
client (aiosmtplib) then hands DSNs and ARF reports to the node's inbound listener."""

import hashlib
import logging
import smtplib
import socket
from contextlib import asynccontextmanager

import aiosmtplib
import anyio
import asyncpg
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from actors import inbound_smtp, node
from service.mail.verp import ReturnPath
from service.metrics import Metrics
from tests.conftest import einmal
from tests.support import reports
from tests.support.pipeline import approve, node_settings, seed, wait_status

pytestmark = pytest.mark.anyio

RETURN_PATH, SECRET = "bounces@example.org", "verp-key"
TABLES = ("einmal.inbound_events", "einmal.bounces", "einmal.suppressions")
SIGNED = "bounces+" + ReturnPath(RETURN_PATH, SECRET).token(1, 1) + "@example.org"  # a valid token


def listening_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


@asynccontextmanager
async def running_node_with_inbound(settings):
    sock = listening_socket()
    stop = anyio.Event()
    codes: list[int] = []

    async def serve() -> None:
        codes.append(await node.serve(settings, stop, inbound_socket=sock))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                yield sock.getsockname()[1]
            finally:
                stop.set()
    finally:
        sock.close()
    assert codes == [0]


@asynccontextmanager
async def listening_actor(dsn: str, metrics: Metrics | None = None, **overrides):
    """The inbound actor alone, on a free loopback port: (the actor, its port)."""
    settings = node_settings(dsn, 25, return_path=RETURN_PATH, return_path_secret=SECRET, **overrides)
    sock = listening_socket()
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=2)
    try:
        async with anyio.create_task_group() as tg:
            actor = inbound_smtp.InboundActor(inbound_smtp.InboundConfig.of(settings), pool, metrics or Metrics(), sock)
            await tg.start(actor.run)
            yield actor, sock.getsockname()[1]
            tg.cancel_scope.cancel()
    finally:
        await pool.close()
        sock.close()


@asynccontextmanager
async def listener(dsn: str, metrics: Metrics | None = None, **overrides):
    """The inbound actor alone, on a free loopback port: its port."""
    async with listening_actor(dsn, metrics, **overrides) as (_, port):
        yield port


async def hand_over(port: int, recipient: str, message: bytes) -> str:
    """Deliver one message with a real SMTP client, null sender as a report has; the reply to it."""
    async with aiosmtplib.SMTP(hostname="127.0.0.1", port=port, timeout=30) as client:
        try:
            await client.mail("")
            await client.rcpt(recipient)
            reply = await client.data(message)
        except aiosmtplib.SMTPResponseException as exc:
            return f"{exc.code} {exc.message}"
    return f"{reply.code} {reply.message}"


async def hand_over_raw(port: int, to: str, message: bytes, split: int = 0) -> str:
    """hand_over with a few lines of SMTP on a raw socket, `message` (CRLF lines, none beginning with a
    dot) sent as it is: no client library's pass over its megabytes, and an empty one is the lone dot.
    `split`: the last `split` bytes, the final dot's line included, follow in a write of their own."""
    with anyio.fail_after(60):
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            received = BufferedByteReceiveStream(stream)

            async def reply() -> str:
                while (line := await received.receive_until(b"\r\n", 1000))[3:4] == b"-":
                    pass
                return line.decode()

            await reply()
            for command in ("EHLO flood.test", "MAIL FROM:<>", f"RCPT TO:<{to}>", "DATA"):
                await stream.send(command.encode() + b"\r\n")
                await reply()
            data = message + b".\r\n"
            await stream.send(data[: len(data) - split])
            if split:
                await anyio.sleep(0.1)  # the listener reads what came, then the rest
                await stream.send(data[len(data) - split :])
            return await reply()


def inbound_lines(caplog) -> list[str]:
    """What the listener logged about messages (not its start)."""
    return [
        r.getMessage() for r in caplog.records if r.name == "einmal.inbound" and r.getMessage().startswith("inbound:")
    ]


async def written(conn: asyncpg.Connection) -> dict[str, int]:
    return {table: await conn.fetchval(f"SELECT count(*) FROM {table}") for table in TABLES}


async def test_bounces_and_complaints_suppress_exactly_once_and_the_next_campaign_skips_them(
    conn: asyncpg.Connection, dsn: str, smtp_server
) -> None:
    people = [f"p{i}@example.com" for i in range(10)]
    first = await seed(conn, people)
    settings = node_settings(
        dsn, smtp_server.port, return_path=RETURN_PATH, return_path_secret=SECRET, soft_bounce_limit=2
    )
    async with running_node_with_inbound(settings) as inbound_port:
        await approve(conn, first)
        await wait_status(conn, first, "sent")
        verp = {m.rcpt_tos[0]: m.mail_from for m in smtp_server.messages}
        ids = {m.rcpt_tos[0]: m.message_id for m in smtp_server.messages}
        assert set(verp) == set(people)

        async def hand(who: str, message: bytes, to: str | None = None) -> None:
            reply = await hand_over(inbound_port, to or verp[who], message)
            assert reply.startswith("250 "), reply

        await hand("p0@example.com", reports.dsn("p0@example.com", report_id="<h0@relay.test>"))
        for _ in range(2):  # delivered twice: one event
            await hand("p1@example.com", reports.dsn("p1@example.com", report_id="<h1@relay.test>"))
            await hand("p2@example.com", reports.arf(report_id="<c2@isp.test>"))
        # no token: nothing, whatever Message-ID it returns
        await hand(
            "p3@example.com", reports.arf(report_id="<c3@isp.test>", original_id=ids["p3@example.com"]), to=RETURN_PATH
        )
        await hand(
            "p4@example.com",
            reports.dsn("p4@example.com", action="delayed", status="4.4.1", report_id="<s4a@relay.test>"),
        )
        for n in ("a", "b"):  # two soft bounces reach the limit
            await hand("p5@example.com", reports.dsn("p5@example.com", status="4.2.2", report_id=f"<s5{n}@relay>"))
        await hand("p6@example.com", reports.auto_reply())

        suppressed = {
            r["email_lower"]: r["reason"]
            for r in await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")
        }
        assert suppressed == {
            "p0@example.com": "bounce",
            "p1@example.com": "bounce",
            "p2@example.com": "complaint",
            "p5@example.com": "bounce",
        }
        kept = sorted(
            tuple(r)
            for r in await conn.fetch(
                "SELECT s.email, b.kind, b.status FROM einmal.bounces b JOIN einmal.sends s ON s.id = b.send_id"
            )
        )
        assert kept == [
            ("p0@example.com", "hard", "5.1.1"),
            ("p1@example.com", "hard", "5.1.1"),
            ("p2@example.com", "complaint", "abuse"),
            ("p4@example.com", "soft", "4.4.1"),
            ("p5@example.com", "soft", "4.2.2"),
            ("p5@example.com", "soft", "4.2.2"),
        ]
        assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == 6

        second = await conn.fetchval(
            """
            INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
            SELECT account_id, 'next', subject, from_address, body_text, list_ids FROM einmal.campaigns
            WHERE id = $1 RETURNING id""",
            first,
        )
        before = len(smtp_server.messages)
        await approve(conn, second)
        await wait_status(conn, second, "sent")
    again = sorted(m.rcpt_tos[0] for m in smtp_server.messages[before:])
    assert again == sorted(set(people) - set(suppressed))


@pytest.mark.parametrize(
    ("recipient", "message", "code"),
    [
        ("postmaster@example.org", reports.dsn("a@example.com"), "550"),
        ("news@example.org", reports.dsn("a@example.com"), "550"),
        ("bounces+1.1.0123456789abcdef@example.org", reports.dsn("a@example.com"), "550"),  # forged token
        ("bounces+1.1@example.org", reports.dsn("a@example.com"), "550"),
        (SIGNED, b"Content-Type: multipart/report; report-type=delivery-status\r\n\r\nno boundary\r\n", "550"),
        (SIGNED, b"Content-Type: multipart/mixed; boundary=b\r\n\r\nno part begins\r\n", "550"),  # unreadable
        (SIGNED, reports.dsn("a@example.com") + (b"x" * 70 + b"\r\n") * 100, "552"),  # > INBOUND_MAX_BYTES
    ],
)
async def test_bad_input_is_refused_with_one_log_line_and_nothing_written(
    conn: asyncpg.Connection, dsn: str, caplog, recipient: str, message: bytes, code: str
) -> None:
    await seed(conn, ["a@example.com"])
    caplog.set_level(logging.INFO, logger="einmal.inbound")
    async with listener(dsn, inbound_max_bytes=5000) as port:
        reply = await hand_over(port, recipient, message)
    assert reply.startswith(code), reply
    assert await written(conn) == dict.fromkeys(TABLES, 0)
    if code != "552":  # aiosmtpd refuses an oversized message itself
        assert len(inbound_lines(caplog)) == 1


async def test_reports_that_touch_no_row_of_ours_are_dropped_with_one_log_line_and_nothing_written(
    conn: asyncpg.Connection, dsn: str, caplog
) -> None:
    campaign = await seed(conn, ["a@example.com"])
    subscriber = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'a@example.com'")
    await conn.execute(
        """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id,
                          status) SELECT id, account_id, $2::bigint, 'a@example.com', 'a@example.com',
                          'campaign:' || id || ':' || $2::bigint, 'sent'
                          FROM einmal.campaigns WHERE id = $1""",
        campaign,
        subscriber,
    )
    path = ReturnPath(RETURN_PATH, SECRET)
    own = "bounces+" + path.token(campaign, subscriber) + "@example.org"
    caplog.set_level(logging.INFO, logger="einmal.inbound")
    async with listener(dsn) as port:
        for recipient, message in [
            (
                "bounces+" + path.token(campaign + 1000, subscriber) + "@example.org",
                reports.dsn("a@example.com"),
            ),  # a valid token for a row that does not exist
            (
                own,
                reports.dsn_of(
                    [
                        ("b@example.com", "failed", "5.1.1"),  # several recipients, none the row's
                        ("c@example.com", "failed", "5.1.1"),
                    ]
                ),
            ),
        ]:
            caplog.clear()
            reply = await hand_over(port, recipient, message)
            assert reply.startswith("250"), reply
            lines = inbound_lines(caplog)
            assert len(lines) == 1 and lines[0].startswith("inbound: dropped"), lines
    assert await written(conn) == dict.fromkeys(TABLES, 0)


async def test_the_same_report_id_with_other_content_is_refused(conn: asyncpg.Connection, dsn: str) -> None:
    to = await one_sent_row(conn)
    async with listener(dsn) as port:
        assert (await hand_over(port, to, reports.dsn("a@example.com"))).startswith("250")
        assert (await hand_over(port, to, reports.dsn("a@example.com", status="5.2.2"))).startswith("554")
    assert await written(conn) == dict.fromkeys(TABLES, 1)


async def one_sent_row(conn: asyncpg.Connection) -> str:
    """A campaign sent to a@example.com; the VERP recipient of its bounces."""
    campaign = await seed(conn, ["a@example.com"])
    subscriber = await conn.fetchval("SELECT id FROM einmal.subscribers")
    await conn.execute(
        """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id,
                          status) SELECT id, account_id, $2::bigint, 'a@example.com', 'a@example.com',
                          'campaign:' || id || ':' || $2::bigint, 'sent' FROM einmal.campaigns WHERE id = $1""",
        campaign,
        subscriber,
    )
    return "bounces+" + ReturnPath(RETURN_PATH, SECRET).token(campaign, subscriber) + "@example.org"


async def test_lmtp_takes_a_bounce_as_smtp_does(conn: asyncpg.Connection, dsn: str) -> None:
    to = await one_sent_row(conn)

    def deliver() -> dict:
        with smtplib.LMTP("127.0.0.1", port, timeout=30) as client:
            return client.sendmail("", [to], reports.dsn("a@example.com"))

    async with listener(dsn, inbound_protocol="lmtp") as port:
        assert await anyio.to_thread.run_sync(deliver) == {}
    assert [tuple(r) for r in await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")] == [
        ("a@example.com", "bounce")
    ]


async def test_an_idle_connection_is_closed_after_the_timeout(dsn: str) -> None:
    async with listener(dsn, inbound_timeout_seconds=0.2) as port:
        stream = await anyio.connect_tcp("127.0.0.1", port)
        received, closed = b"", False
        with anyio.fail_after(60):  # the client says nothing: only the server's timeout ends this
            try:
                while True:
                    received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                closed = True
        await stream.aclose()
    assert closed and received == b"220 einmal-inbound einmal\r\n"


def test_an_inbound_listener_without_a_return_path_stops_the_node_with_one_line() -> None:
    result = einmal("run", env={"EINMAL_INBOUND_SMTP_ADDRESS": "127.0.0.1:0", "EINMAL_RETURN_PATH_SECRET": "k"})
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "EINMAL_RETURN_PATH must be set" in result.stderr


async def test_a_dsn_naming_several_recipients_acts_once_on_the_tokens_own_row_alone(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(conn, ["a@example.com", "b@example.com", "c@example.com"])
    await conn.execute(
        """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id,
                          status) SELECT $1::bigint, account_id, id, email, email_lower,
                          'campaign:' || $1::bigint || ':' || id, 'sent' FROM einmal.subscribers""",
        campaign,
    )
    first = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'a@example.com'")
    to = "bounces+" + ReturnPath(RETURN_PATH, SECRET).token(campaign, first) + "@example.org"
    report = reports.dsn_of(
        [
            ("a@example.com", "failed", "5.1.1"),
            ("b@example.com", "failed", "5.2.2"),
            ("c@example.com", "delivered", "2.0.0"),
            ("stranger@example.net", "failed", "5.1.1"),
        ]
    )
    async with listener(dsn) as port:
        for _ in range(2):  # delivered twice: one event, once
            assert (await hand_over(port, to, report)).startswith("250 ")
    suppressed = [tuple(r) for r in await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions ORDER BY 1")]
    assert suppressed == [("a@example.com", "bounce")]
    kept = [
        tuple(r)
        for r in await conn.fetch("""SELECT s.email, b.kind, b.status, b.event_id FROM einmal.bounces b
                                                  JOIN einmal.sends s ON s.id = b.send_id ORDER BY 1""")
    ]
    assert kept == [("a@example.com", "hard", "5.1.1", f"dsn:{campaign}.{first}:<r1@relay.test>:a@example.com")]
    assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == 1


async def test_a_message_read_in_chunks_is_the_message_sent_dots_and_all(conn: asyncpg.Connection, dsn: str) -> None:
    to = await one_sent_row(conn)
    lines = "".join(f"{'.' * (n % 3)}line {n}\n" for n in range(40_000)) + ".\n..\n"  # > one chunk, dot-stuffed
    message = reports.dsn("a@example.com", report_id=None).replace(
        b"Subject: Hi\r\n", b"Subject: Hi\r\n" + lines.replace("\n", "\r\n").encode(), 1
    )
    async with listener(dsn) as port:
        assert (await hand_over(port, to, message)).startswith("250 ")
        assert (await hand_over_raw(port, to, b"")).startswith("250 2.0.0 OK, ignored")  # the lone dot alone
        for split in range(1, 6):  # the end of data, cut anywhere: still found
            assert (await hand_over_raw(port, to, reports.auto_reply(), split)).startswith("250 2.0.0 OK, ignored")
    row = ".".join(to.removeprefix("bounces+").split(".")[:2])
    assert (
        await conn.fetchval("SELECT event_id FROM einmal.bounces")
        == f"dsn:{row}:sha256:{hashlib.sha256(message).hexdigest()}"
    )
