"""One node's actors and the wires between them, put together in one place (actors/wires.py says who writes
and who reads each). Only the node (actors/node.py) holds this: each actor is handed its own section of the
settings (actors/sections.py), the pool and the wires it uses, and nothing else.
"""

import logging
from dataclasses import dataclass, field

import anyio
import asyncpg
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors import pruner, sequencer
from actors.builder import Builder
from actors.listener import Listener
from actors.pipeline import SendPipeline, record_unrecorded
from actors.scheduler import Scheduler
from actors.sections import Sections
from actors.supervisor import Child
from actors.webhooks import WebhookActor
from actors.wires import (
    Fencing,
    Heartbeat,
    Journal,
    MessageNotices,
    Replication,
    SmtpReach,
    Suppressions,
    Unrecorded,
    Wakeups,
)
from actors.writer import Recording
from service import db
from service.metrics import Metrics

log = logging.getLogger("einmal.node")


@dataclass
class NodeWiring:
    sections: Sections
    pool: asyncpg.Pool
    fencing: Fencing
    journal: Journal
    replication: Replication
    stopping: anyio.Event = field(default_factory=anyio.Event)  # set by the node alone: a drain
    metrics: Metrics = field(default_factory=Metrics)
    heartbeat: Heartbeat = field(default_factory=Heartbeat)
    suppressions: Suppressions = field(default_factory=Suppressions)
    notices: MessageNotices = field(default_factory=MessageNotices)
    wakeups: Wakeups = field(default_factory=Wakeups)
    unrecorded: Unrecorded = field(default_factory=Unrecorded)
    reach: SmtpReach = field(default_factory=SmtpReach)

    @classmethod
    def of(cls, sections: Sections, pool: asyncpg.Pool) -> "NodeWiring":
        return cls(
            sections,
            pool,
            Fencing(sections.node_id),
            Journal(sections.journal_seconds, sections.journal_size),
            Replication(required=sections.require_synchronous_replication),
        )

    def recording(self) -> Recording:
        return Recording(self.sections.pipeline.sender.pauses, self.journal, self.metrics)

    def listener(self) -> Listener:
        return Listener(self.sections.listener, self.suppressions, self.notices, self.wakeups, self.fencing.node_id)

    def scheduler(self) -> Scheduler:
        return Scheduler(
            self.sections.scheduler,
            self.pool,
            self.fencing,
            self.unrecorded,
            self.heartbeat,
            self.replication,
            self.journal,
            self.wakeups,
        )

    def builder(self) -> Builder:
        return Builder(self.pool, self.fencing, self.wakeups, self.sections.db_timeout_seconds)

    def pipeline(self) -> SendPipeline:
        return SendPipeline(
            self.sections.pipeline,
            self.pool,
            self.fencing,
            self.unrecorded,
            self.journal,
            self.replication,
            self.suppressions,
            self.notices,
            self.reach,
            self.wakeups,
            self.stopping,
            self.metrics,
        )

    def children(
        self, to_builder: MemoryObjectSendStream[int], from_scheduler: MemoryObjectReceiveStream[int]
    ) -> tuple[list[Child], SendPipeline]:
        """The actors in start order (the pipeline's: actors/node.py), and the send pipeline (the drain waits for
        it)."""
        sections, pool, fencing = self.sections, self.pool, self.fencing
        the_scheduler, the_builder, pipeline = self.scheduler(), self.builder(), self.pipeline()
        return [
            Child("listener", self.listener().run),
            Child("scheduler", lambda **kw: the_scheduler.run(to_builder.clone(), **kw)),
            Child("builder", lambda **kw: the_builder.run(from_scheduler.clone(), **kw)),
            Child("send pipeline", pipeline.run),
            # sign-ups; with retention, campaigns
            Child("pruner", lambda **kw: pruner.run(sections.pruner, pool, fencing, **kw)),
            # outbound webhooks, on connections of their own (docs/design.md#webhooks); a new actor at each restart
            Child("webhooks", lambda **kw: WebhookActor(sections.webhooks, fencing.node_id).run(**kw)),
            # docs/design.md#sequences
            Child("sequencer", lambda **kw: sequencer.run(sections.sequencer, pool, fencing, self.stopping, **kw)),
        ], pipeline

    def ready(self, not_running: str | None) -> list[str]:
        """Why this node is not ready, the database aside (see service/web/app.py); `not_running`: the first
        actor that is not running, as the supervisor says."""
        reasons = []
        if self.stopping.is_set():
            reasons.append("draining: the node is stopping")
        if not_running is not None:
            reasons.append(f"actor {not_running}")
        if self.reach.unavailable:
            reasons.append(f"SMTP relay refusing: {self.reach.unavailable}")
        if self.replication.refusing:
            reasons.append(f"replication: {self.replication.problem} (EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION)")
        return reasons

    async def leave(self) -> None:
        """Give back what this node still holds; its tasks have all ended."""
        try:
            async with db.acquire(self.pool) as conn:
                await record_unrecorded(conn, self.recording(), self.unrecorded)
                rescued = await conn.fetchrow(*self.sections.rescue.query([*self.fencing.retired, self.fencing.token]))
            assert rescued is not None  # the query returns one row
            if rescued["in_doubt"]:
                log.warning("%d message(s) left in doubt", rescued["in_doubt"])
        except (OSError, ConnectionError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            # e.g. the database is down, or the node gave up because its schema is gone: keep that reason
            log.warning(
                "could not release this node's rows (%s); other nodes will after the timeout",
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )
            if unrecorded := self.unrecorded.count():
                log.warning(
                    "%d answer(s) from the SMTP server could not be recorded: their rows will be in doubt",
                    unrecorded,
                )
