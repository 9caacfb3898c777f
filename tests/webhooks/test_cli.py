"""`einmal webhook add|list|remove|rotate|replay --account NAME`."""

import pytest

from tests.conftest import cells, einmal

LOOPBACK = {"EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK": "true"}


@pytest.mark.anyio
async def test_an_endpoint_is_added_listed_rotated_replayed_and_removed(conn, dsn) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    added = einmal(
        "webhook", "add", "--account", "acme", "--event", "message.sent", "http://127.0.0.1:9/h", dsn=dsn, env=LOOPBACK
    )
    assert added.returncode == 0, added.stderr
    secret = added.stdout.strip()
    assert secret.startswith("whsec_") and "\n" not in secret
    assert await conn.fetchval("SELECT secret FROM einmal.webhook_endpoints") == secret
    listed = einmal("webhook", "list", "--account", "acme", dsn=dsn).stdout.splitlines()
    assert cells(listed[0]) == ["id", "state", "pending", "parked", "events", "url"]
    endpoint_id, state, *_rest, url = cells(listed[1])
    assert (state, url) == ("active", "http://127.0.0.1:9/h") and secret not in "".join(listed)
    rotated = einmal("webhook", "rotate", "--account", "acme", endpoint_id, dsn=dsn)
    assert rotated.returncode == 0 and rotated.stdout.strip().startswith("whsec_")
    assert rotated.stdout.strip() != secret and "previous one signs too" in rotated.stderr
    account = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")
    await conn.execute(
        "INSERT INTO einmal.webhook_events (id, account_id, type, sequence, payload) "
        "VALUES ('evt_1', $1, 'message.sent', 1, '{}')",
        account,
    )
    await conn.execute(
        "INSERT INTO einmal.webhook_deliveries (event_id, endpoint_id, state, attempts, last_status, last_error) "
        "VALUES ('evt_1', $1, 'parked', 12, 503, 'HTTP 503: busy')",
        int(endpoint_id),
    )
    parked = einmal("webhook", "deliveries", "--account", "acme", "--state", "parked", endpoint_id, dsn=dsn)
    header, row = parked.stdout.splitlines()
    assert cells(header) == ["event", "type", "state", "attempts", "status", "made", "next", "last error"]
    assert cells(row)[:5] == ["evt_1", "message.sent", "parked", "12", "503"] and cells(row)[-1] == "HTTP 503: busy"
    pending = einmal("webhook", "deliveries", "--account", "acme", "--state", "pending", endpoint_id, dsn=dsn)
    assert pending.stdout.splitlines()[1:] == []
    replayed = einmal("webhook", "replay", "--account", "acme", endpoint_id, dsn=dsn)
    assert replayed.stdout.strip() == f"webhook endpoint {endpoint_id}: 1 parked deliveries pending again"
    assert einmal("webhook", "remove", "--account", "acme", endpoint_id, dsn=dsn).returncode == 0
    again = einmal("webhook", "remove", "--account", "acme", endpoint_id, dsn=dsn)
    assert (again.returncode, again.stderr.strip()) == (1, "einmal: no such webhook endpoint")


@pytest.mark.anyio
async def test_refusals_are_one_line(conn, dsn) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    for args, said in [
        (("--account", "acme", "http://example.org/h"), "must be https://"),
        (("--account", "acme", "https://10.1.2.3/h"), "non-public"),
        (("--account", "nosuch", "https://example.org/h"), "no account named 'nosuch'"),
    ]:
        found = einmal("webhook", "add", *args, dsn=dsn)
        assert found.returncode == 1 and found.stdout == "", found
        assert len(found.stderr.strip().splitlines()) == 1 and said in found.stderr, found.stderr
    wrong = einmal("webhook", "add", "--account", "acme", "--event", "message.read", "https://x.org/", dsn=dsn)
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr
