"""What a report over SMTP may change: only the send row its signed VERP token names, only once that
row's message went out, and only within bounds on its size (docs/design.md#inbound-events).

Real parts: the inbound actor on loopback, a real SMTP client, real PostgreSQL."""

import logging

import anyio
import asyncpg
import pytest

from actors import inbound_smtp
from service import db
from service.inbound import bounces
from service.mail.verp import ReturnPath
from service.metrics import Metrics
from tests.inbound import test_bounce_inbound as inbound
from tests.support import reports
from tests.support.pipeline import node_settings, seed

pytestmark = pytest.mark.anyio


async def send_rows(conn: asyncpg.Connection, status: dict[str, str]) -> tuple[int, dict[str, int]]:
    """A campaign with a send row in the given status for each address: (campaign, {address: subscriber})."""
    campaign = await seed(conn, list(status))
    await conn.execute(
        """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                  claimed_by)
        SELECT $1::bigint, s.account_id, s.id, s.email, s.email_lower, 'campaign:' || $1::bigint || ':' || s.id,
               m.status, CASE WHEN m.status IN ('claimed', 'sending', 'in_doubt') THEN 'node-a' END
        FROM einmal.subscribers s JOIN unnest($2::text[], $3::text[]) AS m (email, status) USING (email)""",
        campaign,
        list(status),
        list(status.values()),
    )
    return campaign, {r["email"]: r["id"] for r in await conn.fetch("SELECT id, email FROM einmal.subscribers")}


def verp(campaign: int, subscriber: int) -> str:
    return "bounces+" + ReturnPath(inbound.RETURN_PATH, inbound.SECRET).token(campaign, subscriber) + "@example.org"


def counted(metrics: Metrics, result: str) -> float:
    return metrics.registry.get_sample_value("einmal_inbound_messages_total", {"result": result}) or 0


async def suppressed(conn: asyncpg.Connection) -> list[tuple[str, str]]:
    return [tuple(r) for r in await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions ORDER BY 1")]


async def test_a_report_without_a_token_changes_nothing_whatever_message_id_it_names(
    conn: asyncpg.Connection, dsn: str, caplog
) -> None:
    people = [f"p{n}@example.com" for n in range(4)]
    campaign, ids = await send_rows(conn, dict.fromkeys(people, "sent"))
    metrics = Metrics()
    caplog.set_level(logging.INFO, logger="einmal.inbound")
    lines = []
    async with inbound.listener(dsn, metrics) as port:
        for n, who in enumerate(people):  # einmal's own Message-ID for each, as a guesser would write it
            ours = f"<campaign.{campaign}.{ids[who]}@example.com>"
            for message in (
                reports.dsn(who, report_id=f"<d{n}@relay.test>", original_id=ours),
                reports.arf(report_id=f"<a{n}@isp.test>", original_id=ours),
            ):
                caplog.clear()
                reply = await inbound.hand_over(port, inbound.RETURN_PATH, message)
                assert reply.startswith("250"), reply
                lines.append(inbound.inbound_lines(caplog))
    assert await inbound.written(conn) == dict.fromkeys(inbound.TABLES, 0)
    assert all(len(logged) == 1 and "no VERP token" in logged[0] for logged in lines), lines
    assert counted(metrics, "unsigned") == 8 and counted(metrics, "applied") == 0


async def test_a_token_bound_report_touches_its_own_send_row_alone(conn: asyncpg.Connection, dsn: str) -> None:
    people = [f"p{n}@example.com" for n in range(12)]
    campaign, ids = await send_rows(conn, dict.fromkeys(people, "sent"))
    own = verp(campaign, ids["p0@example.com"])
    other_message = f"<campaign.{campaign}.{ids['p5@example.com']}@example.com>"
    metrics = Metrics()
    async with inbound.listener(dsn, metrics) as port:
        for message in (
            # one recipient: the token's row, whatever address it names (a relay may have rewritten it)
            reports.dsn("p1@example.com", report_id="<one@relay.test>"),
            # several recipients, none the row's: nothing
            reports.dsn_of([(who, "failed", "5.1.1") for who in people[1:]], report_id="<others@relay.test>"),
            # several recipients: the row's own alone
            reports.dsn_of(
                [
                    ("p1@example.com", "failed", "5.1.1"),
                    ("P0@Example.com", "failed", "5.2.2"),
                    ("p2@example.com", "failed", "5.1.1"),
                ],
                report_id="<both@relay.test>",
            ),
            # a complaint returning another recipient's message: still the token's row
            reports.arf(report_id="<c@isp.test>", original_id=other_message),
        ):
            reply = await inbound.hand_over(port, own, message)
            assert reply.startswith("250"), reply
    assert await suppressed(conn) == [("p0@example.com", "bounce")]
    kept = [
        tuple(r)
        for r in await conn.fetch("""SELECT s.email, b.kind, b.status, b.event_id FROM einmal.bounces b
                                                  JOIN einmal.sends s ON s.id = b.send_id ORDER BY b.id""")
    ]
    row = f"{campaign}.{ids['p0@example.com']}"
    assert kept == [
        ("p0@example.com", "hard", "5.1.1", f"dsn:{row}:<one@relay.test>"),
        ("p0@example.com", "hard", "5.2.2", f"dsn:{row}:<both@relay.test>:p0@example.com"),
        ("p0@example.com", "complaint", "abuse", f"arf:{row}:<c@isp.test>"),
    ]
    assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == 3
    assert (counted(metrics, "applied"), counted(metrics, "dropped")) == (3, 1)


STATUSES = ("queued", "claimed", "suppressed", "failed", "sending", "in_doubt", "sent")


async def test_a_report_acts_only_on_a_row_whose_message_went_out(conn: asyncpg.Connection, dsn: str) -> None:
    campaign, ids = await send_rows(conn, {f"{status}@example.com": status for status in STATUSES})
    metrics = Metrics()
    async with inbound.listener(dsn, metrics) as port:
        for status in STATUSES:
            who = f"{status}@example.com"
            report = reports.dsn(who, report_id=f"<{status}@relay>")
            reply = await inbound.hand_over(port, verp(campaign, ids[who]), report)
            assert reply.startswith("250"), reply
    assert await suppressed(conn) == [(f"{status}@example.com", "bounce") for status in ("in_doubt", "sending", "sent")]
    assert await conn.fetchval("SELECT count(*) FROM einmal.bounces") == 3
    assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == 3
    assert (counted(metrics, "applied"), counted(metrics, "dropped")) == (3, 4)


async def test_apply_drops_a_report_on_a_row_not_sent_whoever_found_the_row(conn: asyncpg.Connection, dsn: str) -> None:
    campaign, ids = await send_rows(conn, {"q@example.com": "queued", "s@example.com": "sent"})
    settings = node_settings(dsn, 25)
    results = {}
    for who in ids:
        row = await conn.fetchrow(*db.sql("bounce_send_row", campaign_id=campaign, subscriber_id=ids[who]))
        results[who] = await bounces.apply(
            conn, bounces.Rules.of(settings), bounces.Report("hard", "5.1.1", who, None, f"test:{who}"), row
        )
    assert results["q@example.com"].startswith("dropped") and results["s@example.com"] == "applied"
    assert await suppressed(conn) == [("s@example.com", "bounce")]


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("MIME parts", reports.dsn_of([("a@example.com", "failed", "5.1.1")], extra_parts=2000)),
        (
            "recipients",
            reports.dsn_of(
                [("a@example.com", "failed", "5.1.1")] + [(f"r{n}@example.net", "failed", "5.1.1") for n in range(2000)]
            ),
        ),
    ],
)
async def test_a_report_past_its_bounds_is_refused_and_writes_nothing(
    conn: asyncpg.Connection, dsn: str, caplog, what: str, message: bytes
) -> None:
    campaign, ids = await send_rows(conn, {"a@example.com": "sent"})
    caplog.set_level(logging.INFO, logger="einmal.inbound")
    async with inbound.listener(dsn) as port:
        reply = await inbound.hand_over(port, verp(campaign, ids["a@example.com"]), message)
    assert reply.startswith("552 5.3.4"), reply
    assert await inbound.written(conn) == dict.fromkeys(inbound.TABLES, 0)
    (line,) = inbound.inbound_lines(caplog)
    assert what in line, line


async def test_a_report_within_its_bounds_is_read(conn: asyncpg.Connection, dsn: str) -> None:
    campaign, ids = await send_rows(conn, {"a@example.com": "sent"})
    message = reports.dsn_of(
        [("a@example.com", "failed", "5.1.1")] + [(f"r{n}@example.net", "failed", "5.1.1") for n in range(20)],
        extra_parts=20,
        returned_body="A line of the returned message.\n" * 20000,
    )
    async with inbound.listener(dsn) as port:
        reply = await inbound.hand_over(port, verp(campaign, ids["a@example.com"]), message)
    assert reply.startswith("250"), reply
    assert await suppressed(conn) == [("a@example.com", "bounce")]


async def test_a_report_that_finds_no_parser_free_is_answered_451_and_writes_nothing(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign, ids = await send_rows(conn, {"a@example.com": "sent"})
    to = verp(campaign, ids["a@example.com"])
    replies: list[str] = []
    async with inbound.listening_actor(dsn) as (actor, port):
        parsers = actor.handler.parsers
        holders = [object() for _ in range(int(parsers.total_tokens))]
        for holder in holders:  # every parser busy, as under a flood
            await parsers.acquire_on_behalf_of(holder)

        async def deliver(n: int) -> None:
            replies.append(await inbound.hand_over(port, to, reports.dsn("a@example.com", report_id=f"<w{n}@relay>")))

        async with anyio.create_task_group() as tg:
            for n in range(inbound_smtp.MAX_WAITING):
                tg.start_soon(deliver, n)
            with anyio.fail_after(30):
                while parsers.statistics().tasks_waiting < inbound_smtp.MAX_WAITING:
                    await anyio.sleep(0.02)
            await deliver(-1)  # one more than may wait
            assert replies == ["451 4.3.0 cannot read the report now, try again later"], replies
            for holder in holders:
                parsers.release_on_behalf_of(holder)
    assert sorted(reply[:3] for reply in replies) == ["250"] * inbound_smtp.MAX_WAITING + ["451"]
    assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == inbound_smtp.MAX_WAITING


async def test_a_token_holder_cannot_take_the_report_id_of_another_rows_report(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign, ids = await send_rows(conn, dict.fromkeys(["p0@example.com", "p1@example.com"], "sent"))
    async with inbound.listener(dsn) as port:
        # p0 guesses the Message-ID a relay will give p1's bounce and sends it first, to his own return path
        squatted = await inbound.hand_over(
            port,
            verp(campaign, ids["p0@example.com"]),
            reports.dsn("p0@example.com", status="4.2.2", report_id="<x@relay>"),
        )
        genuine = await inbound.hand_over(
            port, verp(campaign, ids["p1@example.com"]), reports.dsn("p1@example.com", report_id="<x@relay>")
        )
        again = await inbound.hand_over(
            port,
            verp(campaign, ids["p1@example.com"]),
            reports.dsn("p1@example.com", status="5.2.2", report_id="<x@relay>"),
        )
    assert (squatted[:3], genuine[:3], again[:3]) == ("250", "250", "554")  # one row's id, other content: 554
    assert await suppressed(conn) == [("p1@example.com", "bounce")]
    assert sorted(await conn.fetch("SELECT event_id FROM einmal.inbound_events")) == sorted(
        [(f"dsn:{campaign}.{ids[who]}:<x@relay>",) for who in ("p0@example.com", "p1@example.com")]
    )


async def test_a_complaint_to_the_plain_address_acts_through_the_signed_token_of_the_message_it_returns(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """A feedback loop sends its complaints to one fixed address, not to the message's return path; the
    message it returns still carries the signed token, in ARF's Original-Mail-From or the returned
    Return-Path, and that token (never a Message-ID) names the row."""
    people = [f"p{n}@example.com" for n in range(4)]
    campaign, ids = await send_rows(conn, dict.fromkeys(people, "sent"))
    token = {who: verp(campaign, ids[who]) for who in people}
    forged = token["p2@example.com"][: -len("@example.org") - 1] + "0@example.org"  # its last digit changed
    if forged == token["p2@example.com"]:
        forged = forged.replace("0@", "1@")
    metrics = Metrics()
    async with inbound.listener(dsn, metrics) as port:
        replies = [
            await inbound.hand_over(port, inbound.RETURN_PATH, message)
            for message in (
                reports.arf(report_id="<f0@isp.test>", mail_from=token["p0@example.com"]),
                reports.arf(report_id="<f1@isp.test>", return_path=token["p1@example.com"]),
                reports.arf(report_id="<f2@isp.test>", mail_from=forged),
                reports.arf(report_id="<f3@isp.test>", original_id=f"<campaign.{campaign}.{ids['p3@example.com']}@x>"),
            )
        ]
    assert all(reply.startswith("250") for reply in replies), replies
    assert await suppressed(conn) == [("p0@example.com", "complaint"), ("p1@example.com", "complaint")]
    assert counted(metrics, "applied") == 2 and counted(metrics, "unsigned") == 2


async def test_connections_past_the_session_cap_hear_421_and_the_listener_takes_mail_again_after(
    dsn: str, monkeypatch
) -> None:
    """Each session may hold a message of up to EINMAL_INBOUND_MAX_BYTES: their number is capped, so a
    flood of connections bounds the listener's memory; those past the cap are told to come back."""
    monkeypatch.setattr(inbound_smtp, "MAX_SESSIONS", 5)
    metrics = Metrics()

    async def greeting(stream) -> bytes:
        with anyio.fail_after(10):
            return await stream.receive(1024)

    async with inbound.listener(dsn, metrics) as port:
        held = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(5)]
        assert [(await greeting(stream))[:3] for stream in held] == [b"220"] * 5
        async with await anyio.connect_tcp("127.0.0.1", port) as extra:
            assert (await greeting(extra)).startswith(b"421 4.3.2")
            with anyio.fail_after(10), pytest.raises(anyio.EndOfStream):
                await extra.receive()
        for stream in held[:2]:
            await stream.aclose()
        with anyio.fail_after(10):
            while True:  # the listener hears of the closed sessions soon after
                async with await anyio.connect_tcp("127.0.0.1", port) as again:
                    if (await greeting(again)).startswith(b"220"):
                        break
                await anyio.sleep(0.05)
        reply = await inbound.hand_over(port, inbound.RETURN_PATH, reports.auto_reply())
        for stream in held[2:]:
            await stream.aclose()
    assert reply.startswith("250"), reply
    assert counted(metrics, "busy") >= 1
