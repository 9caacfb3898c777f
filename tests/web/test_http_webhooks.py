"""Provider webhooks over real HTTP (einmal serve on loopback) against a real PostgreSQL: the providers'
documented payloads posted twice take effect once, tied to their send rows; wrong signatures and
credentials, unreadable and oversized bodies are a 4xx with one log line and nothing written."""

import json
import logging
import time
from contextlib import asynccontextmanager

import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from service.mail.verp import ReturnPath
from tests.conftest import einmal
from tests.support import webhook_fixtures as fx
from tests.support.web import http_server

pytestmark = pytest.mark.anyio

TABLES = ("einmal.inbound_events", "einmal.bounces", "einmal.suppressions")


@pytest.fixture(scope="module")
def sns_key(tmp_path_factory):
    """(the signing key, the path of its certificate) standing in for SNS's."""
    key, pem = fx.certificate()
    path = tmp_path_factory.mktemp("sns") / "sns.pem"
    path.write_bytes(pem)
    return key, str(path)


@asynccontextmanager
async def serving(dsn: str, sns_key, **overrides):
    settings = {
        "ses_certificate_file": sns_key[1],
        "ses_topic_arn": fx.TOPIC,
        "postmark_webhook_secret": SecretStr(fx.POSTMARK_SECRET),
        "mailgun_webhook_signing_key": SecretStr(fx.MAILGUN_KEY),
        **overrides,
    }
    async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=base) as client:
        yield client


async def sent(
    conn: asyncpg.Connection, emails: list[str], account: str = "acme", status: str = "sent"
) -> dict[str, tuple[int, int]]:
    """A sent campaign of `account` to `emails` (its rows in `status`): each address's (campaign, subscriber)."""
    account_id = await conn.fetchval(
        """INSERT INTO einmal.accounts (name) VALUES ($1)
                                        ON CONFLICT (name) DO UPDATE SET name = $1 RETURNING id""",
        account,
    )
    campaign = await conn.fetchval(
        """INSERT INTO einmal.campaigns (account_id, name, subject, from_address,
                                      body_text, list_ids, status) VALUES ($1, 'spring', 's', 'news@example.com',
                                      'b', '{}', 'sent') RETURNING id""",
        account_id,
    )
    found = {}
    for email in emails:
        subscriber = await conn.fetchval(
            """INSERT INTO einmal.subscribers (account_id, email, email_lower)
                                            VALUES ($1, $2, lower($2)) ON CONFLICT (account_id, email)
                                            DO UPDATE SET email = $2 RETURNING id""",
            account_id,
            email,
        )
        await conn.execute(
            """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower,
                              job_id, status, claimed_by) VALUES ($1, $2, $3, $4, lower($4),
                              'campaign:' || $1::bigint || ':' || $3::bigint, $5,
                              CASE WHEN $5 IN ('claimed', 'sending') THEN 'a-node' END)""",
            campaign,
            account_id,
            subscriber,
            email,
            status,
        )
        found[email] = (campaign, subscriber)
    return found


async def written(conn: asyncpg.Connection) -> dict[str, int]:
    return {table: await conn.fetchval(f"SELECT count(*) FROM {table}") for table in TABLES}


async def came_back(conn: asyncpg.Connection) -> list[tuple]:
    """(event id, address, kind, status, suppression reason) of every einmal.bounces row."""
    return [
        tuple(r)
        for r in await conn.fetch("""
        SELECT b.event_id, s.email, b.kind, b.status, x.reason FROM einmal.bounces b
        JOIN einmal.sends s ON s.id = b.send_id
        LEFT JOIN einmal.suppressions x ON x.account_id = s.account_id AND x.email_lower = s.email_lower
        ORDER BY b.event_id""")
    ]


def webhook_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("webhook ")]


async def twice(client: httpx.AsyncClient, path: str, body: dict, **kwargs) -> list[tuple[int, dict]]:
    answers = [await client.post(path, content=json.dumps(body), **kwargs) for _ in range(2)]
    return [(a.status_code, a.json() if a.status_code == 200 else a.text) for a in answers]


APPLIED, REPEATED = {"applied": 1, "repeated": 0, "dropped": 0}, {"applied": 0, "repeated": 1, "dropped": 0}


async def test_ses_bounces_and_complaints_posted_twice_take_effect_once(
    conn: asyncpg.Connection, dsn: str, sns_key
) -> None:
    rows = await sent(conn, ["jane@example.com", "mary@example.com", "richard@example.com", "tom@example.com"])
    campaign, jane = rows["jane@example.com"]
    key = sns_key[0]
    ours = f"<campaign.{campaign}.{jane}@example.com>"
    async with serving(dsn, sns_key) as client:
        # the message named by its Message-ID; signature version 1
        hard = fx.sns_notification(key, fx.ses_bounce(["jane@example.com"], message_id=ours))
        assert await twice(client, "/inbound/ses", hard) == [(200, APPLIED), (200, REPEATED)]
        # the documented complaint names no message of ours: tied by its address; version 2
        complaint = fx.sns_notification(key, fx.ses_complaint("richard@example.com"), version="2")
        assert await twice(client, "/inbound/ses", complaint) == [(200, APPLIED), (200, REPEATED)]
        # a transient bounce naming two recipients: a soft bounce each, not suppressed
        soft = fx.sns_notification(
            key, fx.ses_bounce(["mary@example.com", "Tom@Example.com"], bounce_type="Transient", feedback_id="f-soft")
        )
        both = {"applied": 2, "repeated": 0, "dropped": 0}
        assert await twice(client, "/inbound/ses", soft) == [(200, both), (200, both | {"applied": 0, "repeated": 2})]
    feedback = "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa068a-000000"
    assert await came_back(conn) == [
        (
            "ses:000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000",
            "richard@example.com",
            "complaint",
            "abuse",
            "complaint",
        ),
        (f"ses:{feedback}", "jane@example.com", "hard", "5.1.1", "bounce"),
        ("ses:f-soft:mary@example.com", "mary@example.com", "soft", "5.1.1", None),
        ("ses:f-soft:tom@example.com", "tom@example.com", "soft", "5.1.1", None),
    ]
    assert await written(conn) == {"einmal.inbound_events": 4, "einmal.bounces": 4, "einmal.suppressions": 2}


async def test_a_subscription_confirmation_is_logged_with_its_url_and_writes_nothing(
    conn: asyncpg.Connection, dsn: str, sns_key, caplog
) -> None:
    caplog.set_level(logging.INFO)
    async with serving(dsn, sns_key) as client:
        answer = await client.post(
            "/inbound/ses",
            content=json.dumps(fx.sns_subscription(sns_key[0])),
            headers={"content-type": "text/plain; charset=UTF-8"},
        )
    assert answer.status_code == 200
    assert [line for line in webhook_lines(caplog) if "Action=ConfirmSubscription" in line and fx.TOPIC in line]
    assert await written(conn) == dict.fromkeys(TABLES, 0)


async def test_postmark_bounces_and_complaints_posted_twice_take_effect_once(
    conn: asyncpg.Connection, dsn: str, sns_key
) -> None:
    rows = await sent(conn, ["john@example.com", "ann@example.com", "bob@example.com", "eve@example.com"])
    campaign, ann = rows["ann@example.com"]
    dump = f"Received: by relay\r\nMessage-ID: <campaign.{campaign}.{ann}@example.com>\r\nSubject: Hi\r\n"
    auth = {"headers": fx.postmark_auth()}
    async with serving(dsn, sns_key) as client:
        for body in (
            fx.postmark_bounce("john@example.com"),
            fx.postmark_complaint("eve@example.com"),
            fx.postmark_bounce("ann@example.com", id_=7, content=dump),
            fx.postmark_bounce("bob@example.com", type_="SoftBounce", id_=8),
        ):
            assert await twice(client, "/inbound/postmark", body, **auth) == [(200, APPLIED), (200, REPEATED)]
        ignored = fx.postmark_bounce("bob@example.com", type_="Transient", id_=9)
        nothing = {"applied": 0, "repeated": 0, "dropped": 0}
        assert await twice(client, "/inbound/postmark", ignored, **auth) == [(200, nothing)] * 2
    assert await came_back(conn) == [
        ("postmark:42", "eve@example.com", "complaint", "SpamComplaint", "complaint"),
        ("postmark:4323372036854775807", "john@example.com", "hard", "HardBounce", "bounce"),
        ("postmark:7", "ann@example.com", "hard", "HardBounce", "bounce"),
        ("postmark:8", "bob@example.com", "soft", "SoftBounce", None),
    ]


async def test_mailgun_failures_and_complaints_posted_twice_take_effect_once(
    conn: asyncpg.Connection, dsn: str, sns_key
) -> None:
    rows = await sent(conn, ["alice@example.com", "carol@example.com", "dan@example.com"])
    campaign, carol = rows["carol@example.com"]
    async with serving(dsn, sns_key) as client:
        for body in (
            fx.mailgun_event("alice@example.com"),
            fx.mailgun_event("carol@example.com", id_="c1", message_id=f"campaign.{campaign}.{carol}@x.org"),
            fx.mailgun_event("dan@example.com", event="complained", severity=None, id_="d1"),
        ):
            assert await twice(client, "/inbound/mailgun", body) == [(200, APPLIED), (200, REPEATED)]
        delivered = fx.mailgun_event("dan@example.com", event="delivered", severity=None, id_="d2")
        assert (await client.post("/inbound/mailgun", json=delivered)).json() == dict.fromkeys(APPLIED, 0)
    assert await came_back(conn) == [
        ("mailgun:G9Bn5sl1TC6nu79C8C0bwg", "alice@example.com", "hard", "5.1.1", "bounce"),
        ("mailgun:c1", "carol@example.com", "hard", "5.1.1", "bounce"),
        ("mailgun:d1", "dan@example.com", "complaint", "5.1.1", "complaint"),
    ]


async def test_the_url_may_name_the_account_of_the_credential(conn: asyncpg.Connection, dsn: str, sns_key) -> None:
    await sent(conn, ["john@example.com"])
    auth = {"headers": fx.postmark_auth()}
    async with serving(dsn, sns_key) as client:
        named = await client.post("/inbound/postmark/acme", json=fx.postmark_bounce("john@example.com"), **auth)
        stranger = await client.post(
            "/inbound/postmark/acme", json=fx.postmark_bounce("zed@example.com", id_=5), **auth
        )
    assert (named.json(), stranger.json()) == (APPLIED, {**APPLIED, "applied": 0, "dropped": 1})
    assert await written(conn) == dict.fromkeys(TABLES, 1)


async def test_the_same_event_id_with_another_payload_is_refused(conn: asyncpg.Connection, dsn: str, sns_key) -> None:
    await sent(conn, ["john@example.com", "ann@example.com"])
    auth = {"headers": fx.postmark_auth()}
    async with serving(dsn, sns_key) as client:
        first = await client.post("/inbound/postmark", json=fx.postmark_bounce("john@example.com"), **auth)
        other = await client.post("/inbound/postmark", json=fx.postmark_bounce("ann@example.com"), **auth)
    assert (first.status_code, other.status_code) == (200, 409)
    assert await written(conn) == dict.fromkeys(TABLES, 1)


async def _chunks():  # no Content-Length: the limit holds while the body streams in
    for _ in range(20):
        yield b" " * 65536


def bad_requests(key) -> dict[str, tuple[str, dict, int]]:
    """name: (path, httpx arguments, the status expected)."""
    tampered = fx.sns_notification(key, fx.ses_bounce(["john@example.com"]))
    tampered["Message"] = tampered["Message"].replace("john@", "jane@")
    other_key, _ = fx.certificate()
    old = fx.mailgun_event("john@example.com", timestamp=int(time.time()) - 9 * 3600)
    wrong_mailgun = fx.mailgun_event("john@example.com", key="another-key")
    return {
        "SES signed by another key": (
            "/inbound/ses",
            {"json": fx.sns_notification(other_key, fx.ses_bounce(["john@example.com"]))},
            403,
        ),
        "SES tampered after signing": ("/inbound/ses", {"json": tampered}, 403),
        "SES unknown signature version": (
            "/inbound/ses",
            {"json": {**fx.sns_notification(key, fx.ses_bounce(["john@example.com"])), "SignatureVersion": "3"}},
            403,
        ),
        "SES from another topic": (
            "/inbound/ses",
            {"json": fx.sns_notification(key, fx.ses_bounce(["john@example.com"]), topic=fx.TOPIC + "-other")},
            403,
        ),
        "Postmark without credentials": ("/inbound/postmark", {"json": fx.postmark_bounce("john@example.com")}, 401),
        "Postmark with wrong credentials": (
            "/inbound/postmark",
            {"json": fx.postmark_bounce("john@example.com"), "headers": fx.postmark_auth("einmal:guess")},
            401,
        ),
        "Mailgun with a wrong signature": ("/inbound/mailgun", {"json": wrong_mailgun}, 403),
        "Mailgun with an old timestamp": ("/inbound/mailgun", {"json": old}, 403),
        "invalid JSON": ("/inbound/postmark", {"content": b'{"RecordType": ', "headers": fx.postmark_auth()}, 400),
        "JSON that is not an object": ("/inbound/mailgun", {"content": b"[1, 2]"}, 400),
        "a field of the wrong type": (
            "/inbound/postmark",
            {"json": {**fx.postmark_bounce("john@example.com"), "Email": ["x"]}, "headers": fx.postmark_auth()},
            400,
        ),
        "body over 1 MiB": (
            "/inbound/postmark",
            {"content": b"{" + b" " * (1024 * 1024) + b"}", "headers": fx.postmark_auth()},
            413,
        ),
        "chunked body over 1 MiB": ("/inbound/ses", {"content": _chunks()}, 413),
        "an unknown provider": ("/inbound/sendgrid", {"json": {}}, 404),
        "an account the credential is not for": (
            "/inbound/postmark/another-account",
            {"json": fx.postmark_bounce("john@example.com"), "headers": fx.postmark_auth()},
            403,
        ),
    }


@pytest.mark.parametrize("case", list(bad_requests(fx.certificate()[0])))
async def test_bad_requests_are_refused_with_one_log_line_and_nothing_written(
    conn: asyncpg.Connection, dsn: str, sns_key, caplog, case: str
) -> None:
    await sent(conn, ["john@example.com", "jane@example.com"])
    path, arguments, status = bad_requests(sns_key[0])[case]
    caplog.set_level(logging.INFO)
    async with serving(dsn, sns_key, ses_topic_arn=fx.TOPIC) as client:
        caplog.clear()
        answer = await client.post(path, **arguments)
    assert answer.status_code == status, answer.text
    assert len(webhook_lines(caplog)) == 1, webhook_lines(caplog)
    assert await written(conn) == dict.fromkeys(TABLES, 0)


async def test_a_provider_without_its_secret_is_not_served(conn: asyncpg.Connection, dsn: str, sns_key) -> None:
    await sent(conn, ["john@example.com"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base) as client:
        answers = [
            await client.post("/inbound/ses", json=fx.sns_notification(sns_key[0], fx.ses_bounce(["x@y.z"]))),
            await client.post(
                "/inbound/postmark", json=fx.postmark_bounce("john@example.com"), headers=fx.postmark_auth()
            ),
            await client.post("/inbound/mailgun", json=fx.mailgun_event("john@example.com")),
        ]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert await written(conn) == dict.fromkeys(TABLES, 0)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"EINMAL_SES_CERTIFICATE_FILE": "/nonexistent/sns.pem"}, "EINMAL_SES_CERTIFICATE_FILE: cannot read"),
        ({"EINMAL_SES_CERTIFICATE_FILE": __file__}, "holds no PEM certificate"),
        ({"EINMAL_POSTMARK_WEBHOOK_SECRET": "no-colon-here"}, "EINMAL_POSTMARK_WEBHOOK_SECRET: expected user:password"),
    ],
)
def test_an_unusable_webhook_setting_stops_the_node_with_one_line(env: dict, said: str) -> None:
    result = einmal("run", env=env)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and said in result.stderr, result.stderr
    assert "no-colon-here" not in result.stderr


async def test_the_message_named_in_the_payload_picks_its_row(conn: asyncpg.Connection, dsn: str, sns_key) -> None:
    older = (await sent(conn, ["tom@example.com"]))["tom@example.com"]
    newer = (await sent(conn, ["tom@example.com"]))["tom@example.com"]
    verp = "bounces+" + ReturnPath("bounces@example.org", "verp-key").token(*older) + "@example.org"
    forged = "bounces+" + ReturnPath("bounces@example.org", "other-key").token(*older) + "@example.org"
    async with serving(
        dsn, sns_key, return_path="bounces@example.org", return_path_secret=SecretStr("verp-key")
    ) as client:
        for source, feedback in ((verp, "f1"), (forged, "f2")):
            assert (
                await client.post(
                    "/inbound/ses",
                    json=fx.sns_notification(
                        sns_key[0], fx.ses_bounce(["tom@example.com"], source=source, feedback_id=feedback)
                    ),
                )
            ).json() == APPLIED
        by_message_id = await client.post(
            "/inbound/mailgun",
            json=fx.mailgun_event(
                "tom@example.com",
                event="complained",
                severity=None,
                message_id=f"<campaign.{older[0]}.{older[1]}@example.com>",
            ),
        )
    assert by_message_id.json() == APPLIED
    rows = await conn.fetch("""SELECT b.event_id, s.campaign_id FROM einmal.bounces b
                               JOIN einmal.sends s ON s.id = b.send_id ORDER BY 1""")
    # the forged token names nothing: that event is tied by its address, to the newest row
    assert [tuple(r) for r in rows] == [
        ("mailgun:G9Bn5sl1TC6nu79C8C0bwg", older[0]),
        ("ses:f1", older[0]),
        ("ses:f2", newer[0]),
    ]


async def test_soft_bounces_reported_by_a_provider_suppress_at_the_limit(
    conn: asyncpg.Connection, dsn: str, sns_key
) -> None:
    await sent(conn, ["bob@example.com"])
    async with serving(dsn, sns_key, soft_bounce_limit=2) as client:
        answers = []
        for n in (1, 2):
            await client.post(
                "/inbound/postmark",
                json=fx.postmark_bounce("bob@example.com", type_="SoftBounce", id_=n),
                headers=fx.postmark_auth(),
            )
            answers.append(await conn.fetchval("SELECT count(*) FROM einmal.suppressions"))
    assert answers == [0, 1]
