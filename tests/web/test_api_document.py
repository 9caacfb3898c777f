"""What the OpenAPI document promises a client generator: an operation id of its own on every operation,
stable when a path changes; on every POST the Idempotency-Key header and what service/api/idempotency.py
answers (the 409 of a wait, `Idempotent-Replayed`); `Retry-After` wherever it may come."""

import re

from fastapi.routing import APIRoute
from fastapi.utils import generate_unique_id

from service.api import app as api
from service.settings import Settings

# the ids clients' functions are named after: changing one breaks their code, so it is a choice made here
OPERATIONS = {
    ("get", "/subscribers"): "list_subscribers",
    ("get", "/subscribers/{email}"): "get_subscriber",
    ("put", "/subscribers/{email}"): "put_subscriber",
    ("post", "/subscribers/batch"): "batch_subscribers",
    ("delete", "/subscribers/{email}"): "delete_subscriber",
    ("get", "/lists"): "list_lists",
    ("put", "/lists/{name}"): "put_list",
    ("get", "/lists/{name}/form"): "get_list_form",
    ("put", "/lists/{name}/form"): "put_list_form",
    ("put", "/lists/{name}/title"): "put_list_title",
    ("put", "/lists/{name}/members/{email}"): "put_member",
    ("delete", "/lists/{name}/members/{email}"): "delete_member",
    ("get", "/suppressions"): "list_suppressions",
    ("put", "/suppressions/{email}"): "put_suppression",
    ("delete", "/suppressions/{email}"): "delete_suppression",
    ("get", "/campaigns"): "list_campaigns",
    ("post", "/campaigns"): "create_campaign",
    ("get", "/campaigns/{campaign_id}"): "get_campaign",
    ("patch", "/campaigns/{campaign_id}"): "change_draft",
    ("post", "/campaigns/{campaign_id}/approve"): "approve_campaign",
    ("post", "/campaigns/{campaign_id}/pause"): "pause_campaign",
    ("post", "/campaigns/{campaign_id}/resume"): "resume_campaign",
    ("post", "/campaigns/{campaign_id}/cancel"): "cancel_campaign",
    ("post", "/campaigns/{campaign_id}/retry"): "retry_campaign",
    ("get", "/campaigns/{campaign_id}/in-doubt"): "list_in_doubt",
    ("post", "/campaigns/{campaign_id}/reconcile"): "reconcile_campaign",
    ("get", "/campaigns/{campaign_id}/preview"): "preview_campaign",
    ("post", "/campaigns/{campaign_id}/test"): "send_test_message",
    ("get", "/campaigns/{campaign_id}/clicks"): "get_campaign_clicks",
    ("get", "/campaigns/{campaign_id}/opens"): "get_campaign_opens",
    ("get", "/campaigns/{campaign_id}/stats"): "get_campaign_stats",
    ("get", "/keys"): "list_keys",
    ("post", "/keys"): "create_key",
    ("delete", "/keys/{key_id}"): "revoke_key",
    ("get", "/account"): "get_account",
    ("patch", "/account"): "change_account",
    ("get", "/account/domains"): "list_domains",
    ("delete", "/account/domains/{domain}"): "delete_domain",
    ("post", "/account/domains/{domain}/dkim"): "create_dkim_key",
    ("get", "/account/identity"): "get_identity",
    ("patch", "/account/identity"): "change_identity",
    ("get", "/doctor"): "doctor",
    ("post", "/subscribe"): "subscribe",
    ("get", "/webhooks"): "list_webhooks",
    ("post", "/webhooks"): "create_webhook",
    ("delete", "/webhooks/{endpoint_id}"): "delete_webhook",
    ("post", "/webhooks/{endpoint_id}/rotate"): "rotate_webhook_secret",
    ("get", "/webhooks/{endpoint_id}/deliveries"): "list_webhook_deliveries",
    ("post", "/webhooks/{endpoint_id}/replay"): "replay_webhook",
    ("post", "/messages"): "send_message",
    ("post", "/messages/batch"): "send_message_batch",
    ("get", "/messages"): "list_messages",
    ("get", "/messages/{message_id}"): "get_message",
    ("get", "/message-templates"): "list_message_templates",
    ("get", "/message-templates/{name}"): "get_message_template",
    ("put", "/message-templates/{name}"): "put_message_template",
    ("delete", "/message-templates/{name}"): "delete_message_template",
    ("get", "/message-templates/{name}/stats"): "get_message_template_stats",
    ("get", "/sequences"): "list_sequences",
    ("post", "/sequences"): "create_sequence",
    ("get", "/sequences/{sequence_id}"): "get_sequence",
    ("get", "/sequences/{sequence_id}/stats"): "get_sequence_stats",
    ("post", "/sequences/{sequence_id}/pause"): "pause_sequence",
    ("post", "/sequences/{sequence_id}/resume"): "resume_sequence",
    ("post", "/sequences/{sequence_id}/steps"): "add_sequence_step",
    ("patch", "/sequences/{sequence_id}/steps/{position}"): "change_sequence_step",
    ("delete", "/sequences/{sequence_id}/steps/{position}"): "delete_sequence_step",
    ("get", "/segments"): "list_segments",
    ("post", "/segments"): "create_segment",
    ("get", "/segments/{name}"): "get_segment",
    ("put", "/segments/{name}"): "change_segment",
    ("delete", "/segments/{name}"): "delete_segment",
    ("get", "/segments/{name}/count"): "count_segment",
    ("get", "/segments/{name}/sample"): "sample_segment",
}


def app():
    return api.api(None, Settings(database_url="postgresql://nobody@127.0.0.1/none"))


def test_every_operation_has_its_own_stable_snake_case_id_not_fastapis_default() -> None:
    made = app()
    routes = [r for module in api.ROUTES for r in module.router.routes if isinstance(r, APIRoute)]
    assert len(routes) == len(OPERATIONS)
    for route in routes:
        assert route.operation_id is not None, (route.methods, route.path)
        assert route.operation_id != generate_unique_id(route), (route.path, route.operation_id)
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", route.operation_id), route.operation_id
    document = made.openapi()
    ids = {
        (method, path): op.get("operationId") for path, ops in document["paths"].items() for method, op in ops.items()
    }
    assert ids == OPERATIONS
    assert len(set(ids.values())) == len(ids)


def test_every_post_declares_the_idempotency_key_and_its_answers() -> None:
    document = app().openapi()
    posts = 0
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            answers = op["responses"]
            for status in {"409", "429", "503"} & set(answers):
                assert "Retry-After" in answers[status].get("headers", {}), (method, path, status)
            if method != "post":
                assert not any(p["name"] == "Idempotency-Key" for p in op.get("parameters", [])), (method, path)
                assert not any("Idempotent-Replayed" in a.get("headers", {}) for a in answers.values())
                continue
            posts += 1
            [header] = [p for p in op["parameters"] if p["name"] == "Idempotency-Key"]
            assert (header["in"], header["required"], header["schema"]["maxLength"]) == ("header", False, 200)
            assert "still running" in answers["409"]["description"], (path, answers["409"])
            assert answers["409"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Problem"}
            for status, answer in answers.items():
                kept = status != "401" and not status.startswith("5")
                assert ("Idempotent-Replayed" in answer.get("headers", {})) == kept, (path, status)
    assert posts == 22
    assert document["paths"]["/subscribe"]["post"]["responses"]["429"]["headers"]["Retry-After"]["schema"] == {
        "type": "integer"
    }
    # a route's own 409 keeps its meaning beside the wait's
    assert document["paths"]["/keys"]["post"]["responses"]["409"]["description"].startswith(
        "its Idempotency-Key's request was done"
    )
