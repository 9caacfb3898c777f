"""The claimed rows between the claimer and the sender's connections (docs/design.md#process).

The claimer puts whole batches in; each connection takes one row at a time.
When fewer than `low_water` rows are left, `room` is set and wakes the
claimer, which claims the next batch; so a node holds less than
`low_water` + one batch claimed and unsent, and a sender that stops taking
rows (the server is down, a drain) stops the claims too. Once closed, no row
is handed out any more: what is left is released by the sender.

Transactional messages (docs/design.md#messages) have a lane of their own: a connection that is free takes
a message's row before any campaign's (under a rate, before any whose send slot is later), so a message waits at
most for one message on the wire per connection. The claimer puts messages in whether or not the feed is low, up
to a few batches of them (`messages_held`), each account's turn (actors/turns.py) no more than MESSAGE_TURN of them.
The accounts take turns in the lane too: a message of another account than the last one handed out goes first
(of the first SCAN), so one account's flood holds another's message back by a turn. They do not count toward
`low_water`. The sender's express connection (actors/sender.py) takes from this lane alone (`take_message`,
woken by `message_ready`).
"""

import time
from collections import Counter, deque
from collections.abc import Callable

import anyio
from opentelemetry import trace

from actors.batch import Batch, OwnRelay, Row
from service import telemetry

SCAN = 256  # rows looked at for one whose send slot has come


class Feed:
    def __init__(self, low_water: int, domain_connections: dict[str, int] | None = None) -> None:
        self.low_water = max(1, low_water)
        self.rows: deque[tuple[Batch, Row]] = deque()
        self.messages: deque[tuple[Batch, Row]] = deque()  # the first lane: transactional messages' rows
        self.held: Counter[int] = Counter()  # the first lane's rows by account
        self.served: int | None = None  # the account whose message was handed out last
        # EINMAL_DOMAIN_LIMITS' Nconn: a row of a domain with that many on the wire waits, the next goes
        self.caps = domain_connections or {}
        self.busy: Counter[str] = Counter()
        self.stopped = anyio.Event()  # closed: set once, never cleared
        self.room = anyio.Event()  # set while the claimer should claim
        self.ready = anyio.Event()  # set while a row waits, or once closed
        self.message_ready = anyio.Event()  # set while a message's row waits, or once closed
        self.claimer_done = anyio.Event()  # the claimer will put nothing more
        # whether any relay of an account (its AccountRelay tuple) is up: the sender's (service/relays.py)
        self.usable: Callable[[tuple[OwnRelay, ...]], bool] = lambda relays: True
        self._update()

    @property
    def closed(self) -> bool:
        return self.stopped.is_set()

    def _update(self) -> None:
        if self.closed or len(self.rows) < self.low_water:
            self.room.set()
        elif self.room.is_set():
            self.room = anyio.Event()
        if self.closed or self._next() is not None:
            self.ready.set()
        elif self.ready.is_set():
            self.ready = anyio.Event()
        if self.closed or self._pick_message() is not None:
            self.message_ready.set()
        elif self.message_ready.is_set():
            self.message_ready = anyio.Event()

    def put(self, batch: Batch) -> None:
        batch.send_span = telemetry.tracer().start_span(
            "send", context=trace.set_span_in_context(batch.span), attributes=telemetry.batch_attributes(batch)
        )
        (self.messages if batch.message else self.rows).extend((batch, row) for row in batch.rows)
        if batch.message:
            self.held[batch.account_id] += len(batch.rows)
        self._update()

    @property
    def messages_held(self) -> int:
        """Messages' rows waiting in the first lane."""
        return len(self.messages)

    def _forget(self, lane: deque[tuple[Batch, Row]], items: list[tuple[Batch, Row]]) -> None:
        if lane is self.messages:
            self.held.subtract(batch.account_id for batch, _ in items)
            self.held = +self.held  # no account kept at 0

    def _next(self) -> tuple[deque[tuple[Batch, Row]], int] | None:
        """The lane and place of the next row to send: a message's whose slot has come first, unless a campaign's
        row's slot came before it (the accounts' turns gave the slots, actors/turns.py: a node that falls behind
        its rate keeps their order), else the row whose slot comes first of the two lanes. Without a rate no row
        has a slot, and a message goes first."""
        m = self._pick_message()
        c = self._pick(self.rows)
        now = time.monotonic()
        if m is not None and self.messages[m][1].not_before <= now:
            if c is not None and self.rows[c][1].not_before < self.messages[m][1].not_before:
                return self.rows, c
            return self.messages, m
        if c is None:
            return None if m is None else (self.messages, m)
        if m is None or self.rows[c][1].not_before <= self.messages[m][1].not_before:
            return self.rows, c
        return self.messages, m

    def _pick_message(self) -> int | None:
        """Where the next message's row is: as `_pick` finds it, unless it is the account's served last while
        another account's may go now (of the first SCAN): the accounts take turns in the lane."""
        m = self._pick(self.messages)
        if m is None or len(self.held) < 2 or self.messages[m][0].account_id != self.served:
            return m
        now = time.monotonic()
        for i, (batch, row) in enumerate(self.messages):
            if i >= SCAN:
                break
            free = not self.caps or self.busy[row.domain] < self.caps.get(row.domain, len(self.messages) + 1)
            if batch.account_id != self.served and row.not_before <= now and free:
                return i
        return m

    def _pick(self, rows: deque[tuple[Batch, Row]]) -> int | None:
        """Where the next row to send is: of the rows whose domain has a connection free, the first whose send
        slot has come, else the one whose slot comes first (of the first SCAN): a row waiting for its relay's
        or domain's slot does not hold the rows behind it whose slots have come (another account's)."""
        if not self.caps and (not rows or rows[0][1].not_before <= time.monotonic()):
            return 0 if rows else None  # the head may go: all there is to it without limits
        now, soonest = time.monotonic(), None
        for i, (_, row) in enumerate(rows):
            if i >= SCAN:
                break
            if self.caps and self.busy[row.domain] >= self.caps.get(row.domain, len(rows) + 1):
                continue
            if row.not_before <= now:
                return i
            if soonest is None or row.not_before < rows[soonest][1].not_before:
                soonest = i
        return soonest

    def next_slot(self) -> float:
        """time.monotonic() of the next row's send slot (0: none, or no rate limit)."""
        found = self._next()
        return 0.0 if found is None else found[0][found[1]][1].not_before

    def next_message_slot(self) -> float:
        """time.monotonic() of the next message's send slot (0: none, or no rate limit)."""
        m = self._pick_message()
        return 0.0 if m is None else self.messages[m][1].not_before

    def take(self) -> tuple[Batch, Row] | None:
        """The next row to send, or None when none may go now or the feed is closed; `done` when sent."""
        found = None if self.closed else self._next()
        if found is None:
            return None
        return self._take(*found)

    def take_message(self) -> tuple[Batch, Row] | None:
        """The next message's row whose send slot has come (of the first lane alone), or None; `done` when sent."""
        m = None if self.closed else self._pick_message()
        if m is None or self.messages[m][1].not_before > time.monotonic():
            return None
        return self._take(self.messages, m)

    def _take(self, lane: deque[tuple[Batch, Row]], i: int) -> tuple[Batch, Row]:
        item = lane[i]
        del lane[i]
        self._forget(lane, [item])
        if lane is self.messages:
            self.served = item[0].account_id
        if self.caps:
            self.busy[item[1].domain] += 1
        self._update()
        return item

    def done(self, row: Row) -> None:
        """A row `take` handed out is off the wire: its domain's connection is free again."""
        if self.caps:
            self.busy[row.domain] -= 1
            self._update()

    def drop_domain(self, domain: str) -> list[tuple[Batch, Row]]:
        """Take every waiting row of `domain` out (it asked us to slow down): to be given back."""
        return self.drop(lambda batch, row: row.domain == domain)

    def drop_relays(self, relays: tuple[OwnRelay, ...]) -> list[tuple[Batch, Row]]:
        """Take every waiting row sent through `relays` out (none of them is up): to be given back."""
        return self.drop(lambda batch, row: batch.relays == relays)

    def drop(self, which: Callable[[Batch, Row], bool]) -> list[tuple[Batch, Row]]:
        dropped: list[tuple[Batch, Row]] = []
        for lane in (self.messages, self.rows):
            kept = [item for item in lane if not which(*item)]
            if len(kept) < len(lane):
                gone = [item for item in lane if which(*item)]
                self._forget(lane, gone)
                dropped.extend(gone)
                lane.clear()
                lane.extend(kept)
        if dropped:
            self._update()
        return dropped

    def close(self) -> None:
        """Hand out no more rows (a drain, the claimer or the writer failed); wakes everyone waiting."""
        self.stopped.set()
        self._update()

    def rest(self) -> list[tuple[Batch, Row]]:
        """The rows never handed out, removed from the feed (to be released)."""
        rest = [*self.messages, *self.rows]
        self.messages.clear()
        self.held.clear()
        self.rows.clear()
        self._update()
        return rest
