"""A short, bounded chaos run on every CI: two node processes, SIGKILLed
mid-campaign and restarted; nobody receives twice, nobody is lost."""

import pytest

from tests import chaos

pytestmark = pytest.mark.anyio


async def test_sigkilled_nodes_send_nobody_twice_and_lose_nobody(tmp_path) -> None:
    verdict = await chaos.run(recipients=2000, nodes=2, kills=3, seed=20261130, time_limit=120,
                              log_dir=tmp_path)
    print(verdict.line())
    assert verdict.kills == 3
    assert verdict.duplicates == 0
    assert verdict.lost == 0
    assert verdict.in_doubt <= verdict.bound
    assert verdict.delivered + verdict.suppressed + verdict.failed + verdict.in_doubt >= 2000
