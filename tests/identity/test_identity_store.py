"""An account's identity as stored (service/accounts/identity.py): every part read back, in a stable order,
and an account that set nothing falls back to the environment."""

import asyncpg
import pytest

from service.accounts import identity
from service.errors import NotFound

pytestmark = pytest.mark.anyio


async def test_an_account_that_set_nothing_has_an_empty_identity(conn: asyncpg.Connection) -> None:
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('plain') RETURNING id")
    assert await identity.of_account(conn, account_id=account_id) == identity.Identity(account_id=account_id)


async def test_domains_relays_and_return_path_are_read_back(conn: asyncpg.Connection) -> None:
    account_id = await conn.fetchval(
        "INSERT INTO einmal.accounts (name, return_path, return_path_secret, unsubscribe_mailto)"
        " VALUES ('acme', 'bounces@mail.acme.example', 'a-secret-long-enough', 'unsub@acme.example') RETURNING id"
    )
    await conn.execute(
        "INSERT INTO einmal.account_domains (account_id, domain, selectors, keys) VALUES"
        " ($1, 'news.acme.example', '{s1,s2}', '{PEM1,PEM2}'), ($1, 'acme.example', '{}', '{}')",
        account_id,
    )
    relay = await conn.fetchval(
        "INSERT INTO einmal.relays (name, url, rate, quota_day) VALUES"
        " ('ses', 'smtp://u:p@127.0.0.1:2525', 14, 50000) RETURNING id"
    )
    await conn.execute(
        "INSERT INTO einmal.account_relays (account_id, relay_id, weight) VALUES ($1, $2, 3)", account_id, relay
    )
    found = await identity.of_account(conn, account_id=account_id)
    assert found.domains == (
        identity.DomainKeys("acme.example"),
        identity.DomainKeys("news.acme.example", ("s1", "s2"), ("PEM1", "PEM2")),
    )
    assert found.relays == (identity.AccountRelay("ses", "smtp://u:p@127.0.0.1:2525", 3, 14.0, None, 50000),)
    assert found.return_path == "bounces@mail.acme.example"
    assert found.return_path_secret is not None
    assert found.return_path_secret.get_secret_value() == "a-secret-long-enough"
    assert "a-secret-long-enough" not in repr(found) and "PEM1" not in repr(found) and "u:p@" not in repr(found)
    assert found.unsubscribe_mailto == "unsub@acme.example"


async def test_no_such_account_is_not_found(conn: asyncpg.Connection) -> None:
    with pytest.raises(NotFound):
        await identity.of_account(conn, account_id=987654321)
