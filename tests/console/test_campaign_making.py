"""Making a campaign in the console through real HTTP, signed in as a browser is: the form creates a draft
through the service's checks (a field refused is the form again with the sentence and what was typed; a POST
without the form's token creates nothing), with its line of the audit log; its preview shows the message one
subscriber would get, the HTML only inside a sandboxed frame's srcdoc, escaped; a test message reaches a real
SMTP server (aiosmtpd) marked as a test. Another account's member finds neither the preview nor the test (404)."""

import email
import email.policy
import html
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import pytest

from service.campaigns import approval, drafts, preview
from service.console.render import HEADERS
from service.errors import Conflict
from service.mail.mailing import Mailing
from service.settings import Settings
from tests.support.console import accounts, page_token, signed_in
from tests.support.pipeline import recording_server
from tests.support.web import SECRET, UNSUBSCRIBE_URL, http_server

pytestmark = pytest.mark.anyio

FORM = {
    "name": "Spring",
    "subject": "Hello {{ name }}",
    "from": "news@example.com",
    "lists": "news",
    "segment": "",
    "text": "Hi {{ name }}, {{ unsubscribe_url }}\r\nBye",  # a browser's textarea sends CRLF lines
    "html": '<p onclick="x()">Hi <b>{{ name }}</b> &amp; "friends"</p><script>alert(1)</script>',
}


class Kept:
    """An SMTP server's handler keeping each message (its recipients and bytes)."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append((list(envelope.rcpt_tos), envelope.original_content or b""))
        return "250 2.0.0 Ok: queued as K1"


async def members(conn: asyncpg.Connection, account_id: int, *emails: str) -> None:
    """Subscribers of the account on its list `news`."""
    for address in emails:
        subscriber = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, name) VALUES ($1, $2, lower($2), 'Ann') "
            "RETURNING id",
            account_id,
            address,
        )
        await conn.execute(
            "INSERT INTO einmal.list_members (list_id, subscriber_id) "
            "SELECT id, $2 FROM einmal.lists WHERE account_id = $1 AND name = 'news'",
            account_id,
            subscriber,
        )


async def test_a_draft_made_from_the_form_is_previewed_sandboxed_and_sent_as_a_test(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await accounts(conn, "acme", "other")
    await members(conn, ids["acme"], "ann@example.org")
    kept = Kept()
    async with recording_server(kept) as port, http_server(dsn, smtp_host="127.0.0.1", smtp_port=port) as base:
        async with signed_in(base, "acme-member") as acme, signed_in(base, "other-member") as other:
            token = await page_token(acme)
            form = (await acme.get("/console/campaigns/new")).text
            assert 'action="/console/campaigns/new"' in form and 'name="account"' not in form  # a member's own

            for data in ({**FORM}, {**FORM, "form_token": "forged"}):  # no token, a wrong one: nothing made
                assert (await acme.post("/console/campaigns/new", data=data)).status_code == 403
            refused = await acme.post("/console/campaigns/new", data={**FORM, "from": "nobody", "form_token": token})
            assert refused.status_code == 422 and "from &#39;nobody&#39; is not a valid address" in refused.text
            assert 'value="Spring"' in refused.text and "{{ unsubscribe_url }}\nBye</textarea>" in refused.text
            assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 0

            # a member's draft is its own account's, whatever account the form names
            made = await acme.post("/console/campaigns/new", data={**FORM, "account": "other", "form_token": token})
            assert made.status_code == 200 and "Created" in made.text and 'id="status">draft<' in made.text
            campaign = await conn.fetchrow("SELECT * FROM einmal.campaigns")
            assert (campaign["account_id"], campaign["name"], campaign["subject"], campaign["body_html"]) == (
                ids["acme"],
                "Spring",
                FORM["subject"],
                FORM["html"],
            )
            assert campaign["body_text"] == "Hi {{ name }}, {{ unsubscribe_url }}\nBye"
            line = await conn.fetchrow(
                "SELECT actor, account_id, action, subject FROM einmal.audit_log WHERE action LIKE 'campaign.%'"
            )
            assert tuple(line) == ("console:acme-member", ids["acme"], "campaign.create", f"campaign {campaign['id']}")

            preview = await acme.get(f"/console/campaigns/{campaign['id']}/preview")
            assert preview.status_code == 200, preview.text
            assert preview.headers["content-security-policy"] == HEADERS["Content-Security-Policy"]
            assert '<dd id="subject">Hello Ann</dd>' in preview.text and "Hi Ann, http" in preview.text
            frame = re.search(r'<iframe class="html" sandbox="" srcdoc="([^"]*)"', preview.text)
            assert frame is not None, preview.text
            assert "<script>" not in frame.group(1) and "<b>" not in frame.group(1)  # escaped in the attribute
            assert "<script>alert(1)</script>" in html.unescape(frame.group(1))  # what the frame shows, inert
            assert preview.text.count("<script") == 1  # htmx's, no other
            nobody = await acme.get(f"/console/campaigns/{campaign['id']}/preview", params={"subscriber": "x@y.org"})
            assert nobody.status_code == 404 and "has no subscriber &#39;x@y.org&#39;" in nobody.text

            for path in ("preview", "test"):  # another account's: not found, nothing sent
                answer = await other.request(
                    "GET" if path == "preview" else "POST",
                    f"/console/campaigns/{campaign['id']}/{path}",
                    data=None if path == "preview" else {"form_token": await page_token(other), "to": "t@x.org"},
                )
                assert answer.status_code == 404 and "Spring" not in answer.text, path

            bad = await acme.post(
                f"/console/campaigns/{campaign['id']}/test", data={"form_token": token, "to": "not an address"}
            )
            assert bad.status_code == 422 and "Test message not sent" in bad.text and kept.messages == []
            sent = await acme.post(
                f"/console/campaigns/{campaign['id']}/test", data={"form_token": token, "to": "qa@example.net"}
            )
            assert sent.status_code == 200 and "Test message sent to qa@example.net: 250 2.0.0<" in sent.text, sent.text
    [(rcpts, raw)] = kept.messages
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert (
        rcpts == ["qa@example.net"]
        and message["Subject"] == "[TEST] Hello Ann"
        and message["To"] == "Ann <qa@example.net>"
    )
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends") == 0  # outside the campaign's rows


async def test_an_operator_names_the_account_a_draft_is_for(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await accounts(conn, "acme")
    async with http_server(dsn) as base, signed_in(base, "root") as operator:
        token = await page_token(operator)
        assert 'name="account"' in (await operator.get("/console/campaigns/new")).text
        unnamed = await operator.post("/console/campaigns/new", data={**FORM, "form_token": token})
        assert unnamed.status_code == 422 and "name the account" in unnamed.text
        unknown = await operator.post("/console/campaigns/new", data={**FORM, "account": "nosuch", "form_token": token})
        assert unknown.status_code == 404 and "no account named" in unknown.text
        long_html = "<p>" + "x" * 30_000 + "</p>"  # a draft's form is bounded as the API's request, not at 8 KiB
        data = {**FORM, "html": long_html, "account": "acme", "form_token": token}
        made = await operator.post("/console/campaigns/new", data=data)
        assert made.status_code == 200 and "Created" in made.text
        campaign = await conn.fetchval("SELECT id FROM einmal.campaigns")
        padded = await operator.post(
            f"/console/campaigns/{campaign}/cancel", data={"form_token": token, "pad": long_html}
        )
        assert padded.status_code == 413  # every other form is
    assert await conn.fetchrow("SELECT account_id, status, length(body_html) FROM einmal.campaigns") == (
        ids["acme"],
        "draft",
        len(long_html),
    )


async def test_a_draft_is_committed_before_its_trial_render_so_other_accounts_writes_never_wait_for_it(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Making a draft attaches its partition of einmal.sends, a lock every account's writes of campaigns wait
    for until it commits: the draft commits before its trial render, and its audit line follows (as the API's
    create). Held in one transaction with the render, other's draft waited for acme's render."""
    ids = await accounts(conn, "acme", "other")
    await members(conn, ids["acme"], *(f"m{i}@example.org" for i in range(40)))  # the trial renders each
    slow = "{% for i in range(20000) %}{{ i }}{% endfor %}{{ unsubscribe_url }}"
    async with http_server(dsn) as base, signed_in(base, "acme-member") as acme:
        async with signed_in(base, "other-member") as other:
            acme_token, other_token = await page_token(acme), await page_token(other)
            seen: list[str] = []

            async def make_slow() -> None:
                data = {**FORM, "name": "Slow", "text": slow, "html": slow, "form_token": acme_token}
                answer = await acme.post("/console/campaigns/new", data=data, timeout=60)
                assert answer.status_code == 200 and "Created" in answer.text, answer.text[answer.text.find("<main") :][
                    :900
                ]
                seen.append("slow answered")

            async with anyio.create_task_group() as tg:
                tg.start_soon(make_slow)
                with anyio.fail_after(30):
                    while not await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE name = 'Slow'"):
                        assert not seen, "acme's draft was committed only with its render's answer"
                        await anyio.sleep(0.01)
                seen.append("slow committed")
                data = {**FORM, "name": "Quick", "form_token": other_token}
                quick = await other.post("/console/campaigns/new", data=data, timeout=60)
                assert quick.status_code == 200 and "Created" in quick.text
                seen.append("quick answered")
    assert seen == ["slow committed", "quick answered", "slow answered"]
    assert await conn.fetchval("SELECT count(*) FROM einmal.audit_log WHERE action = 'campaign.create'") == 2


async def test_a_trial_render_longer_than_the_database_deadline_is_not_taken_for_an_outage(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console gives the database DB_SECONDS a step (pool and statements), a deadline for the database
    alone: a draft's trial render and approve's (40 subscribers here) take their time in a worker thread,
    outside it. Taken into it, a render over it was answered 503 "the database cannot be reached", the draft made
    all the same and an approval never made. (A preview renders one subscriber, within the sandbox's budget: it
    is rendered outside the deadline too, but no single render outlasts this one.)"""
    monkeypatch.setattr("service.db.DB_SECONDS", 0.5)
    ids = await accounts(conn, "acme")
    await members(conn, ids["acme"], *(f"m{i}@example.org" for i in range(40)))  # the trial renders each
    slow = "{% for i in range(20000) %}{{ i }}{% endfor %}{{ unsubscribe_url }}"  # about 20 ms a body
    async with http_server(dsn) as base, signed_in(base, "acme-member") as acme:
        token = await page_token(acme)
        started = time.monotonic()
        data = {**FORM, "name": "Slow", "text": slow, "html": slow, "form_token": token}
        made = await acme.post("/console/campaigns/new", data=data, timeout=60)
        took = time.monotonic() - started
        assert made.status_code == 200 and "Created" in made.text, made.text[made.text.find("<main") :][:900]
        assert took > 0.5, took  # the render outlasted the deadline (else this test proves nothing)
        campaign = await conn.fetchval("SELECT id FROM einmal.campaigns WHERE name = 'Slow'")
        preview = await acme.get(f"/console/campaigns/{campaign}/preview", timeout=60)
        assert preview.status_code == 200, preview.text
        approved = await acme.post(f"/console/campaigns/{campaign}/approve", data={"form_token": token}, timeout=60)
        assert approved.status_code == 200 and 'id="status">approved<' in approved.text, approved.text[:900]


async def test_an_approval_takes_a_trial_made_before_it_only_for_the_campaign_it_rendered(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """The console renders approve's trial before its transaction (approval.tried_first): a draft changed
    meanwhile is not approved on a trial of what it was (Conflict, still a draft); one unchanged is, with that
    trial's warnings."""
    ids = await accounts(conn, "acme")
    await members(conn, ids["acme"], "ann@example.org")
    settings = Settings(database_url=dsn, unsubscribe_url=UNSUBSCRIBE_URL, unsubscribe_secret=SECRET)
    mailing = Mailing.of(settings)
    fields = {"name": "N", "subject": "S", "from_address": "n@example.com", "html": None}
    made = await drafts.create(
        conn, mailing=mailing, account_id=ids["acme"], lists=["news"], text="No link here", **fields
    )
    assert made.trial.warnings == (preview.NO_LINK,)

    tried = await approval.tried_first(lambda: _borrowed(conn), mailing=mailing, campaign_id=made.id)
    assert tried is not None and tried.trial == made.trial
    await conn.execute("UPDATE einmal.campaigns SET body_text = 'Bye {{ unsubscribe_url }}' WHERE id = $1", made.id)
    with pytest.raises(Conflict, match="changed during its trial render"):
        async with conn.transaction():
            await approval.approve(conn, mailing=mailing, campaign_id=made.id, forcing="force", tried=tried)
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", made.id) == "draft"

    tried = await approval.tried_first(lambda: _borrowed(conn), mailing=mailing, campaign_id=made.id)
    assert tried is not None and tried.trial.warnings == ()
    found = await approval.approve(conn, mailing=mailing, campaign_id=made.id, forcing="force", tried=tried)
    assert found == tried.trial
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", made.id) == "approved"
    assert await approval.tried_first(lambda: _borrowed(conn), mailing=mailing, campaign_id=made.id) is None


@asynccontextmanager
async def _borrowed(conn: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    yield conn
