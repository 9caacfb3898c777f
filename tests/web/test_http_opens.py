"""Open tracking over real HTTP (einmal serve on loopback) against a real PostgreSQL: a tracked message's HTML
carries a signed pixel, its text nothing; the pixel answers at once, uncached, and each open is written once,
tagged a person's or a machine's (Apple's proxy from a 127.0.0.x address named in the proxies' list, its bare
user agent, HEAD, early, a scanner); a forged token gets the same pixel and records nothing; a locked opens
table holds up no answer; erasure, webhooks, stats."""

import json
import re
import time
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest

from service.mail import confirm, opens, unsubscribe
from service.subscribers import erasure
from service.web.opens import APPLE_AGENT, PIXEL, REPEAT_SECONDS
from tests.conftest import einmal
from tests.support.web import SECRET, http_server, subscriber, webhook_endpoint
from tests.web.test_api import auth, make_key
from tests.web.test_http_clicks import TEXT, message, tracked

pytestmark = pytest.mark.anyio

BROWSER = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)"


async def opened(
    conn: asyncpg.Connection, *, clicks: bool = False, sent_ago: float = 3600.0, account: str = "acme"
) -> tuple[int, int, int]:
    """(account, campaign, subscriber) of a campaign of `account` that tracks opens (and clicks with `clicks`),
    its message sent to the subscriber `sent_ago` seconds ago."""
    ids = await tracked(conn, track=clicks, sent_ago=sent_ago, account=account)
    await conn.execute("UPDATE einmal.campaigns SET track_opens = true WHERE id = $1", ids[1])
    return ids


async def pixel(conn: asyncpg.Connection, ids: tuple[int, int, int], base: str) -> str:
    (src,) = re.findall(r'<img src="([^"]*)"', (await message(conn, ids, base))["text/html"])
    return src


async def recorded(conn: asyncpg.Connection, count: int, settle: float = 0.5) -> list[tuple]:
    """(subscriber, tag, reasons) of the opens once there are `count`, and `settle` seconds later (the buffer is
    written a moment after the answers: a further write would have come by then)."""
    with anyio.fail_after(15):
        while await conn.fetchval("SELECT count(*) FROM einmal.opens") < count:
            await anyio.sleep(0.05)
    await anyio.sleep(settle)
    rows = await conn.fetch("SELECT subscriber_id, tag, reasons FROM einmal.opens ORDER BY at, id")
    return [tuple(r) for r in rows]


def is_pixel(answer: httpx.Response) -> bool:
    return (
        answer.status_code == 200
        and answer.content == PIXEL
        and answer.headers["content-type"] == "image/gif"
        and "no-store" in answer.headers["cache-control"]
        and "no-cache" in answer.headers["cache-control"]
    )


async def test_the_html_carries_a_signed_pixel_and_one_open_is_written_however_often_loaded(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await opened(conn)
    async with http_server(dsn) as base, httpx.AsyncClient(headers={"User-Agent": BROWSER}) as client:
        parts = await message(conn, ids, base)
        (src,) = re.findall(r'<img src="([^"]*)"', parts["text/html"])
        assert src.startswith(f"{base}/c/o/{ids[0]}.{ids[1]}.{ids[2]}.")
        assert re.search(r'<body><img src="[^"]+" width="1" height="1" alt=""', parts["text/html"])
        assert parts["text/plain"].replace("\r\n", "\n") == TEXT  # the text part as it was
        answers = [await client.get(src) for _ in range(3)]  # shown again, a retry
        assert all(is_pixel(a) for a in answers)
        assert await recorded(conn, 1) == [(ids[2], "human", [])]


async def test_no_pixel_unless_the_campaign_tracks_opens(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await tracked(conn, track=False)
    plain = await message(conn, ids, "http://127.0.0.1:9")
    assert "<img" not in plain["text/html"] and "/c/o/" not in plain["text/html"]
    await conn.execute("UPDATE einmal.campaigns SET track_opens = true, body_html = NULL WHERE id = $1", ids[1])
    text_only = await message(conn, ids, "http://127.0.0.1:9")  # nowhere to put a pixel: nothing changes
    assert list(text_only) == ["text/plain"] and "/c/o/" not in text_only["text/plain"]


async def test_with_clicks_too_the_pixel_and_the_links_are_both_signed(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await opened(conn, clicks=True)
    html = (await message(conn, ids, "http://127.0.0.1:9"))["text/html"]
    assert len(re.findall(r'src="http://127\.0\.0\.1:9/c/o/', html)) == 1
    assert len(re.findall(r'href="http://127\.0\.0\.1:9/c/\d', html)) == 3  # the hidden link and two


async def test_a_forged_or_altered_token_gets_the_pixel_and_records_nothing(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await opened(conn)
    good = opens.Signer(SECRET, "http://x/c").urls(*ids)[opens.FIELD].rpartition("/")[2]
    parts = good.split(".")
    forged = [
        ".".join(parts[:3]),  # unsigned
        ".".join([*parts[:2], str(ids[2] + 1), parts[3]]),  # another subscriber, the signature kept
        ".".join([*parts[:3], ("A" if parts[3][0] != "A" else "B") + parts[3][1:]]),
        confirm.Signer("another-key-of-32-characters-or-more", opens.PURPOSE).token(*ids),  # another key
        unsubscribe.make_token(SECRET, *ids),  # an unsubscribe token is no pixel's
        confirm.Signer(SECRET).token(*ids),  # nor a confirmation's
        "x",
        good + ".1",
    ]
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        for token in forged:
            answer = await client.get(f"{base}/c/o/{token}")
            assert is_pixel(answer), token
        metrics = (await client.get(f"{base}/metrics")).text
        await anyio.sleep(1.0)  # written by now, were it written
        assert await conn.fetchval("SELECT count(*) FROM einmal.opens") == 0
        assert is_pixel(await client.get(f"{base}/c/o/{good}"))
        assert await recorded(conn, 1) == [(ids[2], "human", [])]
    assert f'einmal_opens_total{{result="refused"}} {len(forged)}.0' in metrics


async def test_apples_proxy_by_its_network_or_its_bare_user_agent_is_a_machine(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    """The list is Apple's egress-ip-ranges.csv's form; 127.0.0.2 stands for one of its networks."""
    first = await opened(conn)
    second = await opened(conn, account="globex")
    third = await opened(conn, account="initech")
    proxies = tmp_path / "egress-ip-ranges.csv"
    proxies.write_text("127.0.0.2/32,US,US-CA,Cupertino,\n2a02:26f7:b3c0:4000::/64,US,US-CA,Cupertino,\n")
    apple = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with (
        http_server(dsn, open_proxies_file=str(proxies)) as base,
        httpx.AsyncClient(transport=apple, headers={"User-Agent": BROWSER}) as relayed,
        httpx.AsyncClient(headers={"User-Agent": BROWSER}) as person,
        httpx.AsyncClient(headers={"User-Agent": APPLE_AGENT}) as bare,
    ):
        assert is_pixel(await relayed.get(await pixel(conn, first, base)))
        await recorded(conn, 1, settle=0)
        assert is_pixel(await person.get(await pixel(conn, second, base)))
        await recorded(conn, 2, settle=0)
        assert is_pixel(await bare.get(await pixel(conn, third, base)))
        rows = await recorded(conn, 3)
    assert rows == [(first[2], "machine", ["apple"]), (second[2], "human", []), (third[2], "machine", ["apple"])]


async def test_head_early_and_scanner_opens_are_a_machines(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    head = await opened(conn)
    early = await opened(conn, account="globex", sent_ago=1)
    scanned = await opened(conn, account="initech")
    scanners = tmp_path / "scanners.txt"
    scanners.write_text("127.0.0.3/32\n")
    async with (
        http_server(dsn, click_scanners_file=str(scanners)) as base,
        httpx.AsyncClient(headers={"User-Agent": BROWSER}) as client,
        httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address="127.0.0.3")) as scanner,
    ):
        answer = await client.head(await pixel(conn, head, base))
        assert (answer.status_code, answer.headers["content-type"], answer.content) == (200, "image/gif", b"")
        await recorded(conn, 1, settle=0)
        assert is_pixel(await client.get(await pixel(conn, early, base)))
        await recorded(conn, 2, settle=0)
        assert is_pixel(await scanner.get(await pixel(conn, scanned, base)))
        rows = await recorded(conn, 3)
    assert rows == [
        (head[2], "machine", ["head"]),
        (early[2], "machine", ["early"]),
        (scanned[2], "machine", ["scanner"]),
    ]


@pytest.mark.serial
async def test_a_locked_opens_table_holds_up_no_pixel(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await opened(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        src = await pixel(conn, ids, base)
        locker = await asyncpg.connect(dsn)
        try:
            async with locker.transaction():
                await locker.execute("LOCK TABLE einmal.opens IN ACCESS EXCLUSIVE MODE")
                started = time.monotonic()
                answer = await client.get(src)
                took = time.monotonic() - started
                assert is_pixel(answer) and took < 1.0, took
                await anyio.sleep(1.0)  # the buffer waits for the lock meanwhile
                assert await locker.fetchval("SELECT count(*) FROM einmal.opens") == 0
        finally:
            await locker.close()
        assert await recorded(conn, 1) == [(ids[2], "human", [])]


async def test_erasure_removes_the_subscribers_opens_and_a_later_load_writes_none(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await opened(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        src = await pixel(conn, ids, base)
        await client.get(src)
        await recorded(conn, 1, settle=0)
        async with conn.transaction():
            await erasure.erase(conn, ids[0], "Ann.Example@Example.org")
        assert await conn.fetchval("SELECT count(*) FROM einmal.opens") == 0
        await anyio.sleep(REPEAT_SECONDS)  # a new open, were it written
        assert is_pixel(await client.get(src))
        await anyio.sleep(1.0)
    assert await conn.fetchval("SELECT count(*) FROM einmal.opens") == 0


async def test_message_opened_carries_the_tag(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await opened(conn)
    await webhook_endpoint(conn, ids[0], "message.opened")
    async with http_server(dsn) as base, httpx.AsyncClient(headers={"User-Agent": APPLE_AGENT}) as client:
        await client.get(await pixel(conn, ids, base))
        await recorded(conn, 1)
    events = await conn.fetch("SELECT type, payload FROM einmal.webhook_events ORDER BY sequence")
    assert [e["type"] for e in events] == ["message.opened"]
    payload = json.loads(events[0]["payload"])
    assert (payload["campaign_id"], payload["subscriber_id"], payload["tag"], payload["reasons"]) == (
        ids[1],
        ids[2],
        "machine",
        ["apple"],
    )
    assert payload["email"] == "Ann.Example@Example.org"
    assert not {"ip", "user_agent", "address"} & set(payload)


async def test_the_campaigns_opens_by_the_api_and_the_command_line(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await opened(conn)
    bob = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) "
        "VALUES ($1, 'bob@example.org', 'bob@example.org') RETURNING id",
        ids[0],
    )
    key = make_key(dsn, "acme")
    async with http_server(dsn) as base, httpx.AsyncClient(headers={"User-Agent": BROWSER}) as client:
        ann = await pixel(conn, ids, base)
        await client.get(ann)
        await client.head(await pixel(conn, (ids[0], ids[1], bob), base))
        await recorded(conn, 2, settle=0)
        await anyio.sleep(REPEAT_SECONDS)  # Ann reads it again later
        await client.get(ann)
        await recorded(conn, 3, settle=0)
        answer = await client.get(f"{base}/api/v1/campaigns/{ids[1]}/opens", headers=auth(key))
        other = await client.get(f"{base}/api/v1/campaigns/{ids[1] + 100}/opens", headers=auth(key))
    assert other.status_code == 404
    assert answer.json() == {
        "campaign_id": ids[1],
        "tracked": True,
        "all": {"total": 3, "unique": 2},
        "people": {"total": 2, "unique": 1},
        "machines": {"total": 1, "unique": 1},
    }
    printed = einmal("campaign", "stats", str(ids[1]), "--json", dsn=dsn)
    assert printed.returncode == 0 and json.loads(printed.stdout)["opens"] == answer.json()
    table = einmal("campaign", "stats", str(ids[1]), dsn=dsn).stdout
    assert "opens tracked" in table and re.search(r"people\s+2\s+1", table.split("opens tracked")[1])


async def test_opens_are_off_unless_the_campaign_or_its_account_turns_them_on(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account_id = (await subscriber(conn))[0]
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", account_id)
    key = make_key(dsn, "acme")
    draft = {"name": "n", "subject": "s", "from": "news@example.com", "text": "t", "html": "<p>h</p>"}
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        refused = await client.post(f"{base}/api/v1/campaigns", json={**draft, "track_opens": True}, headers=auth(key))
    async with http_server(dsn, click_url="https://example.org/c") as base, httpx.AsyncClient() as client:
        made = [
            await client.post(f"{base}/api/v1/campaigns", json={**draft, **extra}, headers=auth(key))
            for extra in ({}, {"track_opens": True})
        ]
        turned_on = einmal("accounts", "set", "acme", "--track-opens", "on", dsn=dsn)
        assert turned_on.returncode == 0 and "track opens: on" in turned_on.stdout, turned_on.stderr
        made += [
            await client.post(f"{base}/api/v1/campaigns", json={**draft, **extra}, headers=auth(key))
            for extra in ({}, {"track_opens": False})
        ]
    assert refused.status_code == 422 and "open tracking needs EINMAL_CLICK_URL" in refused.text
    assert [m.status_code for m in made] == [201] * 4, [m.text for m in made]
    stored = [
        await conn.fetchval("SELECT track_opens FROM einmal.campaigns WHERE id = $1", m.json()["id"]) for m in made
    ]
    assert stored == [False, True, True, False]
    env = {"EINMAL_CLICK_URL": "https://example.org/c"}
    for flag, expected in (("--no-track-opens", False), ("--track-opens", True)):
        cli = einmal(
            *"campaign create --account acme --name c --subject s --from news@example.com --text t".split(),
            flag,
            dsn=dsn,
            env=env,
        )
        assert cli.returncode == 0, cli.stderr
        made_id = int(cli.stdout.split()[-1])
        assert await conn.fetchval("SELECT track_opens FROM einmal.campaigns WHERE id = $1", made_id) is expected
