"""The From rule (service/mail/from_rule.py) at every place a From enters, through the real command line and the
real API: an account with From domains is refused (exit 2 / 422, one line naming its domains) a campaign, a
draft's change, a test message, an approval and double opt-in's confirmations from another domain; an
account with none takes any From, as before."""

import subprocess

import asyncpg
import httpx
import pytest

from tests.cli.test_campaign_commands import seed_account
from tests.conftest import einmal
from tests.support.optin import FORM, SECRET, SETTINGS, account_with_list
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

OPTIN_ENV = {"EINMAL_OPTIN_FROM": SETTINGS["optin_from"], "EINMAL_CONFIRM_URL": "http://127.0.0.1/confirm"}


def create(dsn: str, account: str, from_address: str) -> subprocess.CompletedProcess:
    return einmal(
        "campaign", "create", "--account", account, "--name", "N", "--subject", "S", "--from", from_address,
        "--text", "Hi {{ unsubscribe_url }}", dsn=dsn,
    )  # fmt: skip


def refused(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr


def add_domain(dsn: str, account: str, domain: str) -> None:
    assert einmal("account", "domain", "add", "--account", account, domain, dsn=dsn).returncode == 0


async def test_the_command_line_refuses_a_from_outside_the_account_s_domains(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account_id = await seed_account(conn)
    await seed_account(conn, "plain")
    made = create(dsn, "acme", "x@anything.example")
    assert made.returncode == 0, "no domains: any From, as before"
    before = int(made.stdout)
    add_domain(dsn, "acme", "news.acme.example")
    add_domain(dsn, "acme", "acme.example")
    said = refused(create(dsn, "acme", "News <news@elsewhere.example>"))
    assert said == (
        "einmal: From 'News <news@elsewhere.example>': the account sends only from its domains "
        "(acme.example, news.acme.example): add the domain first (`einmal account domain add`)\n"
    )
    assert "acme.example, news.acme.example" in refused(create(dsn, "acme", "x@deep.news.acme.example"))
    assert create(dsn, "acme", "News <News@NEWS.Acme.Example>").returncode == 0, "the domain in any case"
    assert create(dsn, "plain", "x@elsewhere.example").returncode == 0, "another account is not bound"
    # a draft made before the account had domains: neither approved nor tested from a domain it is not given
    subscriber = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, 'a@example.org', "
        "'a@example.org') RETURNING id",
        account_id,
    )
    await conn.execute(
        "INSERT INTO einmal.list_members SELECT id, $1 FROM einmal.lists WHERE name = 'default' AND account_id = $2",
        subscriber,
        account_id,
    )
    said = refused(einmal("campaign", "test", str(before), "--to", "me@example.org", dsn=dsn))
    assert "From 'x@anything.example': the account sends only from" in said
    said = refused(einmal("campaign", "approve", str(before), dsn=dsn))
    assert said.startswith(f"einmal: campaign {before} not approved: its From 'x@anything.example'")
    # a domain removed after a campaign was made from it
    allowed = int(create(dsn, "acme", "news@acme.example").stdout)
    assert einmal("account", "domain", "remove", "--account", "acme", "acme.example", dsn=dsn).returncode == 0
    assert "(news.acme.example)" in refused(einmal("campaign", "approve", str(allowed), dsn=dsn))
    statuses = await conn.fetch("SELECT DISTINCT status FROM einmal.campaigns WHERE account_id = $1", account_id)
    assert [r["status"] for r in statuses] == ["draft"]


async def test_opening_sign_ups_is_refused_when_the_confirmations_from_is_not_the_account_s(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await account_with_list(conn, dsn, open_form=False)
    env = {**OPTIN_ENV, "EINMAL_UNSUBSCRIBE_SECRET": SECRET}
    add_domain(dsn, "acme", "acme.example")
    said = refused(einmal("lists", "form", "open", "news", "--account", "acme", dsn=dsn, env=env))
    assert "the confirmations' From (EINMAL_OPTIN_FROM) 'Acme News <news@example.com>'" in said
    assert "(acme.example)" in said
    assert not await conn.fetchval("SELECT form_open FROM einmal.lists WHERE name = 'news'")
    add_domain(dsn, "acme", "example.com")
    opened = einmal("lists", "form", "open", "news", "--account", "acme", dsn=dsn, env=env)
    assert opened.returncode == 0, opened.stderr


async def test_the_api_refuses_a_from_outside_the_account_s_domains_everywhere(
    conn: asyncpg.Connection, dsn: str
) -> None:
    _, _, key = await account_with_list(conn, dsn, members=["member@example.org"])
    await conn.execute("INSERT INTO einmal.lists (account_id, name) SELECT id, 'default' FROM einmal.accounts")
    draft = {"name": "N", "subject": "S", "text": "Hi {{ unsubscribe_url }}", "lists": ["news"]}
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as api:
        early = await api.post("/campaigns", headers=auth(key), json={**draft, "from": "a@example.com"})
        assert early.status_code == 201, early.text
        early_id = early.json()["id"]
        granted = einmal("account", "domain", "add", "--account", "acme", "acme.example", dsn=dsn)
        assert granted.returncode == 0, granted.stderr
        late = await api.post("/campaigns", headers=auth(key), json={**draft, "from": "a@example.com"})
        assert late.status_code == 422
        assert late.json() == {
            "error": "From 'a@example.com': the account sends only from its domains (acme.example): "
            "add the domain first (`einmal account domain add`)"
        }
        good = await api.post("/campaigns", headers=auth(key), json={**draft, "from": "Acme <a@acme.example>"})
        assert good.status_code == 201, good.text
        changed = await api.patch(f"/campaigns/{good.json()['id']}", headers=auth(key), json={"from": "a@example.com"})
        assert changed.status_code == 422 and "(acme.example)" in changed.json()["error"]
        test = await api.post(f"/campaigns/{early_id}/test", headers=auth(key), json={"to": "me@example.org"})
        assert test.status_code == 422 and "(acme.example)" in test.json()["error"]
        approve = await api.post(f"/campaigns/{early_id}/approve", headers=auth(key), json={})
        assert approve.status_code == 422, approve.text
        assert approve.json()["error"].startswith(f"campaign {early_id} not approved: its From 'a@example.com'")
        # double opt-in: the confirmations' From is example.com's, which the account is not given
        opening = await api.put("/lists/news/form", headers=auth(key), json={"open": True})
        assert opening.status_code == 422 and "EINMAL_OPTIN_FROM" in opening.json()["error"]
        signed = await api.post("/subscribe", headers=auth(key), json={"list": "news", "email": "new@example.org"})
        assert signed.status_code == 422 and "(acme.example)" in signed.json()["error"]
        async with httpx.AsyncClient(base_url=base) as web:
            assert (await web.post(FORM, data={"email": "new@example.org"})).status_code == 422
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE kind = 'confirmation'") == 0
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", early_id) == "draft"
    assert await conn.fetchval("SELECT from_address FROM einmal.campaigns WHERE id = $1", good.json()["id"]) == (
        "Acme <a@acme.example>"
    )


async def test_einmal_from_domains_binds_the_accounts_given_none(conn: asyncpg.Connection, dsn: str) -> None:
    """An installation of many accounts sets EINMAL_FROM_DOMAINS: an account it gave no domain of its own sends
    from those only; one given domains, from its own only."""
    await seed_account(conn)
    await seed_account(conn, "plain")
    add_domain(dsn, "acme", "acme.example")
    default = {"EINMAL_FROM_DOMAINS": "Mail.Example.Net, example.org"}
    said = refused(einmal(*CREATE, "--account", "plain", "--from", "alerts@bank.example", dsn=dsn, env=default))
    assert "sends only from its domains (mail.example.net, example.org)" in said
    assert einmal(*CREATE, "--account", "plain", "--from", "n@example.org", dsn=dsn, env=default).returncode == 0
    own = einmal(*CREATE, "--account", "acme", "--from", "n@example.org", dsn=dsn, env=default)
    assert "sends only from its domains (acme.example)" in refused(own), "its own domains, not the default"
    bad = einmal(*CREATE, "--account", "plain", "--from", "n@example.org", dsn=dsn, env={"EINMAL_FROM_DOMAINS": "a@b"})
    assert bad.returncode == 2 and "EINMAL_FROM_DOMAINS" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


CREATE = ("campaign", "create", "--name", "N", "--subject", "S", "--text", "Hi {{ unsubscribe_url }}")
