"""`einmal subscribers import --from listmonk|mailchimp`: other tools' exports, their opt-outs kept.

The sample files have the columns those tools document and write: listmonk's subscriber export
(`uuid,email,name,attributes,status,created_at,updated_at`, cmd/subscribers.go handleExportSubscribers) and
Mailchimp's audience export (its subscribed, unsubscribed and cleaned CSV files)."""

from pathlib import Path

import asyncpg
import pytest

from service.subscribers import preferences
from tests.conftest import cells, einmal

pytestmark = pytest.mark.anyio

LISTMONK = (
    "uuid,email,name,attributes,status,created_at,updated_at\n"
    '0a3e0a44-7c61-4a7c-9d2e-6a9f1b2c3d4e,ann@example.org,Ann Lee,"{""city"": ""Köln"", ""plan"": 2}",enabled,'
    "2023-01-05 10:20:30.123456 +0000 UTC,2023-02-01 08:00:00.5 +0000 UTC\n"
    "1b4f1b55-8d72-4b8d-8e3f-7b0a2c3d4e5f,bob@example.org,Bob,{},blocklisted,"
    "2023-01-06 11:00:00 +0000 UTC,2023-03-01 09:00:00 +0000 UTC\n"
    "2c5a2c66-9e83-4c9e-9f40-8c1b3d4e5f60,cy@example.org,Cy,{},disabled,"
    "2023-01-07 12:00:00 +0000 UTC,2023-01-07 12:00:00 +0000 UTC\n"
)
MC_COMMON = (
    '"Email Address","First Name","Last Name",Company,MEMBER_RATING,OPTIN_TIME,OPTIN_IP,CONFIRM_TIME,CONFIRM_IP,'
    "LATITUDE,LONGITUDE,GMTOFF,DSTOFF,TIMEZONE,CC,REGION"
)
MC_TAIL = ",LEID,EUID,NOTES,TAGS"
SUBSCRIBED = (
    MC_COMMON + ",LAST_CHANGED" + MC_TAIL + "\n"
    'dana@example.org,Dana,Ng,Acme,4,,,"2021-04-03 09:15:02",198.51.100.7,52.5,13.4,1,2,Europe/Berlin,DE,BE,'
    '"2021-04-03 09:15:02",123456789,a1b2c3d4e5,,"""Customers"""\n'
    'eve@example.org,Eve,,,2,"2020-11-30 18:00:00",203.0.113.9,,,,,,,,,,"2020-11-30 18:00:00",123456790,'
    "b2c3d4e5f6,,\n"
    'finn@example.org,Finn,,,2,,,,,,,,,,,,"2022-01-01 00:00:00",123456791,c3d4e5f6a7,,\n'
)
UNSUBSCRIBED = (
    MC_COMMON + ",UNSUB_TIME,UNSUB_CAMPAIGN_TITLE,UNSUB_CAMPAIGN_ID,UNSUB_REASON,UNSUB_REASON_OTHER" + MC_TAIL + "\n"
    'gus@example.org,Gus,,,2,"2020-01-01 10:00:00",,"2020-01-01 10:00:00",,,,,,,,,"2023-05-05 10:00:00",'
    'Spring,4f1a2b3c4d,"I no longer want to receive these emails",,123456792,d4e5f6a7b8,,\n'
    'hal@example.org,Hal,,,1,"2020-01-01 10:00:00",,"2020-01-01 10:00:00",,,,,,,,,"2023-05-06 10:00:00",'
    "Spring,4f1a2b3c4d,Abuse complaint,,123456793,e5f6a7b8c9,,\n"
)
CLEANED = (
    MC_COMMON + ",CLEAN_TIME,CLEAN_CAMPAIGN_TITLE,CLEAN_CAMPAIGN_ID" + MC_TAIL + "\n"
    'ivy@example.org,Ivy,,,1,"2019-06-01 08:00:00",,"2019-06-01 08:00:00",,,,,,,,,"2023-06-01 07:00:00",'
    "Summer,5a6b7c8d9e,123456794,f6a7b8c9d0,,\n"
)


def write(tmp_path: Path, content: str | bytes, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def run(dsn: str, path: str, *options: str):
    return einmal("subscribers", "import", "--account", "acme", "--create-account", *options, path, dsn=dsn)


def ok(result) -> tuple[str, str]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout, result.stderr


async def memberships(conn: asyncpg.Connection) -> dict[tuple[str, str], tuple[str, str | None, str | None]]:
    """(email, list) → (state, confirmed_at as ISO text, source) of every membership."""
    rows = await conn.fetch(
        """SELECT s.email, l.name, m.state, m.confirmed_at, m.source FROM einmal.list_members m
           JOIN einmal.subscribers s ON s.id = m.subscriber_id JOIN einmal.lists l ON l.id = m.list_id"""
    )
    return {
        (r["email"], r["name"]): (r["state"], r["confirmed_at"] and r["confirmed_at"].isoformat(), r["source"])
        for r in rows
    }


async def suppressions(conn: asyncpg.Connection) -> dict[str, str]:
    return dict(await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions"))


async def subscribers(conn: asyncpg.Connection) -> dict[str, str]:
    return dict(await conn.fetch("SELECT email, attributes::text FROM einmal.subscribers"))


async def test_a_listmonk_export_keeps_its_blocklist_and_never_confirms_what_it_does_not_say(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    path = write(tmp_path, LISTMONK, "subscribers.csv")
    out, err = ok(run(dsn, path, "--from", "listmonk", "--list", "news"))  # no status given: awaiting confirmation
    assert "line 4: status 'disabled': einmal imports enabled and blocklisted subscribers\n" in err
    assert "list news: 1 added (1 awaiting confirmation)\n" in err
    assert "suppressions blocklisted: 1 added\n" in err
    assert out == "imported 1, already present 0, rejected 1, suppressed 1, 1 opted out: no subscriber made\n"
    assert await memberships(conn) == {("ann@example.org", "news"): ("unconfirmed", None, "import:listmonk")}
    assert await suppressions(conn) == {"bob@example.org": "blocklisted"}
    assert await subscribers(conn) == {"ann@example.org": '{"city": "Köln", "plan": "2"}'}  # no blocklisted one
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends") == 0  # a sign-up imported is sent nothing
    shown = einmal("subscribers", "show", "--account", "acme", "ann@example.org", dsn=dsn).stdout
    assert "status: unconfirmed\n" in shown

    ok(run(dsn, path, "--from", "listmonk", "--list", "vip", "--subscription-status", "confirmed"))
    assert (await memberships(conn))[("ann@example.org", "vip")] == ("confirmed", None, "import:listmonk")


async def test_a_listmonk_export_of_those_who_left_a_list_puts_nobody_on_it(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    ok(run(dsn, write(tmp_path, "email,list\nann@example.org,news\n", "einmal.csv")))
    path = write(tmp_path, LISTMONK.replace("bob@", "ben@").replace("Ann Lee", "Ann"), "left.csv")
    path2 = write(tmp_path, LISTMONK.replace("ann@", "amy@"), "left2.csv")
    _, err = ok(run(dsn, path, "--from", "listmonk", "--list", "news", "--subscription-status", "unsubscribed"))
    assert "list news: 0 added, 1 left it in the source: not put on it (1 on it here all the same: kept)\n" in err
    _, err = ok(run(dsn, path2, "--from", "listmonk", "--list", "news", "--subscription-status", "unsubscribed"))
    assert "list news: 0 added, 1 left it in the source: not put on it\n" in err
    assert await memberships(conn) == {("ann@example.org", "news"): ("confirmed", None, None)}
    assert set(await subscribers(conn)) == {"ann@example.org"}  # amy left: no subscriber made of her


async def test_mailchimp_exports_carry_confirmation_times_unsubscribes_complaints_and_bounces(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    out, err = ok(run(dsn, write(tmp_path, SUBSCRIBED, "subscribed.csv"), "--from", "mailchimp", "--list", "news"))
    assert err.endswith("list news: 3 added (1 awaiting confirmation)\n"), err
    assert out == "imported 3, already present 0, rejected 0\n"
    assert await memberships(conn) == {
        ("dana@example.org", "news"): ("confirmed", "2021-04-03T09:15:02+00:00", "import:mailchimp"),
        ("eve@example.org", "news"): ("confirmed", "2020-11-30T18:00:00+00:00", "import:mailchimp"),
        ("finn@example.org", "news"): ("unconfirmed", None, "import:mailchimp"),  # no opt-in time: not confirmed
    }
    names = dict(await conn.fetch("SELECT email, name FROM einmal.subscribers"))
    assert names == {"dana@example.org": "Dana Ng", "eve@example.org": "Eve", "finn@example.org": "Finn"}
    # merge fields, and Mailchimp's TIMEZONE as the attribute local send times read; no IPs, no places
    assert (await subscribers(conn))["dana@example.org"] == '{"company": "Acme", "time_zone": "Europe/Berlin"}'
    assert (await subscribers(conn))["eve@example.org"] == "{}"  # no TIMEZONE: the account's zone applies

    out, err = ok(run(dsn, write(tmp_path, UNSUBSCRIBED, "unsub.csv"), "--from", "mailchimp", "--list", "news"))
    assert "suppressions complaint: 1 added\nsuppressions unsubscribe: 1 added\n" in err
    assert out.endswith(", suppressed 2, 2 opted out: no subscriber made\n")
    ok(run(dsn, write(tmp_path, CLEANED, "cleaned.csv"), "--from", "mailchimp", "--list", "news"))
    assert await suppressions(conn) == {
        "gus@example.org": "unsubscribe",
        "hal@example.org": "complaint",
        "ivy@example.org": "bounce",
    }
    assert set(await subscribers(conn)) == {"dana@example.org", "eve@example.org", "finn@example.org"}


async def test_an_older_file_never_lifts_a_suppression_nor_confirms_a_sign_up(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    """The listmonk thread's overwrite: re-importing a file from before the opt-out must not undo it."""
    ok(run(dsn, write(tmp_path, SUBSCRIBED, "subscribed.csv"), "--from", "mailchimp", "--list", "news"))
    newer = UNSUBSCRIBED.replace("gus@", "dana@")
    ok(run(dsn, write(tmp_path, newer, "unsub.csv"), "--from", "mailchimp", "--list", "news"))
    before = (await memberships(conn), await suppressions(conn))
    # the older export: dana still subscribed, finn confirmed in the meantime according to it
    older = SUBSCRIBED.replace(',,2,,,,,,,,,,,,"2022', ',,2,"2021-12-31 10:00:00",,"2021-12-31 10:00:00",,,,,,,,,"2022')
    assert older != SUBSCRIBED
    for options in (("--from", "mailchimp", "--list", "news"), ()):  # and as einmal's own CSV with a list column
        content = older if options else "email,list\ndana@example.org,news\nfinn@example.org,news\n"
        _, err = ok(run(dsn, write(tmp_path, content, "older.csv"), *options))
        assert "list news: 0 added, " in err, err
        assert (await memberships(conn), await suppressions(conn)) == before
    assert before[1]["dana@example.org"] == "unsubscribe"
    assert before[0][("finn@example.org", "news")][0] == "unconfirmed"
    listing = einmal("subscribers", "list", "--account", "acme", dsn=dsn).stdout
    states = {cells(line)[0]: cells(line)[2] for line in listing.splitlines()[1:]}
    assert (states["dana@example.org"], states["finn@example.org"]) == ("unsubscribed", "unconfirmed")
    ok(run(dsn, write(tmp_path, LISTMONK.replace("ann@", "hal@"), "l.csv"), "--from", "listmonk", "--list", "news"))
    ok(run(dsn, write(tmp_path, LISTMONK.replace("bob@", "dana@"), "l.csv"), "--from", "listmonk", "--list", "news"))
    assert (await suppressions(conn))["dana@example.org"] == "unsubscribe"  # blocklisted is no weaker: kept


async def table_counts(conn: asyncpg.Connection) -> tuple:
    return tuple(
        [
            await conn.fetchval(f"SELECT count(*) FROM einmal.{table}")
            for table in ("accounts", "lists", "subscribers", "list_members", "suppressions", "audit_log")
        ]
    )


@pytest.mark.parametrize(
    ("content", "options"),
    [
        (SUBSCRIBED, ("--from", "mailchimp", "--list", "news")),
        (UNSUBSCRIBED, ("--from", "mailchimp", "--list", "news")),
        (LISTMONK, ("--from", "listmonk", "--list", "news", "--subscription-status", "confirmed")),
        ("email,name,list,suppressed\nann@example.org,Ann,news,\nbob@example.org,,news|vip,bounce\nx,,,\n", ()),
    ],
    ids=["mailchimp-subscribed", "mailchimp-unsubscribed", "listmonk", "csv"],
)
async def test_a_dry_run_writes_nothing_and_says_what_the_real_run_then_does(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, content: str, options: tuple[str, ...]
) -> None:
    ok(run(dsn, write(tmp_path, "email,list\ndana@example.org,news\nann@example.org,vip\n", "first.csv")))
    path = write(tmp_path, content, "file.csv")
    before = await table_counts(conn)
    dry_out, dry_err = ok(run(dsn, path, *options, "--dry-run"))
    assert await table_counts(conn) == before
    out, err = ok(run(dsn, path, *options))
    assert await table_counts(conn) != before
    assert dry_out == "dry run, nothing written: " + out
    said = "dry run, nothing written: what the import would do follows\n"
    assert said in dry_err and dry_err.replace(said, "") == err


@pytest.mark.parametrize(
    ("content", "options", "said"),
    [
        (LISTMONK, ("--from", "mailchimp"), "not a Mailchimp audience export: no email address, optin_time, "),
        (SUBSCRIBED, ("--from", "listmonk"), "not a listmonk subscriber export: no email, name, attributes, status "),
        (b"\xff\xfee\x00m\x00a\x00i\x00l\x00\n\x00", ("--from", "listmonk"), "the header row is not UTF-8"),
        (SUBSCRIBED + "x" * (1 << 20) + "\n", ("--from", "mailchimp"), "the record on line 5 is longer than"),
        (SUBSCRIBED + '"broken,\n', ("--from", "mailchimp"), "the record on line 5 opens a quote that is never closed"),
    ],
)
async def test_a_file_that_cannot_be_read_is_one_line_and_nothing_is_written(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, content: str | bytes, options: tuple[str, ...], said: str
) -> None:
    before = await table_counts(conn)
    result = run(dsn, write(tmp_path, content, "bad.csv"), *options, "--list", "news")
    assert result.returncode == 1, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1 and said in result.stderr, result.stderr
    assert await table_counts(conn) == before  # not even the account --create-account would have made


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--from", "mailchimp"), "einmal: --from mailchimp needs one --list: the list its members join in einmal\n"),
        (("--from", "listmonk", "--list", "a", "--list", "b"), "einmal: --from listmonk needs one --list"),
        (("--subscription-status", "confirmed"), "einmal: --subscription-status is for --from listmonk\n"),
        (("--from", "hubspot"), "invalid choice: 'hubspot'"),
    ],
)
async def test_options_that_do_not_fit_the_format_are_refused_in_one_line(
    dsn: str, tmp_path: Path, options: tuple[str, ...], said: str
) -> None:
    result = run(dsn, write(tmp_path, LISTMONK, "l.csv"), *options)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr


async def test_rows_of_an_export_that_einmal_cannot_take_are_refused_by_their_line(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    rows = [
        '"{""id"": ""7""}"',  # a name einmal reserves
        "[1]",
        "{not json",
        '"{""note"": ""two\\nlines""}"',
    ]
    content = "uuid,email,name,attributes,status,created_at,updated_at\n" + "".join(
        f"u{i},p{i}@example.org,P,{cell},enabled,,\n" for i, cell in enumerate(rows)
    )
    _, err = ok(run(dsn, write(tmp_path, content, "l.csv"), "--from", "listmonk", "--list", "news"))
    assert err.splitlines()[:4] == [
        "line 2: attributes: the name 'id' cannot be an attribute's",
        "line 3: attributes: not a JSON object",
        "line 4: attributes: not JSON",
        "line 5: attributes: 'note' holds a line break or a control character",
    ]
    bad_time = SUBSCRIBED.replace('"2021-04-03 09:15:02",198', '"03/04/2021 09:15",198')
    out, err = ok(run(dsn, write(tmp_path, bad_time, "m.csv"), "--from", "mailchimp", "--list", "news"))
    assert err.startswith("line 2: time '03/04/2021 09:15' is not YYYY-MM-DD HH:MM:SS\n"), err
    assert out == "imported 2, already present 0, rejected 1\n"


async def test_no_import_puts_back_on_a_list_someone_who_left_it(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    """Leaving a list deletes the membership; the departure is kept, so an older file cannot undo it."""
    older = write(tmp_path, "email,list\nann@example.org,news\nbob@example.org,news\n", "older.csv")
    ok(run(dsn, older))
    ids = await conn.fetchrow(
        """SELECT s.account_id, s.id AS subscriber_id, l.id AS list_id FROM einmal.subscribers s
           JOIN einmal.lists l ON l.account_id = s.account_id AND l.name = 'news' WHERE s.email = 'ann@example.org'"""
    )
    assert await preferences.leave(conn, *ids) is not None  # the preference page's leave
    _, err = ok(run(dsn, older))
    assert err == "list news: 0 added, 1 already on it, 1 had left it: not put back\n"
    assert set(await memberships(conn)) == {("bob@example.org", "news")}

    # listmonk: the newer export of those who left, then the older one of the confirmed
    left = LISTMONK.replace("ann@", "cid@")
    path = write(tmp_path, left, "left.csv")
    ok(run(dsn, path, "--from", "listmonk", "--list", "vip", "--subscription-status", "unsubscribed"))
    path = write(tmp_path, LISTMONK.replace("ann@", "cid@"), "older-listmonk.csv")
    _, err = ok(run(dsn, path, "--from", "listmonk", "--list", "vip", "--subscription-status", "confirmed"))
    assert "list vip: 0 added, 1 had left it: not put back\n" in err
    assert ("cid@example.org", "vip") not in await memberships(conn)
