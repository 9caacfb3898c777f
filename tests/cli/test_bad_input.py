"""Bad input never gets past einmal: hostile files, merge values, arguments and environment.

Every case ends one of two ways: accepted and stored or rendered exactly, or refused with one
line and nothing written. Never a traceback, never half an import reported as a success.
"""

import argparse
import csv
import io
import itertools
import os
import random
import re
import resource
import subprocess
import sys
import threading
from pathlib import Path

import anyio.to_thread
import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape  # what Jinja's autoescape does

from service import settings as settings_module
from service.cli import einmal as cli
from service.errors import ConfigError, UsageError
from service.mail.render import CampaignTemplate
from service.settings import Settings
from service.subscribers import importer
from tests.conftest import ROOT, einmal
from tests.mail.test_render import (
    BASE_HEADERS,
    CONTROL,
    UNSUBSCRIBE_HEADERS,
    assert_headers_clean,
    campaign,
    decoded,
    display_name,
    make_settings,
    parse,
)

pytestmark = pytest.mark.anyio

SUMMARY = re.compile(r"imported (\d+), already present (\d+), rejected (\d+)\n")
REJECTED = re.compile(r"line (\d+): \S.*")
PASSWORD = "pa55-never-shown"
MB = 1 << 20
HEADERS = sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS)  # with an HTML part
TEXT_ONLY_HEADERS = sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS | {"Content-Transfer-Encoding"})


# -- helpers ----------------------------------------------------------------------------


async def table_counts(conn: asyncpg.Connection) -> tuple[int, ...]:
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM einmal.accounts), (SELECT count(*) FROM einmal.subscribers),"
        " (SELECT count(*) FROM einmal.lists), (SELECT count(*) FROM einmal.list_members),"
        " (SELECT count(*) FROM einmal.campaigns), (SELECT count(*) FROM einmal.suppressions)")
    return tuple(row)


def check_import_output(code: int, out: str, err: str) -> tuple[int, int, int] | None:
    """The command's output has the promised shape; the summary's counts when it exited 0."""
    assert code in (0, 1), err
    assert "Traceback" not in err
    lines = err.split("\n")
    assert lines.pop() == "", "stderr ends with a line break"
    if code == 1:
        assert out == ""
        assert lines and lines[-1].startswith("einmal: "), err
        lines.pop()
    assert all(REJECTED.fullmatch(line) for line in lines), err
    numbers = [int(REJECTED.fullmatch(line)[1]) for line in lines]
    assert numbers == sorted(set(numbers)) and all(n >= 2 for n in numbers), err
    if code == 1:
        return None
    summary = SUMMARY.fullmatch(out)
    assert summary, out
    imported, present, rejected = map(int, summary.groups())
    assert rejected == len(lines)
    return imported, present, rejected


async def import_in_process(path: str, account: str, dsn: str, capsys: pytest.CaptureFixture):
    try:
        args = argparse.Namespace(account=account, file=path, create_account=True)
        code = await importer.command(args, Settings(database_url=dsn))
    except UsageError as exc:
        assert "\n" not in str(exc)
        print(f"einmal: {exc}", file=sys.stderr)
        code = 1
    out, err = capsys.readouterr()
    return code, out, err


def one_line_refusal(result: subprocess.CompletedProcess, starts: str = "einmal: ") -> str:
    assert result.returncode == 1, (result.returncode, result.stderr[:500])
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(starts), result.stderr[:500]
    assert len(result.stderr) < 400, "a refusal quotes a long value shortened"
    return result.stderr


# -- CSV import: fixed nasty files through the command line -----------------------------

SJIS = "email,name\nyamada@example.com,山田\nok@example.com,Ok\n".encode("shift_jis")
WRAPPED = b'email\n"first@example.com\n' + b"inside@example.com\n" * 12_000 + b'"\nlast@example.com\n'
NASTY_FILES = {
    # name: (content, exit code, what stderr says, rows imported)
    "random bytes": (random.Random(5).randbytes(20_000), 1, "einmal: ", 0),
    "latin-1": ("email,name\nm@example.com,Müller\nok@example.com,Ok\n".encode("latin-1"), 0,
                "line 2: not valid UTF-8\n", 1),
    "UTF-16 with BOM": ("email,name\na@example.com,A\n".encode("utf-16"), 1, "einmal: ", 0),
    "UTF-16-LE without BOM": ("email,name\na@example.com,A\n".encode("utf-16-le"), 1, "einmal: ", 0),
    "UTF-16-BE without BOM": ("email,name\na@example.com,A\n".encode("utf-16-be"), 1, "einmal: ", 0),
    "Shift-JIS": (SJIS, 0, "line 2: not valid UTF-8\n", 1),
    "10 MB field on one line": (b'email,name\na@example.com,"' + b"x" * 10_000_000 + b'"\nb@example.com,B\n',
                                1, "einmal: ", 0),
    "quoted field over the field limit, its lines look like rows": (WRAPPED, 1, "einmal: ", 0),
    "no header": (b"a@example.com,Ann\nb@example.com,Bob\n", 1, "einmal: ", 0),
    "header only, BOM, CRLF": (b"\xef\xbb\xbfemail,name\r\n", 0, "", 0),
    "quoted newlines, control characters and NUL bytes": (
        b'email,name\r\n"q@example.com","two\r\nlines"\r\nc@example.com,bell\x07\r\n'
        b"n@example.com,nul\x00byte\r\n\x00\r\nok@example.com,\"Ok, \"\"quoted\"\"\"\r\n", 0,
        "line 2: line break inside a field\nline 4: control character U+0007 in a field\n"
        "line 5: control character U+0000 in a field\nline 6: expected 2 fields, found 1\n", 1),
}


@pytest.mark.parametrize("case", NASTY_FILES, ids=list(NASTY_FILES))
async def test_a_nasty_file_is_imported_row_by_row_or_refused_whole_in_one_line(
        dsn: str, conn: asyncpg.Connection, tmp_path: Path, case: str) -> None:
    content, code, says, imported = NASTY_FILES[case]
    path = tmp_path / "nasty.csv"
    path.write_bytes(content)
    before = await table_counts(conn)
    result = einmal("subscribers", "import", "--account", "acme", "--create-account", str(path), dsn=dsn)
    assert result.returncode == code, result.stderr[:500]
    check_import_output(result.returncode, result.stdout, result.stderr)
    assert result.stderr.startswith(says) if code else result.stderr == says
    if code == 1:
        one_line_refusal(result)
        assert await table_counts(conn) == before
    else:
        assert result.stdout.startswith(f"imported {imported}, ")
        assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers") == imported


async def test_a_fifo_is_read_like_a_file(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    fifo = tmp_path / "subscribers.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b"email\na@example.com\nb@example.com\n",))
    writer.start()
    result = einmal("subscribers", "import", "--account", "acme", "--create-account", str(fifo), dsn=dsn, timeout=30)
    writer.join(timeout=5)
    assert (result.returncode, result.stdout, result.stderr) == (0, "imported 2, already present 0, rejected 0\n", "")


def _limit_memory() -> None:
    """In the child: a regression fails with MemoryError instead of eating the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run_measured(*args: str, dsn: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, int]:
    """einmal in a child process of at most 2 GiB, and its peak resident memory in bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_")} | {"EINMAL_DATABASE_URL": dsn}
    with subprocess.Popen([sys.executable, "-m", "service", *args], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limit_memory) as child:
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)  # its output is a line or two: no pipe fills up
        finally:
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        out, err = child.stdout.read(), child.stderr.read()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err), usage.ru_maxrss * 1024


async def test_a_50_mb_line_without_end_is_refused_in_bounded_memory(
        dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    small = tmp_path / "small.csv"
    small.write_bytes(b"email\na@example.com\n")
    huge = tmp_path / "huge.csv"
    with huge.open("wb") as file:
        file.write(b"email,name\nb@example.com,")
        for _ in range(50):
            file.write(b"y" * MB)
    baseline, baseline_peak = run_measured("subscribers", "import", "--account", "acme", "--create-account",
                                           str(small), dsn=dsn)
    assert baseline.returncode == 0, baseline.stderr
    before = await table_counts(conn)

    result, peak = run_measured("subscribers", "import", "--account", "acme", "--create-account", str(huge), dsn=dsn)

    assert one_line_refusal(result) == (f"einmal: {huge}: the record on line 2 is longer than {importer.MAX_RECORD}"
                                        " characters (not a CSV file of subscribers?); nothing imported\n")
    assert await table_counts(conn) == before
    assert peak < baseline_peak + 20 * MB, (peak, baseline_peak)


def test_an_endless_line_is_refused_not_read_to_its_end(dsn: str) -> None:
    result, _ = run_measured("subscribers", "import", "--account", "acme", "--create-account", "/dev/zero", dsn=dsn,
                             timeout=30)
    assert one_line_refusal(result).startswith("einmal: /dev/zero: the record on line 1 is longer than")


# -- CSV import: properties, in process -------------------------------------------------

printable = st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u2028\u2029")
safe_text = st.text(printable, max_size=20)
good_email = st.one_of(
    st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9+_-]{0,8}(\.[a-z0-9]{1,4})?", fullmatch=True),
    st.sampled_from(["jörg", "山田", "o'neil", "x+tag"]),
).flatmap(lambda local: st.sampled_from(["example.com", "Example.ORG", "mail.test", "bücher.example",
                                         "localhost"]).map(lambda domain: f"{local}@{domain}"))
BAD_EMAILS = ["not-an-address", "a@@example.com", "a b@example.com", "@example.com", "a@", "a..b@example.com",
              ".a@example.com", "a@-example.com", "a\uff20example.com", "a" * 250 + "@example.com", "", "   "]
BREAKS = ["\n", "\r\n", "\r", "\x00", "\x07", "\t", "\x7f", "\x85", "\u2028"]
DEFECTS = ["address", "control", "long name", "long list", "latin-1", "fields"]


@st.composite
def rows(draw) -> tuple[str, str, str, str | None]:
    """(email, name, list, defect or None) of one record."""
    email = draw(good_email)
    email = draw(st.sampled_from(["", " "])) + email + draw(st.sampled_from(["", "  "]))
    name = draw(st.one_of(safe_text, st.just("N" * importer.MAX_NAME)))
    # "|" separates lists in a cell (tests/cli/test_import.py): one list a row here
    list_name = draw(st.one_of(st.just(""), st.sampled_from(["news", "Offers 2030"]),
                               safe_text.map(lambda text: text.replace("|", "/"))))
    defect = draw(st.none() | st.sampled_from(DEFECTS))
    if defect == "address":
        email = draw(st.sampled_from(BAD_EMAILS))
    elif defect == "control":
        name = name[:5] + draw(st.sampled_from(BREAKS)) + name[5:]
    elif defect == "long name":
        name = "n" * (importer.MAX_NAME + 1)
    elif defect == "long list":
        list_name = "l" * (importer.MAX_LIST + 1)
    elif defect == "latin-1":
        name = "M\u00fcller"  # written in latin-1 below
    return email, name, list_name, defect


def quote(field: str) -> str:
    return '"' + field.replace('"', '""') + '"'


@st.composite
def csv_files(draw) -> tuple[bytes, list[tuple[int, str, str, str, str | None]]]:
    """A CSV file and, for each record, (its first line, email, name, list, defect)."""
    columns = draw(st.permutations(["email", "name", "list", "extra"]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    bom = draw(st.booleans())
    content = [b"\xef\xbb\xbf" if bom else b"", ",".join(f" {c.upper()} " if c == "email" else c
                                                          for c in columns).encode() + newline.encode()]
    line = 2
    records = []
    for email, name, list_name, defect in draw(st.lists(rows(), max_size=12)):
        while draw(st.integers(0, 4)) == 0:  # a blank line now and then
            content.append(newline.encode())
            line += 1
        values = {"email": email, "name": name, "list": list_name, "extra": draw(safe_text)}
        text = ",".join(quote(values[c]) for c in columns) + (',"surplus"' if defect == "fields" else "")
        encoded = text.encode()
        if defect == "latin-1":
            encoded = encoded.replace(name.encode(), name.encode("latin-1"))
        content.append(encoded + newline.encode())
        records.append((line, email, name, list_name, defect))
        line += len(re.findall(r"\r\n|\r|\n", text + newline))
    if records and draw(st.booleans()):
        content[-1] = content[-1][: -len(newline)]  # no line break at the end
    return b"".join(content), records


account_numbers = itertools.count()


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=csv_files())
async def test_every_good_row_is_imported_and_every_bad_row_reported_by_its_line(
        dsn: str, conn: asyncpg.Connection, tmp_path: Path, capsys: pytest.CaptureFixture, file) -> None:
    content, records = file
    account = f"property-{next(account_numbers)}"
    path = tmp_path / f"{account}.csv"
    path.write_bytes(content)

    code, out, err = await import_in_process(str(path), account, dsn, capsys)

    counts = check_import_output(code, out, err)
    assert counts is not None, err
    good = [(email.strip(" "), name.strip(" "), list_name.strip(" ") or "default")
            for _, email, name, list_name, defect in records if defect is None]
    bad_lines = [line for line, *_, defect in records if defect is not None]
    assert [int(n) for n in re.findall(r"^line (\d+):", err, re.M)] == bad_lines, err
    first_names = {}
    for email, name, _ in good:
        first_names.setdefault(email, name)
    assert counts == (len(first_names), len(good) - len(first_names), len(bad_lines))
    stored = await conn.fetch("SELECT s.email, s.name, l.name AS list FROM einmal.subscribers s"
                              " JOIN einmal.accounts a ON a.id = s.account_id AND a.name = $1"
                              " JOIN einmal.list_members m ON m.subscriber_id = s.id"
                              " JOIN einmal.lists l ON l.id = m.list_id", account)
    assert {r["email"]: r["name"] for r in stored} == first_names
    assert {(r["email"], r["list"]) for r in stored} == {(email, list_name) for email, _, list_name in good}


garbage_text = st.text(st.characters(codec="utf-8") | st.sampled_from(',"\r\n@.\x00'), max_size=200)
garbage = st.one_of(
    st.binary(max_size=400),
    st.binary(max_size=400).map(lambda body: b"email,name,list\n" + body),
    st.tuples(garbage_text, st.sampled_from(["latin-1", "utf-16", "utf-16-le", "utf-16-be", "shift_jis",
                                             "utf-8-sig", "utf-8"]), st.booleans()).map(
        lambda t: (("email,name,list\n" if t[2] else "") + t[0]).encode(t[1], "replace")),
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=garbage)
async def test_any_bytes_give_a_full_import_or_nothing_and_every_rejection_counted(
        dsn: str, conn: asyncpg.Connection, tmp_path: Path, capsys: pytest.CaptureFixture, content: bytes) -> None:
    account = f"garbage-{next(account_numbers)}"
    path = tmp_path / f"{account}.csv"
    path.write_bytes(content)
    before = await table_counts(conn)

    code, out, err = await import_in_process(str(path), account, dsn, capsys)

    counts = check_import_output(code, out, err)
    if counts is None:
        assert await table_counts(conn) == before
        return
    imported, present, rejected = counts
    stored = await conn.fetchval("SELECT count(*) FROM einmal.subscribers s JOIN einmal.accounts a"
                                 " ON a.id = s.account_id WHERE a.name = $1", account)
    assert stored == imported
    # every record after the header is stored, already present or reported
    text = content.decode("utf-8-sig", "surrogateescape")
    records = list(csv.reader(io.StringIO(text, newline="")))[1:]
    assert imported + present + rejected == sum(1 for record in records if record)


# -- rendering: hostile merge values, subjects and from names ---------------------------

HOSTILE = "Zoë 山田 😀 \r\nBcc: victim@example.org\r\n\0\n\r\x85\u2028=?utf-8?b?QmNj?= \"<x>\" "
HUNDRED_KB = (HOSTILE * (100_000 // len(HOSTILE) + 1))[:100_000]


def expected_text(value: str) -> str:
    return re.sub(r"\r\n|\r|\n", "\n", value)


def test_a_100_kb_name_full_of_line_breaks_nul_and_non_ascii_stays_out_of_the_headers() -> None:
    template = CampaignTemplate.compile(campaign(subject="Hi {{ name }}!", body_text="Dear {{ name }}.\n",
                                                 body_html="<p>{{ name }}</p>"), make_settings())
    raw = template.render(7, "jane@example.org", HUNDRED_KB)
    message = parse(raw)  # every line within 998 octets, headers ASCII, CRLF only
    assert sorted(message.keys()) == HEADERS
    assert_headers_clean(message)
    shown = CONTROL.sub(" ", expected_text(HUNDRED_KB)).strip()  # a line break of the value is one space
    assert decoded(raw, "Subject") == f"Hi {shown}!"
    assert display_name(raw, message) == shown
    text, markup = message.iter_parts()
    assert text.get_content().replace("\r\n", "\n") == expected_text(f"Dear {HUNDRED_KB}.\n")
    assert markup.get_content().replace("\r\n", "\n") == expected_text(f"<p>{escape(HUNDRED_KB)}</p>\n")


@pytest.mark.parametrize(("display", "subject", "shown"), [
    ("x" * 100_000, ("Grüße, 山田! " * 10_000)[:100_000], "x" * 100_000),
    ("Ünïcödé 山田 " * 2000, "S", ("Ünïcödé 山田 " * 2000).strip()),  # the stdlib parser is slow on non-ASCII
    ('"' + 'q\\"uoted ' * 10_000 + '"', "x" * 100_000, ('q"uoted ' * 10_000).strip()),
])
def test_a_100_kb_from_name_and_subject_are_folded_into_valid_headers(display: str, subject: str, shown: str) -> None:
    raw = CampaignTemplate.compile(campaign(subject=subject, from_address=f"{display} <news@acme.example>"),
                                   make_settings()).render(1, "a@example.org", "A")
    message = parse(raw)
    assert sorted(message.keys()) == TEXT_ONLY_HEADERS
    assert_headers_clean(message)
    assert decoded(raw, "Subject") == subject.strip()
    if b"From: =?" in raw:  # encoded-words: decoded the RFC 2047 way
        assert decoded(raw, "From") == f"{shown} <news@acme.example>"
    else:  # a quoted string
        assert message["From"].addresses[0].display_name == shown
    assert message["From"].addresses[0].addr_spec == "news@acme.example"


@pytest.mark.parametrize("display", ["Eve\r\nBcc: v@example.org", "Eve\nX", "Eve\rX", "Eve\0X", "Eve\x85X",
                                     "Eve\u2028X", "Eve\tX"])
def test_a_from_name_with_a_control_character_is_refused_at_compile(display: str) -> None:
    with pytest.raises(UsageError, match="from address"):
        CampaignTemplate.compile(campaign(from_address=f"{display} <news@acme.example>"), make_settings())


@settings(max_examples=50, deadline=None)
@given(display=st.text(max_size=300) | st.text(st.sampled_from(' "\\\r\n\0é山=?<>,;:@'), max_size=60))
def test_any_from_name_is_refused_or_gives_exactly_one_clean_from_header(display: str) -> None:
    try:
        template = CampaignTemplate.compile(campaign(from_address=f"{display} <news@acme.example>"),
                                            make_settings())
    except UsageError as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc)
        return
    assert not CONTROL.search(display)
    raw = template.render(1, "a@example.org", "A")
    message = parse(raw)
    assert sorted(message.keys()) == TEXT_ONLY_HEADERS
    assert_headers_clean(message)
    assert message["From"].addresses[0].addr_spec == "news@acme.example"
    assert template.envelope_from == "news@acme.example"


# -- campaign create and suppress: hostile arguments on the command line ----------------

# most cases run the command line's main() in this process (fast); these in a child process too
IN_A_CHILD = {"CR in subject", "100 KB subject", "not UTF-8 name", "LF in account", "not UTF-8 account"}


async def command_line(argv: list[str], dsn: str, child: bool, capsys: pytest.CaptureFixture,
                       monkeypatch: pytest.MonkeyPatch) -> subprocess.CompletedProcess:
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
        conn: asyncpg.Connection, dsn: str, case: str, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    await seed_account(conn)
    option, value, message = BAD_CREATE[case]
    arguments = CREATE | ({} if option == "--list" else {option: value})
    extra = ["--list", value] if option == "--list" else []
    before = await table_counts(conn)
    argv = ["campaign", "create", *itertools.chain(*arguments.items()), *extra]
    result = await command_line(argv, dsn, case in IN_A_CHILD, capsys, monkeypatch)
    assert one_line_refusal(result).startswith(f"einmal: {message}")
    assert await table_counts(conn) == before


async def test_campaign_create_refuses_a_nul_in_a_body_file(
        conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    await seed_account(conn)
    (tmp_path / "body.txt").write_text("Hi\0there")
    arguments = {k: v for k, v in CREATE.items() if k != "--text"} | {"--text-file": str(tmp_path / "body.txt")}
    result = einmal("campaign", "create", *itertools.chain(*arguments.items()), dsn=dsn)
    assert one_line_refusal(result) == f"einmal: --text-file {tmp_path / 'body.txt'}: contains a NUL character\n"
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 0


async def test_campaign_create_keeps_non_ascii_at_the_limits_and_it_renders_cleanly(
        conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    name, subject = "山" * 200, ("Grüße 😀 {{ name }} " * 100)[:990] + "{{name}}"
    sender = "Bäckerei Süß " * 30 + "<news@baeckerei.example>"
    result = einmal("campaign", "create", "--account", "acme", "--name", name, "--subject", subject, "--from",
                    sender, "--text", "Hallo {{ name }}", dsn=dsn)
    assert result.returncode == 0, result.stderr
    row = await conn.fetchrow("SELECT * FROM einmal.campaigns WHERE id = $1", int(result.stdout))
    assert (row["name"], row["subject"]) == (name, subject)
    longest_name = HUNDRED_KB[: importer.MAX_NAME]  # fifty times over in the subject
    raw = CampaignTemplate.compile(dict(row), make_settings()).render(3, "jörg@例え.example", longest_name)
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
    "unknown non-ASCII account": (["--account", "Ünbekannt 山", "a@example.org"],
                                  "einmal: no account named 'Ünbekannt 山'"),
}


@pytest.mark.parametrize("case", BAD_SUPPRESS, ids=list(BAD_SUPPRESS))
async def test_suppress_refuses_a_hostile_argument_in_one_line_and_writes_nothing(
        conn: asyncpg.Connection, dsn: str, case: str, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
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


# -- environment variables ----------------------------------------------------------------

CHECKED = {  # variable -> a test of the loaded value
    "EINMAL_SMTP_PORT": lambda s: type(s.smtp_port) is int and 1 <= s.smtp_port <= 65535,
    "EINMAL_BATCH_SIZE": lambda s: type(s.batch_size) is int and 1 <= s.batch_size <= 10_000,
    "EINMAL_IN_DOUBT": lambda s: s.in_doubt in ("hold", "resend"),
    "EINMAL_RATE_LIMIT": lambda s: s.rate_limit >= 0,
    "EINMAL_SMTP_TLS": lambda s: s.smtp_tls in ("none", "starttls", "tls"),
    "EINMAL_TICK_SECONDS": lambda s: s.tick_seconds > 0,
}
numberish = st.one_of(st.integers().map(str), st.floats().map(str), st.from_regex(r"\s*[-+]?[0-9_.eE]{0,8}\s*",
                                                                                   fullmatch=True))
# an environment can hold only what bytes decode to: no NUL, no lone surrogate but the escaped bytes
env_value = st.one_of(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=30),
                      numberish,
                      st.sampled_from(["", " ", "hold ", "TLS", "StartTLS", "inf", "-inf", "nan", "1e999", "0x19",
                                       "２５", "25\n", "١٢", "\udcff", "true", "null", "[]", "{}"]))


def load_with(variables: dict[str, str]) -> Settings:
    saved = dict(os.environ)
    try:
        os.environ.update(variables)
        return settings_module.load()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(CHECKED)), value=env_value)
def test_a_garbage_variable_is_taken_as_a_valid_value_or_named_in_one_line(name: str, value: str) -> None:
    try:
        loaded = load_with({name: value, "EINMAL_SMTP_PASSWORD": PASSWORD})
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith(f"{name}: ") and "\n" not in message and "\r" not in message, message
        assert PASSWORD not in message
        return
    assert CHECKED[name](loaded), (name, value)
    assert loaded.smtp_password.get_secret_value() == PASSWORD and PASSWORD not in repr(loaded)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["EINMAL_SMTP_PASSWORD", "EINMAL_UNSUBSCRIBE_SECRET"]), garbage=env_value)
def test_a_garbage_secret_is_never_shown(name: str, garbage: str) -> None:
    try:
        loaded = load_with({name: PASSWORD + garbage})
    except ConfigError as exc:  # a secret that is not text (bytes that are not UTF-8)
        assert str(exc).startswith(f"{name}: ") and PASSWORD not in str(exc)
        return
    assert PASSWORD not in repr(loaded) and PASSWORD not in str(loaded)


@pytest.mark.parametrize("value", ["inf", "1e999"])
def test_an_infinite_tick_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="EINMAL_TICK_SECONDS"):
        load_with({"EINMAL_TICK_SECONDS": value})


@pytest.mark.parametrize(("name", "value"), [("EINMAL_SMTP_PORT", "2\udcff5"), ("EINMAL_BATCH_SIZE", " "),
                                             ("EINMAL_SMTP_TLS", "starttls\n"), ("EINMAL_IN_DOUBT", "hold" * 500)])
def test_a_garbage_variable_stops_the_command_line_with_exit_2(name: str, value: str) -> None:
    result = einmal("campaign", "status", "1", dsn="postgresql://postgres@127.0.0.1:1/nowhere",
                    env={"EINMAL_SMTP_PASSWORD": PASSWORD, name: value})
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"einmal: {name}: "), result.stderr
    assert "Traceback" not in result.stderr and PASSWORD not in result.stderr

