"""The account's keys over /api/v1/keys (einmal serve on loopback, a real PostgreSQL): a write key lists,
creates (the key in that answer only, never stored) and revokes its own account's keys; a read key only
lists; another account's keys are 404. Keys that are not valid are counted per client network in the
database, shared by the nodes: past the free ones the network is refused 429 with Retry-After."""

import anyio
import asyncpg
import httpx
import pytest

from service import clients
from service.accounts import keys
from service.api.deps import Guesses
from tests.conftest import einmal
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio


async def test_a_write_key_creates_lists_and_revokes_its_account_s_keys(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme'), ('other')")
    write, read, other = make_key(dsn, "acme"), make_key(dsn, "acme", "--scope", "read"), make_key(dsn, "other")
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = await client.post(
            "/keys", headers={**auth(write), "Idempotency-Key": "k1"}, json={"name": "reports", "scope": "read"}
        )
        assert made.status_code == 201, made.text
        new = made.json()
        assert (new["name"], new["scope"], new["revoked_at"]) == ("reports", "read", None)
        assert new["key"].startswith("einmal_") and new["prefix"] == new["key"][: keys.PREFIX]
        assert made.headers["cache-control"] == "no-store"
        replayed = await client.post(
            "/keys", headers={**auth(write), "Idempotency-Key": "k1"}, json={"name": "reports", "scope": "read"}
        )
        assert replayed.status_code == 409 and new["key"] not in replayed.text, replayed.text
        assert (await client.get("/subscribers", headers=auth(new["key"]))).status_code == 200
        assert (await client.post("/keys", headers=auth(new["key"]), json={"scope": "write"})).status_code == 403
        assert (await client.post("/keys", headers=auth(read), json={})).status_code == 403
        assert (await client.delete(f"/keys/{new['id']}", headers=auth(read))).status_code == 403
        assert (await client.post("/keys", headers=auth(write), json={"name": "a\nb"})).status_code == 422
        assert (await client.post("/keys", headers=auth(write), json={"scope": "admin"})).status_code == 422
        listed = await client.get("/keys", headers=auth(read))
        assert [(k["name"], k["scope"]) for k in listed.json()] == [("", "write"), ("", "read"), ("reports", "read")]
        assert all("key" not in k for k in listed.json()) and write not in listed.text
        assert (await client.delete(f"/keys/{new['id']}", headers=auth(other))).json() == {"error": "no such key"}
        assert (await client.get("/keys", headers=auth(other))).json()[0]["id"] not in [k["id"] for k in listed.json()]
        write_id = listed.json()[0]["id"]
        itself = await client.delete(f"/keys/{write_id}", headers=auth(write))
        assert itself.status_code == 409 and "does not revoke itself" in itself.text, "no lock-out by mistake"
        assert (await client.get("/subscribers", headers=auth(write))).status_code == 200
        revoked = await client.delete(f"/keys/{new['id']}", headers=auth(write))
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        assert (await client.get("/subscribers", headers=auth(new["key"]))).status_code == 401
        assert (await client.delete(f"/keys/{new['id']}", headers=auth(write))).status_code == 404
    stored = await conn.fetch("SELECT body FROM einmal.api_requests")
    assert stored and all(new["key"].encode() not in bytes(r["body"]) for r in stored)  # the key kept nowhere
    listing = einmal("account", "key", "list", "--account", "acme", dsn=dsn).stdout
    assert "reports" in listing and new["key"] not in listing


async def fresh_window(conn: asyncpg.Connection) -> None:
    """Wait, if need be, until the failure count's current window has 10 s left, so that a test's failures all
    fall into one window."""
    rest = (await clients.count(conn, Guesses.KIND, "127.0.0.0/24", Guesses.WINDOW_SECONDS)).rest
    if rest < 10:
        await anyio.sleep(rest + 0.1)


def from_address(address: str, base: str) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=address, limits=httpx.Limits(max_connections=100))
    return httpx.AsyncClient(base_url=f"{base}/api/v1", transport=transport, timeout=30)


@pytest.mark.serial
async def test_past_its_free_failures_a_network_is_refused_429_with_retry_after_at_once(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    valid = make_key(dsn, "acme")
    await fresh_window(conn)
    answers: list[httpx.Response] = []
    async with http_server(dsn) as base, from_address("127.0.0.1", base) as client:

        async def guess(n: int) -> None:
            answers.append(await client.get("/subscribers", headers=auth(f"einmal_guess{n}")))

        started = anyio.current_time()
        async with anyio.create_task_group() as tg:
            for n in range(60):
                tg.start_soon(guess, n)
        took = anyio.current_time() - started
        valid_here = await client.get("/subscribers", headers=auth(valid))
        wrong_after = await client.get("/subscribers", headers=auth("einmal_guess_after"))
        no_key = await client.get("/subscribers")
        async with from_address("127.0.9.1", base) as elsewhere:
            valid_elsewhere = await elsewhere.get("/subscribers", headers=auth(valid))
        async with http_server(dsn) as other_node, from_address("127.0.0.77", other_node) as neighbour:
            # another address of the network, on a node that has not seen it refused: the count says it is over
            valid_neighbour = await neighbour.get("/subscribers", headers=auth(valid))
            wrong_neighbour = await neighbour.get("/subscribers", headers=auth("einmal_guess_neighbour"))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [401] * Guesses.FREE + [429] * (60 - Guesses.FREE), statuses  # before: 60 x 401
    retry_after = {int(a.headers["retry-after"]) for a in answers if a.status_code == 429}
    assert retry_after and all(1 <= s <= Guesses.WINDOW_SECONDS for s in retry_after)
    assert took < 5  # refused, not slowed
    # a valid key is never refused for its network's failures (before: 429 for the rest of the window)
    assert valid_here.status_code == 200 and valid_neighbour.status_code == 200
    assert wrong_after.status_code == 429 and wrong_neighbour.status_code == 429
    assert no_key.status_code == 401  # no key guesses nothing: not refused, not counted
    assert valid_elsewhere.status_code == 200
    hits = await conn.fetchval(
        "SELECT hits FROM einmal.client_counts WHERE kind = $1 AND client = '127.0.0.0/24'", Guesses.KIND
    )
    assert Guesses.FREE < hits <= 60


async def test_addresses_of_one_network_are_one_client_and_two_nodes_share_its_count(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await fresh_window(conn)
    statuses = []
    async with http_server(dsn) as first, http_server(dsn) as second:
        for n in range(Guesses.FREE):  # each from another address of 127.0.0.0/24, half through each node
            async with from_address(f"127.0.0.{10 + n}", first if n % 2 else second) as client:
                statuses.append((await client.get("/subscribers", headers=auth("einmal_guess"))).status_code)
        for base in (first, second):
            async with from_address("127.0.0.200", base) as client:
                statuses.append((await client.get("/subscribers", headers=auth("einmal_guess"))).status_code)
    assert statuses == [401] * Guesses.FREE + [429, 429], statuses  # before: 401 every time
