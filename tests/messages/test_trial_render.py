"""The trial render of a message's sources at POST /messages and PUT /message-templates, and the check of a
campaign's templates at POST /campaigns (docs/design.md#templates), hold no connection of the API's pool: a
render takes up to a tenth of a second, a connection is the database's, and a few accounts' renders must not
leave every other request waiting for one. A message's render runs in a worker thread, in the account's share
(service/mail/slots.py)."""

import asyncpg
import httpx
import pytest

from actors import node
from service.campaigns import fields
from service.mail import render
from service.messages import messages
from tests.messages.support import FROM, account_with_key
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

# within the budget, some milliseconds: long enough to be seen holding what it holds
COSTLY = "Hi {{ name }}{% for i in range(20000) %}{% endfor %}{{ attributes.order | default('') }}"


def pools_seen(monkeypatch: pytest.MonkeyPatch) -> list[asyncpg.Pool]:
    """The API's pools, as einmal serve makes them."""
    pools: list[asyncpg.Pool] = []
    make_pool = node.http_pool

    async def http_pool(*args, **kwargs) -> asyncpg.Pool:
        pools.append(await make_pool(*args, **kwargs))
        return pools[-1]

    monkeypatch.setattr(node, "http_pool", http_pool)
    return pools


async def test_the_trial_render_holds_no_connection_of_the_pool(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools = pools_seen(monkeypatch)
    held: list[int] = []  # connections of the API's pools taken, at each trial render
    compile_ = render.CampaignTemplate.compile

    def compile(*args, **kwargs):
        held.append(sum(pool.get_size() - pool.get_idle_size() for pool in pools))
        return compile_(*args, **kwargs)

    monkeypatch.setattr(render.CampaignTemplate, "compile", compile)
    _, key = await account_with_key(conn, dsn)
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        inline = {"to": "ann@example.org", "subject": "Order", "text": COSTLY, "from": FROM}
        assert (await client.post("/messages", json=inline)).status_code == 202
        made = await client.put("/message-templates/receipt", json={"subject": "Order", "text": COSTLY + "!"})
        assert made.status_code == 201, made.text
        vars(messages).get("_tried", {}).clear()  # as after a restart: a stored template is tried at its first message
        sent = await client.post("/messages", json={"to": "bob@example.org", "template": "receipt", "from": FROM})
        assert sent.status_code == 202, sent.text
        bad = await client.post("/messages", json={**inline, "text": "{% for i in range(99999) %}{{ i }}{% endfor %}"})
        assert bad.status_code == 422 and "more than 100,000 steps" in bad.json()["error"], bad.text
    assert pools and len(held) == 4, held
    assert held == [0, 0, 0, 0], f"connections of the pool held during a trial render: {held}"


async def test_the_check_of_a_new_campaigns_templates_holds_no_connection_of_the_pool(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools = pools_seen(monkeypatch)
    held: list[int] = []
    check = fields.check_templates

    def checked(*args) -> None:
        held.append(sum(pool.get_size() - pool.get_idle_size() for pool in pools))
        check(*args)

    monkeypatch.setattr(fields, "check_templates", checked)
    account_id, key = await account_with_key(conn, dsn)
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account_id)
    draft = {"name": "Spring", "subject": "Hello", "from": FROM, "text": COSTLY, "lists": ["news"]}
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        made = await client.post("/campaigns", json=draft)
        assert made.status_code == 201, made.text
        bad = await client.post("/campaigns", json={**draft, "text": "{% for i in range(99999) %}{{ i }}{% endfor %}"})
        assert bad.status_code == 422 and "more than 100,000 steps" in bad.json()["error"], bad.text
    assert pools and held == [0, 0], f"connections of the pool held during the check: {held}"


async def test_sources_a_route_tried_are_found_tried_by_the_others(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message sent from a template the API took a moment ago is not rendered again before it is queued:
    every route tries sources with the same section of the settings (service/api/deps.py Sections)."""
    compiled: list[str] = []
    compile_ = render.CampaignTemplate.compile

    def compile(campaign, *args, **kwargs):
        compiled.append(campaign["body_text"])
        return compile_(campaign, *args, **kwargs)

    monkeypatch.setattr(render.CampaignTemplate, "compile", compile)
    _, key = await account_with_key(conn, dsn)
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        made = await client.put(
            "/message-templates/note", json={"subject": "Note", "text": "Hi {{ name }}", "from": FROM}
        )
        assert made.status_code == 201, made.text
        sent = await client.post("/messages", json={"to": "bob@example.org", "template": "note"})
        assert sent.status_code == 202, sent.text
    assert compiled == ["Hi {{ name }}"], "tried again by POST /messages"
