"""A provider webhook (Amazon SES, over real HTTP against a real PostgreSQL) names the message by its envelope
sender: a VERP token at an account's own return path is verified as the inbound listener verifies it, with
that account's secret and for that account's campaigns only; the environment's return path as before."""

import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from service.mail.verp import ReturnPath
from tests.inbound.test_webhook_trust import OTHER_TOPIC, two_accounts  # noqa: F401  (a fixture)
from tests.support import webhook_fixtures as fx
from tests.support.web import http_server
from tests.web.test_http_webhooks import sent

pytestmark = pytest.mark.anyio

ENV_PATH, ENV_SECRET = "bounces@example.org", "env-return-path-secret"
ACME_PATH, ACME_SECRET = "bounces@mail.acme.example", "acme-return-path-secret"
OTHER_PATH, OTHER_SECRET = "bounces@mail.other.example", "other-return-path-secret"


def verp(path: str, secret: str, row: tuple[int, int], at: str | None = None) -> str:
    """The envelope sender `path` signs for `row` with `secret`, presented at return path `at` (else `path`)."""
    local, _, domain = (at or path).partition("@")
    return f"{local}+{ReturnPath(path, secret).token(*row)}@{domain}"


async def own_return_path(conn: asyncpg.Connection, account: str, path: str, secret: str) -> None:
    await conn.execute(
        "UPDATE einmal.accounts SET return_path = $2, return_path_secret = $3 WHERE name = $1", account, path, secret
    )


async def test_a_token_at_an_accounts_return_path_verifies_with_that_accounts_secret_only(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict
) -> None:
    older = (await sent(conn, ["tom@example.com"], account="acme"))["tom@example.com"]
    newer = (await sent(conn, ["tom@example.com"], account="acme"))["tom@example.com"]
    theirs = (await sent(conn, ["tom@example.com"], account="other"))["tom@example.com"]
    await own_return_path(conn, "acme", ACME_PATH, ACME_SECRET)
    await own_return_path(conn, "other", OTHER_PATH, OTHER_SECRET)
    sources = {
        "own": (verp(ACME_PATH, ACME_SECRET, older), fx.TOPIC),
        "at-the-other-accounts-path": (verp(ACME_PATH, ACME_SECRET, older, at=OTHER_PATH), fx.TOPIC),
        "signed-by-the-environment": (verp(ACME_PATH, ENV_SECRET, older), fx.TOPIC),
        "the-other-account-signed-ours": (verp(OTHER_PATH, OTHER_SECRET, older), fx.TOPIC),
        "environment": (verp(ENV_PATH, ENV_SECRET, older), fx.TOPIC),
        "the-other-accounts-own": (verp(OTHER_PATH, OTHER_SECRET, theirs), OTHER_TOPIC),
    }
    settings = two_accounts["settings"] | {"return_path": ENV_PATH, "return_path_secret": SecretStr(ENV_SECRET)}
    async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=base) as client:
        for feedback, (source, topic) in sources.items():
            bounce = fx.ses_bounce(["tom@example.com"], source=source, feedback_id=feedback)
            answer = await client.post(
                "/inbound/ses", json=fx.sns_notification(two_accounts["key"], bounce, topic=topic)
            )
            assert answer.json() == {"applied": 1, "repeated": 0, "dropped": 0}, (feedback, answer.text)
    rows = await conn.fetch("""SELECT b.event_id, s.campaign_id FROM einmal.bounces b
                               JOIN einmal.sends s ON s.id = b.send_id ORDER BY 1""")
    # a token that does not verify names nothing: that event is tied by its address, to acme's newest row
    assert dict(tuple(r) for r in rows) == {
        "ses:own": older[0],
        "ses:at-the-other-accounts-path": newer[0],
        "ses:signed-by-the-environment": newer[0],
        "ses:the-other-account-signed-ours": newer[0],
        "ses:environment": older[0],
        "ses:the-other-accounts-own": theirs[0],
    }
    suppressed = await conn.fetch("""SELECT a.name FROM einmal.suppressions x
                                     JOIN einmal.accounts a ON a.id = x.account_id ORDER BY 1""")
    assert [r["name"] for r in suppressed] == ["acme", "other"]
