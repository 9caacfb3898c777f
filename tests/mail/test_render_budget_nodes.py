"""The template budget on real processes: `campaign create` refuses a hostile template at once, in
one line; a subscriber whose attribute makes a template outgrow its budget fails alone, while two
real `einmal run` nodes send everyone else and stay up."""

import json
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.cli.test_campaign_commands import campaign_count, one_line_error, seed_account
from tests.conftest import einmal
from tests.mail.test_sandbox import NESTED
from tests.support.pipeline import (
    Received,
    approve,
    counts,
    node_env,
    recording_server,
    seed,
    start_node,
    stop_node,
    wait_status,
)

pytestmark = pytest.mark.anyio

STEPS = "more than 100,000 steps for one message"
HOSTILE = {
    "nested loops over [0]*999999": (
        "{% for a in [0]*999999 %}{% for b in [0]*999999 %}{% endfor %}{% endfor %}",
        STEPS,
    ),
    "replace amplification": (
        "{% set a = 'x' * 999999 %}{{ ('x' * 3000) | replace('x', a) | length }}",
        "a replace of more than",
    ),
    "doubling macro": ("{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}", STEPS),
    "300-million-character %": ("{{ ('%300000000s' % 'x') | length }}", "% formatting of more than"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
async def test_campaign_create_refuses_a_hostile_template_in_one_line(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, case: str
) -> None:
    await seed_account(conn)
    text, problem = HOSTILE[case]
    (tmp_path / "body.txt").write_text(text)
    result = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "N",
        "--subject",
        "S",
        "--from",
        "a@example.org",
        "--text-file",
        str(tmp_path / "body.txt"),
        dsn=dsn,
        timeout=30,
    )
    assert one_line_error(result).startswith(f"einmal: text body: {problem}")
    assert await campaign_count(conn) == 0


async def heartbeats(conn: asyncpg.Connection) -> dict[str, object]:
    rows = await conn.fetch("SELECT id, heartbeat_at FROM einmal.nodes WHERE id LIKE 'a/%' OR id LIKE 'b/%'")
    return {r["id"].split("/")[0]: r["heartbeat_at"] for r in rows}


async def test_a_subscribers_long_attribute_fails_that_row_alone_and_no_node_freezes(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    addresses = [f"b{i}@example.com" for i in range(200)]
    campaign = await seed(conn, addresses, body="Hi {{ name }}\n" + NESTED)
    await conn.execute(
        "UPDATE einmal.subscribers SET attributes = $1::jsonb WHERE email = 'b7@example.com'",
        json.dumps({"s": "x" * 3000}),
    )  # 2.7e10 loop items for this subscriber alone
    received = Received()
    async with recording_server(received) as port:
        env = node_env(dsn, port, EINMAL_BATCH_SIZE="20")
        nodes = [start_node({**env, "EINMAL_NODE_ID": name}, tmp_path / f"{name}.log") for name in ("a", "b")]
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=60)
            before = await heartbeats(conn)
            with anyio.fail_after(30):  # both nodes still beat: neither is stuck in a render
                while not (len(now := await heartbeats(conn)) == 2 and all(now[n] > before[n] for n in before)):
                    await anyio.sleep(0.1)
            assert [node.poll() for node in nodes] == [None, None]
        finally:
            codes = [await stop_node(node) for node in nodes]
    assert codes == [0, 0], (tmp_path / "a.log").read_text() + (tmp_path / "b.log").read_text()
    assert await counts(conn, campaign) == {"sent": 199, "failed": 1}  # nothing claimed, sending or in doubt
    failed = await conn.fetchrow(
        "SELECT email, last_reply FROM einmal.sends WHERE campaign_id = $1 AND status = 'failed'", campaign
    )
    assert failed["email"] == "b7@example.com"
    assert failed["last_reply"].startswith(f"cannot render: {STEPS}"), failed["last_reply"]
    assert sorted(rcpt for _, rcpt, _ in received.messages) == sorted(set(addresses) - {"b7@example.com"})
