"""A public client is its network, and its counts are PostgreSQL's, shared by every node (service/clients.py)."""

import anyio
import asyncpg
import pytest

from service import clients


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("192.0.2.77", "192.0.2.0/24"),
        ("127.0.0.1", "127.0.0.0/24"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("::ffff:198.51.100.9", "198.51.100.0/24"),
        ("fe80::1%eth0", "fe80::/64"),
        ("testclient", "testclient"),
        (None, "?"),
    ],
)
def test_a_client_is_its_network(host: str | None, expected: str) -> None:
    assert clients.network(host) == expected


def test_rotating_inside_a_network_is_one_client() -> None:
    assert len({clients.network(f"127.0.0.{i}") for i in range(1, 255)}) == 1
    assert len({clients.network(f"2001:db8::{i:x}") for i in range(1, 1000)}) == 1
    assert clients.network("127.0.1.1") != clients.network("127.0.0.1")


@pytest.mark.anyio
async def test_counts_are_shared_through_postgresql(dsn: str) -> None:
    """Two connections (two nodes) count into one window; another kind or client counts apart."""
    first, second = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        counts = [await clients.hit(conn, "sign-up", "192.0.2.0/24", 3600) for conn in (first, second) * 3]
        assert [c.hits for c in counts] == [1, 2, 3, 4, 5, 6]
        assert 0 < counts[-1].rest <= 3600 and int(counts[-1].retry_after()) >= 1
        assert (await clients.count(second, "sign-up", "192.0.2.0/24", 3600)).hits == 6
        assert (await clients.count(second, "key-failure", "192.0.2.0/24", 3600)).hits == 0
        assert (await clients.hit(first, "sign-up", "198.51.100.0/24", 3600)).hits == 1
        assert await clients.prune(first) == 0  # nothing ended a day ago
        await first.execute("UPDATE einmal.client_counts SET window_start = window_start - interval '2 days'")
        assert await clients.prune(first) == 2
    finally:
        await first.close()
        await second.close()


@pytest.mark.anyio
async def test_a_window_ends(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        assert (await clients.hit(conn, "key-failure", "x", 1)).hits == 1
        await anyio.sleep(1.05)
        assert (await clients.hit(conn, "key-failure", "x", 1)).hits == 1
    finally:
        await conn.close()
