"""The bound on guessing console passwords, counted in PostgreSQL (einmal.client_counts, service/clients.py)
so every node sees it: failed sign-ins per user name and client network (an IPv4 /24, an IPv6 /64), and per
network whatever the name.

Past PER_NAME failures for a name from a network in a window, that name is refused from that network until
the window ends, without its password being tried or the failure counted; past PER_NETWORK failures from a
network, every name is. So a flood against one user from one network stops neither that user signing in from
another network nor another user from the same one: the flood adds at most PER_NAME to its network's count.
Nothing locks a user out everywhere, which a guesser could do to anyone; a guesser with many networks gets
PER_NAME tries a window from each, against a password hashed with argon2."""

import asyncpg

from service import clients

NAME_KIND, NETWORK_KIND = "console-login", "console-login-network"
WINDOW_SECONDS = 900.0
PER_NAME, PER_NETWORK = 5, 30


def _pair(network: str, name_key: str) -> str:
    return f"{network} {name_key[:200]}"


async def refused(conn: asyncpg.Connection, *, name_key: str, network: str) -> clients.Count | None:
    """The count that refuses this sign-in now (its window's end: Retry-After), or None when it may try."""
    pair = await clients.count(conn, NAME_KIND, _pair(network, name_key), WINDOW_SECONDS)
    if pair.hits >= PER_NAME:
        return pair
    whole = await clients.count(conn, NETWORK_KIND, network, WINDOW_SECONDS)
    return whole if whole.hits >= PER_NETWORK else None


async def failed(conn: asyncpg.Connection, *, name_key: str, network: str) -> None:
    """Count a failed sign-in of the name from the network."""
    await clients.hit(conn, NAME_KIND, _pair(network, name_key), WINDOW_SECONDS)
    await clients.hit(conn, NETWORK_KIND, network, WINDOW_SECONDS)
