"""A message template's engagement and a subscriber's last activity, counted as they happen: messages made from
a stored template, sent by a node (in this process, a real PostgreSQL, a real SMTP server on loopback), one of
them bounced and one complained about over SMTP to their VERP addresses, one unsubscribed by its one-click event."""

import asyncpg
import pytest

from service.engagement import activity, counts
from service.errors import NotFound
from service.inbound import events
from service.messages import messages
from service.messages.messages import Queueing
from tests.inbound.test_bounce_inbound import RETURN_PATH, SECRET, hand_over, running_node_with_inbound
from tests.messages.support import FROM, account_with_key
from tests.messages.test_sending import settled
from tests.support import reports
from tests.support.pipeline import node_settings

pytestmark = pytest.mark.anyio

PEOPLE = ["ann@example.com", "bob@example.com", "cy@example.com", "dee@example.com"]


async def subscriber_id(conn: asyncpg.Connection, email: str) -> int:
    return await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email_lower = $1", email)


async def test_a_templates_messages_counted_and_each_subscribers_last_activity(
    conn: asyncpg.Connection, dsn: str, smtp_server
) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    settings = node_settings(dsn, smtp_server.port, return_path=RETURN_PATH, return_path_secret=SECRET)
    queueing = Queueing.of(settings)
    await messages.put_template(
        conn,
        mailing=queueing.mailing,
        account_id=account_id,
        name="receipt",
        subject="Receipt",
        body_text="Thanks.",
        body_html=None,
        from_address=FROM,
    )
    with pytest.raises(NotFound):
        await counts.of_template(conn, account_id=account_id, name="invoice")
    assert await counts.of_template(conn, account_id=account_id, name="receipt") == counts.TemplateEngagement(
        template="receipt"
    )
    async with running_node_with_inbound(settings) as inbound_port:
        made = {
            to: (await messages.send(conn, queueing=queueing, account_id=account_id, to=to, template_name="receipt")).id
            for to in PEOPLE
        }
        inline = await messages.send(
            conn,
            queueing=queueing,
            account_id=account_id,
            to="ann@example.com",
            subject="Hi",
            body_text="Hi.",
            from_address=FROM,
        )
        await settled(conn, 5)
        got = {m.rcpt_tos[0]: m for m in smtp_server.messages if b"Receipt" in m.data}
        assert sorted(got) == PEOPLE
        reply = await hand_over(inbound_port, got["bob@example.com"].mail_from, reports.dsn("bob@example.com"))
        assert reply.startswith("250 "), reply
        complaint = reports.arf(mail_from=got["cy@example.com"].mail_from)
        reply = await hand_over(inbound_port, got["cy@example.com"].mail_from, complaint)
        assert reply.startswith("250 "), reply
    dee = await subscriber_id(conn, "dee@example.com")
    for _ in range(2):  # the one-click unsubscribe's event, pressed twice: counted once
        await events.apply(
            conn,
            f"unsubscribe:{account_id}.{made['dee@example.com']}.{dee}",
            "unsubscribe",
            account_id,
            "dee@example.com",
        )

    found = await counts.of_template(conn, account_id=account_id, name="receipt")
    assert (found.delivered, found.bounced, found.complained, found.unsubscribed) == (4, 1, 1, 1)
    assert found.clicks is None
    inline_found = await counts.of_template(conn, account_id=account_id, name="")
    assert inline_found.delivered == 1 and inline.id not in made.values()

    seen = {who: await activity.of_subscriber(conn, subscriber_id=await subscriber_id(conn, who)) for who in PEOPLE}
    assert all(a.delivered is not None for a in seen.values())
    assert seen["ann@example.com"].last == "delivered"
    assert (
        seen["bob@example.com"].last == "bounced"
        and seen["bob@example.com"].bounced > seen["bob@example.com"].delivered
    )
    assert seen["cy@example.com"].last == "complained"
    assert seen["dee@example.com"].last == "unsubscribed"
    assert seen["ann@example.com"].bounced is None and seen["ann@example.com"].clicked is None
    nobody = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower)"
        " VALUES ($1, 'new@example.com', 'new@example.com') RETURNING id",
        account_id,
    )
    assert (await activity.of_subscriber(conn, subscriber_id=nobody)).last is None
