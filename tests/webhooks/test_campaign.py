"""A campaign of a few hundred recipients sent by a node while its account's endpoint fails about 30% of
requests, hangs on some and is down for a while, with a bounce and an unsubscribe during the sending:
every event is delivered at least once, with its id the same on each repeat, verified by the Standard
Webhooks library; none is lost, none is invented."""

import json
import random
from collections import Counter, defaultdict
from contextlib import nullcontext

import anyio
import pytest

from service.inbound import bounces
from service.inbound import events as inbound
from service.inbound.reports import Report
from service.webhooks import endpoints, policy
from tests.support.pipeline import Received, approve, node_settings, recording_server, running_node, seed, wait_status
from tests.support.webhook_receiver import HANG, Answer, Receiver, Request
from tests.support.webhooks import verified, wait_until

pytestmark = pytest.mark.anyio

N = 300
REFUSED = "r7@example.com"


async def test_every_event_of_a_campaign_is_delivered_at_least_once(dsn, conn) -> None:
    campaign = await seed(conn, [f"r{i}@example.com" for i in range(N)])
    account = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
    chance = random.Random(34)

    def decide(_request: Request) -> Answer:
        roll = chance.random()
        return HANG if roll < 0.02 else Answer(status=500) if roll < 0.32 else Answer()

    settings = node_settings(
        dsn,
        25,  # the SMTP sink's port is set below, once it runs
        webhook_allow_http_loopback=True,
        webhook_retry_seconds=",".join(["0.05", "0.1"] + ["0.2"] * 14),
        webhook_timeout_seconds=0.5,
        webhook_tick_seconds=0.2,
    )
    received = Received(lambda rcpt: "550 5.1.1 no such user" if rcpt == REFUSED else None)
    async with Receiver(decide) as receiver:
        created = await endpoints.add(
            lambda: nullcontext(conn), policy.Reach.of(settings), account_id=account, url=receiver.url()
        )
        async with recording_server(received) as smtp_port:
            settings = settings.model_copy(update={"smtp_port": smtp_port})
            async with running_node(settings):
                await approve(conn, campaign)
                with anyio.fail_after(60):
                    while len(received.messages) < N // 3:
                        await anyio.sleep(0.02)
                # the receiver is killed for a while: refused connections, tried again
                receiver.kill()
                sent = await conn.fetch(
                    "SELECT id, campaign_id, account_id, email, email_lower FROM einmal.sends "
                    "WHERE campaign_id = $1 AND status = 'sent' ORDER BY id LIMIT 2",
                    campaign,
                )
                bounced, unsubscribed = sent
                report = Report("hard", "5.1.1", bounced["email"], None, "dsn:test-1", reason="no_mailbox")
                assert await bounces.apply(conn, bounces.Rules.of(settings), report, bounced) == "applied"
                assert await inbound.apply(conn, "unsubscribe:test-1", "unsubscribe", account, unsubscribed["email"])
                await anyio.sleep(1)
                await receiver.start()
                await wait_status(conn, campaign, "sent")
                await wait_until(
                    conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries", timeout=120
                )
    requests = receiver.requests
    made = {r["id"]: r for r in await conn.fetch("SELECT id, type, sequence FROM einmal.webhook_events")}
    # none lost: each event arrived, verified; none invented: nothing arrived that was not made
    by_id = defaultdict(list)
    for request in requests:
        by_id[request.headers["webhook-id"]].append(request)
    assert set(by_id) == set(made)
    for event_id, repeats in by_id.items():
        assert len({r.body for r in repeats}) == 1, "the same body on every attempt"
        assert verified(repeats[0], created.secret)["type"] == made[event_id]["type"]
    assert any(len(r) > 1 for r in by_id.values()), "some were tried again"
    statuses = Counter(
        r["status"] for r in await conn.fetch("SELECT status FROM einmal.sends WHERE campaign_id = $1", campaign)
    )
    assert Counter(e["type"] for e in made.values()) == {
        "message.sent": statuses["sent"],
        "message.failed": statuses["failed"],
        "message.bounced": 1,
        "subscriber.unsubscribed": 1,
    }
    assert statuses["failed"] == 1 and statuses["sent"] == N - 1
    # the order key: the bounced address's events are 1 (sent) then 2 (bounced)
    mine = sorted(
        (json.loads(r.body)["sequence"], json.loads(r.body)["type"])
        for repeats in by_id.values()
        for r in repeats[:1]
        if json.loads(r.body)["data"]["email"] == bounced["email"]
    )
    assert mine == [(1, "message.sent"), (2, "message.bounced")]
