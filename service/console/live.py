"""Live progress without polling storms. The dashboard's sending campaigns each ask for their progress every
POLL_SECONDS (htmx, templates/progress.html); however many browsers watch, the database is asked once per
campaign per FRESH_SECONDS in a process (`Live.get`): the first answer is loaded by the request that asks
(one load of a campaign at a time, the others wait for it); after that every request gets the answer kept, and
one older than FRESH_SECONDS is loaded again in the background, so no request waits for a count of the
campaign's rows. A session is answered at most PER_SESSION fragments per POLL_SECONDS (a token bucket; past it,
429 and the fragment stays as it was). The tables are bounded: the least recently used entries go first, and at
most one load of a campaign runs at a time. An account's deliverability is kept the same way
(operations.py), for a minute; a large campaign's page (campaigns.py) too, with `oldest`: an answer kept
longer than that (nobody looked meanwhile) is loaded again before it is shown."""

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio
import asyncpg

from service import db
from service.errors import EinmalError

POLL_SECONDS = 5.0  # templates/progress.html asks again this often
FRESH_SECONDS = 2.0  # a campaign's progress is loaded again once older than this
PER_SESSION = 25  # fragments a session is answered per POLL_SECONDS: a dashboard's rows and a few more
MAX_SESSIONS, MAX_CAMPAIGNS = 10_000, 10_000  # entries kept of each

T = TypeVar("T")
log = logging.getLogger("einmal.console")


class Live(Generic[T]):
    def __init__(
        self, clock: Callable[[], float] = time.monotonic, fresh: float = FRESH_SECONDS, oldest: float | None = None
    ) -> None:
        self.clock, self.fresh, self.oldest = clock, fresh, oldest
        self.shown: OrderedDict[int, tuple[float, T]] = OrderedDict()  # campaign: (when loaded, progress)
        self.loading: dict[int, anyio.Lock] = {}  # a campaign's first load, awaited
        self.refreshing: dict[int, asyncio.Task[None]] = {}  # a campaign's load again, in the background
        self.buckets: OrderedDict[int, tuple[float, float]] = OrderedDict()  # session: (tokens, when counted)

    def allowed(self, session_id: int) -> bool:
        """Whether the session may be answered one more fragment now (and it is counted)."""
        now = self.clock()
        tokens, then = self.buckets.pop(session_id, (float(PER_SESSION), now))
        tokens = min(float(PER_SESSION), tokens + (now - then) * PER_SESSION / POLL_SECONDS)
        self.buckets[session_id] = (tokens - 1 if tokens >= 1 else tokens, now)
        if len(self.buckets) > MAX_SESSIONS:
            self.buckets.popitem(last=False)
        return tokens >= 1

    async def get(
        self, campaign_id: int, load: Callable[[], Awaitable[T]], again: Callable[[], Awaitable[T]] | None = None
    ) -> T:
        """The campaign's progress as kept (loaded again in the background by `again` once stale), else
        `load()`ed now, one first load of a campaign at a time. `load` may use the request's connection; `again`
        (`load` when None) outlives the request, so takes a connection of its own."""
        kept = self.shown.get(campaign_id)
        if kept is not None and self.oldest is not None and self.clock() - kept[0] >= self.oldest:
            del self.shown[campaign_id]  # too old to show: loaded now
            kept = None
        if kept is not None:
            if self.clock() - kept[0] >= self.fresh and campaign_id not in self.refreshing:
                task = self._again(campaign_id, again or load)
                self.refreshing[campaign_id] = asyncio.get_running_loop().create_task(task)
            return kept[1]
        lock = self.loading.setdefault(campaign_id, anyio.Lock())
        try:
            async with lock:
                if (kept := self.shown.get(campaign_id)) is not None:
                    return kept[1]  # loaded while this one waited
                found = await load()
                self.keep(campaign_id, found)
                return found
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self.loading.pop(campaign_id, None)

    async def _again(self, campaign_id: int, load: Callable[[], Awaitable[T]]) -> None:
        try:
            self.keep(campaign_id, await load())
        except (*db.DOWN, asyncpg.PostgresError, EinmalError) as exc:  # the answer kept stays until the next try
            log.warning("console: %d's answer not loaded again: %s", campaign_id, type(exc).__name__)
        finally:
            self.refreshing.pop(campaign_id, None)

    def kept(self, campaign_id: int) -> T | None:
        """The answer kept for the campaign, however old; None without one."""
        found = self.shown.get(campaign_id)
        return found[1] if found is not None else None

    def keep(self, campaign_id: int, found: T) -> None:
        self.shown[campaign_id] = (self.clock(), found)
        self.shown.move_to_end(campaign_id)
        if len(self.shown) > MAX_CAMPAIGNS:
            self.shown.popitem(last=False)
