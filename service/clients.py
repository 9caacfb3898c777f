"""Who a public client is, and bounds on what it does counted in PostgreSQL (docs/design.md#listening-surface "Bounds
per client").

A client is its network, not its address: an IPv4 address counts by its /24 and an IPv6 one by its /64 (what
one subscriber line or one host is given), so a client that rotates addresses inside its network is still
one client. The counts live in `einmal.client_counts`, per kind and fixed window, so every node of the
cluster sees the same count and a restart forgets nothing."""

import ipaddress
import math
from dataclasses import dataclass

import asyncpg

from service import db

IPV4_PREFIX, IPV6_PREFIX = 24, 64
KEEP_SECONDS = 86400.0  # windows ended longer ago than this are pruned (actors/pruner.py)


def network(host: str | None) -> str:
    """The network a client address counts as: 192.0.2.0/24, 2001:db8:1:2::/64; an IPv4 address mapped into
    IPv6 counts as the IPv4 one; anything that is no address (a Unix socket, a test client) as itself."""
    try:
        address = ipaddress.ip_address((host or "").split("%")[0])
    except ValueError:
        return (host or "?")[:100]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    prefix = IPV4_PREFIX if address.version == 4 else IPV6_PREFIX
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False))


@dataclass(frozen=True)
class Count:
    hits: int  # in the current window, this hit included when it was counted
    rest: float  # seconds until the window ends

    def retry_after(self) -> str:
        """The Retry-After header's value: whole seconds, at least 1."""
        return str(max(1, math.ceil(self.rest)))


async def hit(conn: asyncpg.Connection | asyncpg.Pool, kind: str, client: str, window: float) -> Count:
    """Count one hit of `client` (a network()) for `kind` in the current window of `window` seconds."""
    row = await conn.fetchrow(*db.sql("client_count_hit", kind=kind, client=client, window=window))
    assert row is not None  # the query returns one row
    return Count(row["hits"], row["rest"])


async def undo(conn: asyncpg.Connection | asyncpg.Pool, kind: str, client: str, window: float) -> None:
    """Take back one hit of `client` for `kind` in the current window (one counted before its outcome was known)."""
    await conn.execute(*db.sql("client_count_undo", kind=kind, client=client, window=window))


async def count(conn: asyncpg.Connection | asyncpg.Pool, kind: str, client: str, window: float) -> Count:
    """The hits of `client` for `kind` in the current window, counting nothing."""
    row = await conn.fetchrow(*db.sql("client_count_get", kind=kind, client=client, window=window))
    assert row is not None  # the query returns one row
    return Count(row["hits"], row["rest"])


async def prune(conn: asyncpg.Connection) -> int:
    """Remove the counts of windows ended over KEEP_SECONDS ago: how many."""
    return await conn.fetchval(*db.sql("client_count_prune", keep=KEEP_SECONDS))
