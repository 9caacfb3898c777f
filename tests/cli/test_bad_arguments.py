"""Hostile arguments to `einmal campaign create` and `einmal suppress`: refused with one line and
nothing written, or kept exactly (non-ASCII at the limits) and rendered cleanly.
"""

import itertools
import subprocess
from pathlib import Path

import anyio.to_thread
import asyncpg
import pytest

from service.cli import einmal as cli
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from service.text import MAX_NAME
from tests.conftest import einmal
from tests.mail.test_bad_merge_values import HUNDRED_KB, TEXT_ONLY_HEADERS
from tests.mail.test_render import assert_headers_clean, decoded, make_settings, parse
from tests.support.refusals import one_line_refusal, table_counts

pytestmark = pytest.mark.anyio

# -- campaign create and suppress: hostile arguments on the command line ----------------

# most cases run the command line's main() in this process (fast); these in a child process too
IN_A_CHILD = {"CR in subject", "100 KB subject", "not UTF-8 name", "LF in account", "not UTF-8 account"}


async def command_line(
    argv: list[str], dsn: str, child: bool, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> subprocess.CompletedProcess:
    """`einmal ARGV…`: in a child process, or cli.main() in a worker thread of this one."""
    if child:
        return einmal(*argv, dsn=dsn)
    monkeypatch.setenv("EINMAL_DATABASE_URL", dsn)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        await anyio.to_thread.run_sync(cli.main, argv)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, exit_.value.code, out, err)


async def seed_account(conn: asyncpg.Connection) -> None:
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", account_id)


LONG = "x" * 100_000
NOT_UTF8 = "\udcff"  # a byte that is not UTF-8 in argv arrives as a lone surrogate
CREATE = {"--account": "acme", "--name": "N", "--subject": "S", "--from": "a@example.org", "--text": "Hi"}
BAD_CREATE = {
    "CR in subject": ("--subject", "Hi\rBcc: v@example.org", "--subject must not contain line breaks"),
    "U+2028 in subject": ("--subject", "Hi\u2028there", "--subject must not contain line breaks"),
    "NEL in name": ("--name", "a\x85b", "--name: control character U+0085"),
    "escape sequence in name": ("--name", "\x1b[31mred", "--name: control character U+001B"),
    "tab in subject": ("--subject", "a\tb", "--subject: control character U+0009"),
    "CR in from name": ("--from", "Eve\r <a@example.org>", "--from must not contain line breaks"),
    "100 KB name": ("--name", LONG, "--name is longer than 200 characters"),
    "100 KB subject": ("--subject", LONG, "--subject is longer than 998 characters"),
    "100 KB from name": ("--from", f"{LONG} <a@example.org>", "--from is longer than 500 characters"),
    "100 KB account": ("--account", LONG, "invalid account name 'xxx"),
    "100 KB address": ("--from", LONG + "@example.org", "--from is longer"),
    "empty name": ("--name", "", "--name must not be empty"),
    "empty account": ("--account", "", "invalid account name ''"),
    "empty list": ("--list", "", "--list '': 1 to 200 printable characters"),
    "not UTF-8 name": ("--name", "N" + NOT_UTF8, "--name: not valid UTF-8"),
    "not UTF-8 subject": ("--subject", "S" + NOT_UTF8, "--subject: not valid UTF-8"),
    "not UTF-8 account": ("--account", NOT_UTF8, "invalid account name"),
    "not UTF-8 list": ("--list", NOT_UTF8, "--list '\\udcff'"),
    "not UTF-8 text": ("--text", "Hi" + NOT_UTF8, "--text: not valid UTF-8"),
    "not UTF-8 from": ("--from", NOT_UTF8 + " <a@example.org>", "--from: not valid UTF-8"),
    "full-width at sign": ("--from", "a\uff20example.org", "--from 'a＠example.org' is not a valid address"),
    "time out of range": ("--at", "9999-12-31T23:00:00-05:00", "--at '9999-12-31T23:00:00-05:00' is out of range"),
}


@pytest.mark.parametrize("case", BAD_CREATE, ids=list(BAD_CREATE))
async def test_campaign_create_refuses_a_hostile_argument_in_one_line_and_writes_nothing(
    conn: asyncpg.Connection, dsn: str, case: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed_account(conn)
    option, value, message = BAD_CREATE[case]
    arguments = CREATE | ({} if option == "--list" else {option: value})
    extra = ["--list", value] if option == "--list" else []
    before = await table_counts(conn)
    argv = ["campaign", "create", *itertools.chain(*arguments.items()), *extra]
    result = await command_line(argv, dsn, case in IN_A_CHILD, capsys, monkeypatch)
    assert one_line_refusal(result, code=2 if option == "--at" else 1).startswith(f"einmal: {message}")
    assert await table_counts(conn) == before


async def test_campaign_create_refuses_a_nul_in_a_body_file(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    await seed_account(conn)
    (tmp_path / "body.txt").write_text("Hi\0there")
    arguments = {k: v for k, v in CREATE.items() if k != "--text"} | {"--text-file": str(tmp_path / "body.txt")}
    result = einmal("campaign", "create", *itertools.chain(*arguments.items()), dsn=dsn)
    assert one_line_refusal(result) == f"einmal: --text-file {tmp_path / 'body.txt'}: contains a NUL character\n"
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 0


async def test_campaign_create_keeps_non_ascii_at_the_limits_and_it_renders_cleanly(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await seed_account(conn)
    name, subject = "山" * 200, ("Grüße 😀 {{ name }} " * 100)[:990] + "{{name}}"
    sender = "Bäckerei Süß " * 30 + "<news@baeckerei.example>"
    result = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        name,
        "--subject",
        subject,
        "--from",
        sender,
        "--text",
        "Hallo {{ name }}",
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    row = await conn.fetchrow("SELECT * FROM einmal.campaigns WHERE id = $1", int(result.stdout))
    assert (row["name"], row["subject"]) == (name, subject)
    longest_name = HUNDRED_KB[:MAX_NAME]  # fifty times over in the subject
    raw = CampaignTemplate.compile(dict(row), Mailing.of(make_settings())).render(3, "jörg@例え.example", longest_name)
    message = parse(raw.replace("jörg@例え.example".encode(), b"j@x.example"))  # RFC 6532: UTF-8 address
    assert sorted(message.keys()) == TEXT_ONLY_HEADERS
    assert_headers_clean(message)
    assert decoded(raw, "From") == ("Bäckerei Süß " * 30).strip() + " <news@baeckerei.example>"


BAD_SUPPRESS = {
    "100 KB address": (["--account", "acme", LONG + "@example.org"], "einmal: invalid address 'xxx"),
    "100 KB reason": (["--account", "acme", "--reason", LONG, "a@example.org"], "einmal: invalid reason 'xxx"),
    "100 KB account": (["--account", LONG, "a@example.org"], "einmal: invalid account name 'xxx"),
    "not UTF-8 account": (["--account", NOT_UTF8, "a@example.org"], "einmal: invalid account name"),
    "not UTF-8 address": (["--account", "acme", "a" + NOT_UTF8 + "@example.org"], "einmal: invalid address"),
    "LF in account": (["--account", "ac\nme", "a@example.org"], "einmal: invalid account name 'ac\\nme'"),
    "CR in reason": (["--account", "acme", "--reason", "x\rBcc", "a@example.org"], "einmal: invalid reason"),
    "U+2028 in address": (["--account", "acme", "a@example.org\u2028"], "einmal: invalid address"),
    "empty account": (["--account", "", "a@example.org"], "einmal: invalid account name ''"),
    "empty address": (["--account", "acme", "ok@example.org", ""], "einmal: invalid address '': empty address"),
    "full-width at sign": (["--account", "acme", "a\uff20example.org"], "einmal: invalid address 'a＠example.org'"),
    "unknown non-ASCII account": (
        ["--account", "Ünbekannt 山", "a@example.org"],
        "einmal: no account named 'Ünbekannt 山'",
    ),
}


@pytest.mark.parametrize("case", BAD_SUPPRESS, ids=list(BAD_SUPPRESS))
async def test_suppress_refuses_a_hostile_argument_in_one_line_and_writes_nothing(
    conn: asyncpg.Connection, dsn: str, case: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed_account(conn)
    arguments, message = BAD_SUPPRESS[case]
    result = await command_line(["suppress", *arguments], dsn, case in IN_A_CHILD, capsys, monkeypatch)
    assert one_line_refusal(result).startswith(message)
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0


async def test_suppress_takes_a_non_ascii_address_as_given(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    result = einmal("suppress", "--account", "acme", "--reason", "Beschwerde 山", "JÖRG@bücher.example", dsn=dsn)
    assert (result.returncode, result.stdout) == (0, "suppressed 1, already suppressed 0\n"), result.stderr
    row = await conn.fetchrow("SELECT email_lower, reason FROM einmal.suppressions")
    assert tuple(row) == ("jörg@bücher.example", "Beschwerde 山")
