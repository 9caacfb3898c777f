"""A sequence narrowed by a segment: each step goes to the members the segment's rule (as it was when the sequence
was made) takes when the step falls due; one it does not take then is passed over for that step, never sent it, and
goes on to the next, whose delay counts from the pass. Made through the API and the command line; sent by a node (in
this process, a real PostgreSQL, a real SMTP server on loopback)."""

import json

import anyio
import asyncpg
import httpx
import pytest

from service.mail.mailing import Mailing
from service.segments import segments
from service.sequences import sequences, steps
from tests.conftest import einmal
from tests.segments.helpers import seed
from tests.sequences.helpers import Stamped
from tests.sequences.test_rules import FAST, settled
from tests.support.pipeline import node_settings, recording_server, running_node
from tests.support.web import http_server
from tests.web.test_api import make_key

pytestmark = pytest.mark.anyio

PRO = {"attribute": "plan", "op": "eq", "value": "pro"}
PEOPLE = {
    "ann@example.org": ({"plan": "pro"}, ["news"], "2026-02-01"),  # taken at each step
    "cat@example.org": ({"plan": "free"}, ["news"], "2026-03-05"),  # never taken
    "fay@example.org": ({"plan": "free"}, ["news"], "2026-04-02"),  # turns pro before the second step
    "gus@example.org": ({"plan": "pro"}, ["offers"], "2026-04-03"),  # not on the sequence's list
}


async def ids_of(conn: asyncpg.Connection) -> dict[str, int]:
    return dict(await conn.fetch("SELECT email_lower, id FROM einmal.subscribers"))


async def test_each_step_goes_to_the_members_the_segment_takes_when_it_falls_due(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account = await seed(conn, people=PEOPLE)
    await segments.create(conn, account_id=account, name="pro", rule=PRO)
    made = await sequences.create(
        conn, account_id=account, name="onboarding", list_name="news", existing=True, segment="pro"
    )
    assert made.segment == "pro" and made.members == 3
    await segments.update(conn, account_id=account, name="pro", rule={"member": "offers"})  # kept as it was made
    mailing = Mailing.of(node_settings(dsn, 25))
    ids = [
        (
            await steps.add(
                conn,
                mailing=mailing,
                account_id=account,
                sequence_id=made.id,
                subject=f"Step {n}",
                from_address="news@example.com",
                text=f"Step {n}.",
                delay_seconds=delay,
            )
        ).campaign_id
        for n, delay in ((1, 0), (2, 3))
    ]
    people = await ids_of(conn)
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        await settled(conn, ids[:1], 1)
        await conn.execute(
            "UPDATE einmal.subscribers SET attributes = '{\"plan\": \"pro\"}' WHERE email_lower = 'fay@example.org'"
        )
        passed = await conn.fetchrow(
            "SELECT last_position, passed_at FROM einmal.sequence_members WHERE subscriber_id = $1",
            people["fay@example.org"],
        )
        assert passed["last_position"] == 1 and passed["passed_at"] is not None, "passed over step 1"
        await settled(conn, ids, 2)
        with anyio.fail_after(30):
            while len(received.arrivals) < 3:
                await anyio.sleep(0.1)
        await anyio.sleep(1)
    got = received.by_step()
    assert sorted(got[ids[0]]) == [people["ann@example.org"]]
    assert sorted(got[ids[1]]) == sorted([people["ann@example.org"], people["fay@example.org"]])
    assert len(received.arrivals) == 3
    arrived = {mid: at for at, _, mid in received.arrivals}
    fay_second = next(at for mid, at in arrived.items() if f".{people['fay@example.org']}@" in mid)
    assert fay_second >= passed["passed_at"].timestamp() + 3, "the delay counts from the pass"
    cat = await conn.fetchrow(
        "SELECT last_position, due_at FROM einmal.sequence_members WHERE subscriber_id = $1", people["cat@example.org"]
    )
    assert (cat["last_position"], cat["due_at"]) == (2, None), "passed over both, then done"


async def test_a_sequence_to_a_segment_by_the_api_and_the_command_line(conn: asyncpg.Connection, dsn: str) -> None:
    account = await seed(conn, people=PEOPLE)
    await segments.create(conn, account_id=account, name="pro", rule=PRO)
    key = {"Authorization": f"Bearer {make_key(dsn, 'acme')}"}
    async with http_server(dsn) as base, httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1") as client:
        made = await client.post("/sequences", headers=key, json={"name": "a", "list": "news", "segment": "pro"})
        unknown = await client.post("/sequences", headers=key, json={"name": "b", "list": "news", "segment": "nope"})
        shown = await client.get(f"/sequences/{made.json()['id']}", headers=key)
    assert made.status_code == 201 and made.json()["segment"] == "pro", made.text
    assert unknown.status_code == 422 and unknown.json()["error"] == "the account has no segment named 'nope'"
    assert shown.json()["sequence"]["segment"] == "pro"
    created = await anyio.to_thread.run_sync(
        lambda: einmal("sequence", "create", "c", "--account", "acme", "--list", "news", "--segment", "pro", dsn=dsn)
    )
    assert created.returncode == 0, created.stderr
    status = await anyio.to_thread.run_sync(
        lambda: einmal("sequence", "status", created.stdout.strip(), "--account", "acme", dsn=dsn)
    )
    assert "narrowed by segment 'pro'" in status.stdout, status.stdout
    refused = await anyio.to_thread.run_sync(
        lambda: einmal("sequence", "create", "d", "--account", "acme", "--list", "news", "--segment", "no", dsn=dsn)
    )
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    rule = await conn.fetchval("SELECT segment_rule::text FROM einmal.sequences WHERE name = 'c'")
    assert json.loads(rule) == PRO
