"""Signatures as the Standard Webhooks reference library checks them; the retry schedule."""

import json

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from service.settings import WEBHOOK_DELAYS
from service.webhooks import schedule, signing


def as_dict(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in headers}


def test_a_signature_verifies_with_the_reference_library() -> None:
    secret = signing.new_secret()
    body = json.dumps({"type": "message.sent", "data": {"email": "a@example.org"}}).encode()
    headers = as_dict(signing.headers("evt_1", int(__import__("time").time()), body, [secret]))
    assert Webhook(secret).verify(body, headers)["type"] == "message.sent"
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body + b" ", headers)


def test_during_a_rotation_both_secrets_verify() -> None:
    new, old = signing.new_secret(), signing.new_secret()
    body = b'{"type":"message.failed"}'
    headers = as_dict(signing.headers("evt_2", int(__import__("time").time()), body, [new, old]))
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(new).verify(body, headers) and Webhook(old).verify(body, headers)


def test_the_schedule_is_the_specifications_extended_to_about_three_days() -> None:
    assert WEBHOOK_DELAYS[:5] == (5, 300, 1800, 7200, 18000)
    assert 2.5 * 86400 < sum(WEBHOOK_DELAYS) < 3.5 * 86400
    waits = [schedule.next_delay(n, WEBHOOK_DELAYS) for n in range(1, len(WEBHOOK_DELAYS) + 1)]
    assert all(w is not None and 0.9 * d <= w <= 1.1 * d for w, d in zip(waits, WEBHOOK_DELAYS, strict=True))
    assert schedule.next_delay(len(WEBHOOK_DELAYS) + 1, WEBHOOK_DELAYS) is None  # parked


def test_the_waits_of_one_outage_are_spread_by_the_jitter() -> None:
    # 200 deliveries failed once together: their waits cover the ±10% band rather than one second (uniform
    # draws: all 200 within ±3% has a chance of 0.3**200), and none leaves it
    waits = [schedule.next_delay(1, (100.0,)) for _ in range(200)]
    assert all(w is not None and 90.0 <= w <= 110.0 for w in waits)
    assert min(w for w in waits if w is not None) < 97.0 and max(w for w in waits if w is not None) > 103.0
    assert len(set(waits)) > 150


def test_retry_after_is_honoured_within_bounds() -> None:
    assert schedule.retry_after("120") == 120
    assert schedule.retry_after("0") == schedule.RETRY_AFTER_MIN
    assert schedule.retry_after("99999999") == schedule.RETRY_AFTER_MAX
    assert schedule.retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480 - 60) == pytest.approx(60)
    assert schedule.retry_after("soon") is None and schedule.retry_after(None) is None
    assert schedule.next_delay(1, (0.1,), asked=30.0) == 30.0
