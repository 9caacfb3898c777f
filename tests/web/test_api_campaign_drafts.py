"""Drafts over the API (einmal serve on loopback, a real PostgreSQL, a real SMTP server): PATCH changes a
draft as `einmal campaign create` would have made it and nothing once approved; the preview is the
message `einmal campaign preview` renders; a test message goes out once per Idempotency-Key, marked, with
an unsubscribe link that unsubscribes nobody."""

import re
from urllib.parse import parse_qs, urlsplit

import asyncpg
import httpx
import pytest

from tests.conftest import einmal
from tests.support.web import SECRET, http_server, written
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

DRAFT = {
    "name": "Spring",
    "subject": "Hello {{ name }}",
    "from": "News <news@example.com>",
    "text": "Hi {{ name }} from {{ attributes.city | default('town') }}\n{{ unsubscribe_url }}\n",
    "lists": ["news"],
}
UNSUBSCRIBE_URL = "https://news.example.org/u"


@pytest.fixture
async def acme(conn: asyncpg.Connection, dsn: str) -> dict[str, str]:
    """Account acme with lists news and vip, subscribers ann (on news) and bob (on no list); its keys."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news'), ($1, 'vip')", account)
    for email, name in (("ann@example.org", "Ann"), ("Bob@Example.org", "Bob")):
        await conn.execute(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes) "
            'VALUES ($1, $2, lower($2), $3, \'{"city": "Köln"}\')',
            account,
            email,
            name,
        )
    await conn.execute(
        "INSERT INTO einmal.list_members SELECT l.id, s.id FROM einmal.lists l, einmal.subscribers s "
        "WHERE l.name = 'news' AND s.email = 'ann@example.org'"
    )
    return {"write": make_key(dsn, "acme"), "read": make_key(dsn, "acme", "--scope", "read")}


async def stored(conn: asyncpg.Connection, campaign_id: int) -> dict:
    row = await conn.fetchrow(
        "SELECT c.name, c.subject, c.from_address, c.body_text, c.body_html, c.reply_to, "
        "c.language, c.scheduled_for, c.status, array(SELECT l.name FROM einmal.lists l "
        "WHERE l.id = ANY (c.list_ids) ORDER BY l.name) AS lists "
        "FROM einmal.campaigns c WHERE c.id = $1",
        campaign_id,
    )
    return dict(row)


async def test_a_draft_is_changed_field_by_field_and_not_once_approved(
    conn: asyncpg.Connection, dsn: str, acme: dict[str, str]
) -> None:
    key = auth(acme["write"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = (
            await client.post(
                "/campaigns", headers=key, json={**DRAFT, "html": "<p>{{ name }}</p>", "reply_to": "help@example.com"}
            )
        ).json()
        url = f"/campaigns/{made['id']}"
        changed = await client.patch(
            url,
            headers=key,
            json={
                "subject": "Spring is here, {{ name }}",
                "lists": ["news", "vip"],
                "html": None,
                "at": "2099-03-01T09:00:00+01:00",
                "reply_to": None,
                "language": "de",
            },
        )
        assert changed.status_code == 200, changed.text
        assert (changed.json()["subject"], changed.json()["scheduled_for"]) == (
            "Spring is here, {{ name }}",
            "2099-03-01T08:00:00Z",
        )
        after = await stored(conn, made["id"])
        assert after == {
            **after,
            "name": "Spring",
            "subject": "Spring is here, {{ name }}",
            "body_html": None,
            "reply_to": None,
            "language": "de",
            "lists": ["news", "vip"],
            "status": "draft",
            "from_address": "News <news@example.com>",
        }
        refused = {
            "bad template": {"text": "{% if %}"},
            "bad sender": {"from": "nobody"},
            "no such list": {"lists": ["nosuch"]},
            "no time zone": {"at": "2099-01-01T09:00:00"},
            "a name of null": {"name": None},
            "an unknown field": {"status": "sent"},
            "a line break in the subject": {"subject": "a\nb"},
            "unknown language": {"language": "klingon"},
        }
        for what, body in refused.items():
            answer = await client.patch(url, headers=key, json=body)
            problem = answer.json()
            assert answer.status_code == 422 and set(problem) - {"code", "field"} == {"error"}, (what, answer.text)
            assert problem.get("field", next(iter(body))) == next(iter(body)), (what, answer.text)
        assert await stored(conn, made["id"]) == after
        assert (await client.patch(url, headers=auth(acme["read"]), json={"name": "x"})).status_code == 403
        assert (await client.patch("/campaigns/999999", headers=key, json={"name": "x"})).json() == {
            "error": "no such campaign"
        }
        assert (await client.post(f"{url}/approve", headers=key)).status_code == 200
        late = await client.patch(url, headers=key, json={"name": "Autumn"})
        assert late.status_code == 409 and late.json() == {
            "error": f"campaign {made['id']} is approved: only a draft can be changed"
        }
    assert (await stored(conn, made["id"]))["name"] == "Spring"


async def test_the_preview_is_the_message_the_command_line_renders_for_that_subscriber(
    conn: asyncpg.Connection, dsn: str, acme: dict[str, str]
) -> None:
    key = auth(acme["write"])
    async with (
        http_server(dsn, unsubscribe_url=UNSUBSCRIBE_URL) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1") as client,
    ):
        made = await client.post("/campaigns", headers=key, json={**DRAFT, "html": "<p>{{ name }} &amp; co</p>"})
        url = f"/campaigns/{made.json()['id']}/preview"
        first = await client.get(url, headers=auth(acme["read"]))  # the first member of its lists: ann
        cli = einmal(
            "campaign",
            "preview",
            str(made.json()["id"]),
            "--subscriber",
            "ann@example.org",
            dsn=dsn,
            env={"EINMAL_UNSUBSCRIBE_URL": UNSUBSCRIBE_URL, "EINMAL_UNSUBSCRIBE_SECRET": SECRET},
        )
        bob = await client.get(url, headers=key, params={"subscriber": "bob@EXAMPLE.org"})
        unknown = await client.get(url, headers=key, params={"subscriber": "zed@example.org"})
        invalid = await client.get(url, headers=key, params={"subscriber": "zed"})
        await client.patch(
            f"/campaigns/{made.json()['id']}",
            headers=key,
            json={"html": "{{ 'é' * 400000 }}", "text": "{{ 'é' * 400000 }}"},
        )
        too_big = await client.get(url, headers=key)
    assert first.status_code == 200, first.text
    preview = first.json()
    assert (preview["subscriber"], preview["subject"]) == ("ann@example.org", "Hello Ann")
    assert preview["text"] == f"Hi Ann from Köln\n{UNSUBSCRIBE_URL}?token=" + preview["text"].split("token=")[1]
    assert preview["html"] == "<p>Ann &amp; co</p>\n"
    assert cli.returncode == 0, cli.stderr
    head, body = cli.stdout.split("\n\n", 1)
    names = re.findall(r"(?m)^([\w-]+): ", head)
    assert [h["name"] for h in preview["headers"]] == names
    headers = {h["name"]: h["value"] for h in preview["headers"]}
    assert (
        headers["To"] == "Ann <ann@example.org>"
        and headers["List-Unsubscribe"] == f"<{UNSUBSCRIBE_URL}?token={preview['text'].split('token=')[1].strip()}>"
    )
    assert f"--- text/plain ---\n{preview['text']}" in body and f"--- text/html ---\n{preview['html']}" in body
    assert bob.json()["subscriber"] == "Bob@Example.org" and bob.json()["subject"] == "Hello Bob"
    assert unknown.status_code == 404 and unknown.json() == {"error": "no such subscriber"}
    assert invalid.status_code == 422 and "not a valid address" in invalid.json()["error"]
    assert too_big.status_code == 422 and "more than a preview's" in too_big.json()["error"]


async def test_a_test_message_goes_out_once_marked_and_unsubscribes_nobody(
    conn: asyncpg.Connection, dsn: str, acme: dict[str, str], smtp_server
) -> None:
    key = auth(acme["write"])
    relay = {"smtp_host": smtp_server.host, "smtp_port": smtp_server.port, "unsubscribe_url": UNSUBSCRIBE_URL}
    async with http_server(dsn, **relay) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = (await client.post("/campaigns", headers=key, json=DRAFT)).json()
        url = f"/campaigns/{made['id']}/test"
        once = {**key, "Idempotency-Key": "test-1"}
        body = {"to": "qa@example.net", "subscriber": "ann@example.org"}
        first = await client.post(url, headers=once, json=body)
        again = await client.post(url, headers=once, json=body)
        assert first.status_code == 200, first.text
        assert first.json() == {
            "to": "qa@example.net",
            "subscriber": "ann@example.org",
            "reply": first.json()["reply"],
        } and first.json()["reply"].startswith("250")
        assert (again.status_code, again.json(), again.headers["idempotent-replayed"]) == (200, first.json(), "true")
        [received] = smtp_server.wait_for(1)
        assert received.rcpt_tos == ("qa@example.net",) and received.mail_from == "news@example.com"
        message = received.data.decode()
        assert "\r\nSubject: [TEST] Hello Ann\r\n" in message and '\r\nTo: "Ann" <qa@example.net>\r\n' in message
        assert f"Message-ID: <test.{made['id']}." in message
        link = re.search(r"List-Unsubscribe: <([^>]+)>", message)[1]
        pressed = await client.post(f"{base}/unsubscribe", params={"token": parse_qs(urlsplit(link).query)["token"][0]})
        assert pressed.status_code == 200, pressed.text
        refused = {
            "not an address": ({"to": "qa"}, 422),
            "read key": ({"to": "qa@example.net"}, 403),
            "an unknown subscriber": ({"to": "qa@example.net", "subscriber": "zed@example.org"}, 404),
            "a line break in the prefix": ({"to": "qa@example.net", "subject_prefix": "a\nb"}, 422),
        }
        for what, (bad, status) in refused.items():
            answer = await client.post(url, headers=auth(acme["read" if what == "read key" else "write"]), json=bad)
            assert answer.status_code == status and set(answer.json()) == {"error"}, (what, answer.text)
        smtp_server.stop()
        down = await client.post(url, headers=key, json=body)
        assert down.status_code == 503 and down.headers["retry-after"] == "30", down.text
    assert len(smtp_server.wait_for(1)) == 1
    assert await written(conn) == (0, 0)  # the link of a test message names nobody: no opt-out recorded
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends") == 0
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", made["id"]) == "draft"


async def test_a_test_messages_to_names_its_recipient_as_the_campaigns_messages_do(
    conn: asyncpg.Connection, dsn: str, acme: dict[str, str], smtp_server
) -> None:
    """`name` in the body names the test message's recipient in its To, else the subscriber the address is;
    made as a real message's To (quoted, RFC 2047 words for what is not ASCII); a line break in it is a 422."""
    key = auth(acme["write"])
    relay = {"smtp_host": smtp_server.host, "smtp_port": smtp_server.port, "unsubscribe_url": UNSUBSCRIBE_URL}
    async with http_server(dsn, **relay) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = (await client.post("/campaigns", headers=key, json=DRAFT)).json()
        url = f"/campaigns/{made['id']}/test"
        for body in (
            {"to": "bob@example.org", "subscriber": "ann@example.org"},
            {"to": "qa@example.net", "subscriber": "ann@example.org", "name": "Zoë, QA"},
        ):
            sent = await client.post(url, headers=key, json=body)
            assert sent.status_code == 200, sent.text
        bob, zoe = smtp_server.wait_for(2)
        assert b'\r\nTo: "Bob" <bob@example.org>\r\n' in bob.data and b"Subject: [TEST] Hello Ann" in bob.data
        assert b"\r\nTo: =?utf-8?b?Wm/DqywgUUE=?= <qa@example.net>\r\n" in zoe.data, zoe.data
        for bad in ("Eve\r\nBcc: evil@example.net", "Eve\nBcc: evil@example.net", "Eve\u2028x"):
            refused = await client.post(url, headers=key, json={"to": "qa@example.net", "name": bad})
            assert refused.status_code == 422 and refused.json()["error"].startswith("name: "), refused.text
        with pytest.raises(AssertionError):
            smtp_server.wait_for(3, timeout=1)
