"""Rough edges of the command line an operator of several clients meets: an inline HTML body, an account made
before its first import (so that its From domains come first), and `--account` in every command."""

import asyncpg
import pytest

from tests.cli.test_campaign_commands import seed_account
from tests.conftest import einmal

pytestmark = pytest.mark.anyio


async def test_campaign_create_takes_an_inline_html_body_beside_html_file(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    made = einmal(
        "campaign", "create", "--account", "acme", "--name", "N", "--subject", "S", "--from", "a@example.org",
        "--text", "Hi {{ unsubscribe_url }}", "--html", "<p>Hi {{ name }}</p>", dsn=dsn,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    html = await conn.fetchval("SELECT body_html FROM einmal.campaigns WHERE id = $1", int(made.stdout))
    assert html == "<p>Hi {{ name }}</p>"
    both = einmal(
        "campaign", "create", "--account", "acme", "--name", "N", "--subject", "S", "--from", "a@example.org",
        "--text", "Hi", "--html", "<p>x</p>", "--html-file", "x.html", dsn=dsn,
    )  # fmt: skip
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


async def test_accounts_create_makes_an_account_whose_domain_comes_before_its_first_import(
    conn: asyncpg.Connection, dsn: str
) -> None:
    made = einmal("accounts", "create", "--account", "beta", dsn=dsn)
    assert made.returncode == 0, made.stderr
    assert made.stdout == "account 'beta' created\n"
    assert await conn.fetchval("SELECT count(*) FROM einmal.accounts WHERE name = 'beta'") == 1
    again = einmal("accounts", "create", "--account", "beta", dsn=dsn)
    assert again.returncode == 1 and again.stderr == "einmal: account 'beta' exists already\n"
    added = einmal("account", "domain", "add", "--account", "beta", "mail.beta.example", dsn=dsn)
    assert added.returncode == 0, added.stderr
    bad = einmal("accounts", "create", "--account", " ", dsn=dsn)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


async def test_accounts_set_takes_the_account_as_every_other_command_does(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    done = einmal("accounts", "set", "--account", "acme", "--display-name", "Acme", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert await conn.fetchval("SELECT display_name FROM einmal.accounts WHERE name = 'acme'") == "Acme"
    old = einmal("accounts", "set", "acme", "--contact", "help@example.org", dsn=dsn)
    assert old.returncode == 0, "the name as before, positionally, still works"
    neither = einmal("accounts", "set", "--display-name", "X", dsn=dsn)
    assert neither.returncode == 2 and "--account" in neither.stderr


async def test_campaign_create_without_a_list_says_it_goes_to_default(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn, lists=("default", "news"))
    made = einmal(
        "campaign", "create", "--account", "acme", "--name", "N", "--subject", "S", "--from", "a@example.org",
        "--text", "Hi {{ unsubscribe_url }}", dsn=dsn,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stderr == "einmal: no --list given: the campaign goes to the list 'default'\n"
    named = einmal(
        "campaign", "create", "--account", "acme", "--name", "N", "--subject", "S", "--from", "a@example.org",
        "--text", "Hi {{ unsubscribe_url }}", "--list", "news", dsn=dsn,
    )  # fmt: skip
    assert named.returncode == 0 and named.stderr == ""


def test_approve_force_help_says_it_overrides_the_doctor_too() -> None:
    done = einmal("campaign", "approve", "--help")
    assert done.returncode == 0, done.stderr
    force = " ".join(done.stdout.split("--force", 2)[2].split())  # the option's help, its lines joined
    assert "trial render" in force and "`einmal doctor` finds a check of its From domain failing" in force, force
