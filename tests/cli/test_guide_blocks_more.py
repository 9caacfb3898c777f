"""More of the guides' blocks, run as they are written there (tests/cli/test_guide_blocks.py tells how): the
engagement guide's, the sequences guide's segment, the campaigns guide's local send times."""

import json
from pathlib import Path

import asyncpg
import pytest

from service import db
from service.settings import Settings
from tests.cli.test_guide_blocks import NO_NODE, _acme, _exports
from tests.support import doc_examples
from tests.support.wiring import wiring

pytestmark = pytest.mark.anyio

SPRING = "Spring is here. No more mail: {{ unsubscribe_url }}\n"


async def _unsubscribe(conn: asyncpg.Connection, campaign: int, email: str) -> None:
    """A one-click unsubscribe of `email` from `campaign`, as the HTTP surface records it."""
    account, subscriber = await conn.fetchrow(
        "SELECT c.account_id, s.id FROM einmal.campaigns c JOIN einmal.subscribers s ON s.account_id = c.account_id "
        "WHERE c.id = $1 AND s.email = $2",
        campaign,
        email,
    )
    await conn.execute(
        "INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'x')",
        f"unsubscribe:{account}.{campaign}.{subscriber}",
    )


async def test_the_engagement_guides_campaign_block_prints_its_figures(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await _acme(conn, "news")
    (tmp_path / "people.csv").write_text("email,list\nann@example.org,news\nbob@example.org,news\n")
    (tmp_path / "spring.txt").write_text(SPRING)
    await conn.execute("SELECT setval('einmal.campaigns_id_seq', 11)")  # the page's campaign is 12
    setup = _exports() + (
        "einmal subscribers import --account acme people.csv\n"
        "einmal campaign create --account acme --name Spring --subject Spring --list news "
        "--from news@example.org --text-file spring.txt\n"
    )
    code, out, err = await doc_examples.run(setup, dsn, NO_NODE, cwd=tmp_path)
    assert code == 0 and out.splitlines()[-1] == "12", (out, err)
    await _unsubscribe(conn, 12, "bob@example.org")
    block = doc_examples.example("guide/engagement.md", "sh", "## A campaign")
    code, out, err = await doc_examples.run(block, dsn, NO_NODE)
    assert code == 0, err
    assert out.splitlines()[:2] == [
        "campaign 12: delivered 0, bounced 0, complained 0, unsubscribed 1",
        "clicks not tracked",
    ], out


async def test_the_engagement_guides_sequence_block_prints_each_step(conn: asyncpg.Connection, dsn: str) -> None:
    await _acme(conn, "news")
    steps = "".join(
        f"einmal sequence step add 1 --account acme --subject '{s}' --from news@example.org "
        "--text 'No more mail: {{ unsubscribe_url }}'\n"
        for s in ("Welcome", "Day three")
    )
    setup = _exports() + "einmal sequence create welcome --account acme --list news\n" + steps
    setup += "einmal sequence step delete 1 2 --account acme\n"
    code, _, err = await doc_examples.run(setup, dsn, NO_NODE)
    assert code == 0, err
    block = doc_examples.example("guide/engagement.md", "sh", "## Each step of a sequence")
    code, out, err = await doc_examples.run(block, dsn, NO_NODE)
    assert code == 0, err
    shown = json.loads(out.splitlines()[-1])
    assert shown["name"] == "welcome" and shown["sequence_id"] == 1, out
    assert [(s["position"], s["subject"], s["deleted"]) for s in shown["steps"]] == [
        (1, "Welcome", False),
        (2, "Day three", True),
    ], out
    assert "Welcome" in out.split("{")[0] and "deleted" in out.split("{")[0], out  # the table before the JSON


async def test_the_engagement_guides_template_block_counts_a_removed_templates_messages(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await _acme(conn)
    # the messages guide's block adds template receipt, makes a message of it, and removes the template
    messages = doc_examples.example("guide/messages.md", "shell", "## Templates and messages")
    code, _, err = await doc_examples.run(messages, dsn, NO_NODE)
    assert code == 0, err
    send, campaign, account = await conn.fetchrow("SELECT id, campaign_id, account_id FROM einmal.sends")
    await conn.execute(
        "INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ('arf:1', 'x');"
        "INSERT INTO einmal.bounces (event_id, account_id, send_id, campaign_id, kind, status) "
        f"VALUES ('arf:1', {account}, {send}, {campaign}, 'complaint', 'abuse')"
    )
    block = doc_examples.example("guide/engagement.md", "sh", "## A message template")
    code, out, err = await doc_examples.run(block, dsn, NO_NODE)
    assert code == 0, err
    assert out.splitlines()[0] == "template 'receipt': delivered 0, bounced 0, complained 1, unsubscribed 0", out


async def test_the_sequences_guides_segment_block_runs_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    await _acme(conn, "news")
    setup = (
        "einmal segments create pro --account acme "
        """--rule '{"attribute": "plan", "op": "eq", "value": "pro"}'\n"""
    )
    block = doc_examples.example("guide/sequences.md", "shell", "## To a segment")
    code, out, err = await doc_examples.run(setup + block, dsn, NO_NODE)
    assert code == 0, err
    made = await conn.fetchrow("SELECT id, segment FROM einmal.sequences WHERE name = 'pro-onboarding'")
    assert out.splitlines()[-1] == str(made["id"]) and made["segment"] == "pro", out


async def test_the_campaigns_guides_local_time_block_runs_as_written(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await _acme(conn, "default")
    (tmp_path / "people.csv").write_text(
        "email,list,time_zone\nann@example.org,default,Asia/Tokyo\nbob@example.org,default,Mars/Olympus\n"
    )
    (tmp_path / "spring.txt").write_text(SPRING)
    await conn.execute("SELECT setval('einmal.campaigns_id_seq', 41)")  # the page's campaign is 42
    setup = _exports() + "einmal subscribers import --account acme people.csv\n"
    block = doc_examples.example("guide/campaigns.md", "shell", "## Local send times")
    code, out, err = await doc_examples.run(setup + block, dsn, NO_NODE, cwd=tmp_path)
    assert code == 0, err
    assert "  at 09:00 local time" in out.splitlines() and "  about 2 recipients now" in out, out
    # a node starts it when due and its builder makes its rows, each waiting for its local time
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending', started_at = now() WHERE id = 42")
    pool = await db.create_pool(dsn, size=2)
    try:
        assert await wiring(Settings(database_url=dsn), pool, dsn).builder().build(42) == 2
    finally:
        await pool.close()
    [status] = [line for line in block.splitlines() if line.startswith("einmal campaign status")]
    [shown] = [line.split("#", 1)[1].strip() for line in block.splitlines() if "local time:" in line]
    code, out, err = await doc_examples.run(status, dsn, NO_NODE)
    assert code == 0, err
    # the page's figures are its own campaign's: here two rows, Bob's on the account's zone as his names none
    expected = shown.replace("61200", "2").split(", the next due ")[0] + ", the next due …"
    assert doc_examples.unprinted(["  " + expected], out) == [], out
    assert "; 1 recipient whose time_zone attribute names no known time zone got the account's" in out, out
