import asyncpg
import pytest

from service.errors import Conflict, Invalid
from service.inbound import events as inbound

pytestmark = pytest.mark.anyio


async def account(conn: asyncpg.Connection) -> int:
    return await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")


async def test_an_event_takes_effect_once_however_often_it_arrives(conn: asyncpg.Connection) -> None:
    acme = await account(conn)
    first = await inbound.apply(conn, "hook:1", "unsubscribe", acme, "Ann@Example.com", {"ts": 1})
    again = await inbound.apply(conn, "hook:1", "unsubscribe", acme, "ann@example.com", {"ts": 1})
    assert (first, again) == (True, False)
    rows = await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in rows] == [("ann@example.com", "unsubscribe")]
    assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == 1


async def test_the_same_id_with_another_payload_is_refused_and_changes_nothing(conn: asyncpg.Connection) -> None:
    acme = await account(conn)
    await inbound.apply(conn, "hook:2", "bounce", acme, "a@example.com")
    with pytest.raises(Conflict, match="different payload"):
        await inbound.apply(conn, "hook:2", "bounce", acme, "b@example.com")
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 1


async def test_a_failed_effect_leaves_the_id_unclaimed(conn: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await inbound.apply(conn, "hook:3", "complaint", 999_999, "a@example.com")
    assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == 0


async def test_ids_must_be_namespaced(conn: asyncpg.Connection) -> None:
    acme = await account(conn)
    with pytest.raises(Invalid, match="namespaced"):
        await inbound.apply(conn, "12345", "bounce", acme, "a@example.com")
