"""Database access: connections, the SQL files, and errors translated once."""

import errno
import logging
import re
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from importlib import resources
from typing import cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import asyncpg

from service.db import embedded
from service.errors import DatabaseUnavailable, leaves
from service.settings import Settings

log = logging.getLogger("einmal.db")


def _load(folder: str) -> dict[str, str]:
    root = resources.files("sql") / folder
    return {p.name.removesuffix(".sql"): p.read_text() for p in root.iterdir() if p.name.endswith(".sql")}


# What a query file's text holds, read left to right: a quoted string or identifier, a comment, a
# dollar-quoted body, a type cast (::), a named parameter (:name) or a positional one ($n).
_TOKENS = re.compile(
    r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|(\$[A-Za-z_]*\$).*?\1|::|:([A-Za-z_][A-Za-z0-9_]*)|\$([0-9]+)""",
    re.DOTALL,
)


class Query:
    """One sql/queries/<name>.sql: its parameters are named (`:name`), sent as `$n` in order of first use.

    `bind(**values)` gives the statement and its arguments for asyncpg, `conn.fetch(*q.bind(...))`; a name
    missing or extra is a TypeError at the call, never a value in the wrong place. A file with a positional
    parameter (`$n`) fails when it is loaded: every parameter has a name.
    """

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        params: list[str] = []
        positional: set[str] = set()

        def rewrite(m: re.Match[str]) -> str:
            if m.group(2):
                if m.group(2) not in params:
                    params.append(m.group(2))
                return f"${params.index(m.group(2)) + 1}"
            if m.group(3):
                positional.add(m.group(3))
            return m.group(0)

        self.text = _TOKENS.sub(rewrite, text)
        if positional:
            raise ValueError(f"sql/queries/{name}.sql: name its parameters (:name), not ${min(positional, key=int)}")
        self.params = tuple(params)

    def bind(self, /, **values: object) -> tuple[str, *tuple[object, ...]]:
        """(text, *arguments) with each `:name` given by its keyword."""
        if values.keys() != set(self.params):
            missing, extra = set(self.params) - values.keys(), values.keys() - set(self.params)
            raise TypeError(f"query {self.name}: missing {sorted(missing)}, unknown {sorted(extra)}")
        return (self.text, *(values[p] for p in self.params))


QUERIES = {name: Query(name, text) for name, text in _load("queries").items()}


def sql(name: str, /, **values: object) -> tuple[str, *tuple[object, ...]]:
    """sql/queries/<name>.sql bound by keyword (`name` itself may be one), to unpack into a call of asyncpg:

    `await conn.fetchrow(*db.sql("client_count_get", kind=k, client=c, window=60))`
    """
    return QUERIES[name].bind(**values)


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for each sql/migrations/NNNN_name.sql, in order."""
    found = []
    for name, text in _load("migrations").items():
        number, _, label = name.partition("_")
        found.append((int(number), label, text))
    return sorted(found)


# The pooler in front of each database URL, as the settings that named it say (EINMAL_DATABASE_POOLER):
# every connection to that URL is made for it (options). docs/operations/database.md#pgbouncer, docs/design.md#liveness.
_POOLERS: dict[str, str] = {}


def url(settings: Settings) -> str:
    """The database's URL: EINMAL_DATABASE_URL (or DATABASE_URL), else the embedded server's, said once
    on stderr (a misspelled variable would otherwise leave the embedded database in use unnoticed)."""
    if settings.database_url is None and not _POOLERS:
        print(
            f"einmal: EINMAL_DATABASE_URL and DATABASE_URL are unset: using the embedded PostgreSQL in "
            f"{embedded.data_dir()}",
            file=sys.stderr,
        )
    dsn = settings.database_url or embedded.url()
    _POOLERS[dsn] = settings.database_pooler
    return dsn


def pooler(dsn: str) -> str:
    """none, session or transaction: what stands between einmal and PostgreSQL at `dsn`."""
    return _POOLERS.get(dsn, "none")


def describe(dsn: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(dsn)
    hosts = parts.netloc.rpartition("@")[2]  # h, h:port, [v6]:port, or several joined by commas
    if not hosts:
        hosts = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("host", "")
    return f"{hosts}{parts.path}"


# a login that failed: none there, a server starting up, shutting down or recovering from a crash (57P0x), no
# connection slot left; and, for good (refusal), no such database or role, a startup parameter refused
UNAVAILABLE = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InvalidCatalogNameError,
    asyncpg.InvalidAuthorizationSpecificationError,
    asyncpg.InvalidPasswordError,
    TimeoutError,
    asyncpg.TargetServerAttributeNotMatched,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
)
# what an HTTP request (a page, a form, the API) takes for "the database is down": it cannot log in (above),
# the connection broke or closed under it, or the server ended or cancelled its statement (57xxx: a shutdown,
# a crash, a statement_timeout); answered 503, never 500
DOWN = (*UNAVAILABLE, asyncpg.InterfaceError, asyncpg.OperatorInterventionError, ConnectionError)
DB_SECONDS = 10.0  # the most an HTTP request waits for the database (pool and statements)
PROBE_SECONDS = 3.0  # each host's look when several are named
WANTED = {
    "read-write": "accepts writes",
    "primary": "is a primary",
    "read-only": "is read-only",
    "standby": "is a standby",
}


class DatabaseRefused(DatabaseUnavailable):
    """The server answered and refused the connection for what it was asked: a login, a database, a startup
    parameter. Asking again asks the same: nobody waits for it (wait_for_pool)."""


# PgBouncer's own refusals come as protocol violations (08P01), as do its passing ones ("no more connections
# allowed", "server login has been failing, try again later"): those it can never grant are told by their text
_REFUSED_BY_POOLER = ("does not exist", "authentication failed", "no such user")


def refusal(dsn: str, exc: BaseException) -> DatabaseRefused | None:
    """The error for a connection refused for good (a retry asks the same and gets the same answer), or None
    when waiting may help: no server there yet, one starting up, no connection slot left."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    where = describe(dsn)
    if isinstance(exc, asyncpg.PostgresError) and text.startswith("unsupported startup parameter"):
        told = pooler(dsn)
        if told == "none":
            return DatabaseRefused(
                f"PostgreSQL at {where} refused a startup parameter ({text}): a pooler such "
                "as PgBouncer stands there; say which with EINMAL_DATABASE_POOLER=session or "
                "transaction (docs/operations/database.md#pgbouncer)"
            )
        return DatabaseRefused(
            f"PostgreSQL at {where} refused a startup parameter ({text}) though "
            f"EINMAL_DATABASE_POOLER={told} sends only application_name"
        )
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError) or (
        isinstance(exc, asyncpg.ProtocolViolationError) and any(t in text for t in _REFUSED_BY_POOLER)
    ):
        if "does not exist" in text and "role" not in text and "user" not in text:
            return DatabaseRefused(f"PostgreSQL at {where} has no such database: {text}")
        return DatabaseRefused(f"PostgreSQL at {where} refused the login: {text}")
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return DatabaseRefused(f"PostgreSQL at {where} has no such database: {text}")
    return None


async def unavailable(dsn: str, exc: BaseException) -> DatabaseUnavailable:
    """The error for a connection that failed. With several hosts in the URL asyncpg gives one host's
    error (the first that failed) and none when every host answered but none had the
    target_session_attrs asked for: each host is then asked again, alone, and named with its cause."""
    parts = urlsplit(dsn)
    users, _, hosts = parts.netloc.rpartition("@")
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "target_session_attrs"]
    target = dict(parse_qsl(parts.query)).get("target_session_attrs")
    message = f"cannot reach PostgreSQL at {describe(dsn)}"
    if (refused := refusal(dsn, exc)) is not None:  # it answered: what was asked is what failed
        return refused
    if not hosts or ("," not in hosts and not isinstance(exc, asyncpg.TargetServerAttributeNotMatched)):
        return DatabaseUnavailable(f"{message}: {exc}")
    causes = []
    for host in hosts.split(","):
        alone = urlunsplit(parts._replace(netloc=f"{users}@{host}" if users else host, query=urlencode(query)))
        causes.append(f"{host}: {await _probe(alone)}")
    if target:
        wanted = WANTED.get(target)
        message += (
            f": no host {wanted} (target_session_attrs={target})"
            if wanted
            else f": no host matches target_session_attrs={target}"
        )
    return DatabaseUnavailable(f"{message}: {'; '.join(causes)}")


async def _probe(dsn: str) -> str:
    """What one host says: refused, no answer, its error, or whether it takes writes."""
    try:
        conn = await asyncpg.connect(dsn, timeout=PROBE_SECONDS)
    except ConnectionRefusedError:
        return "connection refused"
    except TimeoutError:
        return f"no answer within {PROBE_SECONDS:g}s"
    except (*UNAVAILABLE, asyncpg.PostgresError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    try:
        standby = await conn.fetchval("SELECT pg_is_in_recovery()", timeout=PROBE_SECONDS)
        read_only = await conn.fetchval("SHOW transaction_read_only", timeout=PROBE_SECONDS) == "on"
    except (*UNAVAILABLE, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"answered, then {type(exc).__name__}"
    finally:
        conn.terminate()
    if standby:
        return "read-only (a standby)"
    return "read-only (default_transaction_read_only)" if read_only else "accepts writes"


class DatabaseStalled(ConnectionError):
    """A statement of a node's got no answer within EINMAL_DB_TIMEOUT_SECONDS: its connection is dropped."""


class DatabaseConnectionLost(ConnectionError):
    """An actor's connection was closed under it."""


# what an outage looks like from an actor: no connection, a connection lost or ended by the server (a
# shutdown, a crash, a server starting up), a statement that got no answer
_OUTAGE = (
    DatabaseUnavailable,
    DatabaseStalled,
    DatabaseConnectionLost,
    ConnectionError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
    asyncpg.TargetServerAttributeNotMatched,
)  # the last: mid-failover
_LOCAL_SHORTAGE = {errno.EMFILE, errno.ENFILE, errno.ENOMEM}  # this process's fault: escalate


def unreachable(exc: BaseException) -> bool:
    """Whether a failure says only that PostgreSQL cannot be reached (every error inside it is an outage):
    the supervisor restarts such an actor without counting it toward its limit (docs/design.md#liveness)."""
    return all(
        isinstance(leaf, _OUTAGE) or (isinstance(leaf, OSError) and leaf.errno not in _LOCAL_SHORTAGE)
        for leaf in leaves(exc)
    )


# A node's sessions: named for pg_stat_activity, and probed by the server's TCP keepalives so that the
# backend of a node that vanished (half-open connection) is ended and its locks freed within about a minute.
# A pooler takes no such startup parameters (PgBouncer refuses them unless told to ignore them): behind one,
# its own keepalives (tcp_keepidle…) and server_idle_timeout do that work, and only the name is sent.
KEEPALIVES = {"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"}


class Sessionless(asyncpg.Connection):
    """A connection through a transaction pooler: each transaction may run on another server session."""

    holds_a_session = False


def options(dsn: str, name: str = "einmal") -> dict:
    """asyncpg's connection options for `dsn`. Behind a transaction pooler nothing may live in a session:
    no named prepared statements (asyncpg's statement cache; PgBouncer 1.18, Debian 12's, keeps none for a
    client) and no SET (init, the actors' names): it would stay on a server session others get next."""
    mode = pooler(dsn)
    found: dict = {"server_settings": {"application_name": name[:63], **(KEEPALIVES if mode == "none" else {})}}
    if mode == "transaction":
        found.update(statement_cache_size=0, connection_class=Sessionless)
    return found


def holds_a_session(conn: asyncpg.Connection) -> bool:
    """Whether `conn` (or a pool's proxy of it) has a server session of its own for SETs."""
    return getattr(conn, "holds_a_session", True)


async def init(conn: asyncpg.Connection) -> None:
    """A new connection's search path (einmal's queries name their schema; this is for the tests and the
    operator's habits), but behind a transaction pooler."""
    if holds_a_session(conn):
        await conn.execute("SET search_path = einmal, public")


async def connect(
    dsn: str, timeout: float = 10, command_timeout: float | None = None, name: str = "einmal"
) -> asyncpg.Connection:
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout, command_timeout=command_timeout, **options(dsn, name))
    except UNAVAILABLE as exc:
        raise await unavailable(dsn, exc) from exc
    await init(conn)
    return conn


@asynccontextmanager
async def acquire(pool: asyncpg.Pool, timeout: float | None = None) -> AsyncIterator[asyncpg.Connection]:
    """A connection the pool lends for the block, as `pool.acquire()`. asyncpg lends a proxy that passes
    every call on to its connection; its type stubs keep the two apart, so it is typed here as the
    connection it stands in for."""
    async with pool.acquire(timeout=timeout) as conn:
        yield cast(asyncpg.Connection, conn)


@asynccontextmanager
async def actor_connection(
    pool: asyncpg.Pool, actor: str, token: str, timeout: float
) -> AsyncIterator[asyncpg.Connection]:
    """A pool connection for an actor, named `einmal <actor> <token>` in pg_stat_activity.

    The pool's command timeout (`timeout`, EINMAL_DB_TIMEOUT_SECONDS) bounds every statement. When the
    actor fails on it (a statement timed out, the connection was lost, anything) the connection is dropped,
    not reset: its state is unknown, and a reset would wait on a backend that may never answer. A timeout
    comes out as DatabaseStalled; a connection that died under the actor as DatabaseConnectionLost (asyncpg
    hands a dead connection back to the pool at once, so the actor's next call would only say that)."""
    lost: list[bool] = []

    def on_lost(_conn: object) -> None:
        lost.append(True)

    async with acquire(pool) as conn:
        conn.add_termination_listener(on_lost)
        try:
            if holds_a_session(conn):  # a session of its own to name
                await conn.execute(*sql("session_name", name=f"einmal {actor} {token}"[:63]))
            yield conn
        except TimeoutError as exc:
            _drop(conn)
            raise DatabaseStalled(
                f"PostgreSQL did not answer the {actor} within {timeout:g}s; its connection is dropped"
            ) from exc
        except Exception as exc:
            _drop(conn)
            if lost:
                detail = "" if isinstance(exc, asyncpg.InterfaceError) else f": {type(exc).__name__}: {exc}"
                raise DatabaseConnectionLost(
                    f"the {actor}'s connection to PostgreSQL was closed under it "
                    f"(backend terminated, server restarted or network lost){detail}"
                ) from exc
            raise
        except BaseException:
            _drop(conn)
            raise
        else:
            # An actor's session is its own (its name, its settings), so it is not handed on: it ends with
            # the actor. Ended here, in the actor's task, it is not reset by asyncpg's release either, which
            # runs in a task of its own: a backend that died a moment ago (the actor stopped because of it)
            # would fail that reset where nobody sees it, or fail the actor's clean end.
            _drop(conn)
        finally:
            if not lost:
                with suppress(asyncpg.InterfaceError):
                    conn.remove_termination_listener(on_lost)


def _drop(conn: asyncpg.Connection) -> None:
    with suppress(asyncpg.InterfaceError):  # already handed back to the pool: it is closed
        conn.terminate()


@asynccontextmanager
async def connection(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def create_pool(
    dsn: str, size: int = 4, name: str = "einmal", command_timeout: float | None = None
) -> asyncpg.Pool:
    """A pool that opens one connection now (an unreachable database fails here) and no floor after it:
    an actor's connection ends with the actor (actor_connection), and a pool keeping a floor would open
    one behind it at once, in a task of its own that a close cancels half-way through the handshake."""
    try:
        return await asyncpg.create_pool(
            dsn,
            init_size=1,
            min_size=0,
            max_size=size,
            timeout=10,
            command_timeout=command_timeout,
            init=init,
            **options(dsn, name),
        )
    except UNAVAILABLE as exc:
        raise await unavailable(dsn, exc) from exc


WAIT_LOG_SECONDS = 30.0  # while waiting for the database, one line this often
WAIT_MAX_DELAY = 2.0


async def wait_for_pool(dsn: str, wait: float | None, **options) -> asyncpg.Pool:
    """create_pool, tried again while the database cannot be reached, for up to `wait` seconds
    (EINMAL_DB_WAIT_SECONDS; None: for as long as it takes; 0: once). One line when the wait begins
    and one every WAIT_LOG_SECONDS; DatabaseUnavailable once the wait is over, DatabaseRefused at once
    (a login, database or startup parameter refused: waiting never heals it)."""
    began = time.monotonic()
    delay, logged = 0.1, None
    while True:
        try:
            pool = await create_pool(dsn, **options)
        except DatabaseUnavailable as exc:
            now = time.monotonic()
            if isinstance(exc, DatabaseRefused) or (wait is not None and now - began + delay > wait):
                raise
            if logged is None:
                log.warning(
                    "waiting for PostgreSQL %s (EINMAL_DB_WAIT_SECONDS): %s",
                    "for as long as it takes" if wait is None else f"for up to {wait:g}s",
                    exc,
                )
                logged = now
            elif now - logged >= WAIT_LOG_SECONDS:
                log.warning("still waiting for PostgreSQL after %.0fs: %s", now - began, exc)
                logged = now
            await anyio.sleep(delay)
            delay = min(delay * 2, WAIT_MAX_DELAY)
            continue
        if logged is not None:
            log.info("PostgreSQL answered after %.1fs", time.monotonic() - began)
        return pool
