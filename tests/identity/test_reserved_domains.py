"""A From domain is one account's (service/mail/from_rule.py, migration 0120), through the real command line: a
domain given to one account, one under it or above it, is refused to another (also when both are given at
once); an account with no domains may not send from another's, whatever EINMAL_FROM_DOMAINS says; a display
name may carry no other sender's address; the rule folds case and the A-label spelling of a name for messages
and EINMAL_OPTIN_FROM alike."""

import anyio
import asyncpg
import pytest

from tests.cli.test_campaign_commands import seed_account
from tests.conftest import einmal
from tests.identity.test_from_rule import CREATE, add_domain, create, refused
from tests.support.optin import SECRET, account_with_list

pytestmark = pytest.mark.anyio


def add(dsn: str, account: str, domain: str):
    return einmal("account", "domain", "add", "--account", account, domain, dsn=dsn)


def template(dsn: str, account: str, from_address: str):
    return einmal(
        "message", "template", "add", "--account", account, "receipt", "--subject", "S", "--text", "Thanks.",
        "--from", from_address, dsn=dsn,
    )  # fmt: skip


async def test_a_domain_given_to_one_account_is_no_other_accounts(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    await seed_account(conn, "plain")
    add_domain(dsn, "acme", "acme.example")
    add_domain(dsn, "acme", "news.shop.example")
    for domain in ("acme.example", "ACME.Example.", "news.acme.example", "shop.example", "x.news.shop.example"):
        said = refused(add(dsn, "plain", domain))
        assert "is another account's, or above or under one of its domains" in said, said
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM einmal.account_domains d JOIN einmal.accounts a ON a.id = d.account_id"
            " WHERE a.name = 'plain'"
        )
        == 0
    )
    assert add(dsn, "acme", "acme.example").returncode == 0, "its own again: nothing changes"
    # an account given no domain may use any From, but not another account's domain or one under it
    for address in ("billing@acme.example", "Billing <billing@ACME.EXAMPLE>", "x@mail.news.acme.example"):
        said = refused(create(dsn, "plain", address))
        assert "acme.example is another account's domain" in said, said
    assert "news.shop.example is another account's" in refused(template(dsn, "plain", "a@news.shop.example"))
    assert create(dsn, "plain", "x@shop.example").returncode == 0, "a domain above another's is no one's"
    assert create(dsn, "plain", "x@elsewhere.example").returncode == 0
    # whatever EINMAL_FROM_DOMAINS says
    default = {"EINMAL_FROM_DOMAINS": "acme.example, example.org"}
    said = refused(einmal(*CREATE, "--account", "plain", "--from", "b@acme.example", dsn=dsn, env=default))
    assert "acme.example is another account's domain" in said
    assert einmal(*CREATE, "--account", "plain", "--from", "n@example.org", dsn=dsn, env=default).returncode == 0
    assert create(dsn, "acme", "billing@acme.example").returncode == 0, "its owner sends from it"


async def test_two_accounts_given_overlapping_domains_at_once_get_one(conn: asyncpg.Connection, dsn: str) -> None:
    alpha, beta = await seed_account(conn, "alpha"), await seed_account(conn, "beta")
    first, second = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        held = first.transaction()
        await held.start()
        await first.execute(
            "INSERT INTO einmal.account_domains (account_id, domain) VALUES ($1, 'acme.example')", alpha
        )
        waiting = second.execute(
            "INSERT INTO einmal.account_domains (account_id, domain) VALUES ($1, 'news.acme.example')", beta
        )
        async with anyio.create_task_group() as tg:
            outcome: list[BaseException | None] = []

            async def other() -> None:
                try:
                    await waiting
                    outcome.append(None)
                except asyncpg.UniqueViolationError as exc:
                    outcome.append(exc)

            tg.start_soon(other)
            await anyio.sleep(0.5)
            assert outcome == [], "the second waits for the first"
            await held.commit()
        assert isinstance(outcome[0], asyncpg.UniqueViolationError), outcome
    finally:
        await first.close()
        await second.close()
    rows = await conn.fetch("SELECT account_id, domain FROM einmal.account_domains")
    assert [tuple(r) for r in rows] == [(alpha, "acme.example")]


async def test_a_display_name_carries_no_other_senders_address(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    await seed_account(conn, "plain")
    add_domain(dsn, "acme", "acme.example")
    for address in (
        '"security@bank.example" <a@acme.example>',
        '"Security (security@Bank.Example)" <a@acme.example>',
        '"security\uff20bank.example" <a@acme.example>',  # a fullwidth at sign
    ):
        said = refused(create(dsn, "acme", address))
        assert "its name carries an address at bank.example, which is not the account's" in said, said
    said = refused(create(dsn, "plain", '"security@bank.example" <a@example.org>'))
    assert "carries an address at bank.example" in said
    assert "bank.example" in refused(template(dsn, "plain", '"security@bank.example" <a@example.org>'))
    assert create(dsn, "acme", '"help@ACME.example" <a@acme.example>').returncode == 0
    assert create(dsn, "plain", '"team@example.org" <a@example.org>').returncode == 0
    assert create(dsn, "plain", "Acme News <a@example.org>").returncode == 0


async def test_the_rule_folds_case_and_a_labels_for_messages_and_the_optin_from(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await account_with_list(conn, dsn, open_form=False)
    add_domain(dsn, "acme", "Bücher.Example")
    for address in ("Shop <shop@XN--BCHER-KVA.Example>", "shop@BÜCHER.example"):
        made = template(dsn, "acme", address)
        assert made.returncode == 0, (address, made.stderr)
        sent = einmal(
            "message", "send", "--account", "acme", "--to", "ann@example.org", "--template", "receipt",
            "--from", address, dsn=dsn,
        )  # fmt: skip
        assert sent.returncode == 0, (address, sent.stderr)
    assert "(bücher.example)" in refused(template(dsn, "acme", "shop@bucher.example"))
    for optin_from in ("News <news@XN--BCHER-KVA.example>", "news@Bücher.EXAMPLE"):
        env = {"EINMAL_OPTIN_FROM": optin_from, "EINMAL_CONFIRM_URL": "http://127.0.0.1/confirm",
               "EINMAL_UNSUBSCRIBE_SECRET": SECRET}  # fmt: skip
        opened = einmal("lists", "form", "open", "news", "--account", "acme", dsn=dsn, env=env)
        assert opened.returncode == 0, (optin_from, opened.stderr)
    env = {"EINMAL_OPTIN_FROM": "news@bucher.example", "EINMAL_CONFIRM_URL": "http://127.0.0.1/confirm",
           "EINMAL_UNSUBSCRIBE_SECRET": SECRET}  # fmt: skip
    assert "(bücher.example)" in refused(einmal("lists", "form", "open", "news", "--account", "acme", dsn=dsn, env=env))
