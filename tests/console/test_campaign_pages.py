"""A campaign's page and its transitions through real HTTP, signed in as a browser is: approve, pause,
resume and cancel each call the service's transition and write one line of the audit log; a refusal is the
service's sentence on the page (409) and changes nothing; a POST without the form's token changes nothing; a
member of another account finds neither the page nor its actions (404). The campaigns list pages by a cursor,
an operator's naming each campaign's account. A large campaign's counts are shared between views until its
status changes."""

import asyncpg
import httpx
import pytest

from service.accounts import keys
from service.console import campaigns
from service.console.campaigns import ROWS
from tests.support.console import accounts, page_token, sending_campaign, signed_in
from tests.support.web import http_server

pytestmark = pytest.mark.anyio

DRAFT = {"name": "Spring", "subject": "Hello", "from": "news@example.com", "text": "Hi", "lists": ["news"]}


async def state(conn: asyncpg.Connection, campaign: int) -> tuple[str, list[tuple]]:
    """The campaign's status and the audit log's lines of campaigns written by the console (not the API's, which
    made the draft)."""
    status = await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign)
    lines = await conn.fetch(
        "SELECT actor, account_id, action, subject FROM einmal.audit_log "
        "WHERE action LIKE 'campaign.%' AND actor LIKE 'console:%' ORDER BY id"
    )
    return status, [tuple(r) for r in lines]


async def test_transitions_from_a_campaigns_page_are_done_audited_refused_and_hidden_from_others(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await accounts(conn, "acme", "other")
    key = await keys.mint_for(conn, account="acme", name="", scope="write")
    sending = await sending_campaign(conn, "acme", "Summer")
    async with http_server(dsn) as base:
        async with httpx.AsyncClient(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {key}"}) as api:
            draft = (await api.post("/campaigns", json=DRAFT)).json()["id"]
        async with signed_in(base, "acme-member") as acme, signed_in(base, "other-member") as other:
            token, theirs = await page_token(acme), await page_token(other)
            page = await acme.get(f"/console/campaigns/{draft}")
            assert page.status_code == 200 and "Spring" in page.text and 'id="status">draft<' in page.text
            assert f'action="/console/campaigns/{draft}/approve"' in page.text

            for verb in ("approve", "pause", "resume", "cancel"):  # another account's: not found, nothing done
                answer = await other.post(f"/console/campaigns/{draft}/{verb}", data={"form_token": theirs})
                assert answer.status_code == 404 and "Spring" not in answer.text, verb
            assert (await other.get(f"/console/campaigns/{draft}")).status_code == 404
            for data in ({}, {"form_token": "forged"}):  # no token, a wrong one: refused, nothing done
                answer = await acme.post(f"/console/campaigns/{draft}/approve", data=data)
                assert answer.status_code == 403, answer.text
            assert await state(conn, draft) == ("draft", [])

            approved = await acme.post(f"/console/campaigns/{draft}/approve", data={"form_token": token})
            assert approved.status_code == 200, approved.text
            assert 'id="status">approved<' in approved.text and "Approved." in approved.text
            line = ("console:acme-member", ids["acme"], "campaign.approve", f"campaign {draft}")
            assert await state(conn, draft) == ("approved", [line])

            again = await acme.post(f"/console/campaigns/{draft}/approve", data={"form_token": token})
            assert again.status_code == 409 and "Traceback" not in again.text
            assert f"cannot approve campaign {draft}: it is approved" in again.text
            assert await state(conn, draft) == ("approved", [line])

            lines = [line]
            for verb, then in (("pause", "paused"), ("resume", "sending"), ("cancel", "cancelled")):
                answer = await acme.post(f"/console/campaigns/{sending}/{verb}", data={"form_token": token})
                assert answer.status_code == 200 and f'id="status">{then}<' in answer.text, (verb, answer.text)
                lines.append(("console:acme-member", ids["acme"], f"campaign.{verb}", f"campaign {sending}"))
                assert await state(conn, sending) == (then, lines)
            page = (await acme.get(f"/console/campaigns/{sending}")).text
            assert "Pause" not in page and ">Cancel<" not in page  # a cancelled campaign offers nothing
            assert "Clicks" not in page and ">sent</th><td>10<" in page and ">in doubt</th><td>4<" in page
            await conn.execute("UPDATE einmal.campaigns SET track_clicks = true WHERE id = $1", sending)
            assert "Clicks (total / recipients)" in (await acme.get(f"/console/campaigns/{sending}")).text


async def test_the_campaigns_list_pages_newest_first_and_shows_an_operator_every_account(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await accounts(conn, "acme", "other")
    await conn.execute(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids) "
        "SELECT a.id, a.name || '-news-' || i, 's', 'news@example.com', 'b', '{}' "
        "FROM einmal.accounts AS a, generate_series(1, $1) AS i ORDER BY i, a.id",
        ROWS,
    )
    async with http_server(dsn) as base:
        async with signed_in(base, "acme-member") as member:
            first = (await member.get("/console/campaigns")).text
            assert f"acme-news-{ROWS}<" in first and "other-" not in first and "acme-news-1<" in first
            assert "Older" not in first  # 50 campaigns: one page
        async with signed_in(base, "root") as operator:
            first = (await operator.get("/console/campaigns")).text
            assert first.index(f"other-news-{ROWS}<") < first.index(f"acme-news-{ROWS}<") < first.index("acme-news-26<")
            assert f"other-news-{ROWS // 2 + 1}<" in first and f"other-news-{ROWS // 2}<" not in first
            assert '<td data-label="Account">other</td>' in first
            older = first.split('href="/console/campaigns?before=')[1].split('"')[0]
            second = (await operator.get("/console/campaigns", params={"before": older})).text
            assert f"other-news-{ROWS // 2}<" in second and "acme-news-1<" in second and "Older" not in second


async def test_a_campaigns_page_says_how_many_wait_for_their_local_time(conn: asyncpg.Connection, dsn: str) -> None:
    await accounts(conn, "acme")
    sending = await sending_campaign(conn, "acme", "Morning")
    await conn.execute("UPDATE einmal.campaigns SET local_time = '09:00' WHERE id = $1", sending)
    moved = await conn.execute(
        "UPDATE einmal.sends SET next_attempt_at = now() + interval '2 hours 30 seconds' "  # shown: "2 h" for 30 s
        "WHERE campaign_id = $1 AND status = 'queued'",
        sending,
    )
    waiting = int(moved.split()[-1])
    async with http_server(dsn) as base, signed_in(base, "acme-member") as acme:
        page = (await acme.get(f"/console/campaigns/{sending}")).text
    assert f"at 09:00 local time: {waiting} wait for it, the next due " in page and "(in 2 h)" in page, page


async def test_a_large_campaigns_page_shares_its_counts_until_a_transition_reads_them_afresh(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(campaigns, "KEPT_FROM", 5)  # its 40 rows are many
    await accounts(conn, "acme")
    sending = await sending_campaign(conn, "acme", "Large")
    async with http_server(dsn) as base, signed_in(base, "acme-member") as acme:
        first = (await acme.get(f"/console/campaigns/{sending}")).text
        assert ">sent</th><td>10<" in first and "<dt>Counted at</dt><dd>20" in first
        await conn.execute(
            "UPDATE einmal.sends SET status = 'sent', sent_at = now() WHERE campaign_id = $1 AND status = 'queued'",
            sending,
        )
        assert ">sent</th><td>10<" in (await acme.get(f"/console/campaigns/{sending}")).text  # shared
        paused = await acme.post(f"/console/campaigns/{sending}/pause", data={"form_token": await page_token(acme)})
        assert paused.status_code == 200 and ">sent</th><td>35<" in paused.text  # read afresh
        again = (await acme.get(f"/console/campaigns/{sending}")).text
        assert 'id="status">paused<' in again and ">sent</th><td>35<" in again
