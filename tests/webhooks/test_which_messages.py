"""Which messages make webhook events, as the guide says (docs/guide/webhooks.md): a campaign's and a
transactional message's sent row makes `message.sent`; a list's confirmation message makes none."""

import asyncpg
import pytest

from tests.support import doc_examples

pytestmark = pytest.mark.anyio


def test_the_guide_says_which_messages_make_events() -> None:
    text = (doc_examples.ROOT / "docs/guide/webhooks.md").read_text()
    said = text.split("Which messages make events:", 1)
    assert len(said) == 2, "the guide says which messages make events"
    paragraph = said[1].split("\n\n", 1)[0]
    for named in ("campaign's", "transactional", "sequence step's", "confirmation", "campaign test"):
        assert named in paragraph, named


async def test_a_confirmation_sent_makes_no_event_and_a_campaign_s_does(conn: asyncpg.Connection) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    list_id = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news') RETURNING id", account
    )
    subscriber = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, 'a@example.org', "
        "'a@example.org') RETURNING id",
        account,
    )
    await conn.execute(
        "INSERT INTO einmal.webhook_endpoints (account_id, url, secret, events) "
        "VALUES ($1, 'https://hooks.example/x', 'whsec_x', ARRAY['message.sent'])",
        account,
    )
    kinds = {}
    for kind in ("campaign", "confirmation"):
        campaign = await conn.fetchval(
            "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, kind, "
            "status) VALUES ($1, $2, 'S', 'a@example.org', 'T', ARRAY[$3::bigint], $2, 'sending') RETURNING id",
            account,
            kind,
            list_id,
        )
        await conn.execute(
            """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                         claimed_by)
               VALUES ($1::bigint, $2, $3::bigint, 'a@example.org', 'a@example.org',
                       'campaign:' || $1::bigint || ':' || $3::bigint, 'sending', 't')""",
            campaign,
            account,
            subscriber,
        )
        await conn.execute("UPDATE einmal.sends SET status = 'sent' WHERE campaign_id = $1", campaign)
        kinds[kind] = await conn.fetchval(
            "SELECT count(*) FROM einmal.webhook_events WHERE type = 'message.sent' AND payload->>'campaign_id' = $1",
            str(campaign),
        )
    assert kinds == {"campaign": 1, "confirmation": 0}
