"""What the actors of one node share: settings, the pool, the fencing token,
the in-memory suppression set, the journal of recent outcomes and the
wake-ups between actors."""

import math
import os
import random
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import asyncpg
from opentelemetry.trace import Span

from service.domains import DomainLimit, parse_limits
from service.metrics import Metrics
from service.settings import Settings


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


class Nudge:
    """A wake-up hint: `wait()` returns when nudged or after a timeout."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            await self._event.wait()
        nudged = self._event.is_set()
        if nudged:
            self._event = anyio.Event()
        return nudged


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


class Journal:
    """The outcomes this node recorded, the last `size` of them within `seconds` of the newest, each with its
    token and the wall time it was recorded at: what an asynchronous failover may have lost, to write again
    on the new primary (docs/design.md#liveness). The age is counted back from the newest outcome, not from now:
    while the database is away nothing is recorded, and the window before the failover stays whole. Returns
    to the queue are kept too (a retry, a send slot passed, a throttle): a row the new primary shows still
    held by a token that gave it back unsent is not in doubt, and another node's later answer outranks it."""

    def __init__(self, seconds: float, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self.entries: deque[tuple[float, float, str, Outcome]] = deque(maxlen=size)  # (monotonic, wall, ...)

    def add(self, token: str, outcomes: list[Outcome]) -> None:
        now, wall = self.clock(), time.time()
        self.entries.extend((now, wall, token, o) for o in outcomes)
        while self.entries and self.entries[0][0] < now - self.seconds:
            self.entries.popleft()

    def reach(self) -> float:
        """How many seconds before the newest outcome the journal still covers: its age bound, unless its
        count bound cut it shorter."""
        if len(self.entries) == self.entries.maxlen:  # full (EINMAL_JOURNAL_SIZE=0: always, covering nothing)
            return self.entries[-1][0] - self.entries[0][0] if self.entries else 0.0
        return self.seconds

    def recent(self) -> list[tuple[float, str, Outcome]]:
        """(wall time, token, outcome): the last for each row, oldest first."""
        last = {o.id: (wall, token, o) for _, wall, token, o in self.entries}
        return sorted(last.values(), key=lambda entry: entry[0])


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
    honour_unsubscribe: bool = True  # False: an unsubscribe alone does not stop it (a message's choice)

    @property
    def left(self) -> int:
        """Rows not settled yet."""
        return len(self.rows) - len(self.outcomes) - sum(self.settled.values())


@dataclass
class NodeContext:
    settings: Settings
    pool: asyncpg.Pool
    dsn: str
    node_id: str = ""
    token: str = ""
    incarnation: int = 0
    # this process's own part of every token it takes: a process restarted with the same EINMAL_NODE_ID
    # must not take, and heartbeat, the token of the one that died (its rows would never be returned)
    process: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    hostname: str = field(default_factory=socket.gethostname)
    suppressed: set[tuple[int, str]] = field(default_factory=set)
    # of those, the ones suppressed only by an unsubscribe, which a transactional message passes unless it
    # honours unsubscribes (docs/design.md#messages)
    unsubscribed: set[tuple[int, str]] = field(default_factory=set)
    message_nudge: Nudge = field(default_factory=Nudge)  # a new message is queued (NOTIFY einmal_message)
    message_accounts: set[int] = field(default_factory=set)  # whose (the notifications' payloads, until claimed)
    campaign_nudge: Nudge = field(default_factory=Nudge)
    claim_nudge: Nudge = field(default_factory=Nudge)
    stopping: anyio.Event = field(default_factory=anyio.Event)
    retired_tokens: list[str] = field(default_factory=list)
    # (token, outcomes) a failed send pipeline got from the SMTP server but could not record
    unrecorded: list[tuple[str, list[Outcome]]] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    heartbeat_at: float = 0.0  # time.monotonic() of this node's last heartbeat
    smtp_unavailable: str | None = None  # why the last group reached no SMTP server; None once one did
    domain_limits: dict[str, DomainLimit] = field(default_factory=dict)  # EINMAL_DOMAIN_LIMITS, parsed
    # what the scheduler's replication check found that does not keep the promise; None: nothing
    # (docs/design.md#liveness)
    replication_problem: str | None = None
    database_identity: tuple[int, int] | None = None  # (system identifier, timeline) at the last check
    standby_lag: float = 0.0  # seconds the slowest standby's replay was behind at the last check
    journal: Journal = field(init=False)  # the outcomes recorded in the last seconds (docs/design.md#liveness)
    # a failover was seen: the send pipeline writes the journal again on the new primary before it claims
    failover_due: bool = False

    def __post_init__(self) -> None:
        if not self.node_id:
            self.node_id = self.settings.node_id or f"{self.hostname}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.domain_limits = parse_limits(self.settings.domain_limits or "")
        self.journal = Journal(self.settings.journal_seconds, self.settings.journal_size)

    def new_token(self) -> str:
        """A fresh fencing token for a new incarnation of the send pipeline: `<node id>/<process>.<n>`,
        unique to this process even when the node id is fixed (docs/design.md#liveness)."""
        if self.token:
            self.retired_tokens.append(self.token)
        self.incarnation += 1
        self.token = f"{self.node_id}/{self.process}.{self.incarnation}"
        return self.token

    @property
    def refusing(self) -> bool:
        """EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION and a replication that does not keep the promise: this
        node is not ready and claims nothing while it holds."""
        return self.settings.require_synchronous_replication and self.replication_problem is not None

    def readiness_notes(self) -> list[str]:
        """What /readyz says while it is still 200: replication that does not keep the promise, unrefused."""
        return [f"replication: {self.replication_problem}"] if self.replication_problem and not self.refusing else []

    def retry_after(self, attempts: int) -> float:
        base = self.settings.retry_base_seconds * math.pow(2, attempts)
        return min(base, self.settings.retry_max_seconds) * random.uniform(0.8, 1.2)
