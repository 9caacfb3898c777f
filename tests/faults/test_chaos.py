"""A short, bounded chaos run on every CI: node processes SIGKILLed and
stalled mid-campaign, SMTP faults, opt-outs mid-send; nobody receives twice,
nobody is lost."""

import pytest

from tests.support import chaos

pytestmark = pytest.mark.anyio


async def test_killed_and_stalled_nodes_send_nobody_twice_and_lose_nobody(tmp_path) -> None:
    scenario = chaos.Scenario(
        recipients=3000,
        nodes=2,
        kills=3,
        stalls=1,
        smtp_faults=True,
        opt_outs=20,
        pg_restart=True,
        seed=20261130,
        time_limit=150,
    )
    verdict = await chaos.run(scenario, log_dir=tmp_path)
    print(verdict.line())
    assert (verdict.kills, verdict.stalls, verdict.pg_restarts) == (3, 1, 1)
    assert verdict.duplicates == 0
    assert verdict.lost == 0
    assert verdict.in_doubt <= verdict.bound
    assert 0 < verdict.failed <= 3000 // 500, "the 5xx domain's rows failed (some may have been opted out first)"
    assert verdict.opt_outs_leaked <= 2 * chaos.CONNECTIONS, "only opt-outs already on the wire went out"


async def test_under_resend_killed_nodes_lose_nobody_and_resend_only_what_was_in_doubt(tmp_path) -> None:
    scenario = chaos.Scenario(
        recipients=1500,
        nodes=2,
        kills=3,
        stalls=1,
        smtp_faults=True,
        opt_outs=0,
        pg_restart=False,
        seed=20261201,
        time_limit=150,
        in_doubt="resend",
    )
    verdict = await chaos.run(scenario, log_dir=tmp_path)
    print(verdict.line())
    assert (verdict.kills, verdict.stalls) == (3, 1)
    assert verdict.lost == 0
    assert verdict.duplicates + verdict.in_doubt <= verdict.bound, "only messages in doubt are sent twice"
