"""The delivery actor against real HTTP receivers on loopback: signed, tried again with the same id, a 410
disables, Retry-After is honoured, parked then replayed, one hanging endpoint holds up no other's, a dead
node's lease is taken over, the URL policy is checked again at delivery."""

import json
import time

import anyio
import pytest

from service.subscribers import suppressions
from service.webhooks import endpoints
from tests.support.webhook_receiver import HANG, Answer, Receiver, Request
from tests.support.webhooks import endpoint, running_actor, verified, wait_until

pytestmark = pytest.mark.anyio


async def account(conn, name: str = "acme") -> int:
    return await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)


async def unsubscribe(conn, account_id: int, *emails: str) -> None:
    """An event each (subscriber.unsubscribed), written by the trigger."""
    await suppressions.suppress(conn, account_id, list(emails), "unsubscribe")


def failing(times: int, answer: Answer | None = None):
    """Answers `answer` (500) to the first `times` requests, then 200."""
    seen: list[Request] = []

    def decide(request: Request) -> Answer:
        seen.append(request)
        return (answer or Answer(status=500)) if len(seen) <= times else Answer()

    return decide


async def test_a_delivery_is_signed_and_tried_again_with_the_same_id(dsn, conn) -> None:
    a = await account(conn)
    async with Receiver(failing(2)) as receiver:
        _, secret = await endpoint(conn, a, receiver.url())
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn):
            await wait_until(conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries")
    assert len(receiver.requests) == 3 and len(set(receiver.ids())) == 1
    event_id = await conn.fetchval("SELECT id FROM einmal.webhook_events")
    assert receiver.ids()[0] == event_id
    for request in receiver.requests:
        payload = verified(request, secret)
        assert payload["type"] == "subscriber.unsubscribed" and payload["data"]["email"] == "ann@example.org"
        assert payload["sequence"] == 1
    assert len({r.body for r in receiver.requests}) == 1  # the same body on every attempt
    row = await conn.fetchrow("SELECT attempts, last_status FROM einmal.webhook_deliveries")
    assert (row["attempts"], row["last_status"]) == (3, 200)


async def test_410_disables_the_endpoint_and_parks_its_deliveries(dsn, conn) -> None:
    a = await account(conn)
    async with Receiver(lambda _r: Answer(status=410)) as receiver:
        endpoint_id, _ = await endpoint(conn, a, receiver.url())
        await unsubscribe(conn, a, "ann@example.org", "bob@example.org", "cy@example.org")
        async with running_actor(dsn):
            await wait_until(conn, "SELECT disabled_at IS NOT NULL FROM einmal.webhook_endpoints")
            await wait_until(conn, "SELECT bool_and(state = 'parked') FROM einmal.webhook_deliveries")
            await unsubscribe(conn, a, "dee@example.org")  # a disabled endpoint gets no new event
            await anyio.sleep(0.5)
    assert 1 <= len(receiver.requests) <= 3  # those already in flight when the first 410 came, no more
    assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_deliveries") == 3
    listed = await endpoints.listing(conn, account_id=a)
    assert listed[0].id == endpoint_id and "410" in (listed[0].disabled_reason or "") and listed[0].parked == 3


async def test_retry_after_is_honoured(dsn, conn) -> None:
    a = await account(conn)
    async with Receiver(failing(1, Answer(status=503, headers={"Retry-After": "2"}))) as receiver:
        await endpoint(conn, a, receiver.url())
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn):
            await wait_until(conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries")
    first, second = receiver.requests
    assert second.at - first.at >= 1.9  # not the schedule's 0.05 s


async def test_parked_after_the_last_attempt_then_replayed(dsn, conn) -> None:
    a = await account(conn)
    answers = {"status": 500}
    async with Receiver(lambda _r: Answer(status=answers["status"])) as receiver:
        endpoint_id, _ = await endpoint(conn, a, receiver.url())
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn, webhook_retry_seconds="0.05,0.05"):
            await wait_until(conn, "SELECT bool_and(state = 'parked') FROM einmal.webhook_deliveries")
            assert len(receiver.requests) == 3  # the first attempt and one per wait
            [parked] = await endpoints.deliveries(conn, account_id=a, id=endpoint_id, state="parked")
            assert parked.attempts == 3 and parked.last_status == 500
            await anyio.sleep(0.5)
            assert len(receiver.requests) == 3  # parked: not tried again
            answers["status"] = 200
            replayed = await endpoints.replay(conn, account_id=a, id=endpoint_id)
            assert replayed.replayed == 1
            await wait_until(conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries")
    assert len(set(receiver.ids())) == 1 and len(receiver.requests) == 4


@pytest.mark.serial  # it bounds the other deliveries' time: other tests' load would measure the machine
async def test_a_hanging_endpoint_holds_up_no_other_accounts(dsn, conn) -> None:
    a, b = await account(conn, "a"), await account(conn, "b")
    async with Receiver(lambda _r: HANG) as hanging, Receiver() as fine:
        await endpoint(conn, a, hanging.url())
        await endpoint(conn, b, fine.url())
        await unsubscribe(conn, a, *(f"a{i}@example.org" for i in range(20)))
        async with running_actor(dsn, webhook_timeout_seconds=10.0, webhook_in_flight=6, webhook_endpoint_in_flight=4):
            await hanging.wait_for(lambda: len(hanging.requests) >= 4, 10)
            started = time.monotonic()
            await unsubscribe(conn, b, *(f"b{i}@example.org" for i in range(20)))
            await fine.wait_for(lambda: len(fine.requests) >= 20, 5)
            took = time.monotonic() - started
            assert len(hanging.requests) == 4  # the hanging endpoint's own places, no more
    assert took < 5 and len(set(fine.ids())) == 20


async def test_a_dead_nodes_lease_is_taken_over_when_it_ends(dsn, conn) -> None:
    a = await account(conn)
    async with Receiver() as receiver:
        await endpoint(conn, a, receiver.url())
        await unsubscribe(conn, a, "ann@example.org")
        await conn.execute(
            "UPDATE einmal.webhook_deliveries SET claimed_by = 'dead:webhooks', lease_until = now() + interval '2s'"
        )
        async with running_actor(dsn):
            await anyio.sleep(1)
            assert receiver.requests == []  # the lease still holds
            await wait_until(conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries")
    assert len(receiver.requests) == 1


async def test_the_policy_is_checked_again_at_delivery(dsn, conn) -> None:
    a = await account(conn)
    async with Receiver() as receiver:
        await endpoint(conn, a, receiver.url())  # loopback: registered while a test setting allowed it
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn, webhook_allow_http_loopback=False):
            await wait_until(conn, "SELECT bool_and(attempts >= 2) FROM einmal.webhook_deliveries")
        # https to loopback: the connection itself is refused, the name resolved and checked
        await conn.execute("UPDATE einmal.webhook_endpoints SET url = $1", f"https://localhost:{receiver.port}/h")
        await conn.execute("UPDATE einmal.webhook_deliveries SET attempts = 0, next_attempt_at = now()")
        async with running_actor(dsn, webhook_allow_http_loopback=False):
            await wait_until(conn, "SELECT bool_and(attempts >= 1) FROM einmal.webhook_deliveries")
    assert receiver.requests == []
    error = await conn.fetchval("SELECT last_error FROM einmal.webhook_deliveries")
    assert "policy refuses" in error


async def test_after_a_rotation_both_secrets_verify(dsn, conn) -> None:
    from service.settings import Settings

    a = await account(conn)
    async with Receiver() as receiver:
        endpoint_id, old = await endpoint(conn, a, receiver.url())
        rotated = await endpoints.rotate(conn, Settings().webhook_rotation_hours, account_id=a, id=endpoint_id)
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn):
            await receiver.wait_for(lambda: len(receiver.requests) == 1, 10)
    [request] = receiver.requests
    assert verified(request, rotated.secret, old)["data"]["email"] == "ann@example.org"
    assert json.loads(request.body)["type"] == "subscriber.unsubscribed"


async def test_after_the_rotation_window_the_old_secret_signs_no_more(dsn, conn) -> None:
    from standardwebhooks import Webhook
    from standardwebhooks.webhooks import WebhookVerificationError

    from service.settings import Settings

    a = await account(conn)
    async with Receiver() as receiver:
        endpoint_id, old = await endpoint(conn, a, receiver.url())
        rotated = await endpoints.rotate(conn, Settings().webhook_rotation_hours, account_id=a, id=endpoint_id)
        # the window ended a second ago (the previous secret is still stored: only the claim's check drops it)
        await conn.execute(
            "UPDATE einmal.webhook_endpoints SET previous_until = now() - interval '1 second' WHERE id = $1",
            endpoint_id,
        )
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn):
            await receiver.wait_for(lambda: len(receiver.requests) == 1, 10)
    [request] = receiver.requests
    assert verified(request, rotated.secret)["data"]["email"] == "ann@example.org"
    assert len(request.headers["webhook-signature"].split()) == 1
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(request.body, request.headers)


async def test_a_stopping_actor_gives_its_leases_back(dsn, conn) -> None:
    a = await account(conn)
    async with Receiver(lambda _r: HANG) as receiver:
        await endpoint(conn, a, receiver.url())
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn, webhook_timeout_seconds=30.0):
            await receiver.wait_for(lambda: len(receiver.requests) == 1, 10)
            assert await conn.fetchval("SELECT lease_until > now() + interval '30s' FROM einmal.webhook_deliveries")
    row = await conn.fetchrow("SELECT state, claimed_by, lease_until FROM einmal.webhook_deliveries")
    assert tuple(row) == ("pending", None, None)


async def test_the_connection_goes_to_a_checked_address_and_host_keeps_the_name(dsn, conn) -> None:
    a = await account(conn)
    async with Receiver() as receiver:  # on 127.0.0.1 only: a ::1 that localhost may name first is refused
        await endpoint(conn, a, f"http://localhost:{receiver.port}/hook")
        await unsubscribe(conn, a, "ann@example.org")
        async with running_actor(dsn):
            await wait_until(conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries")
    [request] = receiver.requests
    assert request.headers["host"] == f"localhost:{receiver.port}" and request.path == "/hook"


async def test_delivered_events_are_pruned_after_the_retention_others_kept(dsn, conn) -> None:
    a = await account(conn)
    endpoint_id, _ = await endpoint(conn, a, "http://127.0.0.1:9/h")
    await conn.execute("UPDATE einmal.webhook_endpoints SET disabled_at = now(), disabled_reason = 'test'")
    for event_id, state, days in [
        ("old_done", "delivered", 8),
        ("new_done", "delivered", 1),
        ("old_parked", "parked", 8),
    ]:
        await conn.execute(
            "INSERT INTO einmal.webhook_events (id, account_id, type, sequence, payload, created_at) "
            "VALUES ($1, $2, 'message.sent', 1, '{}', now() - make_interval(days => $3))",
            event_id,
            a,
            days,
        )
        await conn.execute(
            "INSERT INTO einmal.webhook_deliveries (event_id, endpoint_id, state) VALUES ($1, $2, $3)",
            event_id,
            endpoint_id,
            state,
        )
    async with running_actor(dsn, webhook_retention_days=7.0):  # it prunes as it starts
        await wait_until(conn, "SELECT NOT EXISTS (SELECT 1 FROM einmal.webhook_events WHERE id = 'old_done')")
    kept = await conn.fetch("SELECT id FROM einmal.webhook_events ORDER BY id")
    assert [r["id"] for r in kept] == ["new_done", "old_parked"]
    delivering = await conn.fetch("SELECT event_id FROM einmal.webhook_deliveries ORDER BY event_id")
    assert [r["event_id"] for r in delivering] == ["new_done", "old_parked"]  # a pruned event's went with it
