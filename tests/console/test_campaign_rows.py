"""A campaign's rows from its page, through real HTTP: its failed rows queued again and its in-doubt rows decided
(as `einmal campaign retry --failed` and `einmal reconcile` do), each with its line of the audit log, refused
without the form's token or a decision and not found for another account's member; and its chart, drawn as SVG
on the server, of what was sent, failed and bounced over time, clicks added once the campaign tracks them."""

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from service.campaigns import timeline
from service.console import chart
from tests.support.console import accounts, page_token, sending_campaign, signed_in
from tests.support.web import http_server

pytestmark = pytest.mark.anyio

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


async def counted(conn: asyncpg.Connection, campaign: int) -> dict[str, int]:
    found = await conn.fetch("SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY 1", campaign)
    return {r["status"]: r["count"] for r in found}


async def audited(conn: asyncpg.Connection) -> list[str]:
    return [r["action"] for r in await conn.fetch("SELECT action FROM einmal.audit_log WHERE action LIKE 'campaign.%'")]


async def test_retry_and_reconcile_from_a_campaigns_page_are_done_audited_and_refused(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await accounts(conn, "acme", "other")
    campaign = await sending_campaign(conn, "acme", "Spring")  # 10 sent, 1 failed, 4 in doubt, 25 queued
    async with http_server(dsn) as base:
        async with signed_in(base, "acme-member") as acme, signed_in(base, "other-member") as other:
            token, theirs = await page_token(acme), await page_token(other)
            page = (await acme.get(f"/console/campaigns/{campaign}")).text
            assert ">Retry 1 failed<" in page and ">Resend 4 in doubt<" in page and ">Count as sent 4 in doubt<" in page
            for verb in ("retry", "reconcile"):
                data = {"decision": "mark_sent"}
                assert (await acme.post(f"/console/campaigns/{campaign}/{verb}", data=data)).status_code == 403
                answer = await other.post(f"/console/campaigns/{campaign}/{verb}", data={**data, "form_token": theirs})
                assert answer.status_code == 404 and "Spring" not in answer.text
            undecided = await acme.post(f"/console/campaigns/{campaign}/reconcile", data={"form_token": token})
            assert undecided.status_code == 422 and "decision: resend or mark_sent" in undecided.text
            assert await counted(conn, campaign) == {"sent": 10, "failed": 1, "in_doubt": 4, "queued": 25}
            assert await audited(conn) == []

            retried = await acme.post(f"/console/campaigns/{campaign}/retry", data={"form_token": token})
            assert retried.status_code == 200 and "1 failed message(s) queued again." in retried.text
            assert "Retry 1 failed" not in retried.text
            assert await counted(conn, campaign) == {"sent": 10, "in_doubt": 4, "queued": 26}
            decided = await acme.post(
                f"/console/campaigns/{campaign}/reconcile", data={"form_token": token, "decision": "mark_sent"}
            )
            assert decided.status_code == 200 and "4 message(s) in doubt counted as sent." in decided.text
            assert "in doubt<" not in decided.text.split("<table")[0]  # no button left
            assert await counted(conn, campaign) == {"sent": 14, "queued": 26}
            assert await audited(conn) == ["campaign.retry", "campaign.reconcile.mark_sent"]


async def test_a_campaigns_chart_draws_what_was_sent_failed_bounced_and_clicked_over_time(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await accounts(conn, "acme")
    campaign = await sending_campaign(conn, "acme", "Spring")
    empty = await sending_campaign(conn, "acme", "Empty", rows=0)
    async with http_server(dsn) as base, signed_in(base, "acme-member") as acme:
        assert "<svg" not in (await acme.get(f"/console/campaigns/{empty}")).text  # nothing happened yet
        sent = [r["id"] for r in await conn.fetch("SELECT id FROM einmal.sends WHERE status = 'sent' ORDER BY id")]
        # 6 sent at 09:00, 4 an hour later; the failed row at 09:30, a hard bounce of the first at 09:10
        await conn.execute(
            "UPDATE einmal.sends SET sent_at = CASE WHEN id = ANY ($1::bigint[]) THEN $2::timestamptz "
            "ELSE $2::timestamptz + interval '1 hour' END WHERE status = 'sent'",
            sent[:6],
            START,
        )
        await conn.execute(
            "UPDATE einmal.sends SET updated_at = $1 WHERE status = 'failed'", START + timedelta(minutes=30)
        )
        await conn.execute("INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ('t:1', 'x')")
        await conn.execute(
            "INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, created_at) "
            "SELECT 't:1', account_id, id, 'hard', '5.1.1', $2 FROM einmal.sends WHERE id = $1",
            sent[0],
            START + timedelta(minutes=10),
        )
        found = await timeline.of_campaign(conn, campaign_id=campaign)
        assert (found.first, found.width) == (START, 3600 / timeline.BUCKETS)
        assert found.counts["sent"] == [6] + [0] * 22 + [4]
        assert found.counts["failed"][12] == 1 and found.counts["bounced"][4] == 1 and sum(found.counts["clicked"]) == 0

        page = (await acme.get(f"/console/campaigns/{campaign}")).text
        drawn = chart.drawn(found, tracked=False)
        assert drawn is not None and [line.kind for line in drawn.lines] == ["sent", "failed", "bounced"]
        assert f'<polyline class="sent" points="{drawn.lines[0].points}"/>' in page
        assert drawn.lines[0].points.startswith(
            f"{chart.LEFT + (chart.WIDTH - chart.RIGHT - chart.LEFT) / 48:.1f},{chart.TOP:.1f} "
        )
        assert "sent: 10</li>" in page and "failed: 1</li>" in page and "bounced (hard): 1</li>" in page
        assert "from 2026-05-01 09:00:00 UTC to 2026-05-01 10:00:00 UTC" in page and "clicked" not in page

        await conn.execute("UPDATE einmal.campaigns SET track_clicks = true WHERE id = $1", campaign)
        await conn.execute(
            "INSERT INTO einmal.clicks (id, account_id, campaign_id, subscriber_id, link, url, at, tag) "
            "SELECT 'k' || id, account_id, campaign_id, subscriber_id, 1, 'https://example.com/', $2, 'human' "
            "FROM einmal.sends WHERE id = ANY ($1::bigint[])",
            sent[:2],
            START + timedelta(minutes=20),
        )
        page = (await acme.get(f"/console/campaigns/{campaign}")).text
        assert '<polyline class="clicked"' in page and "clicked (people): 2</li>" in page


def test_a_campaign_sent_within_one_second_is_drawn_as_a_level_line() -> None:
    drawn = chart.drawn(
        timeline.Timeline(START, 1.0, {"sent": [30], "failed": [0], "bounced": [0], "clicked": [0]}), tracked=False
    )
    assert drawn is not None and drawn.start == "2026-05-01 09:00:00 UTC" and drawn.end == "2026-05-01 09:00:01 UTC"
    left, right, bottom = chart.LEFT, chart.WIDTH - chart.RIGHT, chart.HEIGHT - chart.BOTTOM
    assert [line.points for line in drawn.lines] == [
        f"{left:.1f},{chart.TOP:.1f} {right:.1f},{chart.TOP:.1f}",
        *[f"{left:.1f},{bottom:.1f} {right:.1f},{bottom:.1f}"] * 2,
    ]
