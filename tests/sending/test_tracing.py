"""One trace per batch: a root span with claim, send and record children,
ids and counts as attributes, never an address."""

import asyncpg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service import telemetry
from tests.support.pipeline import Received, approve, node_settings, recording_server, running_node, seed, wait_status
from tests.support.smtp_servers import FaultServer, free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    telemetry.setup(exporter=exporter)
    yield exporter
    telemetry.shutdown()


async def test_each_batch_is_one_trace_with_claim_send_and_record(
    conn: asyncpg.Connection, dsn: str, spans: InMemorySpanExporter
) -> None:
    campaign = await seed(conn, [f"t{i}@example.com" for i in range(120)], suppressed=["t5@example.com"])
    async with recording_server(Received()) as port, running_node(node_settings(dsn, port, batch_size=50)):
        await approve(conn, campaign)
        await wait_status(conn, campaign, "sent")
    finished = spans.get_finished_spans()
    batches = [s for s in finished if s.name == "batch" and s.attributes["einmal.batch_size"] > 0]
    assert len(batches) == 3  # 119 to send in batches of 50 (the suppressed one is settled at claim)
    assert sum(b.attributes["einmal.batch_size"] for b in batches) == 119
    for batch in batches:
        assert batch.parent is None
        assert batch.attributes["einmal.campaign_id"] == campaign
        assert batch.attributes["einmal.account_id"] > 0
        assert batch.attributes["einmal.node_id"]
        assert batch.attributes["einmal.outcome.sent"] == batch.attributes["einmal.batch_size"]
        children = sorted(s.name for s in finished if s.parent and s.parent.span_id == batch.context.span_id)
        assert children == ["claim", "record", "send"]
        for name in ("send", "record"):  # each says which batch it is of, and what came of it
            [child] = [s for s in finished if s.name == name and s.parent.span_id == batch.context.span_id]
            assert child.attributes["einmal.campaign_id"] == campaign
            assert child.attributes["einmal.node_id"] == batch.attributes["einmal.node_id"]
            assert child.attributes["einmal.rows"] == batch.attributes["einmal.batch_size"]
            assert child.attributes["einmal.outcome.sent"] == batch.attributes["einmal.batch_size"]
        assert all(
            s.context.trace_id == batch.context.trace_id
            for s in finished
            if s.parent and s.parent.span_id == batch.context.span_id
        )
    assert any(s.name == "campaign.start" for s in finished)
    assert any(s.name == "campaign.build" for s in finished)
    for span in finished:
        for value in span.attributes.values():
            assert "@" not in str(value), f"{span.name} carries an address"


async def test_the_send_span_says_which_relay_failed_and_which_domain_throttled(
    conn: asyncpg.Connection, dsn: str, spans: InMemorySpanExporter
) -> None:
    campaign = await seed(conn, [f"t{i}@example.com" for i in range(20)] + ["slow@throttled.example"])
    dead = free_port()  # nothing listens there: the first relay refuses every connection
    with FaultServer() as server:
        server.inject("rcpt", "421 4.7.0 Try again later", domain="throttled.example", times=1)
        urls = f"smtp://127.0.0.1:{dead},smtp://127.0.0.1:{server.port}"
        async with running_node(node_settings(dsn, server.port, smtp_urls=urls, domain_pause_seconds=0.5)):
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent")
    events = [e for s in spans.get_finished_spans() if s.name == "send" for e in s.events]
    relays = {e.attributes["einmal.relay"] for e in events if e.name == "relay unavailable"}
    throttled = [e.attributes for e in events if e.name == "domain throttled"]
    assert relays == {f"127.0.0.1:{dead}"}
    assert [(t["einmal.domain"], t["einmal.relay"]) for t in throttled] == [
        ("throttled.example", f"127.0.0.1:{server.port}")
    ]
    assert throttled[0]["einmal.reply"].startswith("421 4.7.0")
