"""Live progress without polling storms. The dashboard's sending campaigns each ask for their progress every
POLL_SECONDS (htmx, templates/progress.html); however many browsers watch, the database is asked once per
campaign per FRESH_SECONDS in a process (`Live.progress`: the snapshot is shared, one load of a campaign at a
time, and those asking meanwhile get the one before), and a session is answered at most PER_SESSION fragments
per POLL_SECONDS (a token bucket; past it, 429 and the fragment stays as it was). Both tables are bounded: the
least recently used entries go first."""

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio

POLL_SECONDS = 5.0  # templates/progress.html asks again this often
FRESH_SECONDS = 2.0  # a campaign's progress is loaded again once older than this
PER_SESSION = 25  # fragments a session is answered per POLL_SECONDS: a dashboard's rows and a few more
MAX_SESSIONS, MAX_CAMPAIGNS = 10_000, 10_000  # entries kept of each

T = TypeVar("T")


class Live(Generic[T]):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.shown: OrderedDict[int, tuple[float, T]] = OrderedDict()  # campaign: (when loaded, progress)
        self.loading: dict[int, anyio.Lock] = {}
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

    async def progress(self, campaign_id: int, load: Callable[[], Awaitable[T]]) -> T:
        """The campaign's progress: the one loaded within FRESH_SECONDS, else `load()`ed now, one load of a
        campaign at a time (those asking meanwhile get the last one loaded, or wait for the first)."""
        lock = self.loading.setdefault(campaign_id, anyio.Lock())
        kept = self.shown.get(campaign_id)
        if lock.locked() and kept is not None:
            return kept[1]  # being loaded again: the last answer meanwhile, rather than wait for the new one
        try:
            async with lock:
                kept = self.shown.get(campaign_id)
                if kept is not None and self.clock() - kept[0] < FRESH_SECONDS:
                    return kept[1]
                found = await load()
                self.shown[campaign_id] = (self.clock(), found)
                self.shown.move_to_end(campaign_id)
                if len(self.shown) > MAX_CAMPAIGNS:
                    self.shown.popitem(last=False)
                return found
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self.loading.pop(campaign_id, None)
