"""`einmal run`: one node — the actors under a supervisor, until SIGTERM.

Start order follows the pipeline: listener (ready once LISTEN ran),
scheduler, builder, then the send pipeline (actors/pipeline.py).

SIGTERM or SIGINT drains: stop claiming, release what is claimed, finish the
SMTP transactions under way, record their results, exit 0 — within
EINMAL_SHUTDOWN_GRACE_SECONDS. Further signals during the drain are logged
and ignored.

With EINMAL_HTTP_ADDRESS set, the HTTP actor (actors/http.py) starts first,
so /healthz and /readyz answer while the others start; it has a database
pool of its own, so a burst of unsubscribes never takes the senders'
connections, and one connection more for the figures of /metrics. `einmal
serve` runs it alone (serve_http). At start the soft limit on open files is
raised to the hard limit; the HTTP surface takes at most a quarter of it. With
EINMAL_INBOUND_SMTP_ADDRESS set, the inbound actor (actors/inbound_smtp.py)
takes bounces and complaints there, with a small pool of its own too.
"""

import gc
import logging
import signal
import socket
from collections.abc import Awaitable, Callable

import anyio
import asyncpg

from actors import http, inbound_smtp
from actors.sections import Sections
from actors.supervisor import Child, Supervisor
from actors.wiring import NodeWiring
from service import db, logs, telemetry
from service.api import app as api
from service.errors import ConfigError
from service.mail import dkim, from_rule
from service.metrics import Metrics
from service.settings import Settings, weak_unsubscribe_secret
from service.subscribers import optin, texts
from service.web import app as web

log = logging.getLogger("einmal.node")

HTTP_POOL_SIZE = 10


def setup_logging(settings: Settings | None = None) -> None:
    if settings is None:
        logs.setup()
    else:
        logs.setup(settings.log_format, settings.log_level)


async def http_pool(dsn: str, size: int = HTTP_POOL_SIZE) -> asyncpg.Pool:
    """The HTTP actor's pool: no connection until a request needs one, so HTTP starts with the database down."""
    return await asyncpg.create_pool(dsn, min_size=0, max_size=size, init=db.init, timeout=10, **db.options(dsn))


async def web_app(
    settings: Settings,
    dsn: str,
    metrics: Metrics,
    checks: Callable[[], list[str]],
    notes: Callable[[], list[str]] = list,
) -> tuple[web.Web, list[asyncpg.Pool]]:
    """The HTTP surface and its pools: one for requests, one connection for the figures of /metrics."""
    pools = [await http_pool(dsn), await http_pool(dsn, size=1)]
    surface = web.Web(settings, pools[0], metrics, checks, metrics_pool=pools[1], notes=notes, api=api.served)
    # what start-up made (the modules, the API and its models: some 10^5 objects) lives as long as the process:
    # frozen out of the collector's generations, it is not walked again by every full collection, which a
    # request of many rows (a batch) brings on: about 50 -> 40 ms of CPU a batch of 1,000 rows with its client
    gc.freeze()
    return surface, pools


async def serve(
    settings: Settings,
    stop: anyio.Event,
    on_start: Callable[[NodeWiring], None] | None = None,
    http_socket: socket.socket | None = None,
    inbound_socket: socket.socket | None = None,
) -> int:
    """Run a node until `stop` is set, then drain; return the exit code.

    `on_start` is handed the node's wiring before the actors start (tests
    look at its suppression set and its token through it). `http_socket`, a
    bound socket, serves HTTP on it (else EINMAL_HTTP_ADDRESS, when set); `inbound_socket`, a bound
    socket, takes bounces on it (else EINMAL_INBOUND_SMTP_ADDRESS, when set)."""
    dsn = db.url(settings)
    sock = http_socket or (http.bind(settings.http_address) if settings.http_address else None)
    inbound_sock = inbound_socket or (
        inbound_smtp.bind(settings.inbound_smtp_address) if settings.inbound_smtp_address else None
    )
    # held for an actor's life: the pipeline's, the scheduler's, the builder's, the claimer's two (campaigns',
    # notified messages'), the sender's two writers' (the express connection's), the pruner's, the sequencer's;
    # and room for a restarted pipeline's while the old one's are given back, and the leave's
    size = 12
    pool = await db.wait_for_pool(dsn, settings.db_wait_seconds, size=size, command_timeout=settings.db_timeout_seconds)
    node = NodeWiring.of(Sections.of(settings, dsn), pool)
    node.fencing.new_token()
    node.metrics.watch_heartbeat(lambda: node.heartbeat.at)
    if on_start is not None:
        on_start(node)
    log.info("node %s starting", node.fencing.node_id)
    async with db.acquire(pool) as conn:  # several accounts, and a From any of them may use (service/mail/from_rule.py)
        for said in await from_rule.installation_warnings(conn, settings=settings):
            log.warning("%s", said)
    to_builder, from_scheduler = anyio.create_memory_object_stream[int](16)
    children, pipeline = node.children(to_builder, from_scheduler)
    supervisor = Supervisor(
        settings.restart_intensity,
        settings.restart_period_seconds,
        on_restart=lambda name: node.metrics.actor_restarts.labels(name).inc(),
        passing=db.unreachable,
    )
    web_pools: list[asyncpg.Pool] = []
    if sock is not None:
        surface, web_pools = await web_app(
            settings, dsn, node.metrics, lambda: node.ready(supervisor.not_running()), node.replication.notes
        )
        children.insert(0, Child("http", http.HttpActor(surface.app, sock, http.HttpConfig.of(settings)).run))
    inbound_pool = None
    if inbound_sock is not None:
        inbound_pool = await http_pool(dsn)
        children.append(
            Child(
                "inbound",
                inbound_smtp.InboundActor(
                    inbound_smtp.InboundConfig.of(settings), inbound_pool, node.metrics, inbound_sock
                ).run,
            )
        )
    try:
        async with to_builder, from_scheduler, anyio.create_task_group() as tg:

            async def drain_on_stop() -> None:
                await stop.wait()
                log.info("stopping: draining (grace %gs)", settings.shutdown_grace_seconds)
                node.stopping.set()
                node.wakeups.claimer.set()
                with anyio.move_on_after(max(settings.shutdown_grace_seconds - 1, 0.5)):
                    await pipeline.drained.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(drain_on_stop)
            await supervisor.run(children)  # GaveUp comes out in a task group; the CLI unwraps it
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await node.leave()
            await pool.close()
            for web_pool in web_pools:
                await web_pool.close()
            if inbound_pool is not None:
                await inbound_pool.close()
        if sock is not None and http_socket is None:
            sock.close()
        if inbound_sock is not None and inbound_socket is None:
            inbound_sock.close()
    log.info("node %s stopped", node.fencing.node_id)
    return 0


async def serve_http(settings: Settings, stop: anyio.Event, http_socket: socket.socket | None = None) -> int:
    """`einmal serve`: the HTTP actor alone, under a supervisor, until `stop` is set."""
    if http_socket is not None:
        sock = http_socket
    elif settings.http_address:
        sock = http.bind(settings.http_address)
    else:
        raise ConfigError("EINMAL_HTTP_ADDRESS: must be set for einmal serve (host:port)")
    stopping = anyio.Event()
    metrics = Metrics()
    supervisor = Supervisor(
        settings.restart_intensity,
        settings.restart_period_seconds,
        on_restart=lambda name: metrics.actor_restarts.labels(name).inc(),
    )

    def checks() -> list[str]:
        return ["draining: the server is stopping"] if stopping.is_set() else []

    surface, pools = await web_app(settings, db.url(settings), metrics, checks)
    try:
        async with anyio.create_task_group() as tg:

            async def stop_on_signal() -> None:
                await stop.wait()
                stopping.set()
                tg.cancel_scope.cancel()

            tg.start_soon(stop_on_signal)
            await supervisor.run([Child("http", http.HttpActor(surface.app, sock, http.HttpConfig.of(settings)).run)])
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            for pool in pools:
                await pool.close()
        if http_socket is None:
            sock.close()
    return 0


async def run(settings: Settings, body: Callable[[Settings, anyio.Event], Awaitable[int]] = serve) -> int:
    """`einmal run` (body=serve) and `einmal serve` (body=serve_http): until SIGTERM or SIGINT."""
    setup_logging(settings)
    http.raise_file_limit()  # the HTTP surface's connection cap is a share of it
    dkim.signer(settings)  # a missing or unusable DKIM key stops start-up: one line, exit 2
    web.providers(settings)  # so does an unusable EINMAL_SES_CERTIFICATE_FILE
    optin.check_message(settings, [texts.confirmation(code) for code in texts.LANGUAGES])  # and a double opt-in
    # From that is not an address, or a confirmation message that is not a template
    if weak := weak_unsubscribe_secret(settings):  # and an unsubscribe key short enough to guess
        raise ConfigError(weak)
    telemetry.setup()
    stop = anyio.Event()

    async def on_signal() -> None:
        # the receiver stays open for the whole drain: a second SIGTERM or SIGINT is absorbed, not the
        # default action that would kill the node mid-drain; once draining, they stay ignored to the exit
        try:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    if stop.is_set():
                        log.info("%s ignored: already draining", signal.Signals(signum).name)
                    stop.set()
        finally:
            if stop.is_set():
                for signum in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, signal.SIG_IGN)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(on_signal)
            code = await body(settings, stop)
            tg.cancel_scope.cancel()
        return code
    finally:
        telemetry.shutdown()
