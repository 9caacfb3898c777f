"""The sending policy of a cluster, with real nodes: EINMAL_RATE_LIMIT and the quotas hold for every node
sharing the database together, counted where the messages arrive."""

import itertools
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.sending.test_budget import CLAIM, sending_campaign, worst_window
from tests.support.pipeline import approve, counts, node_env, seed, start_node, stop_node, wait_status
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio


@pytest.mark.serial  # it counts messages per second at the server: other tests' load bunches them
async def test_three_nodes_together_stay_within_one_rate_limit(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    recipients = 450
    campaign = await seed(conn, [f"r{i}@example.com" for i in range(recipients)])
    with FaultServer() as server:
        env = node_env(dsn, server.port, EINMAL_RATE_LIMIT="100", EINMAL_SMTP_CONNECTIONS="4")
        nodes = [start_node(env, tmp_path / f"node{i}.log") for i in range(3)]
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=60)
        finally:
            codes = [await stop_node(node) for node in nodes]
        arrivals = [m.at for m in server.messages]
    assert codes == [0, 0, 0]
    assert await counts(conn, campaign) == {"sent": recipients}
    assert not server.duplicates()
    worst = worst_window(arrivals)
    span = max(arrivals) - min(arrivals)
    print(
        f"\n3 nodes at EINMAL_RATE_LIMIT=100: worst 1-second window {worst} messages, "
        f"mean {(len(arrivals) - 1) / span:.0f}/s over {span:.1f} s"
    )
    assert worst <= 110, f"{worst} messages in one second from three nodes limited to 100/s together"


async def test_one_claimers_consecutive_slots_are_a_whole_interval_apart(conn: asyncpg.Connection) -> None:
    """What the cluster's worst second (above) allows a margin for, one claimer does exactly: within a claim
    and from one claim to the next, each slot is 1/rate after the one before (docs/design.md#sending-budget)."""
    rate, campaign = 100.0, await sending_campaign(conn, 120)
    slots = []
    for _ in range(3):
        rows = await conn.fetch(CLAIM, campaign, "node-a/1", 40, rate, 0, 0, 3600.0, 86400.0)
        slots += [r["slot_at"] for r in rows]
    assert len(slots) == 120, "the slots taken stay within the second a claim may reach ahead"
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(slots)]
    assert min(gaps) >= 1 / rate - 1e-6, f"consecutive slots {min(gaps):.6f} s apart at a rate of {rate:g}"


async def test_an_hour_quota_lets_exactly_that_many_out_and_the_rest_wait(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    campaign = await seed(conn, [f"q{i}@example.com" for i in range(80)])
    with FaultServer() as server:
        env = node_env(dsn, server.port, EINMAL_QUOTA_HOUR="50", EINMAL_SMTP_CONNECTIONS="4", EINMAL_BATCH_SIZE="7")
        nodes = [start_node(env, tmp_path / f"node{i}.log") for i in range(2)]
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await server.arrived(50)
            await anyio.sleep(3)  # two nodes, each claiming every half second when idle, had time to overstep
            assert len(server.messages) == 50
            assert await counts(conn, campaign) == {"sent": 50, "queued": 30}
        finally:
            codes = [await stop_node(node) for node in nodes]
    assert codes == [0, 0]
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "sending"


async def test_a_domain_that_answers_421_is_paused_for_every_node_while_the_others_go_on(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    slow = [f"s{i}@throttled.example" for i in range(40)]
    fast = [f"f{i}@other.example" for i in range(300)]
    campaign = await seed(conn, [a for pair in zip(fast[:40], slow, strict=True) for a in pair] + fast[40:])
    nodes_n, connections = 2, 3
    with FaultServer() as server:
        server.inject("rcpt", "421 4.7.0 Try again later, closing connection", domain="throttled.example")
        env = node_env(
            dsn,
            server.port,
            EINMAL_SMTP_CONNECTIONS=str(connections),
            EINMAL_BATCH_SIZE="50",
            EINMAL_DOMAIN_PAUSE_SECONDS="1",
            EINMAL_DOMAIN_PROBES="1",
        )
        nodes = [start_node(env, tmp_path / f"node{i}.log") for i in range(nodes_n)]
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await server.arrived(len(fast))  # every other-domain message, while the domain is throttled
            await anyio.sleep(10)  # the throttle lasts on; the pause grows 1, 2, 4, 8 s
            during = [t for t, address in server.rcpts if address.endswith("@throttled.example")]
            server.clear_faults()
            await wait_status(conn, campaign, "sent", timeout=60)
        finally:
            codes = [await stop_node(node) for node in nodes]
    assert codes == [0] * nodes_n
    assert await counts(conn, campaign) == {"sent": len(slow) + len(fast)}
    assert not server.duplicates()
    # what was on the wire or taken before the first 421 came back, then one probe per pause that ended
    bound = nodes_n * connections + nodes_n + 4  # probes after 1, 1+2 and 3+4 s
    print(
        f"\n{len(during)} tries of the throttled domain during its 421s (bound {bound}) for {len(slow)} rows,"
        f" at {[round(t - during[0], 2) for t in during]}"
    )
    assert len(during) <= bound, f"{len(during)} tries of a domain that answered 421"
    rows = await conn.fetch(
        "SELECT attempts FROM einmal.sends s WHERE campaign_id = $1 AND email_lower LIKE '%@throttled.example'",
        campaign,
    )
    assert {r["attempts"] for r in rows} == {0}, "no attempt is counted for a pause"
    assert await conn.fetchval("SELECT failures FROM einmal.domains WHERE domain = 'throttled.example'") == 0


@pytest.mark.serial  # it counts messages per second at the server: other tests' load bunches them
async def test_a_domain_limit_caps_its_rate_and_connections_and_slows_no_other_domain(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    rated = [f"r{i}@rated.example" for i in range(60)]
    other = [f"o{i}@other.example" for i in range(150)]
    campaign = await seed(conn, rated + other)
    with FaultServer() as server:
        server.inject("data_end", None, delay=0.05)
        env = node_env(
            dsn,
            server.port,
            EINMAL_SMTP_CONNECTIONS="6",
            EINMAL_DOMAIN_LIMITS="Rated.Example=20/s,2conn; unused.example=1conn",
        )
        nodes = [start_node(env, tmp_path / f"node{i}.log") for i in range(2)]
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=60)
        finally:
            codes = [await stop_node(node) for node in nodes]
        messages, rcpts = server.messages, server.rcpts
    assert codes == [0, 0]
    assert await counts(conn, campaign) == {"sent": len(rated) + len(other)}
    to_rated = sorted(m.at for m in messages if m.rcpt_tos[0].endswith("@rated.example"))
    to_other = sorted(m.at for m in messages if m.rcpt_tos[0].endswith("@other.example"))
    # each rated transaction is on the wire from its RCPT to its answer (the dot + 0.05 s)
    began = sorted(t for t, address in rcpts if address.endswith("@rated.example"))
    # the budget paces starts: counted at the RCPT, which follows the grant at once (pipelined with MAIL), not
    # at the end of the data, which a loaded machine delivers in bunches
    worst = worst_window(began)
    overlap = max(sum(1 for b in began if b <= t) - sum(1 for e in to_rated if e + 0.05 < t) for t in began)
    print(
        f"\nrated.example at 20/s, 2conn on each of 2 nodes: worst second {worst}, at most {overlap} at once; "
        f"other.example done {to_rated[-1] - to_other[-1]:.1f} s before it"
    )
    assert worst <= 22, f"{worst} messages in one second to a domain limited to 20/s"
    assert overlap <= 4, f"{overlap} transactions at once to a domain limited to 2 connections a node"
    assert to_other[-1] < to_rated[-1] - 1, "the other domain waited for the limited one"
