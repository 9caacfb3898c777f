"""The bounded buffer of tracking events written after the answer (docs/design.md#click-tracking): clicks
(service/web/clicks.py) and opens (service/web/opens.py).

An event goes into the buffer (at most `capacity`, one per event id) after its request was answered; a task of
its own, started when an event comes and ended when none waits, writes them in batches. When the buffer is full an
event is dropped and counted (`counter`'s result "dropped"), and so is one past its account's `share` of the
buffer: a scanner fetching one account's links by the thousand leaves room for the others'. When the database is
slow or down the buffer waits, the answers do not.

Event id: a prefix and a SHA-256 of the event's ids and the `window`-second window it came in: derived from the
request alone, so the same request again (a retry, a repeat reaching another node, a batch written again after a
commit whose answer was lost) gets the same id, and the table's primary key keeps one.
"""

import asyncio
import hashlib
import itertools
import logging
from collections import Counter
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import anyio
import asyncpg
from prometheus_client import Counter as Metric

from service import db
from service.web.limits import first_line

log = logging.getLogger("einmal.http")

BUFFER = 10_000  # events waiting to be written, at most
SHARE = 0.25  # of them at most one account's: a flood of one account's leaves room for the others'
BATCH = 500  # events written in one statement, at most
GATHER_SECONDS = 0.2  # a batch waits this long for more events
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)  # after a failed write, the waits before the next try


class Event(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def account_id(self) -> int: ...
    @property
    def campaign_id(self) -> int: ...
    @property
    def subscriber_id(self) -> int: ...
    @property
    def at(self) -> datetime: ...
    @property
    def reasons(self) -> tuple[str, ...]: ...


def event_id(prefix: str, window: float, at: float, *ids: int) -> str:
    """The event's id: the same for every request of the same `ids` in one `window`-second window."""
    text = ".".join(map(str, (*ids, int(at // window))))
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:32]


E = TypeVar("E", bound=Event)


class Buffer(Generic[E]):
    """The events waiting to be written and the task that writes them; `statement(batch)` is the (query, *args)
    that writes a batch and returns how many of it were new."""

    what = "events"

    def __init__(self, pool: asyncpg.Pool, counter: Metric, capacity: int = BUFFER, share: float = SHARE) -> None:
        self.pool, self.counter, self.capacity = pool, counter, capacity
        self.pending: dict[str, E] = {}
        self.held: Counter[int] = Counter()  # pending events by account: none holds more than its share
        self.share = max(1, int(capacity * share))
        self._task: asyncio.Task[None] | None = None

    def statement(self, batch: list[E]) -> tuple[Any, ...]:
        """The (query, *args) that writes `batch`, e.g. ``db.sql(name, **self.arrays(batch), …)``."""
        raise NotImplementedError

    @staticmethod
    def arrays(batch: list[E]) -> dict[str, list[Any]]:
        """What every recording statement takes: parallel arrays, one element per event (`said`: its reasons,
        comma-separated)."""
        return {
            "ids": [e.id for e in batch],
            "accounts": [e.account_id for e in batch],
            "campaigns": [e.campaign_id for e in batch],
            "subscribers": [e.subscriber_id for e in batch],
            "ats": [e.at for e in batch],
            "said": [",".join(e.reasons) for e in batch],
        }

    async def add(self, event: E) -> None:
        """Keep `event` to be written (a coroutine: Starlette runs a background function on a thread)."""
        if event.id in self.pending:
            self.counter.labels("repeated").inc()
            return
        if len(self.pending) >= self.capacity or self.held[event.account_id] >= self.share:
            self.counter.labels("dropped").inc()
            return
        self.pending[event.id] = event
        self.held[event.account_id] += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        failures = 0
        while self.pending:
            await anyio.sleep(GATHER_SECONDS if not failures else RETRY_SECONDS[min(failures, 5) - 1])
            batch = list(itertools.islice(self.pending.values(), BATCH))
            try:
                with anyio.fail_after(db.DB_SECONDS):
                    async with db.acquire(self.pool) as conn:
                        written: int = await conn.fetchval(*self.statement(batch))
            except (*db.DOWN, asyncpg.PostgresError) as exc:
                failures += 1
                if failures == 1:
                    log.warning("%s not written yet (%d waiting): %s", self.what, len(self.pending), first_line(exc))
                continue
            failures = 0
            for event in batch:
                if self.pending.pop(event.id, None) is not None:
                    self.held[event.account_id] -= 1
            self.counter.labels("recorded").inc(written)
            self.counter.labels("repeated").inc(len(batch) - written)
