"""The arguments of one campaign claim (sql/queries/send_claim_batch.sql) for the tests that call it directly:
no limit of any kind unless a test names one."""

from typing import Any

NO_LIMITS: dict[str, Any] = dict(
    batch_size=10,
    rate=0.0,
    quota_hour=0,
    quota_day=0,
    hour_seconds=3600.0,
    day_seconds=86400.0,
    domains=[],
    domain_rates=[],
    probes=1,
    pause_seconds=60.0,
    pause_max_seconds=3600.0,
    relays=[],
    account_rate=0.0,
    account_quota_hour=0,
    account_quota_day=0,
    reach=0.0,
)


def claim_args(campaign_id: int, token: str, **limits: Any) -> dict[str, Any]:
    """`db.sql("send_claim_batch", **claim_args(c, t, batch_size=50))`: NO_LIMITS with `limits` over them."""
    unknown = set(limits) - set(NO_LIMITS)
    assert not unknown, f"not a claim argument: {unknown}"
    return {"campaign_id": campaign_id, "token": token, **NO_LIMITS, **limits}
