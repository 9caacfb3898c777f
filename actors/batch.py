"""What the send pipeline hands along: a claimed row, its outcome, the batch they belong to, and what the
sender asks of a campaign's compiled template and of an account's own relay."""

from dataclasses import dataclass, field
from typing import Protocol

from opentelemetry.trace import Span


class Template(Protocol):
    """What the sender asks of a campaign's compiled template (service.mail.render.CampaignTemplate)."""

    def render(self, subscriber_id: int, email: str, name: str | None, attributes: str) -> bytes: ...

    def envelope_sender(self, subscriber_id: int) -> str: ...

    @property
    def costly(self) -> bool: ...


class OwnRelay(Protocol):
    """An account's own relay as the send path reads it (service.accounts.identity.AccountRelay)."""

    @property
    def name(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def weight(self) -> int: ...


@dataclass
class Row:
    """One claimed recipient."""

    id: int
    account_id: int
    subscriber_id: int
    email: str
    email_lower: str
    attempts: int
    name: str
    attributes: str = "{}"  # the subscriber's jsonb attributes as asyncpg gives them: JSON text
    not_before: float = 0.0  # time.monotonic() of its send slot under EINMAL_RATE_LIMIT

    @property
    def domain(self) -> str:
        """The recipient's domain as einmal keys it (what EINMAL_DOMAIN_LIMITS and einmal.domains name)."""
        return self.email_lower.rpartition("@")[2]


@dataclass
class Outcome:
    id: int
    status: str  # sent | failed | queued | in_doubt | suppressed
    reply: str
    attempts: int = 0  # added to the row's count
    retry_after: float = 0.0
    bounce: bool = False
    throttled: bool = False  # the domain answered 421/4.7.x, or refused by policy (5.7.x): it is paused
    campaign_id: int | None = None  # its row's: the statement that records it reads that partition alone


@dataclass(eq=False)  # hashed by identity: the writer tracks batches in flight
class Batch:
    """One claim's rows, from the claim until every row is settled (then the recorder closes it)."""

    campaign_id: int
    account_id: int
    token: str
    rows: list[Row]
    span: Span  # the batch's root span, ended by the recorder
    began: float  # time.monotonic() at its claim
    template: Template  # the campaign's render.CampaignTemplate, compiled by the claimer
    outcomes: list[Outcome] = field(default_factory=list)  # recorded SMTP outcomes
    settled: dict[str, int] = field(default_factory=dict)  # rows settled without SMTP, by status
    send_span: Span | None = None  # from the batch's entry into the sender to its last row settled
    relays: tuple[OwnRelay, ...] = ()  # the account's own relays; empty: the environment's
    message: bool = False  # a transactional message's row (docs/design.md#messages): the feed's first lane
    finishes: bool = True  # its campaign is ever done (kind 'campaign'): its last batch settled wakes the scheduler
    honour_unsubscribe: bool = True  # False: an unsubscribe alone does not stop it (a message's choice)

    @property
    def left(self) -> int:
        """Rows not settled yet."""
        return len(self.rows) - len(self.outcomes) - sum(self.settled.values())
