"""A short, bounded chaos run of a sequence on every CI (tests/support/sequence_chaos.py; `make sequences-chaos` at
full size): three steps (0 s, 5 s, 10 s) while members join in a stream and some leave, nodes SIGKILLed, an SMTP
server answering 4xx and dropping connections after the final dot. For every step: nobody twice, nobody lost, no
step before its delay or out of order, none after a leave that committed before its row was on the wire."""

import pytest

from tests.support import sequence_chaos

pytestmark = pytest.mark.anyio


async def test_a_sequence_under_kills_sends_each_step_once_in_order_and_never_early(tmp_path) -> None:
    scenario = sequence_chaos.Scenario(
        members=300, leaves=30, nodes=2, kills=4, join_seconds=10, seed=20261203, time_limit=150
    )
    verdict = await sequence_chaos.run(scenario, log_dir=tmp_path)
    print(verdict.line())
    assert verdict.kills == 4 and verdict.members == 300 and verdict.left == 30
    assert verdict.duplicates == 0
    assert verdict.lost == 0
    assert (verdict.early, verdict.out_of_order, verdict.after_leave) == (0, 0, 0)
    assert verdict.in_doubt <= verdict.bound
    assert min(verdict.per_step) >= 300 - 30 - verdict.bound, "every step reached nearly every member"
