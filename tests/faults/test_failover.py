"""`make failover`, bounded for every CI: two node processes sending through a URL that names a primary and
its pg_basebackup standby, the database taken away half-way (tests/support/failover.py). Here only what
the other tests in tests/faults/ do not run: a synchronous failover (the primary's postmaster SIGKILLed,
the standby promoted), an asynchronous standby further behind than the journal covers, and an outage
longer than the node timeout with two nodes. A fixed node id restarted after SIGKILL is
tests/faults/test_node_identity.py; the journal's rewrite inside its window, tests/faults/test_replication.py."""

from pathlib import Path

import pytest

from tests.support import failover

pytestmark = pytest.mark.anyio

SMALL = {"recipients": 400, "rate": 100, "tick": 0.5, "node_timeout": 15, "time_limit": 90}


async def test_a_synchronous_failover_sends_each_message_once_and_leaves_none_in_doubt(tmp_path: Path) -> None:
    verdict = await failover.run(failover.scenario("sync", **SMALL), log_dir=tmp_path)
    print(verdict.line())
    assert verdict.exits == [], verdict.line()
    assert (verdict.duplicates, verdict.lost, verdict.in_doubt) == (0, 0, 0), verdict.line()
    assert verdict.lost_outcomes == verdict.lost_lines == 0, verdict.line()
    assert verdict.rewritten + verdict.there > 0, "the nodes met the new primary and wrote their journals there"


async def test_an_asynchronous_standby_behind_the_journal_is_one_line_and_accounts_for_every_duplicate(
    tmp_path: Path,
) -> None:
    # a rate the nodes keep up with on a loaded machine: a row returned to the queue because its send slot
    # passed, lost with the lag, would come back in doubt with no line for it (docs/operations/benchmarks.md)
    s = failover.scenario("async-lag-outside", **{**SMALL, "recipients": 800, "rate": 60}, journal_seconds=1, lag=3)
    verdict = await failover.run(s, log_dir=tmp_path)
    print(verdict.line())
    assert verdict.exits == [], verdict.line()
    assert verdict.lost == 0, verdict.line()
    assert verdict.lag_said is not None and verdict.lag_said > 1, "the line says how far behind the standby was"
    assert verdict.duplicates + verdict.in_doubt > 0, "what the journal did not cover was sent again or in doubt"
    assert verdict.unaccounted == 0, verdict.line()
    assert verdict.passed


async def test_two_nodes_ride_out_an_outage_longer_than_their_timeout_each_message_once(tmp_path: Path) -> None:
    s = failover.scenario("outage", **{**SMALL, "node_timeout": 3}, outage=8)
    verdict = await failover.run(s, log_dir=tmp_path)
    print(verdict.line())
    assert verdict.exits == [], verdict.line()
    assert (verdict.duplicates, verdict.lost, verdict.in_doubt) == (0, 0, 0), verdict.line()
