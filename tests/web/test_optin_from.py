"""Double opt-in for an installation of several clients: each list may have its own confirmations' From
(`einmal lists form open LIST --from ADDRESS`, `"from"` in PUT /api/v1/lists/{name}/form), stored with the list
and judged by the From rule of its account when set and when sign-ups are opened; EINMAL_OPTIN_FROM is only the
default of the lists given none."""

import asyncpg
import httpx
import pytest

from tests.cli.test_campaign_commands import seed_account
from tests.conftest import einmal
from tests.support.optin import SECRET
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

ALPHA_FROM = "Alpha <news@news.alpha.example>"
ENV = {
    "EINMAL_OPTIN_FROM": ALPHA_FROM,
    "EINMAL_CONFIRM_URL": "http://127.0.0.1/confirm",
    "EINMAL_UNSUBSCRIBE_SECRET": SECRET,
}


async def two_clients(conn: asyncpg.Connection, dsn: str) -> None:
    """alpha owning news.alpha.example, beta owning mail.beta.example, each with a list 'weekly'."""
    for name, domain in (("alpha", "news.alpha.example"), ("beta", "mail.beta.example")):
        await seed_account(conn, name, lists=("weekly",))
        added = einmal("account", "domain", "add", "--account", name, domain, dsn=dsn)
        assert added.returncode == 0, added.stderr


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr


async def test_each_client_opens_sign_ups_with_its_own_confirmations_from(conn: asyncpg.Connection, dsn: str) -> None:
    await two_clients(conn, dsn)

    def form_open(account: str, *more: str):
        return einmal("lists", "form", "open", "weekly", "--account", account, *more, dsn=dsn, env=ENV)

    assert form_open("alpha").returncode == 0, "alpha sends as the installation's default"
    said = one_line_error(form_open("beta"))
    assert "add the domain first" not in said, "beta may not be told to take alpha's domain"
    assert "--from" in said and "EINMAL_OPTIN_FROM" in said
    said = one_line_error(form_open("beta", "--from", "Beta <hello@news.alpha.example>"))
    assert "sends only from its domains (mail.beta.example)" in said
    assert "not an address" in one_line_error(form_open("beta", "--from", "Beta <not an address>"))
    opened = form_open("beta", "--from", "Beta <hello@mail.beta.example>")
    assert opened.returncode == 0, opened.stderr
    assert "Beta <hello@mail.beta.example>" in opened.stderr
    stored = await conn.fetch(
        "SELECT a.name, l.optin_from, l.form_open FROM einmal.lists l JOIN einmal.accounts a ON a.id = l.account_id "
        "ORDER BY a.name"
    )
    assert [tuple(r) for r in stored] == [
        ("alpha", None, True),
        ("beta", "Beta <hello@mail.beta.example>", True),
    ]
    again = form_open("beta")
    assert again.returncode == 0, "opened again without --from: the list's own From stays"
    assert await conn.fetchval("SELECT optin_from FROM einmal.lists WHERE optin_from IS NOT NULL") == (
        "Beta <hello@mail.beta.example>"
    )


async def test_the_api_sets_a_list_s_confirmations_from_and_sign_ups_are_sent_from_it(
    conn: asyncpg.Connection, dsn: str
) -> None:
    from tests.support.web import http_server

    await two_clients(conn, dsn)
    made = einmal("account", "key", "create", "--account", "beta", dsn=dsn)
    key = made.stdout.strip()
    settings = {"optin_from": ALPHA_FROM, "confirm_url": "http://127.0.0.1/confirm"}
    async with http_server(dsn, SECRET, **settings) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as api:
        refused = await api.put("/lists/weekly/form", headers=auth(key), json={"open": True})
        assert refused.status_code == 422, refused.text
        assert "add the domain first" not in refused.json()["error"]
        stolen = await api.put(
            "/lists/weekly/form", headers=auth(key), json={"open": True, "from": "x@news.alpha.example"}
        )
        assert stolen.status_code == 422 and "(mail.beta.example)" in stolen.json()["error"]
        opened = await api.put(
            "/lists/weekly/form", headers=auth(key), json={"open": True, "from": "Beta <hello@mail.beta.example>"}
        )
        assert opened.status_code == 200, opened.text
        assert opened.json()["from"] == "Beta <hello@mail.beta.example>"
        shown = await api.get("/lists/weekly/form", headers=auth(key))
        assert shown.json()["from"] == "Beta <hello@mail.beta.example>"
        signed = await api.post("/subscribe", headers=auth(key), json={"list": "weekly", "email": "new@example.org"})
        assert signed.status_code == 202, signed.text
        froms = await conn.fetch("SELECT from_address FROM einmal.campaigns WHERE kind = 'confirmation'")
        assert [r["from_address"] for r in froms] == ["Beta <hello@mail.beta.example>"]
        # a new From for the list: its confirmations from then on go out from it
        changed = await api.put(
            "/lists/weekly/form", headers=auth(key), json={"open": True, "from": "Beta News <news@mail.beta.example>"}
        )
        assert changed.status_code == 200, changed.text
        froms = await conn.fetch("SELECT from_address FROM einmal.campaigns WHERE kind = 'confirmation'")
        assert [r["from_address"] for r in froms] == ["Beta News <news@mail.beta.example>"]
    # an installation without EINMAL_OPTIN_FROM: the list's own From is enough for its form and the API
    url = opened.json()["url"]
    async with http_server(dsn, SECRET, confirm_url="http://127.0.0.1/confirm") as base:
        async with httpx.AsyncClient(base_url=base) as web:
            path = url.removeprefix("http://127.0.0.1")
            assert (await web.get(path)).status_code == 200
            posted = await web.post(path, data={"email": "form@example.org"})
            assert posted.status_code == 200, posted.text
        async with httpx.AsyncClient(base_url=f"{base}/api/v1") as api:
            cleared = await api.put("/lists/weekly/form", headers=auth(key), json={"open": True, "from": ""})
            assert cleared.status_code == 200 and cleared.json()["from"] is None
            signed = await api.post("/subscribe", headers=auth(key), json={"list": "weekly", "email": "b@example.org"})
            assert signed.status_code == 409 and "EINMAL_OPTIN_FROM" in signed.json()["error"], signed.text
    sent_to = await conn.fetch(
        "SELECT s.email FROM einmal.sends s JOIN einmal.campaigns c ON c.id = s.campaign_id "
        "WHERE c.kind = 'confirmation' ORDER BY s.email"
    )
    assert [r["email"] for r in sent_to] == ["form@example.org", "new@example.org"]
