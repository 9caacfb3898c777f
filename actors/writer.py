"""Group commit: the one writer of a send pipeline's row transitions (docs/design.md#in-doubt-bound, #process).

Each SMTP connection hands the writer a step: the outcome of its last
message to record (if any) and the row it would send next to start,
claimed -> sending (if any). The writer takes every step waiting at that
moment, writes them all in one send_advance statement on the sender's
database connection, and answers each connection whether its row started.
A connection writes its next DATA only after that answer, and its previous
outcome is recorded by the same statement that starts its next row: so each
connection has at most one message on the wire unrecorded, whatever the
others do. Steps that arrive while a statement runs wait for the next one.

A statement that fails (the database went away, it timed out) fails the
writer: the outcomes it carried, and each row it was starting as "back to
the queue, never sent", are kept for the next incarnation, as are the
outcomes the connections still hand in while they finish the message they
have on the wire (actors/wires.py Unrecorded); the feed closes, and the
pipeline fails once they are done.

An answer is recorded on a row its token still holds, even one an
asynchronous failover took back to `claimed`; one that finds no such row is
logged with the row's ids, counted and kept in einmal.lost_outcomes
(`record`): never dropped without a word (docs/design.md#liveness). Each one
recorded goes into the node's journal (actors/wires.py Journal), which the
scheduler writes again on a new primary after a failover.

The writer also settles the batches: once every row of a batch is recorded,
released or not started, the batch goes to the recorder.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import asyncpg
from anyio.streams.memory import MemoryObjectSendStream

from actors.batch import Batch, Outcome, Row
from actors.feed import Feed
from actors.sections import DomainPauses
from actors.wires import Journal, Wakeups
from service import db, telemetry
from service.metrics import Metrics

log = logging.getLogger("einmal.sender")

NOT_SENT = "not sent: the database connection failed"
MAX_LINGER = 0.0025  # seconds


async def campaigns_of(conn: asyncpg.Connection, outcomes: Sequence[Outcome]) -> None:
    """Fill in the campaign of the outcomes made without their batch (their row says, one lookup), so that the
    statements recording them read one partition a row; 0 for a row that is gone."""
    if missing := [x.id for x in outcomes if x.campaign_id is None]:
        rows = await conn.fetch(*db.sql("send_campaigns", ids=missing))
        found = {r["id"]: r["campaign_id"] for r in rows}
        for x in outcomes:
            x.campaign_id = x.campaign_id or found.get(x.id, 0)


async def advance(
    conn: asyncpg.Connection, pauses: DomainPauses, outcomes: list[Outcome], token: str, starts: list[tuple[int, int]]
) -> list[asyncpg.Record]:
    """One send_advance: record `outcomes` under `token`, start the rows `starts` (id, campaign)."""
    o = outcomes
    await campaigns_of(conn, o)
    return await conn.fetch(
        *db.sql(
            "send_advance",
            ids=[x.id for x in o],
            statuses=[x.status for x in o],
            replies=[x.reply[:1000] for x in o],
            attempts=[x.attempts for x in o],
            retry_afters=[x.retry_after for x in o],
            bounces=[x.bounce for x in o],
            throttled=[x.throttled for x in o],
            campaign_ids=[x.campaign_id for x in o],
            token=token,
            start_ids=[s[0] for s in starts],
            start_campaign_ids=[s[1] for s in starts],
            pause_seconds=pauses.seconds,
            pause_max_seconds=pauses.max_seconds,
        )
    )


@dataclass(frozen=True)
class Recording:
    """What recording outcomes reads and writes besides the database: the domains' pauses it sets, the
    journal it writes (docs/design.md#liveness), the metrics it counts lost outcomes in."""

    pauses: DomainPauses
    journal: Journal
    metrics: Metrics


async def record(
    conn: asyncpg.Connection,
    recording: Recording,
    outcomes: list[Outcome],
    token: str,
    starts: Sequence[tuple[int, int]] = (),
) -> list[asyncpg.Record]:
    """`advance`, and a log line and a count for each outcome that found no row of `token`'s; the others
    go into the node's journal, to be written again if a failover loses them."""
    rows = await advance(conn, recording.pauses, outcomes, token, list(starts))
    lost = rows[0]["lost"] or []  # the statement returns one row at least
    lost_ids = {entry[0] for entry in lost}
    recording.journal.add(token, [o for o in outcomes if o.id not in lost_ids])
    for send_id, campaign_id, subscriber_id, outcome, code, status, owner in lost:
        ids, found = f"send {send_id}", "there is no such row"
        if status is not None:
            ids += f" (campaign {campaign_id}, subscriber {subscriber_id})"
            found = f"the row is {status}" + (f" by {owner}" if owner else "")
        log.warning(
            "%s: its answer (%s, reply %s) found no row of %s to record it on: %s; kept in einmal.lost_outcomes",
            ids,
            outcome,
            code or "without a code",
            token,
            found,
        )
    recording.metrics.lost_outcomes.inc(len(lost))
    return rows


@dataclass(eq=False)
class Step:
    done: tuple[Batch, Outcome] | None  # the connection's last outcome, to record
    start: tuple[Batch, Row] | None  # the row it would send next, to start
    answered: anyio.Event = field(default_factory=anyio.Event)
    started: bool = False


class Writer:
    """Records the connections' outcomes and starts their next rows (module docstring); writes the journal, wakes
    the scheduler."""

    def __init__(
        self,
        recording: Recording,
        wakeups: Wakeups,
        token: str,
        conn: asyncpg.Connection,
        feed: Feed,
        to_recorder: MemoryObjectSendStream[Batch],
    ) -> None:
        self.recording, self.wakeups = recording, wakeups
        self.token, self.conn, self.feed, self.to_recorder = token, conn, feed, to_recorder
        self.waiting: list[Step] = []
        self.parked: list[tuple[Batch, Row]] = []  # rows to give back unsent (their domain was paused)
        self.writing: list[Step] = []  # the steps of the statement under way
        self.wake = anyio.Event()
        self.stopping = False
        self.error: Exception | None = None
        self.unrecorded: list[Outcome] = []  # for the next incarnation, under this token
        self.busy = 0  # connections with a started row whose outcome they have not handed in yet
        self.last_seconds = 0.0  # how long the last statement took

    def hand_in(self, done: tuple[Batch, Outcome] | None, start: tuple[Batch, Row] | None) -> Step | None:
        """Record `done` and start `start` in the next statement; None when the writer has failed, so
        nothing starts. `answer` waits for the statement."""
        if done is not None:
            done[1].campaign_id = done[0].campaign_id
        if self.error is not None:
            if done is not None:
                self.unrecorded.append(done[1])
            return None
        if done is not None:
            self.busy -= 1
        step = Step(done, start)
        self.waiting.append(step)
        self.wake.set()
        return step

    @staticmethod
    async def answer(step: Step | None) -> bool:
        """Whether the step's row started, so that it may go on the wire."""
        if step is None:
            return False
        await step.answered.wait()
        return step.started

    async def step(self, done: tuple[Batch, Outcome] | None, start: tuple[Batch, Row] | None) -> bool:
        return await self.answer(self.hand_in(done, start))

    def give_back(self, items: list[tuple[Batch, Row]]) -> None:
        """Rows taken out of the feed unsent: back to the queue, in their place, at the next turn."""
        if items:
            self.parked.extend(items)
            self.wake.set()

    def stop(self) -> None:
        """No connection hands in anything more: write what waits, then end."""
        self.stopping = True
        self.wake.set()

    async def run(self) -> None:
        try:
            while True:
                await self.wake.wait()
                self.wake = anyio.Event()
                if self.parked:
                    parked, self.parked = self.parked, []
                    await self.release(parked)
                if not self.waiting:
                    if self.stopping:
                        return
                    continue
                await self.gather()
                self.writing, self.waiting = self.waiting, []
                await self.write(self.writing)
                self.writing = []
        except Exception as exc:  # the pipeline fails with it once the connections are done
            self.error = exc
            self.feed.close()
        finally:
            self._give_up(self.writing + self.waiting)

    async def gather(self) -> None:
        """While other connections have a row on its way, wait for their steps, at most half as long as the
        last statement took: otherwise the connections settle into two halves, each handing in while the
        other's statement runs, and every statement's fixed cost (its commit) is paid for half of them.
        A connection's reply never waits for another's: only its step does, briefly."""
        deadline = time.monotonic() + min(self.last_seconds / 2, MAX_LINGER)
        while self.busy and not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with anyio.move_on_after(left):
                await self.wake.wait()
            self.wake = anyio.Event()

    def _give_up(self, steps: list[Step]) -> None:
        """Steps that may not have been written: their outcomes, and their unsent rows as never sent."""
        for step in steps:
            if step.done is not None:
                self.unrecorded.append(step.done[1])
            if step.start is not None:
                self.unrecorded.append(
                    Outcome(step.start[1].id, "queued", NOT_SENT, campaign_id=step.start[0].campaign_id)
                )
            step.answered.set()
        self.writing, self.waiting = [], []

    async def write(self, steps: list[Step]) -> None:
        done = [step.done[1] for step in steps if step.done is not None]
        began = time.monotonic()
        rows = await record(
            self.conn,
            self.recording,
            done,
            self.token,
            [(step.start[1].id, step.start[0].campaign_id) for step in steps if step.start is not None],
        )
        self.last_seconds = time.monotonic() - began
        self.recording.metrics.group_commit_seconds.observe(self.last_seconds)
        started = {r["id"] for r in rows if r["id"] is not None}
        if any(o.bounce or (o.throttled and o.attempts) for o in done):
            self.wakeups.scheduler.set()  # a refusal or a rejection: the scheduler checks the rates now
        touched: list[Batch] = []
        for step in steps:
            if step.done is not None:
                step.done[0].outcomes.append(step.done[1])
                touched.append(step.done[0])
            if step.start is not None:
                step.started = step.start[1].id in started
                self.busy += step.started
                if not step.started:  # settled by the statement: suppressed, paused or cancelled
                    settle(step.start[0], "not_started")
                    touched.append(step.start[0])
            step.answered.set()
        self.writing = []
        await self.close_settled(touched)

    async def release(self, items: list[tuple[Batch, Row]]) -> None:
        """Give rows never handed to a connection back to the queue."""
        if items:
            await self.conn.execute(
                *db.sql(
                    "send_release",
                    ids=[row.id for _, row in items],
                    campaign_ids=[batch.campaign_id for batch, _ in items],
                    token=self.token,
                )
            )
        for batch, _ in items:
            settle(batch, "released")
        await self.close_settled([batch for batch, _ in items])

    async def close_settled(self, batches: list[Batch]) -> None:
        for batch in dict.fromkeys(batches):
            if batch.left == 0:
                if batch.send_span is not None:  # set as the batch entered the feed
                    batch.send_span.set_attributes(telemetry.outcome_attributes(batch))
                    batch.send_span.end()
                await self.to_recorder.send(batch)
                if batch.finishes and not self.feed.rows:
                    # this node's share of the campaign may be done: the scheduler checks at once (a message's,
                    # a confirmation's or a step's campaign never is: it ticked, on a new connection, for each)
                    self.wakeups.scheduler.set()


def settle(batch: Batch, status: str) -> None:
    batch.settled[status] = batch.settled.get(status, 0) + 1
