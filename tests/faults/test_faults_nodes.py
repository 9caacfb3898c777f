"""Node faults on real processes: a node frozen (SIGSTOP) past its timeout
while it holds rows, a crash loop that must end the process, and SIGTERM
while SMTP transactions are on the wire."""

import re
import signal
from collections import Counter
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.support.pipeline import (
    NODE_TIMEOUT,
    TAKEOVER_TIMEOUT,
    Received,
    approve,
    counts,
    message_id,
    node_env,
    recording_server,
    seed,
    start_node,
    stop_node,
    wait_status,
)
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio

CONNECTIONS = 4


async def test_a_node_frozen_past_its_timeout_sends_none_of_the_rows_taken_over(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    campaign = await seed(conn, [f"f{i}@example.com" for i in range(1000)])
    received = Received(delay=0.01)
    async with recording_server(received) as port:
        env = node_env(
            dsn,
            port,
            EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
            EINMAL_BATCH_SIZE="50",
            EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
        )
        frozen = start_node({**env, "EINMAL_NODE_ID": "frozen"}, tmp_path / "frozen.log")
        other = None
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                while len(received.messages) < 100:
                    await anyio.sleep(0.02)
            frozen.send_signal(signal.SIGSTOP)
            await anyio.sleep(0.2)  # statements under way when it stopped have committed
            held = await conn.fetch(
                """
                SELECT id, subscriber_id, status FROM einmal.sends
                WHERE campaign_id = $1 AND claimed_by LIKE 'frozen/%' AND status IN ('claimed', 'sending')""",
                campaign,
            )
            claimed = {r["id"]: r["subscriber_id"] for r in held if r["status"] == "claimed"}
            on_the_wire = {r["id"]: r["subscriber_id"] for r in held if r["status"] == "sending"}
            assert claimed, "the frozen node held claimed rows"
            assert len(on_the_wire) <= CONNECTIONS
            # the other node claims in batches big enough to leave nothing queued for the frozen one once it
            # wakes: whatever of its old rows it sends then, it sends past the claim fence
            other = start_node({**env, "EINMAL_NODE_ID": "other", "EINMAL_BATCH_SIZE": "1000"}, tmp_path / "other.log")
            # declared dead after 3 s, its rows taken over: seconds alone, and once over 20 s on a loaded CI run
            # (five test processes and PostgreSQL on two cores), hence the margin
            with anyio.fail_after(45):
                while await conn.fetchval(
                    """
                        SELECT count(*) FROM einmal.sends WHERE campaign_id = $1
                        AND (status = 'queued' OR (status = 'claimed' AND claimed_by LIKE 'frozen/%'))""",
                    campaign,
                ):
                    await anyio.sleep(0.1)
            taken_over = await counts(conn, campaign)
            frozen.send_signal(signal.SIGCONT)  # it wakes up believing it still holds its batch
            with anyio.fail_after(30):
                while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent":
                    twice = [i for i, n in Counter(received.ids()).items() if n > 1]
                    assert not twice, f"received twice: {twice[:5]}"
                    await anyio.sleep(0.1)
        finally:
            frozen.send_signal(signal.SIGCONT)
            codes = [await stop_node(frozen)] + ([await stop_node(other)] if other else [])
        assert codes == [0, 0], (tmp_path / "frozen.log").read_text()
    ids = Counter(received.ids())
    assert not {i: n for i, n in ids.items() if n > 1}, "nobody received twice"
    rows = {
        r["id"]: r
        for r in await conn.fetch("SELECT id, status, claimed_by FROM einmal.sends WHERE campaign_id = $1", campaign)
    }
    for row_id, subscriber in claimed.items():
        assert rows[row_id]["status"] == "sent"
        assert rows[row_id]["claimed_by"].startswith("other/"), "delivered by the node that took it over"
        assert ids[message_id(campaign, subscriber)] == 1
    for row_id, subscriber in on_the_wire.items():  # in flight when frozen: its own answer, or in doubt
        assert rows[row_id]["status"] in ("sent", "in_doubt")
        assert ids[message_id(campaign, subscriber)] <= 1
    final = await counts(conn, campaign)
    assert set(final) <= {"sent", "in_doubt"} and final.get("in_doubt", 0) <= len(on_the_wire), final
    print(
        f"\nheld at SIGSTOP: {len(claimed)} claimed, {len(on_the_wire)} sending; "
        f"after the take-over {taken_over}; final {final}"
    )


async def test_an_actor_failing_on_every_start_ends_the_process_with_one_line(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    log = tmp_path / "node.log"
    env = node_env(
        dsn, 2525, EINMAL_RESTART_INTENSITY="3", EINMAL_RESTART_PERIOD_SECONDS="30", EINMAL_NODE_ID="looping"
    )
    proc = start_node(env, log)
    try:
        with anyio.fail_after(15):
            while not await conn.fetchval("SELECT count(*) FROM einmal.nodes WHERE id LIKE 'looping/%'"):
                assert proc.poll() is None, log.read_text()
                await anyio.sleep(0.05)
        await conn.execute("DROP TABLE einmal.nodes")  # every heartbeat fails from now on
        began = anyio.current_time()
        with anyio.fail_after(30):
            while proc.poll() is None:
                await anyio.sleep(0.05)
        took = anyio.current_time() - began
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = log.read_text().strip().splitlines()
    assert proc.returncode == 1, lines
    assert "Traceback" not in log.read_text()
    gave_up = [line for line in lines if "giving up" in line]
    assert gave_up == [lines[-1]], lines[-5:]
    assert lines[-1].startswith(
        (
            "einmal: actor scheduler failed 4 times within 30s, giving up: ",
            "einmal: actor send pipeline failed 4 times within 30s, giving up: ",
        )
    ), lines[-1]
    assert lines[-1].endswith('UndefinedTableError: relation "einmal.nodes" does not exist'), lines[-1]
    print(f"\ngave up {took:.1f}s after the table was dropped: {lines[-1]}")


async def test_sigterm_while_replies_are_slow_finishes_the_messages_on_the_wire(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    campaign = await seed(conn, [f"s{i}@example.com" for i in range(400)])
    with FaultServer() as server:
        server.inject("data_end", None, delay=1.0)  # every message waits a second for its 250
        log = tmp_path / "node.log"
        proc = start_node(
            node_env(
                dsn,
                server.port,
                EINMAL_SHUTDOWN_GRACE_SECONDS="5",
                EINMAL_NODE_ID="drained",
                EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
                EINMAL_BATCH_SIZE="20",
            ),
            log,
        )
        await approve(conn, campaign)
        with anyio.fail_after(30):
            await server.arrived(2 * CONNECTIONS + 1)  # a third group is on the wire, its replies pending
        began = anyio.current_time()
        code = await stop_node(proc, timeout=60)  # the grace period is 5 s; a loaded machine may take longer
        took = anyio.current_time() - began
        assert code == 0, log.read_text()
    final = await counts(conn, campaign)
    assert set(final) == {"sent", "queued"}, f"nothing claimed, sending or in doubt: {final}"
    assert final["sent"] == len(server.messages) > 2 * CONNECTIONS, "the group on the wire was answered and recorded"
    assert not server.duplicates()
    assert not await conn.fetchval(
        "SELECT count(*) FROM einmal.sends WHERE claimed_by LIKE 'drained/%' AND status <> 'sent'"
    )
    assert not await conn.fetchval("SELECT count(*) FROM einmal.nodes WHERE id LIKE 'drained/%'")
    print(f"\nSIGTERM with slow replies: exit 0 after {took:.2f}s; final {final}")


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_second_signal_during_the_drain_is_absorbed_and_the_node_still_exits_0(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, second: signal.Signals
) -> None:
    campaign = await seed(conn, [f"t{i}@example.com" for i in range(200)])
    with FaultServer() as server:
        server.inject("data_end", None, delay=2.0)  # the drain waits on the replies of the group on the wire
        log = tmp_path / "node.log"
        proc = start_node(
            node_env(
                dsn,
                server.port,
                EINMAL_SHUTDOWN_GRACE_SECONDS="8",
                EINMAL_NODE_ID="twice",
                EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
                EINMAL_BATCH_SIZE="20",
            ),
            log,
        )
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await server.arrived(CONNECTIONS + 1)  # a second group is on the wire, its replies pending
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                while "stopping: draining" not in log.read_text():
                    await anyio.sleep(0.05)
            await anyio.sleep(0.5)
            assert proc.poll() is None, "still draining when the second signal comes"
            proc.send_signal(second)
            code = await stop_node(proc, timeout=30)  # sends a third one, SIGTERM
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert code == 0, log.read_text()
    assert f"{second.name} ignored: already draining" in log.read_text()
    final = await counts(conn, campaign)
    assert set(final) == {"sent", "queued"}, f"nothing claimed, sending or in doubt: {final}"
    assert final["sent"] == len(server.messages) > CONNECTIONS, "the group on the wire was answered and recorded"
    assert not server.duplicates()
    assert not await conn.fetchval("SELECT count(*) FROM einmal.nodes WHERE id LIKE 'twice/%'")
    print(f"\nSIGTERM then {second.name}: exit {code}; final {final}")


class Gates:
    """An SMTP handler that keeps the reply to the n-th message until `release[n]` is set; each reply
    names its delivery ("250 2.0.0 Ok: delivery 2"), so a row's last_reply tells whose answer it took."""

    def __init__(self, gated: int) -> None:
        self.arrived = [anyio.Event() for _ in range(gated)]
        self.release = [anyio.Event() for _ in range(gated)]
        self.rcpts: list[str] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        n = len(self.rcpts)
        self.rcpts.append(envelope.rcpt_tos[0])
        if n < len(self.release):
            self.arrived[n].set()
            await self.release[n].wait()
        return f"250 2.0.0 Ok: delivery {n + 1}"


async def test_under_resend_a_node_woken_past_its_timeout_records_no_answer_on_a_row_taken_over(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    """Frozen with a message on the wire, the node is declared dead; resend queues the row and another
    node sends it. The woken node then gets its 250: the message went out twice (the window resend
    accepts), but that answer must not be written onto the row the other node now holds."""
    campaign = await seed(conn, ["woken@example.com"])
    gates = Gates(2)
    async with recording_server(gates) as port:
        env = node_env(
            dsn,
            port,
            EINMAL_IN_DOUBT="resend",
            EINMAL_SMTP_CONNECTIONS="1",
            EINMAL_BATCH_SIZE="1",
            EINMAL_SMTP_TIMEOUT_SECONDS="120",
        )
        frozen = start_node({**env, "EINMAL_NODE_ID": "frozen"}, tmp_path / "frozen.log")
        other = None
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await gates.arrived[0].wait()  # the frozen node's message is at the server, unanswered
            frozen.send_signal(signal.SIGSTOP)
            gates.release[0].set()  # its 250 waits in the stopped node's socket
            other = start_node({**env, "EINMAL_NODE_ID": "other"}, tmp_path / "other.log")
            with anyio.fail_after(NODE_TIMEOUT + 45):  # the frozen node's timeout, then the other's start and claim
                await gates.arrived[1].wait()  # declared dead, queued again, and on the wire from the other node
            row = await conn.fetchrow("SELECT status, claimed_by FROM einmal.sends WHERE campaign_id = $1", campaign)
            assert row["status"] == "sending" and row["claimed_by"].startswith("other/"), dict(row)
            frozen.send_signal(signal.SIGCONT)  # it reads its 250 and records it
            with anyio.fail_after(30):
                while (
                    "found no row" not in (tmp_path / "frozen.log").read_text()
                    and await conn.fetchval("SELECT status FROM einmal.sends WHERE campaign_id = $1", campaign)
                    == "sending"
                ):
                    await anyio.sleep(0.05)
            gates.release[1].set()
            await wait_status(conn, campaign, "sent", timeout=30)
        finally:
            for gate in gates.release:
                gate.set()
            frozen.send_signal(signal.SIGCONT)
            codes = [await stop_node(frozen)] + ([await stop_node(other)] if other else [])
        assert codes == [0, 0], (tmp_path / "frozen.log").read_text()
    row = await conn.fetchrow(
        "SELECT status, claimed_by, last_reply FROM einmal.sends WHERE campaign_id = $1", campaign
    )
    assert row["status"] == "sent" and row["claimed_by"].startswith("other/"), dict(row)
    assert row["last_reply"] == "250 2.0.0 Ok: delivery 2", "the row took the answer of its own delivery"
    assert gates.rcpts == ["woken@example.com"] * 2, "sent by the frozen node and once more by the other"
    frozen_log = (tmp_path / "frozen.log").read_text()
    assert re.search(
        r"send \d+ \(campaign \d+, subscriber \d+\): its answer \(sent, reply 250\) found no row of "
        r"frozen/\S+ to record it on: the row is sending by other/",
        frozen_log,
    ), frozen_log
    assert "found no row" not in (tmp_path / "other.log").read_text()
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM einmal.lost_outcomes WHERE outcome = 'sent' AND token LIKE "
            "'frozen/%' AND found_status = 'sending' AND found_claimed_by LIKE 'other/%'"
        )
        == 1
    )
