"""What a provider webhook's check vouches for, over real HTTP against a real PostgreSQL: an account's
credential or topic reaches that account's rows only (the URL cannot widen it), a global credential
serves only a single-account installation, a Mailgun signature carries one event, an SNS message is
refused long after it was published, and Postmark's credentials are checked before its body is read."""

import json
import time
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from tests.conftest import einmal
from tests.support import webhook_fixtures as fx
from tests.support.web import http_server
from tests.web.test_http_webhooks import TABLES, came_back, sent, written

pytestmark = pytest.mark.anyio

ACME_TOPIC, OTHER_TOPIC = fx.TOPIC, "arn:aws:sns:us-west-2:210987654321:other-feedback"
ACME_POSTMARK, OTHER_POSTMARK = "acme:acme-password", "other:other-password"
ACME_MAILGUN, OTHER_MAILGUN = "acme-mailgun-key", "other-mailgun-key"


def accounts_file(folder: Path, accounts: dict[str, dict]) -> str:
    """EINMAL_WEBHOOK_ACCOUNTS_FILE: a TOML table of each account's webhook credentials."""
    path = folder / "webhooks.toml"
    path.write_text(
        "".join(
            f"[{json.dumps(name)}]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())
            for name, table in accounts.items()
        )
    )
    return str(path)


@pytest.fixture
def two_accounts(tmp_path: Path) -> dict:
    """Settings for acme and other, each with its own SNS topic, Postmark credentials and Mailgun key."""
    key, pem = fx.certificate()
    (tmp_path / "sns.pem").write_bytes(pem)
    path = accounts_file(
        tmp_path,
        {
            "acme": {
                "ses_topic_arn": ACME_TOPIC,
                "postmark_webhook_secret": ACME_POSTMARK,
                "mailgun_webhook_signing_key": ACME_MAILGUN,
            },
            "other": {
                "ses_topic_arn": [OTHER_TOPIC],
                "postmark_webhook_secret": OTHER_POSTMARK,
                "mailgun_webhook_signing_key": OTHER_MAILGUN,
            },
        },
    )
    return {"key": key, "settings": {"ses_certificate_file": str(tmp_path / "sns.pem"), "webhook_accounts_file": path}}


async def suppressed(conn: asyncpg.Connection) -> list[tuple[str, str]]:
    rows = await conn.fetch("""SELECT a.name, x.email_lower FROM einmal.suppressions x
                               JOIN einmal.accounts a ON a.id = x.account_id ORDER BY 1, 2""")
    return [tuple(r) for r in rows]


async def test_one_mailgun_signature_carries_one_event(conn: asyncpg.Connection, dsn: str, tmp_path) -> None:
    """The signature covers only its timestamp and token: re-used with new events, it is refused."""
    emails = [f"p{n}@example.com" for n in range(6)]
    await sent(conn, emails)
    captured = fx.mailgun_signature()
    await conn.execute("""INSERT INTO einmal.webhook_tokens (token, digest, expires_at)
                          VALUES ('mailgun:expired', 'x', now() - interval '1 second')""")
    async with (
        http_server(dsn, mailgun_webhook_signing_key=SecretStr(fx.MAILGUN_KEY)) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        first = fx.mailgun_event(emails[0], id_="e0") | {"signature": captured}
        answers = [await client.post("/inbound/mailgun", json=first)]
        for n, email in enumerate(emails[1:], 1):
            replayed = fx.mailgun_event(email, id_=f"e{n}") | {"signature": captured}
            answers.append(await client.post("/inbound/mailgun", json=replayed))
        again = await client.post("/inbound/mailgun", json=first)  # Mailgun's own retry: the same event
    assert [a.status_code for a in answers] == [200] + [403] * 5
    assert (again.status_code, again.json()["repeated"]) == (200, 1)
    assert await suppressed(conn) == [("acme", "p0@example.com")]
    # the token is kept once, the expired one was pruned
    assert await conn.fetchval("SELECT array_agg(token) FROM einmal.webhook_tokens") == [f"mailgun:{captured['token']}"]


def test_ses_is_not_served_without_an_allowed_topic(tmp_path: Path) -> None:
    """SNS signs every AWS account's messages in a region with one certificate: the certificate alone
    would admit any account's topic."""
    (tmp_path / "sns.pem").write_bytes(fx.certificate()[1])
    result = einmal(
        "serve",
        dsn="postgresql://postgres@127.0.0.1:1/nowhere",
        env={"EINMAL_SES_CERTIFICATE_FILE": str(tmp_path / "sns.pem")},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("einmal: EINMAL_SES_TOPIC_ARN: "), result.stderr


async def test_an_sns_message_published_outside_the_window_is_refused(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await sent(conn, ["jane@example.com"])
    key, pem = fx.certificate()
    (tmp_path / "sns.pem").write_bytes(pem)
    stale = fx.sns_notification(key, fx.ses_complaint("jane@example.com"), timestamp="2016-01-27T14:59:38.237Z")
    ahead = fx.sns_notification(key, fx.ses_complaint("jane@example.com"), timestamp=fx.sns_time(time.time() + 3600))
    unreadable = fx.sns_notification(key, fx.ses_complaint("jane@example.com"), timestamp="yesterday")
    async with (
        http_server(dsn, ses_certificate_file=str(tmp_path / "sns.pem"), ses_topic_arn=fx.TOPIC) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        answers = [await client.post("/inbound/ses", json=message) for message in (stale, ahead, unreadable)]
        recent = fx.sns_notification(
            key, fx.ses_complaint("jane@example.com"), timestamp=fx.sns_time(time.time() - 1800)
        )  # SNS retries for up to an hour
        answers.append(await client.post("/inbound/ses", json=recent))
    assert [a.status_code for a in answers] == [403, 403, 403, 200]
    assert await suppressed(conn) == [("acme", "jane@example.com")]


async def test_an_sns_topic_reaches_only_its_own_account(conn: asyncpg.Connection, dsn: str, two_accounts) -> None:
    await sent(conn, ["john@example.com", "ann@example.com"], account="acme")
    other = await sent(conn, ["john@example.com", "ann@example.com"], account="other")
    key = two_accounts["key"]
    john = fx.ses_bounce(["john@example.com"], feedback_id="f-john")
    # acme's own topic, naming other's message to ann: the message is not acme's, so acme's row to ann
    campaign, subscriber = other["ann@example.com"]
    ann = fx.ses_complaint("ann@example.com", message_id=f"<campaign.{campaign}.{subscriber}@example.com>")
    async with http_server(dsn, **two_accounts["settings"]) as base, httpx.AsyncClient(base_url=base) as client:
        widened = await client.post("/inbound/ses/other", json=fx.sns_notification(key, john, topic=ACME_TOPIC))
        assert await written(conn) == dict.fromkeys(TABLES, 0)
        own = await client.post("/inbound/ses", json=fx.sns_notification(key, john, topic=ACME_TOPIC))
        named = await client.post("/inbound/ses/acme", json=fx.sns_notification(key, ann, topic=ACME_TOPIC))
        theirs = await client.post(
            "/inbound/ses/other",
            json=fx.sns_notification(key, fx.ses_bounce(["ann@example.com"], feedback_id="f-ann"), topic=OTHER_TOPIC),
        )
        foreign = await client.post(
            "/inbound/ses",
            json=fx.sns_notification(
                key, fx.ses_bounce(["ann@example.com"], feedback_id="f-x"), topic=ACME_TOPIC + "-x"
            ),
        )
    assert [a.status_code for a in (widened, own, named, theirs, foreign)] == [403, 200, 200, 200, 403]
    assert await suppressed(conn) == [
        ("acme", "ann@example.com"),
        ("acme", "john@example.com"),
        ("other", "ann@example.com"),
    ]
    assert {r[0] for r in await came_back(conn)} == {
        "ses:f-john",
        "ses:000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000",
        "ses:f-ann",
    }


async def test_postmark_and_mailgun_credentials_reach_only_their_own_account(
    conn: asyncpg.Connection, dsn: str, two_accounts
) -> None:
    await sent(conn, ["john@example.com", "ann@example.com"], account="acme")
    other = await sent(conn, ["john@example.com", "ann@example.com"], account="other")
    campaign, subscriber = other["ann@example.com"]
    # a bounce's Content is what the remote server wrote: its Message-ID names nothing
    dump = f"Message-ID: <campaign.{campaign}.{subscriber}@example.com>\r\nSubject: Hi\r\n"
    acme_auth = {"headers": fx.postmark_auth(ACME_POSTMARK)}
    async with http_server(dsn, **two_accounts["settings"]) as base, httpx.AsyncClient(base_url=base) as client:
        answers = [
            await client.post("/inbound/postmark/other", json=fx.postmark_bounce("john@example.com"), **acme_auth),
            await client.post("/inbound/mailgun/other", json=fx.mailgun_event("john@example.com", key=ACME_MAILGUN)),
            await client.post(
                "/inbound/postmark", json=fx.postmark_bounce("ann@example.com", id_=1, content=dump), **acme_auth
            ),
            await client.post(
                "/inbound/mailgun", json=fx.mailgun_event("john@example.com", id_="m2", key=OTHER_MAILGUN)
            ),
            await client.post(
                "/inbound/mailgun/acme",
                json=fx.mailgun_event(
                    "ann@example.com",
                    id_="m3",
                    key=ACME_MAILGUN,
                    message_id=f"<campaign.{campaign}.{subscriber}@example.com>",
                ),
            ),
        ]
    assert [a.status_code for a in answers] == [403, 403, 200, 200, 200]
    assert await suppressed(conn) == [("acme", "ann@example.com"), ("other", "john@example.com")]


async def test_a_global_credential_serves_a_single_account_installation_only(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    key, pem = fx.certificate()
    (tmp_path / "sns.pem").write_bytes(pem)
    acme = await sent(conn, ["john@example.com"], account="acme")
    settings = {
        "ses_certificate_file": str(tmp_path / "sns.pem"),
        "ses_topic_arn": fx.TOPIC,
        "postmark_webhook_secret": SecretStr(fx.POSTMARK_SECRET),
        "mailgun_webhook_signing_key": SecretStr(fx.MAILGUN_KEY),
    }
    campaign, subscriber = acme["john@example.com"]
    dump = f"Message-ID: <campaign.{campaign}.{subscriber}@example.com>\r\n"

    def requests(n: int) -> list[tuple[str, dict]]:
        return [
            (
                "/inbound/ses",
                {"json": fx.sns_notification(key, fx.ses_bounce(["john@example.com"], feedback_id=f"f{n}"))},
            ),
            (
                "/inbound/postmark/globex",
                {"json": fx.postmark_bounce("john@example.com", id_=n, content=dump), "headers": fx.postmark_auth()},
            ),
            ("/inbound/mailgun", {"json": fx.mailgun_event("john@example.com", id_=f"m{n}")}),
        ]

    async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=base) as client:
        await sent(conn, ["john@example.com"], account="globex")
        several = [(await client.post(path, **arguments)).status_code for path, arguments in requests(1)]
        assert await written(conn) == dict.fromkeys(TABLES, 0)
        await conn.execute(
            "DELETE FROM einmal.sends WHERE account_id = (SELECT id FROM einmal.accounts WHERE name = 'globex')"
        )
        await conn.execute(
            "DELETE FROM einmal.campaigns WHERE account_id = (SELECT id FROM einmal.accounts WHERE name = 'globex')"
        )
        await conn.execute(
            "DELETE FROM einmal.subscribers WHERE account_id = (SELECT id FROM einmal.accounts WHERE name = 'globex')"
        )
        await conn.execute("DELETE FROM einmal.accounts WHERE name = 'globex'")
        single = [(await client.post(path, **arguments)).status_code for path, arguments in requests(2)]
    assert several == [403, 403, 403]
    assert single == [200, 403, 200]  # the only account is acme: the URL cannot name another
    assert await suppressed(conn) == [("acme", "john@example.com")]


async def test_postmark_credentials_are_refused_before_the_body_is_read(conn: asyncpg.Connection, dsn: str) -> None:
    """A request without credentials declaring 1 MB is answered 401 with only 1 KiB of it sent."""
    async with http_server(dsn, postmark_webhook_secret=SecretStr(fx.POSTMARK_SECRET)) as base:
        host, port = base.removeprefix("http://").split(":")
        stream = await anyio.connect_tcp(host, int(port))
        async with stream:
            await stream.send(
                b"POST /inbound/postmark HTTP/1.1\r\nHost: einmal\r\nContent-Type: application/json"
                b"\r\nContent-Length: 1000000\r\n\r\n" + b" " * 1024
            )
            answer = b""
            with anyio.fail_after(20):  # a server waiting for the rest of the body never answers
                while b"\r\n\r\n" not in answer:
                    answer += await stream.receive()
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
    assert await written(conn) == dict.fromkeys(TABLES, 0)


async def test_an_address_is_tied_only_to_a_row_whose_message_went_out(conn: asyncpg.Connection, dsn: str) -> None:
    """A provider's event that names no message of ours: the newest row to its address that was sent (or
    may have been: sending, in doubt) is the one; a row never sent (queued, claimed, failed) is not."""
    older = await sent(conn, ["ann@example.com"])
    for status in ("queued", "claimed", "failed"):
        await sent(conn, ["ann@example.com", f"{status}@example.com"], status=status)
    for status in ("sending", "in_doubt"):
        await sent(conn, [f"{status}@example.com"], status=status)
    auth = {"headers": fx.postmark_auth()}
    async with (
        http_server(dsn, postmark_webhook_secret=SecretStr(fx.POSTMARK_SECRET)) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        emails = ["ann", "queued", "claimed", "failed", "sending", "in_doubt"]
        answers = [
            (
                await client.post("/inbound/postmark", json=fx.postmark_bounce(f"{email}@example.com", id_=n), **auth)
            ).json()["applied"]
            for n, email in enumerate(emails, 1)
        ]
    assert answers == [1, 0, 0, 0, 1, 1]
    bounced = await conn.fetch(
        "SELECT s.campaign_id, s.status FROM einmal.bounces b JOIN einmal.sends s "
        "ON s.id = b.send_id WHERE s.email = 'ann@example.com'"
    )
    assert [tuple(r) for r in bounced] == [(older["ann@example.com"][0], "sent")]
    assert await suppressed(conn) == [("acme", f"{email}@example.com") for email in ("ann", "in_doubt", "sending")]


SECRET_WORD = "hunter2secret"
BAD_FILES = {
    "missing": (None, {}, "EINMAL_WEBHOOK_ACCOUNTS_FILE: cannot read"),
    "not TOML": ("[acme\npostmark_webhook_secret = 'u:" + SECRET_WORD + "'\n", {}, "not TOML"),
    "an unknown key": ({"acme": {"postmark_secret": "u:" + SECRET_WORD}}, {}, "not one of ses_topic_arn"),
    "a Postmark secret without a password": (
        {"acme": {"postmark_webhook_secret": SECRET_WORD}},
        {},
        "expected user:password",
    ),
    "a topic that is not an ARN": ({"acme": {"ses_topic_arn": [SECRET_WORD]}}, {}, "expected an SNS topic ARN"),
    "one key for two accounts": (
        {"acme": {"mailgun_webhook_signing_key": SECRET_WORD}, "other": {"mailgun_webhook_signing_key": SECRET_WORD}},
        {},
        "accounts 'acme' and 'other' have the same mailgun_webhook_signing_key",
    ),
    "a global secret beside the file": (
        {"acme": {"postmark_webhook_secret": "u:" + SECRET_WORD}},
        {"EINMAL_POSTMARK_WEBHOOK_SECRET": "u:" + SECRET_WORD},
        "EINMAL_POSTMARK_WEBHOOK_SECRET: a single-account installation's",
    ),
    "a global topic that is not an ARN": ({}, {"EINMAL_SES_TOPIC_ARN": "MyTopic"}, "EINMAL_SES_TOPIC_ARN: expected"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_unusable_webhook_credentials_stop_start_up_with_one_line(tmp_path: Path, case: str) -> None:
    content, env, said = BAD_FILES[case]
    path = tmp_path / "webhooks.toml"
    if isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        accounts_file(tmp_path, content)
    result = einmal(
        "serve", dsn="postgresql://postgres@127.0.0.1:1/nowhere", env={"EINMAL_WEBHOOK_ACCOUNTS_FILE": str(path), **env}
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and said in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert SECRET_WORD not in result.stderr


async def test_a_message_id_names_its_row_only_for_that_rows_own_address(conn: asyncpg.Connection, dsn: str) -> None:
    """A provider's event naming alice's message but another recipient is not alice's bounce: it is the
    same campaign's row for that recipient (bob's), or nobody's (mallory got nothing from acme)."""
    rows = await sent(conn, ["alice@example.com", "bob@example.com"])
    alices = f"<campaign.{rows['alice@example.com'][0]}.{rows['alice@example.com'][1]}@example.com>"
    async with (
        http_server(dsn, mailgun_webhook_signing_key=SecretStr(fx.MAILGUN_KEY)) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        stranger = await client.post(
            "/inbound/mailgun", json=fx.mailgun_event("mallory@example.com", id_="e-mallory", message_id=alices)
        )
        assert stranger.json() == {"applied": 0, "repeated": 0, "dropped": 1}
        assert await suppressed(conn) == [], "alice's row took a bounce for mallory"
        neighbour = await client.post(
            "/inbound/mailgun", json=fx.mailgun_event("bob@example.com", id_="e-bob", message_id=alices)
        )
    assert neighbour.json() == {"applied": 1, "repeated": 0, "dropped": 0}
    assert await suppressed(conn) == [("acme", "bob@example.com")]
    assert await came_back(conn) == [("mailgun:e-bob", "bob@example.com", "hard", "5.1.1", "bounce")]
