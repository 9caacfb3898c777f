"""The bound on guessing console passwords, counted in PostgreSQL (einmal.client_counts, service/clients.py)
so every node sees it: sign-ins per user name and client network (an IPv4 /24, an IPv6 /64), and per network
whatever the name; those that succeed are taken back, so only failures count.

A sign-in is counted before its password is tried (one atomic hit each, so sign-ins at once cannot all
slip under the bound). Past PER_NAME for a name from a network in a window, that name is refused from that
network until the window ends, its password not tried and the network not counted; past PER_NETWORK from a
network, every name is. So a flood against one user from one network stops neither that user signing in
from another network nor another user from the same one: the flood adds at most PER_NAME to its network's
count. Nothing locks a user out everywhere, which a guesser could do to anyone; a guesser with many networks
gets PER_NAME tries a window from each, against a password hashed with argon2."""

import asyncpg

from service import clients

NAME_KIND, NETWORK_KIND = "console-login", "console-login-network"
WINDOW_SECONDS = 900.0
PER_NAME, PER_NETWORK = 5, 30


def _pair(network: str, name_key: str) -> str:
    return f"{network} {name_key[:200]}"


async def attempt(conn: asyncpg.Connection, *, name_key: str, network: str) -> clients.Count | None:
    """Count a sign-in of the name from the network: the count that refuses it (its window's end is the
    Retry-After), or None when its password may be tried."""
    pair = await clients.hit(conn, NAME_KIND, _pair(network, name_key), WINDOW_SECONDS)
    if pair.hits > PER_NAME:
        return pair
    whole = await clients.hit(conn, NETWORK_KIND, network, WINDOW_SECONDS)
    return whole if whole.hits > PER_NETWORK else None


async def succeeded(conn: asyncpg.Connection, *, name_key: str, network: str) -> None:
    """Take back the count of a sign-in whose password was right."""
    await clients.undo(conn, NAME_KIND, _pair(network, name_key), WINDOW_SECONDS)
    await clients.undo(conn, NETWORK_KIND, network, WINDOW_SECONDS)
