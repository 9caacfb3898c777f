"""Garbage against the webhook handlers: whatever JSON (or bytes) a provider's genuine signature or
credentials come with, the answer is 200 or a 4xx, never a 500, and every event read is well formed."""

import json

import anyio.from_thread
import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from service.inbound import webhooks
from service.metrics import Metrics
from service.settings import Settings
from service.web.app import Web
from tests.support import webhook_fixtures as fx

KEY, PEM = fx.certificate()
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "notificationType",
    "eventType",
    "bounce",
    "complaint",
    "mail",
    "bounceType",
    "bouncedRecipients",
    "complainedRecipients",
    "emailAddress",
    "feedbackId",
    "status",
    "source",
    "headers",
    "commonHeaders",
    "RecordType",
    "Type",
    "ID",
    "Email",
    "Content",
    "event",
    "severity",
    "recipient",
    "id",
    "message",
    "event-data",
    "envelope",
    "delivery-status",
    "code",
    "message-id",
    "complaintFeedbackType",
]


def mangled(base: dict) -> st.SearchStrategy:
    """The fixture with some of its fields (at any depth) replaced by other JSON, or added."""

    def apply(edits: list[tuple[str, object]]) -> dict:
        document = json.loads(json.dumps(base))
        for name, value in edits:
            stack = [document]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    if name in node or not stack:
                        node[name] = value
                        break
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)
        return document

    return st.lists(st.tuples(st.sampled_from(FIELDS), JSON), min_size=1, max_size=4).map(apply)


def ses_documents() -> st.SearchStrategy:
    notification = st.one_of(
        JSON,
        mangled(fx.ses_bounce(["jane@example.com", "mary@example.com"])),
        mangled(fx.ses_complaint("jane@example.com")),
    )
    return notification.map(lambda n: fx.sns_notification(KEY, n, message_id="m"))


REQUESTS = st.one_of(
    st.tuples(st.just("/inbound/ses"), ses_documents(), st.just({})),
    st.tuples(st.just("/inbound/ses"), JSON, st.just({})),
    st.tuples(
        st.just("/inbound/postmark"),
        st.one_of(
            JSON, mangled(fx.postmark_bounce("jane@example.com")), mangled(fx.postmark_complaint("jane@example.com"))
        ),
        st.just(fx.postmark_auth()),
    ),
    st.tuples(
        st.just("/inbound/mailgun"),
        st.one_of(
            JSON.map(lambda j: {"signature": fx.mailgun_signature(), "event-data": j}),
            mangled(fx.mailgun_event("jane@example.com")).map(lambda d: {**d, "signature": fx.mailgun_signature()}),
        ),
        st.just({}),
    ),
    st.tuples(
        st.sampled_from(["/inbound/ses", "/inbound/postmark/acme", "/inbound/mailgun"]),
        st.binary(max_size=200),
        st.just(fx.postmark_auth()),
    ),
)


@pytest.fixture
def client(dsn: str, tmp_path):
    pem = tmp_path / "sns.pem"
    pem.write_bytes(PEM)
    config = Settings(
        database_url=dsn,
        ses_certificate_file=str(pem),
        ses_topic_arn=fx.TOPIC,
        postmark_webhook_secret=SecretStr(fx.POSTMARK_SECRET),
        mailgun_webhook_signing_key=SecretStr(fx.MAILGUN_KEY),
    )

    async def start():
        pool = await asyncpg.create_pool(dsn, min_size=0, max_size=2)
        async with pool.acquire() as conn:
            await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
        app = Web(config, pool, Metrics()).app
        return pool, httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://einmal")

    with anyio.from_thread.start_blocking_portal() as portal:
        pool, http = portal.call(start)
        try:
            yield lambda path, body, headers: portal.call(lambda: http.post(path, content=body, headers=headers))
        finally:
            portal.call(http.aclose)
            portal.call(pool.close)


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(REQUESTS)
def test_garbage_is_answered_with_a_4xx_or_200_never_a_500(client, request_: tuple) -> None:
    path, document, headers = request_
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    answer = client(path, body, headers)
    assert answer.status_code in (200, 400, 401, 403, 404, 409, 413), (answer.status_code, answer.text)
    if answer.status_code == 200:
        assert set(answer.json()) == {"applied", "repeated", "dropped"}


@settings(max_examples=300, deadline=None)
@given(st.one_of(mangled(fx.ses_bounce(["jane@example.com"])), mangled(fx.ses_complaint("jane@example.com")), JSON))
def test_every_ses_event_read_is_well_formed(notification) -> None:
    from service.inbound.ses import _ses_events

    try:
        events = _ses_events(notification) if isinstance(notification, dict) else []
    except webhooks.Rejected as exc:
        assert 400 <= exc.status < 500 and str(exc)
        return
    for event in events:
        assert event.kind in ("hard", "soft", "complaint") and event.event_id.startswith("ses:")
        assert "@" in event.recipient and event.status and event.status.isprintable()
