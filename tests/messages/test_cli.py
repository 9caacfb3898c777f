"""`einmal message …` (the real command line in a child process, a real PostgreSQL), and what the pruner does
with messages: their Idempotency-Keys forgotten after EINMAL_MESSAGE_KEY_HOURS (a request with one is then new),
and with EINMAL_MESSAGE_RETENTION_DAYS the settled messages older deleted with their send row and campaign, never
one in doubt."""

import asyncpg
import pytest

from service.campaigns import retention
from service.messages import messages
from service.messages.messages import Queueing
from service.settings import Settings
from tests.conftest import einmal
from tests.messages.support import FROM, account_with_key, message_rows

pytestmark = pytest.mark.anyio


async def test_templates_and_messages_on_the_command_line(conn: asyncpg.Connection, dsn: str) -> None:
    await account_with_key(conn, dsn)
    added = einmal(
        "message", "template", "add", "--account", "acme", "receipt",
        "--subject", "Order {{ attributes.order }}", "--text", "Thanks.", "--from", FROM, dsn=dsn,
    )  # fmt: skip
    assert (added.returncode, added.stdout) == (0, "added template receipt\n"), added.stderr
    listed = einmal("message", "template", "list", "--account", "acme", dsn=dsn)
    assert "receipt" in listed.stdout and "Order {{ attributes.order }}" in listed.stdout
    sent = [
        einmal(
            "message",
            "send",
            "--account",
            "acme",
            "--to",
            "ann@example.org",
            "--template",
            "receipt",
            "--data",
            '{"order": "A-1"}',
            "--idempotency-key",
            "order-A-1",
            dsn=dsn,
        )
        for _ in range(2)
    ]
    assert [s.returncode for s in sent] == [0, 0], [s.stderr for s in sent]
    assert sent[0].stdout == sent[1].stdout and int(sent[0].stdout) >= 2**52  # one message for the key
    shown = einmal("message", "show", "--account", "acme", sent[0].stdout.strip(), dsn=dsn)
    assert shown.returncode == 0 and shown.stdout.startswith(f"message {sent[0].stdout.strip()}: queued\n")
    assert "to: ann@example.org" in shown.stdout and "template: receipt" in shown.stdout
    bad = einmal("message", "send", "--account", "acme", "--to", "a@example.org", "--template", "receipt",
                 "--data", "[1]", dsn=dsn)  # fmt: skip
    assert (bad.returncode, bad.stderr) == (2, "einmal: --data: a JSON object is needed\n")
    unknown = einmal("message", "show", "--account", "acme", str(2**52 + 5), dsn=dsn)
    assert (unknown.returncode, unknown.stderr) == (1, "einmal: no such message\n")
    assert einmal("message", "template", "remove", "--account", "acme", "receipt", dsn=dsn).returncode == 0
    again = einmal("message", "template", "remove", "--account", "acme", "receipt", dsn=dsn)
    assert (again.returncode, again.stderr) == (1, "einmal: no such message template\n")
    assert len(await message_rows(conn)) == 1


async def test_the_pruner_forgets_keys_and_deletes_old_settled_messages(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn, message_key_hours=72, message_retention_days=30)

    async def send(key: str) -> int:
        made = await messages.send(
            conn,
            queueing=Queueing.of(settings),
            account_id=account_id,
            to="ann@example.org",
            subject="S",
            body_text="T",
            from_address=FROM,
            idempotency_key=key,
        )
        return made.id

    old, doubtful, recent = await send("old"), await send("doubtful"), await send("recent")
    await conn.execute(
        "UPDATE einmal.messages SET created_at = now() - interval '40 days' WHERE campaign_id = ANY ($1::bigint[])",
        [old, doubtful],
    )
    await conn.execute("UPDATE einmal.sends SET status = 'sent' WHERE campaign_id = ANY ($1::bigint[])", [old, recent])
    await conn.execute("UPDATE einmal.sends SET status = 'in_doubt' WHERE campaign_id = $1", doubtful)
    assert await messages.prune_keys(conn, settings=settings) == 2
    assert await messages.prune(conn, settings=settings) == 1
    kept = await conn.fetch("SELECT campaign_id, idempotency_key FROM einmal.messages ORDER BY campaign_id")
    assert [tuple(r) for r in kept] == [(doubtful, None), (recent, "recent")]
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE id = $1", old) == 0
    assert [r["campaign_id"] for r in await message_rows(conn)] == [doubtful, recent]
    assert await send("recent") == recent  # kept: the same message
    assert await send("doubtful") not in (doubtful, recent)  # forgotten: a new one
    # a message's campaign is never one `einmal prune` takes, even cancelled long ago: no partition of its own
    await conn.execute(
        "UPDATE einmal.campaigns SET status = 'cancelled', updated_at = now() - interval '400 days' WHERE id = $1",
        recent,
    )
    assert await retention.candidates(conn, older_than_seconds=0) == []
