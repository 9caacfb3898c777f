"""`einmal suppress` and service.subscribers.suppressions.suppress."""

import anyio
import asyncpg
import pytest

from service.subscribers.suppressions import suppress
from tests.conftest import einmal

pytestmark = pytest.mark.anyio


async def make_account(conn: asyncpg.Connection, name: str = "acme") -> int:
    return await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)


async def suppressed(conn: asyncpg.Connection) -> set[tuple[int, str, str]]:
    rows = await conn.fetch("SELECT account_id, email_lower, reason FROM einmal.suppressions")
    return {(r["account_id"], r["email_lower"], r["reason"]) for r in rows}


async def test_suppress_is_idempotent_and_stores_lower_case(dsn: str, conn: asyncpg.Connection) -> None:
    account_id = await make_account(conn)
    first = einmal(
        "suppress",
        "--account",
        "acme",
        "Alice@Example.com",
        "alice@example.com",
        "bob@example.com",
        "--reason",
        "complaint",
        dsn=dsn,
    )
    assert (first.returncode, first.stdout, first.stderr) == (0, "suppressed 2, already suppressed 0\n", "")
    second = einmal("suppress", "--account", "acme", "ALICE@example.com", "carol@example.com", dsn=dsn)
    assert (second.returncode, second.stdout) == (0, "suppressed 1, already suppressed 1\n")
    assert await suppressed(conn) == {
        (account_id, "alice@example.com", "complaint"),
        (account_id, "bob@example.com", "complaint"),
        (account_id, "carol@example.com", "manual"),
    }


async def test_suppress_notifies_account_and_lower_cased_address(dsn: str, conn: asyncpg.Connection) -> None:
    account_id = await make_account(conn)
    received: list[str] = []
    arrived = anyio.Event()

    def on_notify(_conn, _pid, _channel, payload: str) -> None:
        received.append(payload)
        arrived.set()

    await conn.add_listener("einmal_suppression", on_notify)
    result = await anyio.to_thread.run_sync(
        lambda: einmal("suppress", "--account", "acme", "Dora@Example.com", dsn=dsn)
    )
    assert result.returncode == 0, result.stderr
    with anyio.fail_after(10):
        await arrived.wait()
    assert received == [f"{account_id}:dora@example.com"]


async def test_unknown_account_is_refused(dsn: str, conn: asyncpg.Connection) -> None:
    await make_account(conn)
    result = einmal("suppress", "--account", "acne", "a@example.com", dsn=dsn)
    assert (result.returncode, result.stderr) == (1, "einmal: no account named 'acne'\n")
    assert await conn.fetchval("SELECT count(*) FROM einmal.accounts") == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["ok@example.com", "not-an-address"], "einmal: invalid address 'not-an-address': "),
        (["ok@example.com", "x@example.com\r\nBcc: y@example.com"], "einmal: invalid address "),
        (["ok@example.com", "--reason", ""], "einmal: invalid reason"),
    ],
)
async def test_bad_input_is_one_line_and_suppresses_nothing(
    dsn: str, conn: asyncpg.Connection, arguments: list[str], message: str
) -> None:
    await make_account(conn)
    result = einmal("suppress", "--account", "acme", *arguments, dsn=dsn)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(message), result.stderr
    assert await suppressed(conn) == set()


async def test_suppress_function_returns_how_many_were_new(conn: asyncpg.Connection) -> None:
    account_id = await make_account(conn)
    assert await suppress(conn, account_id, ["A@example.com", "b@example.com"], "bounce") == 2
    assert await suppress(conn, account_id, ["a@EXAMPLE.com", "c@example.com"], "bounce") == 1
    assert await suppress(conn, account_id, [], "bounce") == 0
    emails = {email for _, email, _ in await suppressed(conn)}
    assert emails == {"a@example.com", "b@example.com", "c@example.com"}
