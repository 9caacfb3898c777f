"""Each actor's section of the settings, built once by the node (`Sections.of`) from `Settings`, the one place
that reads the environment: an actor holds the fields it reads, and nothing else of the configuration.

Where a subject's function an actor calls takes a subject's section (a template's compile and the From rule:
Mailing; a self-pause's thresholds: Limits) or still the whole `Settings` (a relay's link), the section holds that
call bound to it, so the actor says what it calls, not what the call reads.
"""

import functools
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg
import httpcore

from service import db, relays
from service.accounts.identity import AccountRelay, Identity
from service.campaigns import self_pause
from service.domains import DomainLimit, parse_limits
from service.mail import from_rule, render, unsubscribe
from service.mail.mailing import Mailing
from service.messages import messages
from service.settings import Settings
from service.smtp.connection import SmtpConnection
from service.subscribers import optin
from service.webhooks import delivery


@dataclass(frozen=True)
class Rescue:
    """How the rows of dead tokens are returned (node_rescue): the scheduler's, the pipeline's, the leave's."""

    node_timeout_seconds: float
    in_doubt: Literal["hold", "resend"]
    max_attempts: int

    def query(self, dead_tokens: list[str]) -> tuple[str, *tuple[object, ...]]:
        return db.sql(
            "node_rescue",
            node_timeout_seconds=self.node_timeout_seconds,
            in_doubt=self.in_doubt,
            dead_tokens=dead_tokens,
            max_attempts=self.max_attempts,
        )


@dataclass(frozen=True)
class ListenerConfig:
    url: str  # EINMAL_LISTEN_DATABASE_URL, else the node's database
    db_timeout_seconds: float


@dataclass(frozen=True)
class SchedulerConfig:
    db_timeout_seconds: float
    tick_seconds: float
    rescue: Rescue
    self_pause: Callable[[asyncpg.Connection], Awaitable[list[int]]]  # service/campaigns/self_pause.py check


@dataclass(frozen=True)
class Budget:
    """What a claim is bounded by, the account's turn and relays aside (docs/design.md#sending-budget)."""

    batch_size: int
    rate_limit: float
    quota_hour: int
    quota_day: int
    quota_hour_seconds: float
    quota_day_seconds: float
    domain_rates: Mapping[str, float]
    domain_probes: int
    domain_pause_seconds: float
    domain_pause_max_seconds: float
    account_rate_limit: float
    account_quota_hour: int
    account_quota_day: int

    def capacity(self) -> int:
        """The rows one pass of the claimer may take, shared among the accounts (actors/turns.py): a batch, and
        with a rate limit no more than the claim's horizon of slots (einmal.send_claim: one second)."""
        rated = math.ceil(self.rate_limit) if self.rate_limit else self.batch_size
        return max(1, min(self.batch_size, rated))

    def of_claim(
        self, account_relays: tuple[AccountRelay, ...], batch_size: int | None = None, reach: float = 0.0
    ) -> dict[str, object]:
        """A claim's parameters: at most `batch_size` rows (the account's turn), through the account's relays;
        `reach`: the seconds of the cluster's slots the account's turn took just before (send_claim's p_reach)."""
        return {
            "batch_size": self.batch_size if batch_size is None else min(batch_size, self.batch_size),
            "rate": self.rate_limit,
            "quota_hour": self.quota_hour,
            "quota_day": self.quota_day,
            "hour_seconds": self.quota_hour_seconds,
            "day_seconds": self.quota_day_seconds,
            "domains": list(self.domain_rates),
            "domain_rates": list(self.domain_rates.values()),
            "probes": self.domain_probes,
            "pause_seconds": self.domain_pause_seconds,
            "pause_max_seconds": self.domain_pause_max_seconds,
            "relays": [relay.name for relay in account_relays],
            "account_rate": self.account_rate_limit,
            "account_quota_hour": self.account_quota_hour,
            "account_quota_day": self.account_quota_day,
            "reach": reach,
        }


@dataclass(frozen=True)
class ClaimerConfig:
    db_timeout_seconds: float
    budget: Budget
    compile: Callable[[Mapping[str, Any], Identity], render.CampaignTemplate]  # CampaignTemplate.compile
    from_problem: Callable[..., Awaitable[str | None]]  # from_rule.problem(conn, account_id=, address=)
    without_one_click: Callable[[Mapping[str, Any]], str | None]  # unsubscribe.without_one_click


@dataclass(frozen=True)
class DomainPauses:
    """How long a domain that asked einmal to slow down is paused: the first pause, the longest."""

    seconds: float
    max_seconds: float


@dataclass(frozen=True)
class SenderConfig:
    dsn: str  # a campaign's pause is written on a connection of its own
    db_timeout_seconds: float
    smtp_connections: int
    max_attempts: int
    in_doubt: Literal["hold", "resend"]
    retry_base_seconds: float
    retry_max_seconds: float
    pauses: DomainPauses
    routes: Callable[[], relays.Routes]  # the environment's relays and the accounts' (service/relays.py)
    link: Callable[[relays.Relay], SmtpConnection]  # a connection's link to a relay

    def retry_after(self, attempts: int) -> float:
        """The backoff before a row's next attempt, jittered."""
        base = self.retry_base_seconds * math.pow(2, attempts)
        return min(base, self.retry_max_seconds) * random.uniform(0.8, 1.2)


@dataclass(frozen=True)
class PipelineConfig:
    db_timeout_seconds: float
    rescue: Rescue
    feed_low: int  # the claimer is woken when fewer rows than this wait to be sent (docs/design.md#process)
    domain_connections: Mapping[str, int]  # EINMAL_DOMAIN_LIMITS' connection caps
    claimer: ClaimerConfig
    sender: SenderConfig


@dataclass(frozen=True)
class PrunerConfig:
    db_timeout_seconds: float
    locking: bool  # a session advisory lock takes the turn (none behind a transaction pooler)
    retention_days: float | None
    optin_window_hours: float
    message_key_hours: float
    message_retention_days: float | None
    prune_optin: Callable[[asyncpg.Connection], Awaitable[tuple[int, int]]]
    prune_keys: Callable[[asyncpg.Connection], Awaitable[int]]
    prune_messages: Callable[[asyncpg.Connection], Awaitable[int]]


@dataclass(frozen=True)
class SequencerConfig:
    db_timeout_seconds: float
    batch: int
    wait_seconds: float
    tick_seconds: float


@dataclass(frozen=True)
class WebhookConfig:
    dsn: str
    listen_url: str  # EINMAL_LISTEN_DATABASE_URL, else the node's database
    db_timeout_seconds: float
    in_flight: int
    endpoint_in_flight: int
    account_in_flight: int
    lease_seconds: float
    tick_seconds: float
    delays: tuple[float, ...]
    retention_days: float
    client: Callable[[], httpcore.AsyncConnectionPool]  # delivery.client
    post: Callable[..., Awaitable[delivery.Outcome]]  # delivery.post(http, url=, event_id=, body=, secrets=)


def webhook_config(settings: Settings, dsn: str) -> WebhookConfig:
    return WebhookConfig(
        dsn=dsn,
        listen_url=settings.listen_database_url or dsn,
        db_timeout_seconds=settings.db_timeout_seconds,
        in_flight=settings.webhook_in_flight,
        endpoint_in_flight=settings.webhook_endpoint_in_flight,
        account_in_flight=settings.webhook_account_in_flight,
        lease_seconds=settings.webhook_timeout_seconds * 2 + 5,
        tick_seconds=settings.webhook_tick_seconds,
        delays=settings.webhook_delays,
        retention_days=settings.webhook_retention_days,
        client=functools.partial(delivery.client, settings),
        post=functools.partial(delivery.post, settings=settings),
    )


@dataclass(frozen=True)
class Sections:
    """The node's actors' sections, built once from `Settings`."""

    node_id: str  # EINMAL_NODE_ID; empty: made up from the host and the process
    db_timeout_seconds: float
    journal_seconds: float
    journal_size: int
    require_synchronous_replication: bool
    rescue: Rescue
    listener: ListenerConfig
    scheduler: SchedulerConfig
    pipeline: PipelineConfig
    pruner: PrunerConfig
    sequencer: SequencerConfig
    webhooks: WebhookConfig

    @classmethod
    def of(cls, settings: Settings, dsn: str) -> "Sections":
        s = settings
        limits: dict[str, DomainLimit] = parse_limits(s.domain_limits or "")
        rescue = Rescue(s.node_timeout_seconds, s.in_doubt, s.max_attempts)
        pauses = DomainPauses(s.domain_pause_seconds, s.domain_pause_max_seconds)
        budget = Budget(
            s.batch_size,
            s.rate_limit,
            s.quota_hour,
            s.quota_day,
            s.quota_hour_seconds,
            s.quota_day_seconds,
            {domain: limit.rate for domain, limit in limits.items() if limit.rate},
            s.domain_probes,
            s.domain_pause_seconds,
            s.domain_pause_max_seconds,
            s.account_rate_limit,
            s.account_quota_hour,
            s.account_quota_day,
        )
        mailed = Mailing.of(s)  # the mail subject's section (service/mail/mailing.py)
        claimer = ClaimerConfig(
            s.db_timeout_seconds,
            budget,
            compile=lambda campaign, sender: render.CampaignTemplate.compile(campaign, mailed, sender),
            from_problem=functools.partial(from_rule.problem, mailing=mailed),
            without_one_click=lambda campaign: unsubscribe.without_one_click(campaign, mailed),
        )
        relaying = relays.Relaying.of(s)
        sender = SenderConfig(
            dsn,
            s.db_timeout_seconds,
            s.smtp_connections,
            s.max_attempts,
            s.in_doubt,
            s.retry_base_seconds,
            s.retry_max_seconds,
            pauses,
            routes=lambda: relays.Routes(relaying),
            link=lambda relay: SmtpConnection(relaying, relay),
        )
        return cls(
            node_id=s.node_id or "",
            db_timeout_seconds=s.db_timeout_seconds,
            journal_seconds=s.journal_seconds,
            journal_size=s.journal_size,
            require_synchronous_replication=s.require_synchronous_replication,
            rescue=rescue,
            listener=ListenerConfig(s.listen_database_url or dsn, s.db_timeout_seconds),
            scheduler=SchedulerConfig(
                s.db_timeout_seconds,
                s.tick_seconds,
                rescue,
                functools.partial(self_pause.check, limits=self_pause.Limits.of(s)),
            ),
            pipeline=PipelineConfig(
                s.db_timeout_seconds,
                rescue,
                max(s.smtp_connections, s.batch_size // 2),
                {domain: limit.connections for domain, limit in limits.items() if limit.connections},
                claimer,
                sender,
            ),
            pruner=PrunerConfig(
                s.db_timeout_seconds,
                s.database_pooler != "transaction",
                s.retention_days,
                s.optin_window_hours,
                s.message_key_hours,
                s.message_retention_days,
                prune_optin=functools.partial(optin.prune, settings=s),
                prune_keys=functools.partial(messages.prune_keys, settings=s),
                prune_messages=functools.partial(messages.prune, settings=s),
            ),
            sequencer=SequencerConfig(
                s.db_timeout_seconds, s.sequence_batch, s.sequence_wait_seconds, s.sequence_tick_seconds
            ),
            webhooks=webhook_config(s, dsn),
        )
