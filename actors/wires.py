"""What the actors of one node share besides their channels: each value one wire, with one writer, its readers
named (docs/design.md#wires). An actor's constructor takes the wires it uses and nothing else of the node.

| wire | writer | readers |
|---|---|---|
| `Fencing` | the send pipeline (the node takes the first token) | scheduler, builder, pruner, sequencer, the leave |
| `Heartbeat` | scheduler | the heartbeat gauge of /metrics |
| `Suppressions` | listener | sender (the last look) |
| `MessageNotices` | listener | claimer (the notified messages' task) |
| `Wakeups` | anyone with news (a hint) | scheduler, claimer: each waits on its own |
| `Unrecorded` | the send pipeline | scheduler (heartbeats their tokens), the leave |
| `Journal` | the sender's writers | the failover barrier |
| `Replication` | the replication check (actors/failover.py) | claimer, send pipeline, /readyz |
| `SmtpReach` | sender | /readyz |

The node's `stopping` event (set by the node alone, read by claimer, sender, sequencer and /readyz) is an
`anyio.Event`, and the channels scheduler -> builder, claimer -> sender (actors/feed.py) and sender -> recorder
are bounded memory streams.
"""

import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from actors.batch import Outcome


class Nudge:
    """A wake-up hint: `wait()` returns when nudged or after a timeout. Anyone may set it; one task waits on it."""

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
class Wakeups:
    """Hints that bring an actor's next pass forward; a lost one costs a tick, never a row.

    `scheduler`: waited on by the scheduler; set by the listener (a campaign notification), the builder (a build
    done) and the sender's writers (a refusal, a rejection, a campaign's batch done with its lane empty).
    `claimer`: waited on by the claimer while it is idle; set by the listener, the scheduler (rows returned,
    campaigns sending), the builder (rows added) and the node (a drain begins)."""

    scheduler: Nudge = field(default_factory=Nudge)
    claimer: Nudge = field(default_factory=Nudge)


@dataclass
class MessageNotices:
    """The accounts whose new transactional messages were notified (NOTIFY einmal_message), until claimed.
    Written by the listener (`notify`); taken by the claimer's notified-messages task (`take`), which waits on
    `nudge` (set by the claimer too as it stops, so that task ends with it)."""

    accounts: set[int] = field(default_factory=set)
    nudge: Nudge = field(default_factory=Nudge)

    def notify(self, account_id: int) -> None:
        if len(self.accounts) < 10_000:  # bounded; past it, the claimer's next pass looks for them
            self.accounts.add(account_id)
        self.nudge.set()

    def take(self) -> list[int]:
        taken = list(self.accounts)
        self.accounts.clear()
        return taken


@dataclass
class Suppressions:
    """The addresses suppressed since this node started, as (account id, email_lower), and of those the ones
    suppressed only by an unsubscribe, which a transactional message passes unless it honours unsubscribes
    (docs/design.md#messages). Written by the listener; read by the sender's last look
    (docs/design.md#opt-outs)."""

    suppressed: set[tuple[int, str]] = field(default_factory=set)
    unsubscribed: set[tuple[int, str]] = field(default_factory=set)

    def stops(self, key: tuple[int, str], honour_unsubscribe: bool = True) -> bool:
        """Whether the address may not be sent to."""
        return key in self.suppressed and (honour_unsubscribe or key not in self.unsubscribed)


class Fencing:
    """This node's name and its send pipeline's fencing token (docs/design.md#liveness). Written by the send
    pipeline: a new token for each incarnation (the node takes the first before the actors start), the retired
    ones forgotten once it returned their rows. Read by the scheduler (it heartbeats the token), the builder,
    pruner and sequencer (their connections are named by it) and the node's leave (it returns every token's
    rows)."""

    def __init__(self, node_id: str = "") -> None:
        self.hostname = socket.gethostname()
        self.node_id = node_id or f"{self.hostname}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        # this process's own part of every token it takes: a process restarted with the same EINMAL_NODE_ID
        # must not take, and heartbeat, the token of the one that died (its rows would never be returned)
        self.process = uuid.uuid4().hex[:8]
        self.token = ""
        self.incarnation = 0
        self.retired: list[str] = []  # tokens of failed incarnations whose rows are not returned yet

    def new_token(self) -> str:
        """A fresh fencing token for a new incarnation of the send pipeline: `<node id>/<process>.<n>`,
        unique to this process even when the node id is fixed (docs/design.md#liveness)."""
        if self.token:
            self.retired.append(self.token)
        self.incarnation += 1
        self.token = f"{self.node_id}/{self.process}.{self.incarnation}"
        return self.token


@dataclass
class Heartbeat:
    """time.monotonic() of this node's last heartbeat. Written by the scheduler; read by /metrics."""

    at: float = 0.0


@dataclass
class Unrecorded:
    """(token, outcomes) the SMTP server answered a failed incarnation of the send pipeline, which it could not
    record (docs/design.md#in-doubt-bound). Written by the send pipeline: its sender holds them as it fails, its
    next incarnation records them (actors/pipeline.py), or writes them again after a failover
    (actors/failover.py), before anything else; the node's leave records what is left. Read by the scheduler:
    a token holding some stays alive until they are recorded."""

    held: list[tuple[str, list[Outcome]]] = field(default_factory=list)

    def tokens(self) -> list[str]:
        return [token for token, _ in self.held]

    def count(self) -> int:
        return sum(len(outcomes) for _, outcomes in self.held)


@dataclass
class Replication:
    """What the replication check (actors/failover.py check_replication) last found (docs/design.md#liveness).
    Written by that check, which the scheduler runs each tick and the send pipeline at each start, both on the
    event loop; `failover_due` is cleared by the pipeline once it wrote its journal again. Read by the claimer
    (`refusing`), the send pipeline and /readyz."""

    required: bool = False  # EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION
    problem: str | None = None  # what does not keep the promise; None: nothing
    identity: tuple[int, int] | None = None  # (system identifier, timeline) at the last check
    standby_lag: float = 0.0  # seconds the slowest standby's replay was behind at the last check
    # a failover was seen: the send pipeline writes the journal again on the new primary before it claims
    failover_due: bool = False

    @property
    def refusing(self) -> bool:
        """Required, and a replication that does not keep the promise: this node is not ready and claims
        nothing while it holds."""
        return self.required and self.problem is not None

    def notes(self) -> list[str]:
        """What /readyz says while it is still 200: replication that does not keep the promise, unrefused."""
        return [f"replication: {self.problem}"] if self.problem and not self.refusing else []


@dataclass
class SmtpReach:
    """Why the last group of connections reached no SMTP server of the environment's; None once one did.
    Written by the sender; read by /readyz."""

    unavailable: str | None = None


class Journal:
    """The outcomes this node recorded, the last `size` of them within `seconds` of the newest, each with its
    token and the wall time it was recorded at: what an asynchronous failover may have lost, to write again
    on the new primary (docs/design.md#liveness). Written by the sender's writers (actors/writer.py record);
    read by the failover barrier (actors/failover.py). The age is counted back from the newest outcome, not
    from now: while the database is away nothing is recorded, and the window before the failover stays whole.
    Returns to the queue are kept too (a retry, a send slot passed, a throttle): a row the new primary shows
    still held by a token that gave it back unsent is not in doubt, and another node's later answer outranks
    it."""

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
