"""The claimed rows between the claimer and the sender's connections (docs/design.md §5).

The claimer puts whole batches in; each connection takes one row at a time.
When fewer than `low_water` rows are left, `room` is set and wakes the
claimer, which claims the next batch; so a node holds less than
`low_water` + one batch claimed and unsent, and a sender that stops taking
rows (the server is down, a drain) stops the claims too. Once closed, no row
is handed out any more: what is left is released by the sender.
"""

from collections import deque

import anyio
from opentelemetry import trace

from service import telemetry
from service.context import Batch, Row


class Feed:
    def __init__(self, low_water: int) -> None:
        self.low_water = max(1, low_water)
        self.rows: deque[tuple[Batch, Row]] = deque()
        self.stopped = anyio.Event()  # closed: set once, never cleared
        self.room = anyio.Event()  # set while the claimer should claim
        self.ready = anyio.Event()  # set while a row waits, or once closed
        self.claimer_done = anyio.Event()  # the claimer will put nothing more
        self._update()

    @property
    def closed(self) -> bool:
        return self.stopped.is_set()

    def _update(self) -> None:
        if self.closed or len(self.rows) < self.low_water:
            self.room.set()
        elif self.room.is_set():
            self.room = anyio.Event()
        if self.closed or self.rows:
            self.ready.set()
        elif self.ready.is_set():
            self.ready = anyio.Event()

    def put(self, batch: Batch) -> None:
        batch.send_span = telemetry.tracer().start_span("send", context=trace.set_span_in_context(batch.span))
        self.rows.extend((batch, row) for row in batch.rows)
        self._update()

    def next_slot(self) -> float:
        """time.monotonic() of the next row's send slot (0: none, or no rate limit)."""
        return self.rows[0][1].not_before if self.rows else 0.0

    def take(self) -> tuple[Batch, Row] | None:
        """The next row to send, or None when none waits or the feed is closed."""
        if self.closed or not self.rows:
            return None
        item = self.rows.popleft()
        self._update()
        return item

    def close(self) -> None:
        """Hand out no more rows (a drain, the claimer or the writer failed); wakes everyone waiting."""
        self.stopped.set()
        self._update()

    def rest(self) -> list[tuple[Batch, Row]]:
        """The rows never handed out, removed from the feed (to be released)."""
        rest, self.rows = list(self.rows), deque()
        self._update()
        return rest
