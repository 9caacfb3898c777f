"""A wrong field is named as its surface names it: the API answers the JSON field and what is wrong with it
(`field`, `code`), the command line its option, for the same value refused by the same check."""

import asyncpg
import httpx
import pytest

from tests.conftest import einmal
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

DRAFT = {"name": "Spring", "subject": "Hi", "from": "news@example.com", "text": "Hi", "lists": ["news"]}


async def acme(conn: asyncpg.Connection) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account)


async def test_the_api_names_the_json_field_and_its_code_where_the_command_line_names_its_option(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await acme(conn)
    key = auth(make_key(dsn, "acme"))
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1", headers=key) as client:
        bad_from = await client.post("/campaigns", json={**DRAFT, "from": "not-an-address"})
        bad_list = await client.post("/campaigns", json={**DRAFT, "lists": [""]})
        bad_reply = await client.post("/campaigns", json={**DRAFT, "reply_to": "two\nlines"})
        bad_contact = await client.patch("/account", json={"contact": "nobody"})
        bad_selector = await client.post("/account/domains/news.example.com/dkim", json={"selector": "-s"})
    assert bad_from.status_code == 422, bad_from.text
    assert bad_from.json()["error"].startswith("from 'not-an-address' is not a valid address")
    assert (bad_from.json()["field"], bad_from.json()["code"]) == ("from", "from.not_an_address")
    assert bad_list.status_code == 422, bad_list.text
    assert bad_list.json() == {
        "error": "lists '': 1 to 200 printable characters",
        "code": "lists.name",
        "field": "lists",
    }
    assert bad_reply.json() == {
        "error": "reply_to must not contain line breaks",
        "code": "reply_to.line_break",
        "field": "reply_to",
    }
    assert (bad_contact.json()["field"], bad_contact.json()["code"]) == ("contact", "contact.not_an_address")
    assert bad_selector.status_code == 422, bad_selector.text
    assert bad_selector.json()["error"].startswith("selector '-s': letters, digits and '-'")
    assert bad_selector.json()["field"] == "selector"
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 0

    create = ("campaign", "create", "--account", "acme", "--name", "n", "--subject", "s", "--text", "t")
    cli_from = einmal(*create, "--from", "not-an-address", dsn=dsn)
    cli_list = einmal(*create, "--from", "news@example.com", "--list", "", dsn=dsn)
    cli_reply = einmal(*create, "--from", "news@example.com", "--reply-to", "two\nlines", dsn=dsn)
    cli_contact = einmal("account", "set", "acme", "--contact", "nobody", dsn=dsn)
    assert cli_from.returncode == 1 and cli_from.stderr.startswith("einmal: --from 'not-an-address' is not a valid")
    assert cli_list.returncode == 1 and cli_list.stderr == "einmal: --list '': 1 to 200 printable characters\n"
    assert cli_reply.stderr == "einmal: --reply-to must not contain line breaks\n"
    assert cli_contact.stderr.startswith("einmal: --contact 'nobody' is not a valid address"), cli_contact.stderr
