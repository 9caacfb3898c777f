"""An account's own sending budget (docs/design.md#sending-budget "Each account's budget"): its rate and hour/day
quotas, kept by every claim of its rows beside the installation's, and its bound on messages queued and not yet
sent (service/messages/messages.py `room_for`). Each is NULL until set: the installation's default then
(EINMAL_ACCOUNT_RATE_LIMIT, EINMAL_ACCOUNT_QUOTA_HOUR, EINMAL_ACCOUNT_QUOTA_DAY, EINMAL_ACCOUNT_MESSAGES_QUEUED);
0 is none."""

from dataclasses import dataclass

import asyncpg

from service import db
from service.errors import ArgumentError, NotFound
from service.text import shown

DEFAULT = "default"  # the value that gives a setting back to the installation's default


@dataclass(frozen=True)
class Budget:
    """An account's own settings (None: the installation's default)."""

    rate: float | None
    quota_hour: int | None
    quota_day: int | None
    messages_queued: int | None


def number(value: str, option: str, whole: bool = True) -> float | int | None:
    """A setting as given on the command line: a number of at least 0, or `default` (None); Invalid, one line."""
    if value == DEFAULT:
        return None
    try:
        found: float | int = int(value) if whole else float(value)
    except ValueError:
        found = -1
    if not 0 <= found < 2**31 or found != found:
        kind = "a whole number" if whole else "a number"
        raise ArgumentError(f"{option}: {kind} of at least 0 (0: none), or {DEFAULT!r}, not {shown(value)}")
    return found


async def set_budget(conn: asyncpg.Connection, *, account: str, given: dict[str, float | int | None]) -> Budget:
    """Set the settings named in `given` (rate, quota_hour, quota_day, messages_queued; None: the default) of the
    account named `account`; its settings after. NotFound without the account."""
    row = await conn.fetchrow(
        *db.sql(
            "account_set_budget",
            account=account,
            rate_given="rate" in given,
            rate=given.get("rate"),
            quota_hour_given="quota_hour" in given,
            quota_hour=given.get("quota_hour"),
            quota_day_given="quota_day" in given,
            quota_day=given.get("quota_day"),
            messages_queued_given="messages_queued" in given,
            messages_queued=given.get("messages_queued"),
        )
    )
    if row is None:
        raise NotFound(f"no account named {shown(account)}")
    return Budget(**dict(row))


def shown_budget(budget: Budget) -> str:
    """The settings in one line, each `default` when unset."""
    parts = {
        "rate": budget.rate,
        "quota-hour": budget.quota_hour,
        "quota-day": budget.quota_day,
        "messages-queued": budget.messages_queued,
    }
    return ", ".join(f"{k} {DEFAULT if v is None else f'{v:g}'}" for k, v in parts.items())
