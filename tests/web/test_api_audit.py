"""Every change made through /api/v1 writes one line of the audit log (docs/guide/console.md#the-audit-log):
by `api:key <id>`, in the key's account, `<subject>.<verb>`, naming what it changed. The table holds a call of
each operation that writes; an operation that writes and is neither in it nor in EXEMPTED (each with its reason)
fails the first test, so that a new one cannot go unaudited unnoticed. A change refused writes no line."""

import asyncpg
import httpx
import pytest

from service.api import app
from tests.cli.test_campaign_commands import seed_campaign
from tests.conftest import einmal
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

# the operations that write but are no change of the account's settings or data (docs/guide/http-api.md)
EXEMPTED = {
    "send_message": "a transactional message is mail sent, not a change; its send row and events record it",
    "send_message_batch": "as send_message: messages sent, each with its send row",
    "send_test_message": "one test message sent outside the campaign; nothing stored changes",
    "subscribe": "a person's sign-up, as the public form's: pending until the person confirms it",
}

DRAFT = {"name": "Spring", "subject": "Hi", "from": "news@example.org", "text": "Hi {{ unsubscribe_url }}"}
STEP = {"subject": "Welcome", "from": "news@example.org", "text": "Hello {{ unsubscribe_url }}"}
RULE = {"attribute": "plan", "op": "eq", "value": "pro"}

# operation, method, path, JSON body, action, subject; in a path or subject {s} and {p} are campaigns seeded (sent,
# sending), {c}, {k}, {w} and {q} the ids earlier calls answered (MADE); in order: each needs what those before made
MADE = {"create_campaign": "c", "create_key": "k", "create_webhook": "w", "create_sequence": "q"}
CALLS = [
    ("put_list", "PUT", "/lists/news", None, "list.put", "list news"),
    ("put_list_title", "PUT", "/lists/news/title", {"title": "News"}, "list.title", "list news"),
    ("put_list_form", "PUT", "/lists/news/form", {"open": True}, "list.form", "list news"),
    (
        "put_subscriber",
        "PUT",
        "/subscribers/Ann@A.example",
        {"name": "Ann"},
        "subscriber.put",
        "subscriber Ann@A.example",
    ),
    (
        "batch_subscribers",
        "POST",
        "/subscribers/batch",
        {"subscribers": [{"email": "bob@b.example"}, {"email": "ann@a.example"}, {"email": "nobody"}]},
        "subscriber.batch",
        "subscribers: 1 created, 1 updated, 1 invalid",
    ),
    ("put_member", "PUT", "/lists/news/members/ann@a.example", None, "member.add", "list news: ann@a.example"),
    ("delete_member", "DELETE", "/lists/news/members/ann@a.example", None, "member.remove", "list news: ann@a.example"),
    ("delete_subscriber", "DELETE", "/subscribers/bob@b.example", None, "subscriber.erase", "subscriber {bob}"),
    ("put_suppression", "PUT", "/suppressions/carl@c.example", {}, "suppression.add", "carl@c.example"),
    (
        "delete_suppression",
        "DELETE",
        "/suppressions/carl@c.example",
        None,
        "suppression.remove",
        "carl@c.example",
    ),
    ("create_campaign", "POST", "/campaigns", DRAFT, "campaign.create", "campaign {c}"),
    ("change_draft", "PATCH", "/campaigns/{c}", {"name": "May"}, "campaign.change", "campaign {c}"),
    ("approve_campaign", "POST", "/campaigns/{c}/approve?force=true", None, "campaign.approve", "campaign {c}"),
    ("pause_campaign", "POST", "/campaigns/{p}/pause", None, "campaign.pause", "campaign {p}"),
    ("resume_campaign", "POST", "/campaigns/{p}/resume", None, "campaign.resume", "campaign {p}"),
    ("cancel_campaign", "POST", "/campaigns/{c}/cancel", None, "campaign.cancel", "campaign {c}"),
    (
        "reconcile_campaign",
        "POST",
        "/campaigns/{s}/reconcile",
        {"decision": "mark_sent"},
        "campaign.reconcile.mark_sent",
        "campaign {s}",
    ),
    ("retry_campaign", "POST", "/campaigns/{s}/retry", {}, "campaign.retry", "campaign {s}"),
    ("create_key", "POST", "/keys", {"name": "report", "scope": "read"}, "key.create", "key {k}"),
    ("revoke_key", "DELETE", "/keys/{k}", None, "key.revoke", "key {k}"),
    ("change_account", "PATCH", "/account", {"display_name": "Acme"}, "account.change", "account: display_name"),
    (
        "create_dkim_key",
        "POST",
        "/account/domains/example.org/dkim",
        {"selector": "s1", "algorithm": "ed25519"},
        "domain.dkim",
        "domain example.org selector s1",
    ),
    (
        "change_identity",
        "PATCH",
        "/account/identity",
        {"unsubscribe_mailto": "u@example.org"},
        "identity.change",
        "identity: unsubscribe_mailto",
    ),
    ("delete_domain", "DELETE", "/account/domains/example.org", None, "domain.remove", "domain example.org"),
    ("create_webhook", "POST", "/webhooks", {"url": "http://127.0.0.1:9/hook"}, "webhook.create", "webhook {w}"),
    ("rotate_webhook_secret", "POST", "/webhooks/{w}/rotate", None, "webhook.rotate", "webhook {w}"),
    ("replay_webhook", "POST", "/webhooks/{w}/replay", None, "webhook.replay", "webhook {w}"),
    ("delete_webhook", "DELETE", "/webhooks/{w}", None, "webhook.remove", "webhook {w}"),
    (
        "put_message_template",
        "PUT",
        "/message-templates/hi",
        {"subject": "Hi", "text": "Hi"},
        "template.put",
        "message template hi",
    ),
    ("delete_message_template", "DELETE", "/message-templates/hi", None, "template.remove", "message template hi"),
    (
        "create_sequence",
        "POST",
        "/sequences",
        {"name": "onboarding", "list": "news"},
        "sequence.create",
        "sequence {q}",
    ),
    ("add_sequence_step", "POST", "/sequences/{q}/steps", STEP, "step.add", "sequence {q} step 1"),
    (
        "change_sequence_step",
        "PATCH",
        "/sequences/{q}/steps/1",
        {"subject": "Hello"},
        "step.change",
        "sequence {q} step 1",
    ),
    ("pause_sequence", "POST", "/sequences/{q}/pause", None, "sequence.pause", "sequence {q}"),
    ("resume_sequence", "POST", "/sequences/{q}/resume", None, "sequence.resume", "sequence {q}"),
    ("delete_sequence_step", "DELETE", "/sequences/{q}/steps/1", None, "step.delete", "sequence {q} step 1"),
    ("create_segment", "POST", "/segments", {"name": "pro", "rule": RULE}, "segment.create", "segment pro"),
    ("change_segment", "PUT", "/segments/pro", {"rule": {"not": RULE}}, "segment.change", "segment pro"),
    ("delete_segment", "DELETE", "/segments/pro", None, "segment.delete", "segment pro"),
]


def test_every_operation_that_writes_is_audited_or_exempted_with_its_reason() -> None:
    writing = {
        route.operation_id
        for module in app.ROUTES
        for route in module.router.routes
        if set(route.methods) - {"GET", "HEAD"}
    }
    called = [operation for operation, *_ in CALLS]
    assert len(called) == len(set(called)) and not set(called) & set(EXEMPTED)
    assert writing - set(called) - set(EXEMPTED) == set(), "an operation that writes with no audit line tried"
    assert set(called) | set(EXEMPTED) <= writing, "an operation named here that the API no longer has"


async def test_each_change_through_the_api_writes_one_line_in_the_keys_account(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = {"s": await seed_campaign(conn, "sent", sends=("sent", "failed", "in_doubt"))}
    ids["p"] = await seed_campaign(conn, "sending")
    account = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")
    assert einmal("account", "domain", "add", "--account", "acme", "example.org", dsn=dsn).returncode == 0
    key = auth(make_key(dsn, "acme"))
    key_id = await conn.fetchval("SELECT max(id) FROM einmal.api_keys")
    async with (
        http_server(dsn, webhook_allow_http_loopback=True) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        for operation, method, path, body, action, subject in CALLS:
            last = await conn.fetchval("SELECT coalesce(max(id), 0) FROM einmal.audit_log")
            if "{bob}" in subject:  # an erasure names the subscriber by its number, never by the address erased
                ids["bob"] = await conn.fetchval(
                    "SELECT id FROM einmal.subscribers WHERE email_lower = 'bob@b.example'"
                )
            answer = await client.request(method, path.format(**ids), json=body)
            assert answer.is_success, (operation, answer.text)
            if operation in MADE:
                ids[MADE[operation]] = answer.json()["id"]
            lines = await conn.fetch(
                "SELECT actor, account_id, action, subject FROM einmal.audit_log WHERE id > $1", last
            )
            assert [tuple(line) for line in lines] == [(f"api:key {key_id}", account, action, subject.format(**ids))], (
                operation
            )

        last = await conn.fetchval("SELECT max(id) FROM einmal.audit_log")
        refused = await client.patch(f"/campaigns/{ids['c']}", json={"name": "June"})
        assert refused.status_code == 409, refused.text  # cancelled: no draft now
        gone = await client.delete("/segments/pro")
        assert gone.status_code == 404, gone.text
        assert await conn.fetchval("SELECT count(*) FROM einmal.audit_log WHERE id > $1", last) == 0
