"""Database access: connections, the SQL files, and errors translated once."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from urllib.parse import urlsplit

import asyncpg

from service import embedded
from service.errors import DatabaseUnavailable
from service.settings import Settings


def _load(folder: str) -> dict[str, str]:
    root = resources.files("sql") / folder
    return {p.name.removesuffix(".sql"): p.read_text() for p in root.iterdir() if p.name.endswith(".sql")}


QUERIES = _load("queries")


def query(name: str) -> str:
    """The text of sql/queries/<name>.sql."""
    return QUERIES[name]


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for each sql/migrations/NNNN_name.sql, in order."""
    found = []
    for name, text in _load("migrations").items():
        number, _, label = name.partition("_")
        found.append((int(number), label, text))
    return sorted(found)


def url(settings: Settings) -> str:
    return settings.database_url or embedded.url()


def describe(dsn: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(dsn)
    host = parts.hostname or dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("host", "")
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path}"


UNAVAILABLE = (OSError, asyncpg.PostgresConnectionError, asyncpg.InvalidCatalogNameError,
               asyncpg.InvalidAuthorizationSpecificationError, asyncpg.InvalidPasswordError, TimeoutError)


async def init(conn: asyncpg.Connection) -> None:
    await conn.execute("SET search_path = einmal, public")


async def connect(dsn: str, timeout: float = 10) -> asyncpg.Connection:
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except UNAVAILABLE as exc:
        raise DatabaseUnavailable(f"cannot reach PostgreSQL at {describe(dsn)}: {exc}") from exc
    await init(conn)
    return conn


@asynccontextmanager
async def connection(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def create_pool(dsn: str, size: int = 4) -> asyncpg.Pool:
    try:
        return await asyncpg.create_pool(dsn, min_size=1, max_size=size, init=init, timeout=10)
    except UNAVAILABLE as exc:
        raise DatabaseUnavailable(f"cannot reach PostgreSQL at {describe(dsn)}: {exc}") from exc
