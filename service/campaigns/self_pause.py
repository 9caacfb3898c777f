"""A campaign that is being refused or complained about pauses itself (docs/design.md#sending-budget).

Its figures are running counts (einmal.campaign_tallies, migration 0060): each send pipeline's group
commit adds what its outcomes were (delivered, refused by policy at send time, rejected for an address
reason), and the transaction that records a bounce or complaint adds it. They count since the campaign's
last resume: a resume starts them again from nothing (`rebase`), so a campaign resumed is judged on what
it sends from then on, and pauses again only when that crosses a threshold over a new sample.

- complaint rate: complaints over messages delivered (EINMAL_PAUSE_COMPLAINT_RATE, 0.3 %);
- hard-bounce rate: hard bounces for an address reason, by mail, by webhook or at send time (550 5.1.1),
  over messages delivered or rejected (EINMAL_PAUSE_HARD_BOUNCE_RATE, 2 %);
- policy-rejection rate: 5.7.x refusals at send time, one per refused attempt, over attempts delivered or
  refused (EINMAL_PAUSE_POLICY_REJECTION_RATE, 5 %): a campaign refused everywhere delivers nothing, so
  its sample is its attempts.

A rate is judged once what it is over reaches EINMAL_PAUSE_MIN_SAMPLE, and pauses the campaign when it
is above its threshold; a threshold of 0 never does. The check (`check`) runs where the counts grow: after
a bounce or complaint is recorded, and in the scheduler's tick, which the writer brings forward when it
recorded a refusal or rejection. The pause is the CAS sending -> paused, so of several nodes one pauses and
the others find it done; `einmal campaign resume` resumes it as any pause.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from service import db
from service.campaigns.transitions import transition
from service.errors import Conflict, NotFound
from service.settings import Settings

log = logging.getLogger("einmal.self_pause")


@dataclass(frozen=True)
class Figures:
    delivered: int = 0
    refused: int = 0
    rejected: int = 0
    bounced: int = 0
    complained: int = 0


@dataclass(frozen=True)
class Limits:
    """The self-pause's section of the settings, read once from Settings: the thresholds in per cent (0: off)
    and the least number of messages a rate is judged over, each as Settings names it."""

    pause_complaint_rate: float
    pause_hard_bounce_rate: float
    pause_policy_rejection_rate: float
    pause_min_sample: int

    @classmethod
    def of(cls, settings: Settings) -> "Limits":
        return cls(
            settings.pause_complaint_rate,
            settings.pause_hard_bounce_rate,
            settings.pause_policy_rejection_rate,
            settings.pause_min_sample,
        )


# (name, setting, events, what they are over, a word for what that is)
Rate = tuple[str, str, Callable[[Figures], int], Callable[[Figures], int], str]
RATES: tuple[Rate, ...] = (
    ("complaint rate", "pause_complaint_rate", lambda f: f.complained, lambda f: f.delivered, "delivered"),
    (
        "hard-bounce rate",
        "pause_hard_bounce_rate",
        lambda f: f.bounced + f.rejected,
        lambda f: f.delivered + f.rejected,
        "delivered or rejected",
    ),
    (
        "policy-rejection rate",
        "pause_policy_rejection_rate",
        lambda f: f.refused,
        lambda f: f.delivered + f.refused,
        "attempts",
    ),
)


def verdict(limits: Limits, figures: Figures) -> str | None:
    """Why the campaign with `figures` should pause, naming the threshold and the figures; None if it
    should not."""
    for name, setting, events, over, word in RATES:
        limit, n, total = getattr(limits, setting), events(figures), over(figures)
        if limit and total >= limits.pause_min_sample and n * 100 > limit * total:
            return (
                f"{name} {n * 100 / total:.2f} % ({n:,} of {total:,} {word}) over the {limit:.2f} % "
                f"threshold (EINMAL_{setting.upper()})"
            )
    return None


async def check(conn: asyncpg.Connection, *, limits: Limits, campaign_id: int | None = None) -> list[int]:
    """Pause each sending campaign (`campaign_id`: that one only) whose figures cross a threshold; the
    campaigns this call paused."""
    paused = []
    for row in await conn.fetch(*db.sql("campaign_figures", campaign_id=campaign_id)):
        reason = verdict(
            limits, Figures(*(row[k] for k in ("delivered", "refused", "rejected", "bounced", "complained")))
        )
        if reason is None:
            continue
        try:
            await transition(conn, verb="pause", campaign_id=row["campaign_id"], reason=reason)
        except (Conflict, NotFound):
            continue  # paused, cancelled or finished meanwhile, maybe by another node
        log.error("campaign %d paused: %s", row["campaign_id"], reason)
        paused.append(row["campaign_id"])
    return paused
