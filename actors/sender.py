"""Sender: the SMTP connections, each a standing worker (docs/design.md#in-doubt-bound, #process).

Each of the EINMAL_SMTP_CONNECTIONS connections takes its next claimed row
from the feed as soon as its own reply is in; no connection waits for
another's. Before its DATA goes out, the row's move claimed -> sending must
have committed: the connection hands its last outcome and its next row to
the group-commit writer (actors/writer.py), which records and starts them,
together with every other connection's, in one statement that re-checks the
claim fence, the suppressions and the campaign's status. A started row then
gets one last look at the in-memory suppression set. A crash can therefore
leave at most one message per connection in doubt.

A connection that cannot reach the server (down, TLS or AUTH refused) sent
nothing: its row goes back to the queue with no attempt counted, one line is
logged, and no connection takes a row for a pause that doubles (from
EINMAL_RETRY_BASE_SECONDS, at most 0.5 s, up to 30 s) while it lasts. The
feed, no longer emptied, stops the claimer, so no more than about one batch
stays claimed meanwhile. A connection refused while others got through waits
one first pause alone.

A campaign of an account with relays of its own goes only through them
(service/relays.py Routes), each message to the next of them by weight,
another of them up when it reaches nothing; never through the environment's
or another account's. Each connection opens a link to a relay on its first
message for it, so a node has at most EINMAL_SMTP_CONNECTIONS links to any
relay and as many messages on the wire, however many accounts share it.
Once every relay of an account is down, its rows waiting in the feed go back
to the queue and the claimer skips its campaigns until one may be tried
again; the other accounts' rows go on (docs/design.md#sending-identity).
While no account has relays of its own, the connections wait as above.

A message whose template runs Jinja is rendered in a worker thread, in its account's share of the render
threads (service/mail/slots.py), while the statement that starts its row runs; one of plain fields alone
(microseconds) on the event loop. No render holds the loop longer than that (docs/design.md#templates).

Transactional messages (docs/design.md#messages) have a connection of their own, the express connection: with
EXPRESS_FROM (8) EINMAL_SMTP_CONNECTIONS or more, the last of them takes messages' rows alone (the feed's first
lane; the others take them too when free) and hands its steps to a writer of its own, on a database connection of
its own. So a message waits neither for a connection to come free of the campaign rows pipelined on all of them,
nor for the group statement of their rows under way, nor for its own mark among them: its start is a statement of
its own, and so is its 250's record. The in-doubt bound holds as before: it is one of the connections, with at most one
message on the wire unrecorded, and its writer's statements record and start only its rows.

A drain, or a failed claimer, closes the feed: each connection finishes the
message it has on the wire, hands in its outcome, and stops; the rows never
handed out are released.
"""

import contextlib
import logging
import time
from dataclasses import dataclass

import anyio
import anyio.abc
import asyncpg
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from actors.batch import Batch, Outcome, Row, Template
from actors.feed import Feed
from actors.sections import SenderConfig
from actors.wires import Journal, SmtpReach, Suppressions, Unrecorded, Wakeups
from actors.writer import Recording, Writer
from service import db, domains, relays
from service.campaigns.transitions import transition
from service.errors import Conflict, NotFound
from service.mail.slots import RenderSlots
from service.metrics import Metrics
from service.relays import Relays, RelayState
from service.smtp import reasons
from service.smtp.connection import Outcome as Smtp
from service.smtp.connection import SmtpConnection, SmtpUnavailable

log = logging.getLogger("einmal.sender")

LATE = 0.05  # seconds a row may go after its send slot (docs/design.md#sending-budget)
# with this many connections or more, the last is the express connection (transactional messages alone): with
# fewer, the one kept from bulk mail would be too large a share of its connections
EXPRESS_FROM = 8


def event(batch: Batch, name: str, attributes: dict[str, str]) -> None:
    """An event on the batch's send span: which relay failed, which domain asked us to slow down."""
    if batch.send_span is not None:
        batch.send_span.add_event(name, attributes)


def late(row: Row) -> bool:
    """Whether the row's send slot (EINMAL_RATE_LIMIT, a domain's rate) has passed by more than LATE."""
    return bool(row.not_before) and time.monotonic() - row.not_before > LATE


# a campaign pauses itself once this many of its messages failed to render on a node, and they are at
# least this share of the messages it rendered there: a template that fails for most subscribers stops
# after a handful, one that fails for a few goes on (docs/design.md#templates)
RENDER_FAILURES_TO_PAUSE = 10
RENDER_FAILURE_SHARE = 0.1


PAUSING = "not sent: the campaign is being paused, its template cannot be rendered"


@dataclass
class Renders:
    """A campaign's renders on this node with its compiled `template`, and whether its pause is asked."""

    template: Template
    rendered: int = 0
    failed: int = 0
    asked: bool = False
    first_error: str = ""


class RenderWatch:
    """Counts each campaign's renders and render failures on this node; says once when to pause it. A
    campaign resumed with its template changed is compiled anew, and counted afresh.

    Once the pause is asked, a row of the campaign that cannot be rendered goes back to the queue (no attempt)
    instead of failing: the connections still render what they took while the pause is written, and those
    rows would fail for a template the operator is about to fix. So the rows this node failed are the ones the
    pause reason counts."""

    def __init__(self) -> None:
        self.counts: dict[int, Renders] = {}  # by campaign

    def count(self, batch: Batch, row: Row, message: bytes | Outcome) -> tuple[bytes | Outcome, str | None]:
        """The message or the row's outcome, and the pause reason when the campaign's render failures pass the
        threshold (else None)."""
        counts = self.counts.get(batch.campaign_id)
        if counts is None or counts.template is not batch.template:
            counts = self.counts[batch.campaign_id] = Renders(batch.template)
        if not isinstance(message, Outcome):
            counts.rendered += 1
            return message, None
        if counts.asked:
            return Outcome(row.id, "queued", PAUSING), None
        counts.rendered += 1
        counts.failed += 1
        rendered, failed = counts.rendered, counts.failed
        if failed == 1:
            counts.first_error = message.reply.removeprefix("cannot render: ")
            log.warning("campaign %d: a message cannot be rendered: %s", batch.campaign_id, message.reply)
        if failed < RENDER_FAILURES_TO_PAUSE or failed < RENDER_FAILURE_SHARE * rendered:
            return message, None
        counts.asked = True
        return message, (
            f"cannot render for {failed} of {rendered} recipients tried on node {batch.token}: {counts.first_error}"
        )

    def unasked(self, campaign_id: int) -> None:
        """The pause could not be written: the next failure asks again (and fails its row meanwhile)."""
        if (counts := self.counts.get(campaign_id)) is not None:
            counts.asked = False


def render_row(batch: Batch, row: Row) -> bytes | Outcome:
    """The row's message, or its outcome when it cannot be rendered."""
    try:
        return batch.template.render(row.subscriber_id, row.email, row.name, row.attributes)
    except ValueError as exc:
        return Outcome(row.id, "failed", f"cannot render: {exc}", attempts=1)


class Sender:
    """Reads the suppressions (the last look), the feed and `stopping`; writes the SMTP reach; its writers write
    the journal (actors/writer.py)."""

    def __init__(
        self,
        config: SenderConfig,
        pool: asyncpg.Pool,
        suppressions: Suppressions,
        reach: SmtpReach,
        journal: Journal,
        unrecorded: Unrecorded,
        wakeups: Wakeups,
        stopping: anyio.Event,
        metrics: Metrics,
        token: str,
        feed: Feed,
    ) -> None:
        self.config, self.pool, self.suppressions, self.reach = config, pool, suppressions, reach
        self.recording = Recording(config.pauses, journal, metrics)
        self.unrecorded, self.wakeups, self.stopping, self.metrics = unrecorded, wakeups, stopping, metrics
        self.token, self.feed = token, feed
        self.routes = config.routes()
        feed.usable = self.routes.usable
        self.relays: Relays = self.routes.default
        self.own = relays.share([s.relay for s in self.relays.states], config.smtp_connections)
        self.connections: list[SmtpConnection] = []  # every one opened, for close()
        self.writer: Writer  # set by run()
        self.express: Writer | None = None  # the express connection's writer (set by run(): EXPRESS_FROM)
        self.renders = RenderWatch()
        self.slots = RenderSlots()
        self.background: anyio.abc.TaskGroup  # set by send_all()

    def outcome(self, row: Row, status: Smtp, reply: str) -> Outcome:
        config = self.config
        if status is Smtp.SENT:
            return Outcome(row.id, "sent", reply)
        if status is Smtp.PERMANENT:
            kind, reason = reasons.of_reply(reply)
            if reason in domains.REFUSALS:
                # the domain refuses the sender (policy, authentication), not the address: paused for every
                # node like a throttle, its other rows keep their place and probes test when it passes again.
                # This row is charged an attempt and waits a backoff, so it is not the first probe each time:
                # a refusal of one recipient alone (a group closed to outside senders) then holds the domain
                # for a few pauses, not for good, and the row fails at the limit, never suppressed.
                self.metrics.domain_throttled.labels(row.domain).inc()
                if row.attempts + 1 >= config.max_attempts:
                    return Outcome(
                        row.id,
                        "failed",
                        f"{reply} (gave up after {row.attempts + 1} attempts)",
                        attempts=1,
                        throttled=True,
                    )
                return Outcome(
                    row.id, "queued", reply, attempts=1, retry_after=config.retry_after(row.attempts), throttled=True
                )
            # the same table as a bounce's: only an address reason (550 5.1.1, 5.2.1) suppresses
            bounce = reasons.effect(kind, reason) == reasons.SUPPRESS
            return Outcome(row.id, "failed", reply, attempts=1, bounce=bounce)
        if status is Smtp.TRANSIENT and domains.throttled(reply):
            # the domain asks us to slow down: it is paused for every node, the row keeps its place
            self.metrics.domain_throttled.labels(row.domain).inc()
            return Outcome(row.id, "queued", reply, throttled=True)
        in_doubt = status is Smtp.IN_DOUBT
        if in_doubt and config.in_doubt == "hold":
            return Outcome(row.id, "in_doubt", reply, attempts=1)
        # a 4xx, or under resend a reply lost after the dot: an attempt, retried with backoff up to the limit;
        # past it an in-doubt row waits for reconcile
        if row.attempts + 1 >= config.max_attempts:
            if in_doubt:
                return Outcome(
                    row.id, "in_doubt", f"{reply} (still in doubt after {row.attempts + 1} attempts)", attempts=1
                )
            return Outcome(row.id, "failed", f"{reply} (gave up after {row.attempts + 1} attempts)", attempts=1)
        return Outcome(row.id, "queued", reply, attempts=1, retry_after=config.retry_after(row.attempts))

    async def deliver(
        self,
        connection: SmtpConnection,
        template: Template,
        row: Row,
        message: bytes | Outcome,
        honour_unsubscribe: bool = True,
    ) -> Outcome:
        """The row's outcome; raises SmtpUnavailable when nothing could reach the server. A transactional
        message that does not honour unsubscribes passes an address suppressed only by one
        (docs/design.md#messages)."""
        key = (row.account_id, row.email_lower)
        if self.suppressions.stops(key, honour_unsubscribe):
            return Outcome(row.id, "suppressed", "suppressed before sending")  # the last look (docs/design.md#opt-outs)
        if isinstance(message, Outcome):  # it could not be rendered
            return message
        result = await connection.send(template.envelope_sender(row.subscriber_id), row.email, message)
        return self.outcome(row, result.outcome, result.reply)

    async def attempt(
        self, links: dict[int, SmtpConnection], own: int, batch: Batch, row: Row, message: bytes | Outcome
    ) -> tuple[Outcome, float]:
        """The row's outcome through the connection's own relay, else the next one up; and how long this
        connection alone should wait before its next row. A relay that reached nothing sent nothing, so
        the next one may take the row in the same `sending` transition (service/relays.py)."""
        reason, alone = "no SMTP relay is up", False
        group = self.routes.of(batch.relays)
        for state in group.order(own if group is self.relays else group.pick()):
            seen = state.reached
            try:
                outcome = await self.deliver(
                    self.link(links, state), batch.template, row, message, batch.honour_unsubscribe
                )
            except SmtpUnavailable as exc:
                reason = str(exc)
                alone |= not state.down(reason, seen)
                self.metrics.relay_unavailable.labels(state.relay.name).inc()
                event(batch, "relay unavailable", {"einmal.relay": state.relay.name, "einmal.reason": reason})
                continue
            state.up()
            self.reach.unavailable = None
            if outcome.throttled:
                event(
                    batch,
                    "domain throttled",
                    {"einmal.domain": row.domain, "einmal.relay": state.relay.name, "einmal.reply": outcome.reply},
                )
            return outcome, 0.0
        if group is self.relays:
            self.reach.unavailable = self.relays.unavailable()
        if self.routes.sets and group.next_up() > time.monotonic():  # every relay of the account is down
            self.writer.give_back(self.feed.drop_relays(batch.relays))
        return Outcome(row.id, "queued", f"not sent: {reason}"), group.first_pause if alone else 0.0

    def link(self, links: dict[int, SmtpConnection], state: RelayState) -> SmtpConnection:
        """This connection's link to the relay, opened on its first message."""
        key = id(state)
        if key not in links:
            links[key] = self.config.link(state.relay)
            self.connections.append(links[key])
        return links[key]

    async def work(self, own: int, express: bool = False) -> None:
        """One connection: record the last outcome and start the next row in one step, send, repeat. The
        `express` one takes messages' rows alone, and has a writer of its own (module docstring)."""
        links: dict[int, SmtpConnection] = {}
        done: tuple[Batch, Outcome] | None = None
        alone_until = 0.0
        writer = self.express if express and self.express is not None else self.writer
        while True:
            # the next row's send slot under EINMAL_RATE_LIMIT, shared by every node (docs/design.md#sending-budget)
            # while no account has relays of its own, every row waits for the environment's to come up
            relays_up = 0.0 if self.routes.sets else self.relays.next_up()
            slot = self.feed.next_message_slot() if express else self.feed.next_slot()
            wait = max(relays_up, alone_until, slot) - time.monotonic()
            item = None if wait > 0 else self.feed.take_message() if express else self.feed.take()
            if item is None:
                if done is not None:  # nothing to send at once: record the last outcome now
                    await writer.step(done, None)
                    done = None
                elif self.feed.closed:
                    return
                elif wait > 0:
                    with anyio.move_on_after(wait):  # cut short by a drain
                        await self.feed.stopped.wait()
                else:
                    await (self.feed.message_ready if express else self.feed.ready).wait()
                continue
            if late(item[1]):
                # its slot has passed (the node was busy or slow to start): sent now it would crowd the
                # slots of others, so it goes back to the queue in its place and gets a new slot
                self.feed.done(item[1])
                self.writer.give_back([item])
                continue
            step = writer.hand_in(done, item)
            done = None
            # the message is made while the statement that starts its row runs, off this connection's
            # path from the answer to DATA; it goes out only if the row started (docs/design.md#process)
            # a template running Jinja renders in a worker thread, in its account's share (service/mail/slots.py)
            message: bytes | Outcome = b""
            if step is not None:
                batch = item[0]
                costly = batch.template.costly
                message = await self.slots.run(batch.account_id, render_row, *item) if costly else render_row(*item)
            started = await writer.answer(step)
            if started and late(item[1]):
                # the slot passed while its start was written: nothing sent, a new slot at the next claim
                done = (item[0], Outcome(item[1].id, "queued", "not sent: its send slot had passed"))
            elif started:
                # counted once the row started: a render whose row did not start (the campaign paused
                # meanwhile) failed no row
                message, reason = self.renders.count(*item, message)
                if reason:
                    self.background.start_soon(self.pause, item[0].campaign_id, reason)
                outcome, alone = await self.attempt(links, own, *item, message)
                done, alone_until = (item[0], outcome), time.monotonic() + alone
                if outcome.throttled:  # the rest of the domain goes back to the queue, in its place
                    self.writer.give_back(self.feed.drop_domain(item[1].domain))
            self.feed.done(item[1])

    async def pause(self, campaign_id: int, reason: str) -> None:
        """Pause a campaign whose messages keep failing to render, on a connection of its own (the rows of
        it not yet started go back to the queue as the writer starts them no more)."""
        log.error("campaign %d paused: %s", campaign_id, reason)
        try:
            with anyio.fail_after(self.config.db_timeout_seconds):
                async with db.connection(self.config.dsn) as conn:
                    await transition(conn, verb="pause", campaign_id=campaign_id, reason=reason)
        except (Conflict, NotFound):
            pass  # paused, cancelled or finished meanwhile
        except (*db.UNAVAILABLE, asyncpg.PostgresError, TimeoutError) as exc:
            log.error("campaign %d could not be paused: %s", campaign_id, exc)
            self.renders.unasked(campaign_id)

    async def send_all(self) -> None:
        """The connections and the writer, until the feed is closed and the last outcome is written."""

        async def close_on_stop() -> None:
            await self.stopping.wait()
            self.feed.close()

        async with anyio.create_task_group() as watch:
            self.background = watch
            watch.start_soon(close_on_stop)
            async with anyio.create_task_group() as tg:
                writers = [self.writer] if self.express is None else [self.writer, self.express]
                for writer in writers:
                    tg.start_soon(writer.run)
                async with anyio.create_task_group() as workers:
                    for own in self.own if self.express is None else self.own[:-1]:
                        workers.start_soon(self.work, own)
                    if self.express is not None:  # one of the EINMAL_SMTP_CONNECTIONS, the last
                        workers.start_soon(self.work, self.own[-1], True)
                for writer in writers:
                    writer.stop()
            watch.cancel_scope.cancel()

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            for connection in self.connections:
                await connection.close()

    async def run(
        self, to_recorder: MemoryObjectSendStream[Batch], *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        config, token, feed = self.config, self.token, self.feed
        writers: list[Writer] = []
        try:
            # the writer's connection for the sender's life, and the express connection's writer's
            async with to_recorder, contextlib.AsyncExitStack() as stack:
                for name in ("sender", "express")[: 2 if config.smtp_connections >= EXPRESS_FROM else 1]:
                    conn = await stack.enter_async_context(
                        db.actor_connection(self.pool, name, token, config.db_timeout_seconds)
                    )
                    # the writer's statement, prepared once, runs thousands of times with arrays of a few ids:
                    # planning it anew each time was a quarter of its cost (docs/design.md#state-machines). Behind
                    # a transaction pooler nothing is prepared for long, and a SET would outlive the session's turn.
                    if db.holds_a_session(conn):
                        await conn.execute("SET plan_cache_mode = force_generic_plan")
                    writers.append(Writer(self.recording, self.wakeups, token, conn, feed, to_recorder))
                self.writer = writers[0]
                self.express = writers[1] if len(writers) > 1 else None
                task_status.started()
                await self.send_all()
                for writer in writers:
                    if writer.error is not None:
                        raise writer.error
                await feed.claimer_done.wait()
                await self.writer.release(feed.rest())
        finally:
            # answers got but not written, and rows being started that never reached the wire (back to the
            # queue, no attempt): the next incarnation records them before any rescue
            for writer in writers:
                if writer.unrecorded:
                    self.unrecorded.held.append((token, writer.unrecorded))
            await self.close()
