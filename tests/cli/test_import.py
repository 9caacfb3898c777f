"""`einmal subscribers import`: streaming CSV import with per-line rejections."""

import argparse
import json
from pathlib import Path

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.errors import Invalid
from service.settings import Settings
from service.subscribers import import_command, importer
from tests.conftest import einmal

pytestmark = pytest.mark.anyio


def write(tmp_path: Path, content: bytes | str, name: str = "subscribers.csv") -> str:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def run_import(dsn: str, path: str, account: str = "acme"):
    return einmal("subscribers", "import", "--account", account, "--create-account", path, dsn=dsn)


async def members(conn: asyncpg.Connection) -> set[tuple[str, str, str]]:
    rows = await conn.fetch(
        "SELECT a.name AS account, s.email, l.name AS list FROM einmal.subscribers s"
        " JOIN einmal.accounts a ON a.id = s.account_id"
        " JOIN einmal.list_members m ON m.subscriber_id = s.id JOIN einmal.lists l ON l.id = m.list_id"
    )
    return {(r["account"], r["email"], r["list"]) for r in rows}


def assert_one_line_error(result, starts: str, code: int = 1) -> None:
    assert result.returncode == code
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(starts), result.stderr
    assert result.stdout == ""


async def test_import_creates_account_lists_and_one_subscriber_per_mailbox_whatever_its_spelling(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "email,name,list\nAlice@Example.com,Alice,news\nalice@example.com,Al,vip\n"
        "bob@example.com,Bob,\nbob@example.com,Bobby,other\n",
    )
    result = run_import(dsn, path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "imported 2, already present 2, rejected 0\n"
    merged = "merged into its subscriber, its lists added, its attributes over the earlier rows'"
    assert result.stderr == (  # each repeat of a mailbox said; --create-account made it: a typo would show
        f"line 3: 'alice@example.com' repeats line 2 ('Alice@Example.com'): {merged}; its name 'Al' not taken "
        "(a subscriber keeps its name)\n"
        f"line 5: 'bob@example.com' repeats line 4: {merged}; its name 'Bobby' not taken (a subscriber keeps its "
        "name)\n"
        "einmal: created account 'acme'\n"
        "list default: 1 added (new subscribers of rows naming no list; --list chooses)\n"
        "list news: 1 added\nlist other: 1 added\nlist vip: 1 added\n"
    )
    assert await members(conn) == {
        ("acme", "Alice@Example.com", "news"),
        ("acme", "Alice@Example.com", "vip"),
        ("acme", "bob@example.com", "default"),
        ("acme", "bob@example.com", "other"),
    }
    names = await conn.fetch("SELECT email, name FROM einmal.subscribers ORDER BY id")
    assert [(r["email"], r["name"]) for r in names] == [("Alice@Example.com", "Alice"), ("bob@example.com", "Bob")]


# -- one mailbox twice in one file: merged, each later row said -----------------------------


async def test_each_row_repeating_an_earlier_rows_mailbox_is_named_with_what_was_done(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    """A row of a mailbox an earlier row of the file named is merged into that subscriber, as the API's batch
    merges rows of one mailbox, and stderr says so for each such row: its line, its address, the line it
    repeats (and that row's spelling when it differs)."""
    path = write(
        tmp_path,
        "email,name,list,city\n"
        "Ann@Example.org,Ann,news,Berlin\n"
        "bob@example.org,Bob,news,\n"
        "ann@example.org,Annie,vip,Paris\n"
        "not an address,,,\n"
        "ANN@EXAMPLE.ORG,,,\n"
        "bob@example.org,Bob,news,\n",
    )
    result = run_import(dsn, path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "imported 2, already present 3, rejected 1\n"
    said = [line for line in result.stderr.splitlines() if line.startswith("line ")]
    assert said[0].startswith("line 5: invalid address 'not an address'"), result.stderr
    assert said[1:] == [  # once the whole file is in, in file order
        "line 4: 'ann@example.org' repeats line 2 ('Ann@Example.org'): merged into its subscriber, its lists "
        "added, its attributes over the earlier rows'; its name 'Annie' not taken (a subscriber keeps its name)",
        "line 6: 'ANN@EXAMPLE.ORG' repeats line 2 ('Ann@Example.org'): merged into its subscriber, its lists "
        "added, its attributes over the earlier rows'",
        "line 7: 'bob@example.org' repeats line 3: merged into its subscriber, its lists added, its attributes "
        "over the earlier rows'",
    ], result.stderr
    rows = await conn.fetch("SELECT email, name, attributes FROM einmal.subscribers ORDER BY id")
    assert [(r["email"], r["name"], json.loads(r["attributes"])) for r in rows] == [
        ("Ann@Example.org", "Ann", {"city": "Paris"}),
        ("bob@example.org", "Bob", {}),
    ]
    assert await members(conn) == {
        ("acme", "Ann@Example.org", "news"),
        ("acme", "Ann@Example.org", "vip"),
        ("acme", "bob@example.org", "news"),
    }


async def test_repeats_are_found_across_chunks_and_said_only_once_the_file_is_in(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch
) -> None:
    """Chunks of two rows: a repeat three chunks after its first row is found all the same; an import that fails
    on a later record says no row was merged, since nothing was written."""
    monkeypatch.setattr(importer, "CHUNK_ROWS", 2)
    rows = "".join(f"user{i}@example.org\n" for i in range(6))
    args = argparse.Namespace(account="acme", file=write(tmp_path, f"email\n{rows}user1@example.org\n"), lists=[])
    args.create_account = True
    assert await import_command.command(args, Settings(database_url=dsn)) == 0
    out, err = capsys.readouterr()
    assert out == "imported 6, already present 1, rejected 0\n"
    assert "line 8: 'user1@example.org' repeats line 3: merged into its subscriber" in err
    assert err.count("repeats line") == 1, err
    broken = write(tmp_path, f'email\n{rows}user1@example.org\n"never closed\n', "broken.csv")
    args = argparse.Namespace(account="other", file=broken, lists=[], create_account=True)
    with pytest.raises(Invalid, match="never closed"):
        await import_command.command(args, Settings(database_url=dsn))
    out, err = capsys.readouterr()
    assert "repeats" not in err and out == "", err
    assert await conn.fetchval("SELECT count(*) FROM einmal.accounts WHERE name = 'other'") == 0


async def test_another_spelling_of_a_mailbox_updates_its_subscriber_and_the_summary_says_so(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    """USER1@NU3.EXAMPLE is the mailbox of user1@nu3.example (service/addresses.py): its row updates that
    subscriber (before: a second subscriber of the same mailbox)."""
    assert (
        run_import(dsn, write(tmp_path, "email,plan\nuser1@nu3.example,free\nanna@bücher.example,free\n")).returncode
        == 0
    )
    again = run_import(
        dsn,
        write(tmp_path, "email,plan,list\nUSER1@NU3.EXAMPLE,pro,vip\nanna@xn--bcher-kva.example,free,\n", "again.csv"),
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == (
        "imported 0, already present 2 (attributes changed for 1; 2 under another spelling), rejected 0\n"
    )
    rows = await conn.fetch("SELECT email, attributes FROM einmal.subscribers ORDER BY id")
    assert [(r["email"], r["attributes"]) for r in rows] == [
        ("user1@nu3.example", '{"plan": "pro"}'),
        ("anna@bücher.example", '{"plan": "free"}'),
    ]
    assert ("acme", "user1@nu3.example", "vip") in await members(conn)


async def test_bad_rows_are_reported_with_their_starting_line_and_the_rest_imported(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    long_email = "a" * 250 + "@example.com"
    lines = [
        "email,name,list",  # 1
        "good1@example.com,One,",  # 2
        "not-an-address,x,",  # 3
        '"evil@example.com","Eve\r\nBcc: victim@example.com",',  # 4-5: CR/LF injection in a name
        "good2@example.com,Two,",  # 6
        '"inject@example.com\nBcc: x@example.com",y,',  # 7-8: line break inside the address
        ",empty,",  # 9
        "too@many.com,fields,here,extra",  # 10
        "tab@example.com,a\tb,",  # 11
        "nul@example.com,a\x00b,",  # 12
        f"{long_email},long,",  # 13
        "longname@example.com," + "n" * 1001 + ",",  # 14
        "",  # 15: blank, skipped silently
        "good3@example.com,Three,",  # 16
    ]
    result = run_import(dsn, write(tmp_path, "\n".join(lines) + "\n"))
    assert result.returncode == 0
    assert "Traceback" not in result.stderr
    reported = [line.split(":")[0] for line in result.stderr.splitlines()]
    assert reported == [
        "line 3",
        "line 4",
        "line 7",
        "line 9",
        "line 10",
        "line 11",
        "line 12",
        "line 13",
        "line 14",
        "einmal",
        "list default",
    ], result.stderr
    assert "line 4: line break inside a field" in result.stderr
    assert "line 11: control character U+0009" in result.stderr
    assert result.stdout == "imported 3, already present 0, rejected 9\n"
    emails = {r["email"] for r in await conn.fetch("SELECT email FROM einmal.subscribers")}
    assert emails == {"good1@example.com", "good2@example.com", "good3@example.com"}


async def test_bom_and_header_case_and_spaces_are_accepted(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    path = write(tmp_path, b"\xef\xbb\xbf LIST , Email ,Name\r\nnews,a@example.com,A\r\n")
    result = run_import(dsn, path)
    assert result.returncode == 0 and result.stderr == "einmal: created account 'acme'\nlist news: 1 added\n"
    assert result.stdout == "imported 1, already present 0, rejected 0\n"
    assert await members(conn) == {("acme", "a@example.com", "news")}


async def test_test_and_special_use_domains_are_accepted(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    addresses = ["a@example.com", "x@mail.test", "y@foo.invalid", "z@localhost", "w@host.local", "v@a.localhost"]
    result = run_import(dsn, write(tmp_path, "email\n" + "\n".join(addresses) + "\n"))
    assert result.stdout == "imported 6, already present 0, rejected 0\n", result.stderr
    assert {r["email"] for r in await conn.fetch("SELECT email FROM einmal.subscribers")} == set(addresses)


async def test_bytes_that_are_not_utf8_reject_only_their_record(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    path = write(
        tmp_path, b"email,name\nok@example.com,Ok\nbad@example.com,M\xfcller\n\xff@example.com,x\nok2@example.com,Ok2\n"
    )
    result = run_import(dsn, path)
    assert result.returncode == 0
    assert result.stderr == (
        "line 3: not valid UTF-8\nline 4: not valid UTF-8\neinmal: created account 'acme'\n"
        "list default: 2 added (new subscribers of rows naming no list; --list chooses)\n"
    )
    assert result.stdout == "imported 2, already present 0, rejected 2\n"
    assert {r["email"] for r in await conn.fetch("SELECT email FROM einmal.subscribers")} == {
        "ok@example.com",
        "ok2@example.com",
    }


async def test_reimport_adds_nothing(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    path = write(tmp_path, "email,list\na@example.com,news\nb@example.com,news\nbroken,news\n")
    first, second = run_import(dsn, path), run_import(dsn, path)
    assert first.stdout == "imported 2, already present 0, rejected 1\n"
    assert second.stdout == "imported 0, already present 2, rejected 1\n"
    counts = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM einmal.subscribers) AS s,"
        " (SELECT count(*) FROM einmal.list_members) AS m,"
        " (SELECT count(*) FROM einmal.lists) AS l,"
        " (SELECT count(*) FROM einmal.accounts) AS a"
    )
    assert tuple(counts) == (2, 2, 1, 1)
    lines = await conn.fetch("SELECT actor, action, subject FROM einmal.audit_log ORDER BY id")
    assert [tuple(r) for r in lines] == [  # each import its line: what it said it did
        ("cli", "subscriber.import", "imported 2, already present 0, rejected 1"),
        ("cli", "subscriber.import", "imported 0, already present 2, rejected 1"),
    ]


async def test_existing_subscriber_is_added_to_a_new_list_and_keeps_its_name(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    run_import(dsn, write(tmp_path, "email,name,list\na@example.com,First,news\n", "one.csv"))
    result = run_import(dsn, write(tmp_path, "email,name,list\na@example.com,Second,offers\n", "two.csv"))
    assert result.stdout == "imported 0, already present 1, rejected 0\n"
    assert await members(conn) == {("acme", "a@example.com", "news"), ("acme", "a@example.com", "offers")}
    assert await conn.fetchval("SELECT name FROM einmal.subscribers") == "First"


async def test_accounts_are_kept_apart(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    path = write(tmp_path, "email\na@example.com\n")
    assert run_import(dsn, path, "one").stdout == "imported 1, already present 0, rejected 0\n"
    assert run_import(dsn, path, "two").stdout == "imported 1, already present 0, rejected 0\n"
    assert await members(conn) == {("one", "a@example.com", "default"), ("two", "a@example.com", "default")}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name,list\nAlice,news\n", "has no email column"),
        ("", "is empty"),
        ("email,name,EMAIL\na@example.com,x,b@example.com\n", "names the email column twice"),
        (b"em\xffail\na@example.com\n", "the header row is not valid UTF-8"),
    ],
)
async def test_unusable_header_is_refused_in_one_line_and_writes_nothing(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, content: str | bytes, message: str
) -> None:
    result = run_import(dsn, write(tmp_path, content))
    assert_one_line_error(result, "einmal: ")
    assert message in result.stderr
    assert await conn.fetchval("SELECT count(*) FROM einmal.accounts") == 0


async def test_missing_or_unreadable_file_is_one_line(dsn: str, tmp_path: Path) -> None:
    missing = run_import(dsn, str(tmp_path / "nope.csv"))  # a bad argument: exit 2, as docs/reference/cli.md says
    assert_one_line_error(missing, f"einmal: cannot read {tmp_path / 'nope.csv'}: No such file", code=2)
    directory = run_import(dsn, str(tmp_path))
    assert_one_line_error(directory, f"einmal: cannot read {tmp_path}: Is a directory", code=2)


async def test_database_error_mid_import_leaves_nothing_written(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    await conn.execute("""
        CREATE FUNCTION einmal.refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.email = 'boom@example.com' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
        CREATE TRIGGER refuse_boom BEFORE INSERT ON einmal.subscribers
            FOR EACH ROW EXECUTE FUNCTION einmal.refuse_boom();""")
    rows = [f"user{i}@example.com" for i in range(importer.CHUNK_ROWS + 5)] + ["boom@example.com"]
    result = run_import(dsn, write(tmp_path, "email\n" + "\n".join(rows) + "\n"))
    assert_one_line_error(result, "einmal: database error: refused")
    counts = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM einmal.subscribers) AS s,"
        " (SELECT count(*) FROM einmal.lists) AS l,"
        " (SELECT count(*) FROM einmal.accounts) AS a"
    )
    assert tuple(counts) == (0, 0, 0)


async def test_invalid_account_name_is_refused(dsn: str, tmp_path: Path) -> None:
    result = run_import(dsn, write(tmp_path, "email\na@example.com\n"), account="bad\nname")
    assert_one_line_error(result, "einmal: invalid account name")


csv_text = st.lists(
    st.lists(st.text(st.characters(codec="utf-8") | st.sampled_from(',"\r\n@.'), max_size=12), max_size=4), max_size=6
).map(lambda rows: "\n".join(",".join(fields) for fields in rows).encode())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=200),
        st.binary(max_size=200).map(lambda body: b"email,name,list\n" + body),
        csv_text,
        csv_text.map(lambda body: b"email,name,list\n" + body),
    )
)
async def test_arbitrary_content_never_fails_with_anything_but_a_usage_error(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture, content: bytes
) -> None:
    args = argparse.Namespace(account="fuzz", file=write(tmp_path, content), create_account=True)
    try:
        code = await import_command.command(args, Settings(database_url=dsn))
    except Invalid:
        code = 1
    assert code in (0, 1)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert all(line.startswith("line ") for line in err.splitlines() if line != "einmal: created account 'fuzz'"), err
    if code == 0:
        assert out.startswith("imported ")


# -- attributes, delimiters, header spellings, several lists, the account ---------------


async def test_extra_columns_become_string_attributes_of_new_subscribers(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    path = write(tmp_path, "email,name,City,plan,zip\na@example.org,A,Berlin,pro,01234\nb@example.org,B,,free,\n")
    result = run_import(dsn, path)
    assert result.returncode == 0, result.stderr
    rows = await conn.fetch("SELECT email, attributes FROM einmal.subscribers ORDER BY email")
    assert [(r["email"], json.loads(r["attributes"])) for r in rows] == [
        ("a@example.org", {"city": "Berlin", "plan": "pro", "zip": "01234"}),
        ("b@example.org", {"plan": "free"}),
    ]  # an empty cell is no value


async def test_importing_an_address_again_merges_the_new_files_attributes_into_its_own(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    first = write(
        tmp_path, "email,name,city,plan\na@example.org,Ann,Berlin,free\nb@example.org,Bob,Köln,pro\n", "first.csv"
    )
    assert run_import(dsn, first).stdout == "imported 2, already present 0, rejected 0\n"
    # plan changes, tier is new, city is not in the file; b's row says nothing new (an empty cell sets
    # nothing); c is new; a's second row (another list) comes later in the file and wins for tier
    second = write(
        tmp_path,
        "email,name,plan,tier,list\na@example.org,Annie,pro,gold,news\n"
        "b@example.org,Bobby,pro,,news\nc@example.org,Cy,free,,news\n"
        "a@example.org,Annie,pro,platinum,vip\n",
        "second.csv",
    )
    result = run_import(dsn, second)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "imported 1, already present 3 (attributes changed for 1), rejected 0\n"
    rows = await conn.fetch("SELECT email, name, attributes FROM einmal.subscribers ORDER BY email")
    assert [(r["email"], r["name"], json.loads(r["attributes"])) for r in rows] == [
        ("a@example.org", "Ann", {"city": "Berlin", "plan": "pro", "tier": "platinum"}),
        ("b@example.org", "Bob", {"city": "Köln", "plan": "pro"}),
        ("c@example.org", "Cy", {"plan": "free"}),
    ]
    assert run_import(dsn, second).stdout == "imported 0, already present 4, rejected 0\n"  # nothing changes now
    assert await members(conn) >= {("acme", "a@example.org", "vip"), ("acme", "b@example.org", "news")}


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
@pytest.mark.parametrize("email_header", ["email", "E-Mail", "Email Address", "e_mail", "MAIL"])
async def test_semicolon_and_tab_delimiters_and_common_email_spellings_are_read(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, delimiter: str, email_header: str
) -> None:
    lines = [[email_header, "Name", "city"], ["a@example.org", "Ann, Jr.", "Köln"]]
    content = "".join(delimiter.join(f'"{x}"' if delimiter in x else x for x in line) + "\n" for line in lines)
    result = run_import(dsn, write(tmp_path, content))
    assert result.returncode == 0, result.stderr
    row = await conn.fetchrow("SELECT email, name, attributes FROM einmal.subscribers")
    assert (row["email"], row["name"], json.loads(row["attributes"])) == ("a@example.org", "Ann, Jr.", {"city": "Köln"})


async def test_a_list_cell_split_on_bars_puts_the_address_on_each_list(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    result = run_import(dsn, write(tmp_path, "email,list\na@example.org,news| vip |news\nb@example.org,|\n"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "imported 2, already present 0, rejected 0\n"
    assert await members(conn) == {
        ("acme", "a@example.org", "news"),
        ("acme", "a@example.org", "vip"),
        ("acme", "b@example.org", "default"),
    }


@pytest.mark.parametrize(
    ("header", "starts"),
    [
        ("email,campaign", "einmal: {path}: column 'campaign' is named like a reserved field"),
        ("email,Attributes", "einmal: {path}: column 'attributes' is named like a reserved field"),
        ("email,city,City", "einmal: {path}: the header row names the 'city' column twice"),
        ("E-Mail,email", "einmal: {path}: the header row names the email column twice"),
        ("email," + ",".join(f"c{i}" for i in range(10_000)), "einmal: {path}: the header row has 10001 columns"),
    ],
)
async def test_a_header_with_reserved_duplicate_or_too_many_columns_is_refused_in_one_line(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, header: str, starts: str
) -> None:
    path = write(tmp_path, header + "\n" + "a@example.org" + "," * header.count(",") + "\n")
    assert_one_line_error(run_import(dsn, path), starts.format(path=path))
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers") == 0


async def test_an_unknown_account_is_refused_unless_create_account_is_given(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    path = write(tmp_path, "email\na@example.org\n")
    result = einmal("subscribers", "import", "--account", "acmee", path, dsn=dsn)
    assert_one_line_error(result, "einmal: no account named 'acmee'; --create-account creates it")
    assert await conn.fetchval("SELECT count(*) FROM einmal.accounts") == 0
    assert run_import(dsn, path).returncode == 0  # with --create-account
    again = einmal("subscribers", "import", "--account", "acme", path, dsn=dsn)  # now it exists
    assert again.returncode == 0 and again.stdout == "imported 0, already present 1, rejected 0\n"


async def test_a_file_naming_no_list_joins_none_for_those_present_and_says_what_it_did_per_list(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    first = run_import(dsn, write(tmp_path, "email,list\nann@example.org,news\nbob@example.org,news\n"))
    assert first.returncode == 0, first.stderr
    assert "list news: 2 added\n" in first.stderr
    # the guide's file that "changes only the attribute": no list column
    again = run_import(dsn, write(tmp_path, "email,plan\nann@example.org,pro\ncid@example.org,free\n", "plan.csv"))
    assert again.returncode == 0, again.stderr
    assert again.stdout == "imported 1, already present 1 (attributes changed for 1), rejected 0\n"
    assert await members(conn) == {
        ("acme", "ann@example.org", "news"),
        ("acme", "bob@example.org", "news"),
        ("acme", "cid@example.org", "default"),
    }, "ann, already present, is not put on default"
    assert "list default: 1 added (new subscribers of rows naming no list; --list chooses)\n" in again.stderr
    assert "1 already present, naming no list: their lists unchanged\n" in again.stderr
    assert await conn.fetchval("SELECT attributes->>'plan' FROM einmal.subscribers WHERE email = 'ann@example.org'")


async def test_import_list_option_puts_the_rows_naming_no_list_on_it(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    assert run_import(dsn, write(tmp_path, "email,list\nann@example.org,news\n")).returncode == 0
    path = write(tmp_path, "email,list\nann@example.org,\nbob@example.org,\ncid@example.org,vip\n", "more.csv")
    result = einmal("subscribers", "import", "--account", "acme", "--list", "weekly", path, dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert await members(conn) == {
        ("acme", "ann@example.org", "news"),
        ("acme", "ann@example.org", "weekly"),
        ("acme", "bob@example.org", "weekly"),
        ("acme", "cid@example.org", "vip"),
    }
    assert "list vip: 1 added\n" in result.stderr and "list weekly: 2 added\n" in result.stderr
    bad = einmal("subscribers", "import", "--account", "acme", "--list", " ", path, dsn=dsn)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--list" in bad.stderr, bad.stderr
