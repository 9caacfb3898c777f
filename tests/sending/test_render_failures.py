"""A template that fails for most subscribers: create and approve warn after a trial render over a
sample of the campaign's real subscribers, and a running campaign pauses itself once its render
failures pass a small threshold, with the figure in its pause reason; resumed after the template was
fixed, it sends the rest."""

from pathlib import Path

import anyio
import asyncpg
import pytest

from service.addresses import email_key
from tests.conftest import einmal
from tests.support.pipeline import UNSUBSCRIBE, counts, node_env, start_node, stop_node, wait_status

pytestmark = pytest.mark.anyio

BODY = "Hallo {{ name }} aus {{ attributes.stadt }}\nAbmelden: {{ unsubscribe_url }}"


async def seeded(conn: asyncpg.Connection, total: int, with_city: int) -> None:
    """An account `acme` whose list `default` holds `total` subscribers, the first `with_city` of them with a
    `stadt` attribute."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    list_id = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default') RETURNING id", account
    )
    for i in range(total):
        email = f"user{i:03d}@example.org"
        attributes = '{"stadt": "Köln"}' if i < with_city else "{}"
        subscriber = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes) "
            "VALUES ($1, $2, $3, 'N', $4) RETURNING id",
            account,
            email,
            email_key(email),
            attributes,
        )
        await conn.execute("INSERT INTO einmal.list_members VALUES ($1, $2)", list_id, subscriber)


def create(dsn: str):
    return einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "c",
        "--subject",
        "Hi",
        "--from",
        "news@example.org",
        "--text",
        BODY,
        dsn=dsn,
        env=UNSUBSCRIBE,
    )


async def test_create_and_approve_warn_when_the_trial_render_fails_for_part_of_a_sample(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await seeded(conn, 30, 2)
    created = create(dsn)
    assert created.returncode == 0, created.stderr
    campaign = int(created.stdout)
    warning = (
        "einmal: warning: the campaign cannot be rendered for 28 of 30 subscribers tried (a sample of its "
        "lists): 'dict object' has no attribute 'stadt'"
    )
    assert warning in created.stderr.splitlines()
    approved = einmal("campaign", "approve", str(campaign), dsn=dsn, env=UNSUBSCRIBE)
    assert approved.returncode == 0 and warning in approved.stderr.splitlines(), approved.stderr
    await conn.execute("UPDATE einmal.campaigns SET status = 'draft'")
    await conn.execute('UPDATE einmal.subscribers SET attributes = \'{"stadt": "Bonn"}\'')
    quiet = einmal("campaign", "approve", str(campaign), dsn=dsn, env=UNSUBSCRIBE)
    assert quiet.returncode == 0 and quiet.stderr == ""


async def test_a_campaign_whose_messages_keep_failing_to_render_pauses_itself_and_resumes_after_a_fix(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, smtp_server
) -> None:
    await seeded(conn, 157, 2)
    campaign = int(create(dsn).stdout)
    assert einmal("campaign", "approve", str(campaign), dsn=dsn, env=UNSUBSCRIBE).returncode == 0
    log = tmp_path / "node.log"
    node = start_node(node_env(dsn, smtp_server.port, EINMAL_SMTP_CONNECTIONS="2"), log)
    try:
        await wait_status(conn, campaign, "paused")
        reason = await conn.fetchval("SELECT pause_reason FROM einmal.campaigns WHERE id = $1", campaign)
        assert reason.startswith("cannot render for ") and "'dict object' has no attribute 'stadt'" in reason
        failed = (await counts(conn, campaign)).get("failed", 0)
        assert 10 <= failed <= 40, failed
        assert "paused" in log.read_text()
        await conn.execute(
            "UPDATE einmal.campaigns SET body_text = 'Hallo {{ name }} aus "
            '{{ attributes.stadt | default("") }}\nAbmelden: {{ unsubscribe_url }}\' '
            "WHERE id = $1",
            campaign,
        )
        assert einmal("campaign", "resume", str(campaign), dsn=dsn, env=UNSUBSCRIBE).returncode == 0
        await wait_status(conn, campaign, "sent")
    finally:
        assert await stop_node(node) == 0
    assert (await counts(conn, campaign)) == {"failed": failed, "sent": 157 - failed}


async def test_the_pause_reason_counts_every_row_the_template_failed_and_only_those(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, smtp_server
) -> None:
    """A template that fails for everyone, 20 connections rendering at once: the rows they were rendering while
    the pause was being written used to fail too (40 failed, the reason said "10 of 10")."""
    await seeded(conn, 200, 0)
    campaign = int(create(dsn).stdout)
    await conn.execute("UPDATE einmal.campaigns SET status = 'approved' WHERE id = $1", campaign)
    node = start_node(node_env(dsn, smtp_server.port, EINMAL_SMTP_CONNECTIONS="20"), tmp_path / "node.log")
    try:
        await wait_status(conn, campaign, "paused")
        with anyio.fail_after(30):  # the rows the node held go back to the queue
            while (await counts(conn, campaign)).keys() - {"queued", "failed"}:
                await anyio.sleep(0.1)
    finally:
        assert await stop_node(node) == 0
    reason = await conn.fetchval("SELECT pause_reason FROM einmal.campaigns WHERE id = $1", campaign)
    failed = (await counts(conn, campaign)).get("failed", 0)
    assert reason.startswith(f"cannot render for {failed} of {failed} recipients tried"), (reason, failed)
    assert reason.endswith(": 'dict object' has no attribute 'stadt'"), reason
    assert failed == 10
