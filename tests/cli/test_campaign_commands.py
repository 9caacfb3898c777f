"""`einmal campaign create|approve|pause|resume|cancel|status` against a real PostgreSQL."""

import io
import json
import os
import subprocess
import sys
from argparse import Namespace
from datetime import UTC, datetime
from pathlib import Path

import anyio
import asyncpg
import pytest

from service import db
from service.cli import campaign_status
from service.settings import Settings
from tests.conftest import ROOT, einmal

pytestmark = pytest.mark.anyio

HELD = ("claimed", "sending", "in_doubt")


async def seed_account(conn: asyncpg.Connection, name: str = "acme", lists: tuple[str, ...] = ("default",)) -> int:
    account = await conn.fetchval(
        "INSERT INTO einmal.accounts (name) VALUES ($1) "
        "ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id",
        name,
    )
    for list_name in lists:
        await conn.execute(
            "INSERT INTO einmal.lists (account_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING", account, list_name
        )
    return account


async def seed_campaign(conn: asyncpg.Connection, status: str = "draft", sends: tuple[str, ...] = ()) -> int:
    """A campaign of account acme in `status`, with one send row per entry of `sends` (its status)."""
    account = await seed_account(conn)
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status) "
        "VALUES ($1, 'spring', 'Hello', 'news@example.org', 'Hi', '{}', $2) RETURNING id",
        account,
        status,
    )
    for i, send_status in enumerate(sends):
        email = f"r{i}@example.org"
        subscriber = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, $2) "
            "ON CONFLICT (account_id, email) DO UPDATE SET name = '' RETURNING id",
            account,
            email,
        )
        await conn.execute(
            "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, "
            "status, claimed_by, attempts, last_reply) "
            "VALUES ($1, $2, $3, $4, lower($4), 'campaign:' || $1::bigint || ':' || $3::bigint, "
            "$5, $6, 1, $7)",
            campaign,
            account,
            subscriber,
            email,
            send_status,
            "node-a" if send_status in HELD else None,
            "connection lost after DATA" if send_status == "in_doubt" else None,
        )
    return campaign


async def campaign_count(conn: asyncpg.Connection) -> int:
    return await conn.fetchval("SELECT count(*) FROM einmal.campaigns")


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- create -------------------------------------------------------------------------------------


async def test_create_prints_the_id_alone_and_stores_a_draft_for_the_default_list(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    account = await seed_account(conn, lists=("default", "vip"))
    (tmp_path / "body.txt").write_text("Hello {{ name }}\n{{unsubscribe_url}}\n")
    (tmp_path / "body.html").write_text("<p>Hello {{name}}</p>")
    result = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "Spring",
        "--subject",
        "Hi {{ name }}",
        "--from",
        "Team@Example.ORG",
        "--text-file",
        str(tmp_path / "body.txt"),
        "--html-file",
        str(tmp_path / "body.html"),
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    campaign_id = int(result.stdout)
    assert result.stdout == f"{campaign_id}\n"
    row = await conn.fetchrow("SELECT * FROM einmal.campaigns WHERE id = $1", campaign_id)
    default = await conn.fetchval("SELECT id FROM einmal.lists WHERE name = 'default'")
    assert (row["account_id"], row["status"], row["name"]) == (account, "draft", "Spring")
    assert row["subject"] == "Hi {{ name }}"
    assert row["from_address"] == "Team@example.org"  # the domain normalised
    assert row["body_text"] == "Hello {{ name }}\n{{unsubscribe_url}}\n"
    assert row["body_html"] == "<p>Hello {{name}}</p>"
    assert row["list_ids"] == [default]


async def test_create_with_named_lists_and_a_display_name_from(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn, lists=("default", "vip", "press"))
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
        '"Acme, News" <news@example.org>',
        "--text",
        "Hi",
        "--list",
        "press",
        "--list",
        "vip",
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    row = await conn.fetchrow("SELECT list_ids, from_address, body_html FROM einmal.campaigns")
    ids = dict(await conn.fetch("SELECT name, id FROM einmal.lists"))
    assert row["list_ids"] == [ids["press"], ids["vip"]]
    assert row["from_address"] == '"Acme, News" <news@example.org>'
    assert row["body_html"] is None


@pytest.mark.parametrize(
    "sender, stored",
    [
        ("news@acme.test", "news@acme.test"),
        ("Acme <news@Acme.LOCAL>", "Acme <news@acme.local>"),
        ("ops@mail.invalid", "ops@mail.invalid"),
    ],
)
async def test_create_accepts_the_from_addresses_the_import_accepts_special_use_domains_too(
    conn: asyncpg.Connection, dsn: str, sender: str, stored: str
) -> None:
    await seed_account(conn)
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
        sender,
        "--text",
        "Hi",
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    assert await conn.fetchval("SELECT from_address FROM einmal.campaigns WHERE id = $1", int(result.stdout)) == stored


async def test_create_at_a_future_time_stores_scheduled_for(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    common = (
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
        "--text",
        "Hi {{ unsubscribe_url }}",
    )
    zoned = einmal(*common, "--list", "default", "--at", "2031-05-01T09:30:00+02:00", dsn=dsn)
    naive = einmal(*common, "--list", "default", "--at", "2031-05-01T09:30:00", dsn=dsn)
    now = einmal(*common, "--list", "default", dsn=dsn)
    assert [r.returncode for r in (zoned, naive, now)] == [0, 0, 0], (zoned.stderr, naive.stderr, now.stderr)
    scheduled = dict(await conn.fetch("SELECT id, scheduled_for FROM einmal.campaigns"))
    assert scheduled[int(zoned.stdout)] == datetime(2031, 5, 1, 7, 30, tzinfo=UTC)
    assert scheduled[int(naive.stdout)] == datetime(2031, 5, 1, 9, 30, tzinfo=UTC)  # no timezone: UTC
    assert scheduled[int(now.stdout)] < datetime.now(UTC)
    assert zoned.stderr == "" and naive.stderr == (
        "einmal: note: --at '2031-05-01T09:30:00' names no offset or time zone: taken as UTC, "
        "2031-05-01T09:30:00+00:00\n"
    )


async def test_create_at_a_date_and_a_time_apart_is_understood(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    common = (
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
        "--text",
        "Hi {{ unsubscribe_url }}",
        "--list",
        "default",
        "--at",
    )
    spaced = einmal(*common, "2031-01-01 09:00", dsn=dsn)
    zoned = einmal(*common, "2031-01-01 09:00 Europe/Berlin", dsn=dsn)
    assert [spaced.returncode, zoned.returncode] == [0, 0], (spaced.stderr, zoned.stderr)
    assert spaced.stderr == (
        "einmal: note: --at '2031-01-01 09:00' names no offset or time zone: taken as UTC, 2031-01-01T09:00:00+00:00\n"
    )
    at = dict(await conn.fetch("SELECT id, scheduled_for FROM einmal.campaigns"))
    assert at[int(spaced.stdout)] == datetime(2031, 1, 1, 9, 0, tzinfo=UTC)
    assert at[int(zoned.stdout)] == datetime(2031, 1, 1, 8, 0, tzinfo=UTC)
    past = einmal(*common, "2001-01-01 09:00", dsn=dsn)
    assert past.returncode == 2 and past.stderr.startswith("einmal: --at '2001-01-01 09:00' is in the past")


BAD_CREATE = {
    "unknown account": (["--account", "nobody"], "einmal: no account named 'nobody'"),
    "unknown list": (["--list", "default", "--list", "vipp"], "einmal: account 'acme' has no list named 'vipp'"),
    "missing text file": (
        ["--text-file", "/nonexistent/body.txt"],
        "einmal: --text-file /nonexistent/body.txt: no such file",
    ),
    "missing html file": (
        ["--html-file", "/nonexistent/b.html"],
        "einmal: --html-file /nonexistent/b.html: no such file",
    ),
    "invalid from": (["--from", "not-an-address"], "einmal: --from 'not-an-address' is not a valid address"),
    "from with two addresses": (
        ["--from", "Doe, Jane <j@example.org>"],
        "einmal: --from 'Doe, Jane <j@example.org>': quote the display name",
    ),
    "line break in subject": (
        ["--subject", "Hi\r\nBcc: x@example.org"],
        "einmal: --subject must not contain line breaks",
    ),
    "line break in name": (["--name", "a\nb"], "einmal: --name must not contain line breaks"),
    "line break in from": (
        ["--from", "a@example.org\nBcc: b@example.org"],
        "einmal: --from must not contain line breaks",
    ),
    "empty subject": (["--subject", " "], "einmal: --subject must not be empty"),
    "unparseable at": (["--at", "next tuesday"], "einmal: --at 'next tuesday' is not an ISO-8601 time"),
    "unknown variable in subject": (["--subject", "Hi {{ nme }}"], "einmal: subject: line 1: unknown variable 'nme'"),
    "unknown variable in text": (["--text", "Hi\n{{nmae}}"], "einmal: text body: line 2: unknown variable 'nmae'"),
    "template syntax error": (["--text", "Hi\n\n{% if name %}x"], "einmal: text body: line 3: Unexpected end"),
    "sandbox escape": (["--text", "{{ ''.__class__.__mro__ }}"], "einmal: text body: line 1: names starting"),
    "template import": (["--text", "{% import 'os' as os %}"], "einmal: text body: line 1: import is not allowed"),
    "loop of 10**9": (["--text", "{% for i in range(10**9) %}x{% endfor %}"], "einmal: text body: more than"),
}


BAD_ARGUMENTS = {"missing text file", "missing html file", "unparseable at"}


@pytest.mark.parametrize("case", BAD_CREATE, ids=list(BAD_CREATE))
async def test_create_refuses_bad_input_in_one_line_and_inserts_nothing(
    conn: asyncpg.Connection, dsn: str, case: str
) -> None:
    await seed_account(conn, lists=("default", "vip"))
    await seed_account(conn, name="other", lists=("vipp",))  # a list of another account is not acme's
    changes, expected = BAD_CREATE[case]
    options = {"--account": "acme", "--name": "N", "--subject": "S", "--from": "a@example.org", "--text": "Hi"}
    if "--text-file" in changes:
        del options["--text"]
    for option, value in zip(changes[::2], changes[1::2], strict=True):
        if option != "--list":
            options[option] = value
    lists = [
        x
        for option, value in zip(changes[::2], changes[1::2], strict=True)
        if option == "--list"
        for x in (option, value)
    ]
    result = einmal("campaign", "create", *[x for pair in options.items() for x in pair], *lists, dsn=dsn)
    # judged without the database: a bad argument, exit 2 as docs/reference/cli.md says; the rest exit 1
    assert result.returncode == (2 if case in BAD_ARGUMENTS else 1), result.stderr
    assert one_line_error(subprocess.CompletedProcess(result.args, 1, result.stdout, result.stderr)).startswith(
        expected
    )
    assert result.stdout == ""
    assert await campaign_count(conn) == 0


async def test_create_checks_merge_fields_of_the_html_body(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    await seed_account(conn)
    (tmp_path / "b.html").write_text("<p>{{ unsubscribe }}</p>")
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
        "--text",
        "Hi",
        "--html-file",
        str(tmp_path / "b.html"),
        dsn=dsn,
    )
    assert one_line_error(result).startswith("einmal: html body: line 1: unknown variable 'unsubscribe'")
    assert await campaign_count(conn) == 0


async def test_create_refuses_a_template_of_1_mb_in_one_line(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await seed_account(conn)
    (tmp_path / "big.txt").write_text("Hello {{ name }}\n" + "x" * 1_000_000)
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
        str(tmp_path / "big.txt"),
        dsn=dsn,
    )
    assert one_line_error(result) == "einmal: text body: longer than 500,000 characters"
    assert await campaign_count(conn) == 0


# --- transitions --------------------------------------------------------------------------------

NO_NODE = "due now, but no node is running: start one with `einmal run`"
DONE_WORD = {"approve": f"approved; {NO_NODE}", "pause": "paused", "resume": "resumed", "cancel": "cancelled"}


async def test_every_allowed_transition_moves_the_campaign_and_notifies(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn)
    heard: list[str] = []
    all_heard = anyio.Event()

    def listen(*args: object) -> None:
        heard.append(str(args[3]))
        if len(heard) == 4:
            all_heard.set()

    await conn.add_listener("einmal_campaign", listen)
    path = []
    for verb, then in (
        ("approve", "approved"),
        (None, "sending"),
        ("pause", "paused"),
        ("resume", "sending"),
        ("cancel", "cancelled"),
    ):
        if verb is None:  # the scheduler's start, done here by hand
            await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
        else:
            result = einmal("campaign", verb, str(campaign), dsn=dsn)
            expected = (0, f"campaign {campaign} {DONE_WORD[verb]}\n")
            assert (result.returncode, result.stdout) == expected, result.stderr
        path.append(await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign))
        assert path[-1] == then
    with anyio.fail_after(30):
        await all_heard.wait()
    assert heard == [str(campaign)] * 4


@pytest.mark.parametrize(
    ("status", "verb"),
    [
        ("sent", "approve"),
        ("approved", "approve"),
        ("sending", "approve"),
        ("draft", "pause"),
        ("approved", "pause"),
        ("paused", "pause"),
        ("sending", "resume"),
        ("draft", "resume"),
        ("sent", "cancel"),
        ("cancelled", "cancel"),
        ("cancelled", "resume"),
    ],
)
async def test_a_refused_transition_is_one_line_and_changes_nothing(
    conn: asyncpg.Connection, dsn: str, status: str, verb: str
) -> None:
    campaign = await seed_campaign(conn, status)
    before = await conn.fetchval("SELECT updated_at FROM einmal.campaigns WHERE id = $1", campaign)
    result = einmal("campaign", verb, str(campaign), dsn=dsn)
    assert one_line_error(result) == f"einmal: cannot {verb} campaign {campaign}: it is {status}"
    row = await conn.fetchrow("SELECT status, updated_at FROM einmal.campaigns WHERE id = $1", campaign)
    assert tuple(row) == (status, before)


@pytest.mark.parametrize(
    "command",
    [
        "campaign approve",
        "campaign cancel",
        "campaign status",
        "campaign status --json",
        "campaign status --follow",
        "reconcile",
        "reconcile --resend",
        "reconcile --mark-sent",
    ],
)
async def test_an_unknown_campaign_id_is_one_line(conn: asyncpg.Connection, dsn: str, command: str) -> None:
    await seed_campaign(conn)
    words = command.split()
    at = 2 if words[0] == "campaign" else 1
    args = [*words[:at], "4242", *words[at:]]
    assert one_line_error(einmal(*args, dsn=dsn)) == "einmal: no campaign with id 4242"


async def test_two_racing_approve_cas_statements_exactly_one_wins(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn)
    other = await asyncpg.connect(dsn)
    results: list[int | None] = []

    async def second() -> None:
        results.append(await other.fetchval(*db.sql("campaign_approve", campaign_id=campaign)))

    try:
        first = conn.transaction()
        await first.start()
        won = await conn.fetchval(*db.sql("campaign_approve", campaign_id=campaign))
        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            with anyio.fail_after(30):  # the second statement waits for the first one's row lock
                while not await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                ):
                    await anyio.sleep(0.01)
            assert results == []
            await first.commit()  # the second now re-checks `status = 'draft'` on the committed row
    finally:
        await other.close()
    assert (won, results) == (campaign, [None])
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "approved"


async def test_two_racing_approve_processes_one_exits_0_and_one_exits_1(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn)
    results: list[subprocess.CompletedProcess] = []

    async def approve() -> None:
        result = await anyio.to_thread.run_sync(lambda: einmal("campaign", "approve", str(campaign), dsn=dsn))
        results.append(result)

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(approve)
    winner, loser = sorted(results, key=lambda r: r.returncode)
    assert (winner.returncode, winner.stdout) == (0, f"campaign {campaign} approved; {NO_NODE}\n"), winner.stderr
    assert one_line_error(loser) == f"einmal: cannot approve campaign {campaign}: it is approved"


# --- status -------------------------------------------------------------------------------------


async def test_status_json_has_every_state_including_zeros(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("sent", "sent", "queued", "in_doubt"))
    result = einmal("campaign", "status", str(campaign), "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr
    scheduled = await conn.fetchval("SELECT scheduled_for FROM einmal.campaigns WHERE id = $1", campaign)
    assert (
        result.stdout
        == json.dumps(
            {
                "id": campaign,
                "status": "sending",
                "total": 4,
                "counts": {
                    "queued": 1,
                    "claimed": 0,
                    "sending": 0,
                    "sent": 2,
                    "suppressed": 0,
                    "failed": 0,
                    "cancelled": 0,
                    "in_doubt": 1,
                },
                "scheduled_for": scheduled.isoformat(),
                "started_at": None,
                "pause_reason": None,
                "bounced": 0,
                "soft_bounced": 0,
                "unclassified": 0,
                "complained": 0,
                "reasons": {},
                "paused_domains": [],
                "failures": [],
                "unsubscribed": 0,
                "recipients_estimate": None,
                "nodes_running": 0,
                "next_step": "1 message in doubt (the relay may or may not have taken it): "
                f"decide with `einmal reconcile {campaign}`",
                "unsubscribe": True,
                "local_time": None,
                "waiting_for_local_time": 0,
                "next_due": None,
                "time_zone_fallbacks": 0,
            }
        )
        + "\n"
    )


async def test_status_json_of_a_campaign_without_send_rows_is_all_zeros(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "draft")
    result = einmal("campaign", "status", str(campaign), "--json", dsn=dsn)
    assert json.loads(result.stdout) == {
        "id": campaign,
        "status": "draft",
        "total": 0,
        "counts": dict.fromkeys(campaign_status.STATES, 0),
        "scheduled_for": None,
        "started_at": None,  # a draft given no time
        "pause_reason": None,
        "bounced": 0,
        "soft_bounced": 0,
        "unclassified": 0,
        "complained": 0,
        "reasons": {},
        "paused_domains": [],
        "failures": [],
        "unsubscribed": 0,
        "recipients_estimate": 0,
        "nodes_running": 0,
        "next_step": None,
        "unsubscribe": True,
        "local_time": None,
        "waiting_for_local_time": 0,
        "next_due": None,
        "time_zone_fallbacks": 0,
    }


async def test_status_counts_the_send_rows_that_bounced_or_drew_a_complaint(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent",) * 5)
    other = await conn.fetchval(
        """INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text,
                                   list_ids, status) SELECT account_id, 'other', 's', 'f@example.org', 'b', '{}',
                                   'sent' FROM einmal.campaigns WHERE id = $1 RETURNING id""",
        campaign,
    )
    await conn.execute(
        """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id,
                          status) SELECT $2::bigint, account_id, subscriber_id, email, email_lower,
                          'campaign:' || $2::bigint || ':' || subscriber_id, 'sent'
                          FROM einmal.sends WHERE campaign_id = $1""",
        campaign,
        other,
    )
    rows = [
        r["id"] for r in await conn.fetch("SELECT id FROM einmal.sends WHERE campaign_id = $1 ORDER BY id", campaign)
    ]
    elsewhere = await conn.fetchval("SELECT min(id) FROM einmal.sends WHERE campaign_id = $1", other)
    came_back = [
        (rows[0], "hard", "no_mailbox"),
        (rows[1], "soft", "mailbox_full"),
        (rows[1], "soft", "routing"),
        (rows[2], "soft", None),
        (rows[3], "complaint", "complaint"),
        (rows[4], "hard", "policy"),
        (rows[4], "complaint", "complaint"),
        (rows[4], "unclassified", "unclassified"),
        (elsewhere, "hard", "no_mailbox"),
    ]
    for n, (send_id, kind, reason) in enumerate(came_back):
        await conn.execute("INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'x')", f"t:{n}")
        await conn.execute(
            """INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, reason)
                              SELECT $1, account_id, id, $3, '5.1.1', $4 FROM einmal.sends WHERE id = $2""",
            f"t:{n}",
            send_id,
            kind,
            reason,
        )
    shown = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    assert (shown["bounced"], shown["soft_bounced"], shown["unclassified"], shown["complained"]) == (2, 2, 1, 2)
    assert shown["reasons"] == {
        "no_mailbox": 1,
        "mailbox_full": 1,
        "routing": 1,
        "policy": 1,
        "complaint": 2,
        "unclassified": 1,
    }
    text = einmal("campaign", "status", str(campaign), dsn=dsn).stdout.splitlines()
    at = text.index("came back:")
    assert [line.strip().rsplit(maxsplit=1) for line in text[at + 1 : at + 5]] == [
        ["bounced", "2"],
        ["soft bounced", "2"],
        ["unclassified", "1"],
        ["complained", "2"],
    ]
    at = text.index("by reason:")
    assert [line.strip().rsplit(maxsplit=1) for line in text[at + 1 : at + 7]] == [
        ["complaint", "2"],
        ["mailbox full", "1"],
        ["no mailbox", "1"],
        ["policy", "1"],
        ["routing", "1"],
        ["unclassified", "1"],
    ]


async def test_status_table_shows_status_name_each_state_and_total(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "paused", sends=("sent", "failed", "suppressed", "claimed"))
    result = einmal("campaign", "status", str(campaign), dsn=dsn)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"campaign {campaign} 'spring': paused"
    assert [line.split() for line in lines[1:10]] == [
        ["queued", "0"],
        ["claimed", "1"],
        ["sending", "0"],
        ["sent", "1"],
        ["suppressed", "1"],
        ["failed", "1"],
        ["cancelled", "0"],
        ["in_doubt", "0"],
        ["total", "4"],
    ]


def test_progress_line_counts_every_finished_state_as_done() -> None:
    counts = dict.fromkeys(campaign_status.STATES, 0) | {
        "sent": 1000,
        "suppressed": 150,
        "failed": 40,
        "in_doubt": 10,
        "queued": 3800,
    }
    snap = campaign_status.Snapshot(7, "spring", "sending", counts)
    assert campaign_status.progress_line(snap, 850.0) == (
        "[####................] done 1200/5000 (sent 1000, suppressed 150, failed 40, in_doubt 10)   24%  850/s  ETA 4s"
    )
    paused = campaign_status.Snapshot(7, "spring", "paused", counts)
    assert "paused" in campaign_status.progress_line(paused, 0.0)
    assert "ETA --" in campaign_status.progress_line(paused, 0.0)


def test_rate_is_measured_over_the_recent_samples() -> None:
    rate = campaign_status.Rate(window=5.0)
    assert rate.add(0.0, 0) == 0.0
    assert rate.add(1.0, 100) == 100.0
    assert rate.add(2.0, 300) == 150.0
    assert rate.add(10.0, 300) == 0.0  # nothing moved in the last window


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty", [True, False], ids=["tty", "pipe"])
async def test_follow_ends_when_the_campaign_is_sent(conn: asyncpg.Connection, dsn: str, tty: bool) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("queued", "queued", "sent"))
    out = FakeTty() if tty else io.StringIO()
    args = Namespace(id=campaign, json=False, follow=True)
    settings = Settings(database_url=dsn)
    codes = []

    async def run() -> None:
        codes.append(await campaign_status.command(args, settings, out=out, interval=0.01))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while "done 1/3" not in out.getvalue():
                await anyio.sleep(0.01)
            await conn.execute("UPDATE einmal.sends SET status = 'sent' WHERE campaign_id = $1", campaign)
            await conn.execute("UPDATE einmal.campaigns SET status = 'sent' WHERE id = $1", campaign)
    assert codes == [0]
    text = out.getvalue()
    assert "done 3/3 (sent 3)  100%" in text
    assert "  total            3\ncame back:\n" in text
    assert text.rstrip().endswith("  complained       0\n  unsubscribed     0")
    bar = text.split("campaign ")[0]
    if tty:  # one live bar redrawn in place (erase the line, write it again), left on screen at the end
        assert bar.count("\x1b[2K") >= 2 and bar.rstrip().count("\n") <= 1
    else:  # a line a poll, nothing for a terminal
        assert "\r" not in text and "\x1b" not in text and bar.count("\n") >= 2


async def test_follow_on_the_command_line_keeps_following_a_paused_campaign_until_sent(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "paused", sends=("queued", "sent"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    command = [sys.executable, "-m", "service", "campaign", "status", str(campaign), "--follow"]
    proc = subprocess.Popen(  # noqa: ASYNC220 -- starts at once
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env | {"EINMAL_DATABASE_URL": dsn},
    )
    try:
        first = await anyio.to_thread.run_sync(proc.stdout.readline)
        assert "done 1/2 (sent 1)" in first and "paused" in first, first + proc.stderr.read()
        await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
        await conn.execute("UPDATE einmal.sends SET status = 'sent' WHERE campaign_id = $1", campaign)
        await conn.execute("UPDATE einmal.campaigns SET status = 'sent' WHERE id = $1", campaign)
        rest, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=20))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "done 2/2 (sent 2)  100%" in rest
    assert f"campaign {campaign} 'spring': sent" in rest
