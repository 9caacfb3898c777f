"""Transactional messages sent by a node (in this process, a real PostgreSQL, a real SMTP server on loopback):
what a message honours, its Message-ID and VERP bounce, and the in-memory last look's rule.

A message is never sent to an address suppressed for a hard bounce, a complaint or by the operator; an
unsubscribe (a list opt-out) does not stop it unless it was made with honour_unsubscribe. A hard bounce of the
message, handed back over SMTP to its VERP address, is recorded against it and then stops the next message to
the address even where the address had only unsubscribed before (the stronger reason replaces the
unsubscribe)."""

import anyio
import asyncpg
import pytest

from actors.batch import Outcome, Row
from actors.feed import Feed
from service import db
from service.messages import messages
from service.settings import Settings
from service.subscribers import suppressions
from tests.inbound.test_bounce_inbound import RETURN_PATH, SECRET, hand_over, running_node_with_inbound
from tests.messages.support import FROM, account_with_key, message_rows, suppress
from tests.support import reports
from tests.support.pipeline import message_id, node_settings
from tests.support.wiring import wiring

pytestmark = pytest.mark.anyio


async def settled(conn: asyncpg.Connection, n: int, timeout: float = 30) -> list[asyncpg.Record]:
    """The message rows once `n` of them are settled (none queued, claimed or sending)."""
    with anyio.fail_after(timeout):
        while True:
            rows = await message_rows(conn)
            if len(rows) >= n and all(r["status"] not in ("queued", "claimed", "sending") for r in rows):
                return rows
            await anyio.sleep(0.05)


async def test_what_a_message_honours_and_its_verp_bounce(conn: asyncpg.Connection, dsn: str, smtp_server) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    for email, reason in [
        ("unsub@example.com", "unsubscribe"),
        ("hard@example.com", "bounce"),
        ("complained@example.com", "complaint"),
        ("blocked@example.com", "manual"),
    ]:
        await suppress(conn, account_id, email, reason)
    settings = node_settings(dsn, smtp_server.port, return_path=RETURN_PATH, return_path_secret=SECRET)

    async def send(to: str, **options) -> int:
        made = await messages.send(
            conn,
            settings=settings,
            account_id=account_id,
            to=to,
            subject="Receipt {{ attributes.order }}",
            body_text="Order {{ attributes.order }} for {{ email }}.",
            from_address=FROM,
            data={"order": to.partition("@")[0]},
            **options,
        )
        return made.id

    async with running_node_with_inbound(settings) as inbound_port:
        ids = {
            "unsub": await send("unsub@example.com"),
            "unsub-honoured": await send("unsub@example.com", honour_unsubscribe=True),
            "hard": await send("hard@example.com"),
            "complained": await send("complained@example.com"),
            "blocked": await send("blocked@example.com"),
            "fresh": await send("fresh@example.com"),
        }
        await settled(conn, 6)
        states = {
            name: (await messages.show(conn, account_id=account_id, message_id=i)).state for name, i in ids.items()
        }
        assert states == {
            "unsub": "sent",
            "unsub-honoured": "suppressed",
            "hard": "suppressed",
            "complained": "suppressed",
            "blocked": "suppressed",
            "fresh": "sent",
        }
        got = {m.rcpt_tos[0]: m for m in smtp_server.messages}
        assert sorted(got) == ["fresh@example.com", "unsub@example.com"]  # each once
        assert len(smtp_server.messages) == 2
        fresh = got["fresh@example.com"]
        subscriber = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email_lower = 'fresh@example.com'")
        assert fresh.message_id == message_id(ids["fresh"], subscriber)
        assert b"Receipt fresh" in fresh.data and b"Order fresh for fresh@example.com." in fresh.data
        # a hard bounce to each sent message's VERP address: recorded against the message
        for who in ("fresh@example.com", "unsub@example.com"):
            reply = await hand_over(inbound_port, got[who].mail_from, reports.dsn(who, report_id=f"<{who}@relay>"))
            assert reply.startswith("250 "), reply
        shown = await messages.show(conn, account_id=account_id, message_id=ids["fresh"])
        assert shown.bounces == ["hard: no_mailbox"], shown
        reasons = dict(await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions"))
        assert reasons["fresh@example.com"] == "bounce"
        assert reasons["unsub@example.com"] == "bounce", "a bounce replaces the unsubscribe messages pass"
        again = await send("unsub@example.com")
        await settled(conn, 7)
        assert (await messages.show(conn, account_id=account_id, message_id=again)).state == "suppressed"
        assert len(smtp_server.messages) == 2
    # messages are no campaigns: the writer counts no tallies for them (a bounce report adds its own), none
    # finished, none listed for the claimer's campaign turns
    assert await conn.fetchval("SELECT coalesce(sum(delivered), 0) FROM einmal.campaign_tallies") == 0
    assert {r["campaign_status"] for r in await message_rows(conn)} == {"sending"}
    assert await conn.fetch(*db.sql("campaign_sending")) == []


def _row(account_id: int = 1, email: str = "a@example.com") -> Row:
    return Row(1, account_id, 1, email, email, 0, "")


async def test_the_last_look_passes_an_unsubscribe_for_a_message_only(dsn: str) -> None:
    """The listener's sets, as the notifications of migration 0114 feed them, and the sender's rule over them."""
    node = wiring(Settings(database_url=dsn), dsn=dsn)
    listener = node.listener()
    listener._on_unsubscribe(None, 0, "einmal_unsubscribe", "+1:a@example.com")
    listener._on_suppression(None, 0, "einmal_suppression", "1:a@example.com")
    listener._on_suppression(None, 0, "einmal_suppression", "1:b@example.com")
    sender = node.pipeline().sender("t", Feed(1))

    async def look(email: str, honour: bool) -> str:
        outcome = await sender.deliver(None, None, _row(email=email), Outcome(1, "failed", "not rendered"), honour)  # type: ignore[arg-type]
        return outcome.status

    # a campaign's row (honour) stops at any suppression; a message's passes an unsubscribe alone
    assert await look("a@example.com", True) == "suppressed"
    assert await look("a@example.com", False) == "failed"  # past the look: the (stand-in) render's outcome
    assert await look("b@example.com", False) == "suppressed"
    listener._on_unsubscribe(None, 0, "einmal_unsubscribe", "-1:a@example.com")  # now a bounce
    assert await look("a@example.com", False) == "suppressed"


async def test_the_database_notifies_which_suppressions_are_only_an_unsubscribe(conn: asyncpg.Connection) -> None:
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    heard: list[tuple[str, str]] = []
    await conn.add_listener("einmal_unsubscribe", lambda *a: heard.append((a[2], a[3])))
    await conn.add_listener("einmal_suppression", lambda *a: heard.append((a[2], a[3])))
    await suppress(conn, account_id, "u@example.com", "unsubscribe")
    await suppress(conn, account_id, "b@example.com", "bounce")
    assert await suppressions.suppress(conn, account_id, ["u@example.com"], "complaint") == 0  # not new: replaced
    with anyio.fail_after(5):
        while len(heard) < 4:
            await anyio.sleep(0.02)
    assert heard == [
        ("einmal_unsubscribe", f"+{account_id}:u@example.com"),
        ("einmal_suppression", f"{account_id}:u@example.com"),
        ("einmal_suppression", f"{account_id}:b@example.com"),
        ("einmal_unsubscribe", f"-{account_id}:u@example.com"),
    ]
    assert (
        await conn.fetchval("SELECT reason FROM einmal.suppressions WHERE email_lower = 'u@example.com'") == "complaint"
    )
