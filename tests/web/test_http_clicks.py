"""Click tracking over real HTTP (einmal serve on loopback) against a real PostgreSQL: a tracked message's links
redirect to the template's URLs and each click is written once, tagged a person's or a machine's; an altered
link never leads anywhere; a locked clicks table holds up no answer; erasure and webhooks."""

import email
import json
import re
import time
from email.message import Message
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from service import db
from service.mail import clicks, unsubscribe
from service.mail.render import CampaignTemplate
from service.settings import Settings
from service.subscribers import erasure
from service.web.clicks import BURST_SECONDS, REPEAT_SECONDS
from tests.conftest import einmal
from tests.support.web import SECRET, http_server, subscriber, webhook_endpoint
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

HTML = (
    '<!doctype html><html><body><p><a href="https://example.org/news?a=1&amp;b=2">news</a> and '
    '<a href="https://shop.example.org/">shop</a></p></body></html>'
)
TEXT = "News: https://example.org/news?a=1&b=2\nShop: https://shop.example.org/\n"
ORIGINALS = ["https://example.org/news?a=1&b=2", "https://shop.example.org/"]


async def tracked(
    conn: asyncpg.Connection, *, track: bool = True, sent_ago: float = 3600.0, account: str = "acme"
) -> tuple[int, int, int]:
    """(account, campaign, subscriber) of a campaign of `account` with two links (tracked unless `track` is false)
    whose message went to the subscriber `sent_ago` seconds ago."""
    ids = await subscriber(conn, account=account)
    await conn.execute(
        "UPDATE einmal.campaigns SET body_text = $2, body_html = $3, track_clicks = $4 WHERE id = $1",
        ids[1],
        TEXT,
        HTML,
        track,
    )
    await conn.execute(
        """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                  sent_at)
        SELECT $1, $2, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id, 'sent',
               now() - make_interval(secs => $4)
        FROM einmal.subscribers WHERE id = $3""",
        ids[1],
        ids[0],
        ids[2],
        sent_ago,
    )
    return ids


def parts_of(raw: bytes) -> dict[str, str]:
    """A message's parts by content type, decoded."""
    return {
        part.get_content_type(): part.get_payload(decode=True).decode()
        for part in email.message_from_bytes(raw).walk()
        if isinstance(part, Message) and not part.is_multipart()
    }


async def message(conn: asyncpg.Connection, ids: tuple[int, int, int], base: str) -> dict[str, str]:
    """The subscriber's message as rendered for a node of this surface: its parts by content type."""
    settings = Settings(unsubscribe_secret=SecretStr(SECRET), click_url=f"{base}/c")
    campaign = dict(await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=ids[1])))
    return parts_of(CampaignTemplate.compile(campaign, settings).render(ids[2], "ann@example.org", "Ann"))


async def message_links(conn: asyncpg.Connection, ids: tuple[int, int, int], base: str) -> tuple[list[str], str]:
    """The links of the HTML body of the subscriber's message as rendered for a node of this surface, and its
    text body."""
    parts = await message(conn, ids, base)
    return re.findall(r'href="([^"]*)"', parts["text/html"]), parts["text/plain"]


async def recorded(conn: asyncpg.Connection, count: int) -> list[asyncpg.Record]:
    """The clicks once there are `count` of them (the buffer is written a moment after the answers)."""
    with anyio.fail_after(15):
        while True:
            rows = await conn.fetch("SELECT link, url, tag, reasons FROM einmal.clicks ORDER BY link, at")
            if len(rows) >= count:
                return rows
            await anyio.sleep(0.05)


async def test_a_link_redirects_to_the_templates_url_and_one_click_is_written_however_often_asked(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await tracked(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        links, text = await message_links(conn, ids, base)
        _hidden, news, shop = links  # the hidden link first, then the template's own
        assert [link.rpartition("/c/")[2].split(".")[3] for link in links] == ["0", "1", "2"]
        assert all(link.startswith(f"{base}/c/{ids[0]}.{ids[1]}.{ids[2]}.") for link in links)
        assert news in text and shop in text  # the text body's links are the same links
        answers = [await client.get(news) for _ in range(3)]  # a double click, a retry
        assert [a.status_code for a in answers] == [302] * 3
        assert answers[0].headers["location"] == ORIGINALS[0]
        await recorded(conn, 1)
        await anyio.sleep(BURST_SECONDS)  # a person reads between two links
        assert (await client.get(shop)).headers["location"] == ORIGINALS[1]
        rows = await recorded(conn, 2)
        await anyio.sleep(0.5)  # a repeat would have been written by now
    rows = await conn.fetch("SELECT link, url, tag, reasons FROM einmal.clicks ORDER BY link")
    assert [tuple(r) for r in rows] == [(1, ORIGINALS[0], "human", []), (2, ORIGINALS[1], "human", [])]


async def test_an_altered_or_unsigned_link_never_redirects(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn)
    account, campaign, sub = ids
    other = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('other') RETURNING id")

    def signed(a: int, c: int, s: int, link: int) -> str:
        text = f"click:{a}:{c}:{s}:{link}"
        return f"{a}.{c}.{s}.{link}." + unsubscribe.signature(SECRET.encode(), text).decode()

    good = signed(account, campaign, sub, 1)
    parts = good.split(".")
    altered = []
    for i in range(4):  # each id changed, its signature kept
        changed = list(parts)
        changed[i] = str(int(changed[i]) + 1)
        altered.append(".".join(changed))
    altered.append(".".join([*parts[:4], ("A" if parts[4][0] != "A" else "B") + parts[4][1:]]))
    altered.append(".".join([*parts[:4], parts[4][:-1]]))
    altered += [
        ".".join(parts[:4]),  # unsigned
        f"{account}.{campaign}.{sub}.1",
        "x",
        good + ".1",
        "0" + good,  # a leading zero
        signed(account, campaign, sub, 3),  # signed, but a link the template has not
        signed(other, campaign, sub, 1),  # signed, but another account's campaign
        good.replace(parts[4], "https%3A%2F%2Fevil.example"),
    ]
    altered.append(unsubscribe.make_token(SECRET, account, campaign, sub))  # an unsubscribe token is no link
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        for token in altered:
            answer = await client.get(f"{base}/c/{token}")
            assert answer.status_code == 404, token
            assert "location" not in answer.headers
        assert (await client.get(f"{base}/c/{good}?url=https://evil.example")).headers["location"] == ORIGINALS[0]
        await recorded(conn, 1)
    assert await conn.fetchval("SELECT count(*) FROM einmal.clicks") == 1


async def test_a_head_request_is_a_machines_click(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, _shop = (await message_links(conn, ids, base))[0]
        assert (await client.head(news)).status_code == 302
        rows = await recorded(conn, 1)
    assert [tuple(r) for r in rows] == [(1, ORIGINALS[0], "machine", ["head"])]


async def test_every_link_in_one_burst_is_a_machine(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, shop = (await message_links(conn, ids, base))[0]
        for link in (news, shop):
            assert (await client.get(link)).status_code == 302
        rows = await recorded(conn, 2)
        await anyio.sleep(0.5)
    rows = await conn.fetch("SELECT link, tag, reasons FROM einmal.clicks ORDER BY link")
    assert [tuple(r) for r in rows] == [(1, "machine", ["burst"]), (2, "machine", ["burst"])]


async def test_the_hidden_link_makes_the_recipients_burst_a_machines_afterwards(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await tracked(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        hidden, news, _shop = (await message_links(conn, ids, base))[0]
        assert (await client.get(news)).status_code == 302
        first = await recorded(conn, 1)
        assert [tuple(r) for r in first] == [(1, ORIGINALS[0], "human", [])]  # written before the evidence came
        answer = await client.get(hidden)
        assert answer.status_code == 204 and "location" not in answer.headers
        await recorded(conn, 2)
        await anyio.sleep(0.3)
    rows = await conn.fetch("SELECT link, tag, reasons FROM einmal.clicks ORDER BY link")
    assert [tuple(r) for r in rows] == [(0, "machine", ["hidden"]), (1, "machine", ["hidden"])]


async def test_a_click_soon_after_delivery_is_early(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn, sent_ago=1)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, _shop = (await message_links(conn, ids, base))[0]
        assert (await client.get(news)).status_code == 302
        rows = await recorded(conn, 1)
    assert [(r["tag"], r["reasons"]) for r in rows] == [("machine", ["early"])]


async def test_a_scanner_networks_click_is_a_machines(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    ids = await tracked(conn)
    networks = tmp_path / "scanners.txt"
    networks.write_text("# the tests' own\n127.0.0.0/8\n")
    async with http_server(dsn, click_scanners_file=str(networks)) as base, httpx.AsyncClient() as client:
        _hidden, news, _shop = (await message_links(conn, ids, base))[0]
        assert (await client.get(news)).status_code == 302
        rows = await recorded(conn, 1)
    assert [(r["tag"], r["reasons"]) for r in rows] == [("machine", ["scanner"])]


async def test_the_shipped_list_names_a_scanner_behind_a_trusted_proxy(conn: asyncpg.Connection, dsn: str) -> None:
    """Uvicorn takes X-Forwarded-For from the proxies it trusts (FORWARDED_ALLOW_IPS, loopback by default)."""
    ids = await tracked(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, shop = (await message_links(conn, ids, base))[0]
        outlook = await client.get(news, headers={"X-Forwarded-For": "40.92.10.20"})  # Exchange Online Protection
        await recorded(conn, 1)
        await anyio.sleep(BURST_SECONDS)
        person = await client.get(shop, headers={"X-Forwarded-For": "192.0.2.7"})
        assert (outlook.status_code, person.status_code) == (302, 302)
        rows = await recorded(conn, 2)
    assert [(r["link"], r["tag"], r["reasons"]) for r in rows] == [(1, "machine", ["scanner"]), (2, "human", [])]


@pytest.mark.serial
async def test_a_locked_clicks_table_holds_up_no_redirect(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, shop = (await message_links(conn, ids, base))[0]
        await client.get(shop)  # the campaign's links are read once, before the lock
        await recorded(conn, 1)
        locker = await asyncpg.connect(dsn)
        try:
            async with locker.transaction():
                await locker.execute("LOCK TABLE einmal.clicks IN ACCESS EXCLUSIVE MODE")
                started = time.monotonic()
                answer = await client.get(news)
                took = time.monotonic() - started
                assert answer.status_code == 302 and answer.headers["location"] == ORIGINALS[0]
                assert took < 1.0
                await anyio.sleep(1.0)  # the buffer waits for the lock meanwhile
        finally:
            await locker.close()
        rows = await recorded(conn, 2)
    assert [r["link"] for r in rows] == [1, 2]


async def test_erasure_removes_the_subscribers_clicks(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, _shop = (await message_links(conn, ids, base))[0]
        await client.get(news)
        await recorded(conn, 1)
    async with conn.transaction():
        await erasure.erase(conn, ids[0], "Ann.Example@Example.org")
    assert await conn.fetchval("SELECT count(*) FROM einmal.clicks") == 0


async def test_message_clicked_carries_the_tag_and_a_revision(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn)
    await webhook_endpoint(conn, ids[0], "message.clicked")
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        hidden, news, _shop = (await message_links(conn, ids, base))[0]
        await client.get(news)
        await recorded(conn, 1)
        await client.get(hidden)
        await recorded(conn, 2)
        await anyio.sleep(0.3)
    events = await conn.fetch("SELECT type, payload FROM einmal.webhook_events ORDER BY sequence")
    payloads = [json.loads(e["payload"]) for e in events]
    assert {e["type"] for e in events} == {"message.clicked"}
    shown = [(p["link"], p["tag"], p["reasons"], p["revised"]) for p in payloads]
    # the revision of the click written before comes in the order of the clicks' times, before the hidden one's
    assert shown == [(1, "human", [], False), (1, "machine", ["hidden"], True), (0, "machine", ["hidden"], False)]
    assert payloads[0]["url"] == ORIGINALS[0] and payloads[0]["email"] == "Ann.Example@Example.org"
    assert "ip" not in payloads[0] and "user_agent" not in payloads[0]


async def test_a_campaign_without_tracking_keeps_its_links(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn, track=False)
    links, text = await message_links(conn, ids, "http://127.0.0.1:9")
    assert links == ["https://example.org/news?a=1&amp;b=2", "https://shop.example.org/"]
    assert text.replace("\r\n", "\n") == TEXT


def test_a_tracked_campaign_needs_a_click_url() -> None:
    campaign = {
        "id": 1,
        "account_id": 1,
        "subject": "s",
        "from_address": "a@example.org",
        "body_text": TEXT,
        "body_html": None,
        "track_clicks": True,
    }
    with pytest.raises(Exception, match="EINMAL_CLICK_URL"):
        CampaignTemplate.compile(campaign, Settings(unsubscribe_secret=SecretStr(SECRET)))
    assert clicks.missing(Settings(unsubscribe_secret=SecretStr(SECRET), click_url="https://e.org/c")) == []


async def test_the_campaigns_clicks_by_the_api_and_the_command_line(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn)
    key = make_key(dsn, "acme")
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, shop = (await message_links(conn, ids, base))[0]
        await client.get(news)
        await recorded(conn, 1)
        await anyio.sleep(BURST_SECONDS)
        await client.head(shop)
        await recorded(conn, 2)
        answer = await client.get(f"{base}/api/v1/campaigns/{ids[1]}/clicks", headers=auth(key))
        other = await client.get(f"{base}/api/v1/campaigns/{ids[1] + 100}/clicks", headers=auth(key))
    assert other.status_code == 404
    found = answer.json()
    assert (found["tracked"], found["all"], found["people"], found["machines"]) == (
        True,
        {"total": 2, "unique": 1},
        {"total": 1, "unique": 1},
        {"total": 1, "unique": 1},
    )
    assert [
        (link["link"], link["url"], link["people"]["total"], link["machines"]["total"]) for link in found["links"]
    ] == [
        (1, ORIGINALS[0], 1, 0),
        (2, ORIGINALS[1], 0, 1),
    ]
    printed = einmal("campaign", "stats", str(ids[1]), "--json", dsn=dsn)
    assert printed.returncode == 0, printed.stderr
    shown = json.loads(printed.stdout)
    assert shown["opens"]["tracked"] is False and shown["opens"]["all"] == {"total": 0, "unique": 0}
    assert shown["clicks"] == {**found, "campaign_id": ids[1]} and shown["campaign_id"] == ids[1]
    assert {k: shown[k] for k in ("bounced", "complained", "unsubscribed")} == dict.fromkeys(
        ("bounced", "complained", "unsubscribed"), 0
    )
    table = einmal("campaign", "stats", str(ids[1]), dsn=dsn)
    assert "people" in table.stdout and ORIGINALS[1] in table.stdout
    missing = einmal("campaign", "stats", "999999", dsn=dsn)
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr


async def test_a_campaign_is_created_with_tracking_only_where_links_can_be_served(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account_id = (await subscriber(conn))[0]
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", account_id)
    key = make_key(dsn, "acme")
    draft = {
        "name": "n",
        "subject": "s",
        "from": "news@example.com",
        "text": "https://example.org/",
        "track_clicks": True,
    }
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        refused = await client.post(f"{base}/api/v1/campaigns", json=draft, headers=auth(key))
    async with http_server(dsn, click_url="https://example.org/c") as base, httpx.AsyncClient() as client:
        made = await client.post(f"{base}/api/v1/campaigns", json=draft, headers=auth(key))
        plain = await client.post(f"{base}/api/v1/campaigns", json={**draft, "track_clicks": False}, headers=auth(key))
    assert refused.status_code == 422 and "EINMAL_CLICK_URL" in refused.text
    assert (made.status_code, plain.status_code) == (201, 201), (made.text, plain.text)
    stored = await conn.fetch("SELECT id, track_clicks FROM einmal.campaigns WHERE name = 'n' ORDER BY id")
    assert [(r["id"], r["track_clicks"]) for r in stored] == [(made.json()["id"], True), (plain.json()["id"], False)]
    made_by_cli = "campaign create --account acme --name c --subject s --from news@example.com --track-clicks"
    env = {"EINMAL_CLICK_URL": "https://example.org/c"}
    cli = einmal(*made_by_cli.split(), "--text", "https://example.org/", dsn=dsn, env=env)
    assert cli.returncode == 0, cli.stderr
    assert await conn.fetchval("SELECT track_clicks FROM einmal.campaigns WHERE id = $1", int(cli.stdout.split()[-1]))


async def test_a_drafts_links_are_read_anew_and_a_pruned_campaigns_still_lead_on(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await tracked(conn)
    await conn.execute("UPDATE einmal.campaigns SET status = 'draft' WHERE id = $1", ids[1])
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        _hidden, news, _shop = (await message_links(conn, ids, base))[0]
        assert (await client.get(news)).headers["location"] == ORIGINALS[0]
        await conn.execute(  # the draft changed: its first link is another
            "UPDATE einmal.campaigns SET body_text = 'https://example.org/other', body_html = NULL WHERE id = $1",
            ids[1],
        )
        assert (await client.get(news)).headers["location"] == "https://example.org/other"
        await recorded(conn, 1)
        await conn.execute("UPDATE einmal.campaigns SET status = 'sent', pruned_at = now() WHERE id = $1", ids[1])
        await anyio.sleep(REPEAT_SECONDS)
        assert (await client.get(news)).headers["location"] == "https://example.org/other"
        await anyio.sleep(1.0)  # written by now, were it written
    assert await conn.fetchval("SELECT count(*) FROM einmal.clicks") == 1
