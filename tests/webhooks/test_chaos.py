"""A short, bounded chaos run of webhooks on every CI (tests/support/webhook_chaos.py; `make webhooks-chaos` at
full size): two node processes send a campaign of 300 with refusals, bounces, unsubscribes and rolled-back changes
while the endpoint's receiver fails 30% of requests, hangs on some and is killed once. Every event delivered with
a verified signature, none lost, none invented, repeats the same, the events one for one with their changes."""

import pytest

from tests.support import webhook_chaos

pytestmark = pytest.mark.anyio


async def test_webhooks_under_a_failing_hanging_killed_receiver_lose_nothing(tmp_path) -> None:
    scenario = webhook_chaos.Scenario(
        recipients=300, nodes=2, receiver_kills=1, bounces=10, unsubscribes=20, rollbacks=4, seed=34, time_limit=60
    )
    verdict = await webhook_chaos.run(scenario, log_dir=tmp_path)
    print(verdict.line())
    assert verdict.drained and verdict.kills == 1
    assert verdict.lost == 0 and verdict.invented == 0 and verdict.bad_signatures == 0
    assert verdict.changed_repeats == 0 and verdict.rolled_back == 0
    assert verdict.mismatched == 0, "the events one for one with the sends, bounces and unsubscribes"
    assert verdict.pending == 0 and verdict.parked == 0
    assert verdict.per_type["message.sent"] > 250
    assert verdict.per_type["message.failed"] >= 1, "user7 or user257@refused.test, refused at RCPT"
    assert verdict.per_type["message.bounced"] == 10 and verdict.per_type["subscriber.unsubscribed"] == 20
    assert verdict.repeats > 0 and verdict.failed_answers > 0, "the receiver's failures were tried again"
    assert verdict.passed
