"""Bad CSV files never get past `einmal subscribers import`: hostile files, fixed and generated.

Every case ends one of two ways: each good row imported and each bad one reported by its line, or
the file refused with one line and nothing written. Never a traceback, never half an import
reported as a success.
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

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.addresses import email_key
from service.errors import Invalid
from service.settings import Settings
from service.subscribers import import_command, importer
from service.text import MAX_LIST, MAX_NAME
from tests.conftest import ROOT, einmal
from tests.support.refusals import one_line_refusal, table_counts

pytestmark = pytest.mark.anyio

SUMMARY = re.compile(r"imported (\d+), already present (\d+), rejected (\d+)\n")
REJECTED = re.compile(r"line (\d+): \S.*")
REPEATED = re.compile(r"""(?m)^line \d+: ('[^\n]*'|"[^\n]*") repeats line \d+[ :][^\n]*\n""")  # merged, not rejected
CREATED = re.compile(r"(?m)^einmal: created account '[^'\n]*'\n")  # --create-account made the account: said once


PER_LIST = re.compile(r"(?m)^list [^\n]*: \d+ added[^\n]*\n")  # what the import did per list


def created_aside(err: str) -> str:
    """stderr without the line that says --create-account created the account, nor those said per list or per
    row repeating an earlier row's mailbox."""
    return REPEATED.sub("", PER_LIST.sub("", CREATED.sub("", err)))


PASSWORD = "pa55-never-shown"
MB = 1 << 20


def check_import_output(code: int, out: str, err: str) -> tuple[int, int, int] | None:
    """The command's output has the promised shape; the summary's counts when it exited 0."""
    assert code in (0, 1), err
    assert "Traceback" not in err
    assert len(CREATED.findall(err)) <= (1 if code == 0 else 0), err
    lines = created_aside(err).split("\n")
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
        code = await import_command.command(args, Settings(database_url=dsn))
    except Invalid as exc:
        assert "\n" not in str(exc)
        print(f"einmal: {exc}", file=sys.stderr)
        code = 1
    out, err = capsys.readouterr()
    return code, out, err


# -- CSV import: fixed nasty files through the command line -----------------------------

SJIS = "email,name\nyamada@example.com,山田\nok@example.com,Ok\n".encode("shift_jis")
WRAPPED = b'email\n"first@example.com\n' + b"inside@example.com\n" * 12_000 + b'"\nlast@example.com\n'
NASTY_FILES = {
    # name: (content, exit code, what stderr says, rows imported)
    "random bytes": (random.Random(5).randbytes(20_000), 1, "einmal: ", 0),
    "latin-1": (
        "email,name\nm@example.com,Müller\nok@example.com,Ok\n".encode("latin-1"),
        0,
        "line 2: not valid UTF-8\n",
        1,
    ),
    "UTF-16 with BOM": ("email,name\na@example.com,A\n".encode("utf-16"), 1, "einmal: ", 0),
    "UTF-16-LE without BOM": ("email,name\na@example.com,A\n".encode("utf-16-le"), 1, "einmal: ", 0),
    "UTF-16-BE without BOM": ("email,name\na@example.com,A\n".encode("utf-16-be"), 1, "einmal: ", 0),
    "Shift-JIS": (SJIS, 0, "line 2: not valid UTF-8\n", 1),
    "10 MB field on one line": (
        b'email,name\na@example.com,"' + b"x" * 10_000_000 + b'"\nb@example.com,B\n',
        1,
        "einmal: ",
        0,
    ),
    "quoted field over the field limit, its lines look like rows": (WRAPPED, 1, "einmal: ", 0),
    "no header": (b"a@example.com,Ann\nb@example.com,Bob\n", 1, "einmal: ", 0),
    "header only, BOM, CRLF": (b"\xef\xbb\xbfemail,name\r\n", 0, "", 0),
    "quoted newlines, control characters and NUL bytes": (
        b'email,name\r\n"q@example.com","two\r\nlines"\r\nc@example.com,bell\x07\r\n'
        b'n@example.com,nul\x00byte\r\n\x00\r\nok@example.com,"Ok, ""quoted"""\r\n',
        0,
        "line 2: line break inside a field\nline 4: control character U+0007 in a field\n"
        "line 5: control character U+0000 in a field\nline 6: expected 2 fields, found 1\n",
        1,
    ),
}


@pytest.mark.parametrize("case", NASTY_FILES, ids=list(NASTY_FILES))
async def test_a_nasty_file_is_imported_row_by_row_or_refused_whole_in_one_line(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, case: str
) -> None:
    content, code, says, imported = NASTY_FILES[case]
    path = tmp_path / "nasty.csv"
    path.write_bytes(content)
    before = await table_counts(conn)
    result = einmal("subscribers", "import", "--account", "acme", "--create-account", str(path), dsn=dsn)
    assert result.returncode == code, result.stderr[:500]
    check_import_output(result.returncode, result.stdout, result.stderr)
    assert result.stderr.startswith(says) if code else created_aside(result.stderr) == says
    if code == 1:
        one_line_refusal(result)
        assert await table_counts(conn) == before
    else:
        assert result.stdout.startswith(f"imported {imported}, ")
        assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers") == imported


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (
            b'email,name\na@example.com,A\nb@example.com,"Bob\nc@example.com,C\nd@example.com,D\n',
            "the record on line 3 opens a quote that is never closed",
        ),
        (
            b'email,name\na@example.com,A\nb@example.com,"Bob\nc@example.com,C"x\nd@example.com,D\n',
            "the record on line 3 has a quote that is not closed where its field ends",
        ),
    ],
    ids=["never closed", "closed inside a field"],
)
async def test_a_stray_quote_refuses_the_file_whole_naming_its_line(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, content: bytes, says: str
) -> None:
    """An unclosed quote would swallow every row after it into one field: the file is refused whole
    (before: that one record was rejected as 'line break inside a field' and the rows after it were gone,
    exit 0)."""
    path = tmp_path / "stray.csv"
    path.write_bytes(content)
    before = await table_counts(conn)
    result = einmal("subscribers", "import", "--account", "acme", "--create-account", str(path), dsn=dsn)
    assert result.returncode == 1, result.stdout
    assert one_line_refusal(result) == f"einmal: {path}: {says} (broken quoting); nothing imported\n"
    assert await table_counts(conn) == before


async def test_a_fifo_is_read_like_a_file(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    fifo = tmp_path / "subscribers.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b"email\na@example.com\nb@example.com\n",))
    writer.start()
    result = einmal("subscribers", "import", "--account", "acme", "--create-account", str(fifo), dsn=dsn, timeout=30)
    writer.join(timeout=5)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "imported 2, already present 0, rejected 0\n",
        "einmal: created account 'acme'\n"
        "list default: 2 added (new subscribers of rows naming no list; --list chooses)\n",
    )


def _limit_memory() -> None:
    """In the child: a regression fails with MemoryError instead of eating the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run_measured(*args: str, dsn: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, int]:
    """einmal in a child process of at most 2 GiB, and its peak resident memory in bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_")} | {"EINMAL_DATABASE_URL": dsn}
    with subprocess.Popen(
        [sys.executable, "-m", "service", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_limit_memory,
    ) as child:
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
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    small = tmp_path / "small.csv"
    small.write_bytes(b"email\na@example.com\n")
    huge = tmp_path / "huge.csv"
    with huge.open("wb") as file:
        file.write(b"email,name\nb@example.com,")
        for _ in range(50):
            file.write(b"y" * MB)
    baseline, baseline_peak = run_measured(
        "subscribers", "import", "--account", "acme", "--create-account", str(small), dsn=dsn
    )
    assert baseline.returncode == 0, baseline.stderr
    before = await table_counts(conn)

    result, peak = run_measured("subscribers", "import", "--account", "acme", "--create-account", str(huge), dsn=dsn)

    assert one_line_refusal(result) == (
        f"einmal: {huge}: the record on line 2 is longer than {importer.MAX_RECORD}"
        " characters (not a CSV file of subscribers?); nothing imported\n"
    )
    assert await table_counts(conn) == before
    assert peak < baseline_peak + 20 * MB, (peak, baseline_peak)


def test_an_endless_line_is_refused_not_read_to_its_end(dsn: str) -> None:
    result, _ = run_measured(
        "subscribers", "import", "--account", "acme", "--create-account", "/dev/zero", dsn=dsn, timeout=30
    )
    assert one_line_refusal(result).startswith("einmal: /dev/zero: the record on line 1 is longer than")


# -- CSV import: properties, in process -------------------------------------------------

printable = st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u2028\u2029")
safe_text = st.text(printable, max_size=20)
good_email = st.one_of(
    st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9+_-]{0,8}(\.[a-z0-9]{1,4})?", fullmatch=True),
    st.sampled_from(["jörg", "山田", "o'neil", "x+tag"]),
).flatmap(
    lambda local: st.sampled_from(["example.com", "Example.ORG", "mail.test", "bücher.example", "localhost"]).map(
        lambda domain: f"{local}@{domain}"
    )
)
BAD_EMAILS = [
    "not-an-address",
    "a@@example.com",
    "a b@example.com",
    "@example.com",
    "a@",
    "a..b@example.com",
    ".a@example.com",
    "a@-example.com",
    "a\uff20example.com",
    "a" * 250 + "@example.com",
    "",
    "   ",
]
BREAKS = ["\n", "\r\n", "\r", "\x00", "\x07", "\t", "\x7f", "\x85", "\u2028"]
DEFECTS = ["address", "control", "long name", "long list", "latin-1", "fields"]


@st.composite
def rows(draw) -> tuple[str, str, str, str | None]:
    """(email, name, list, defect or None) of one record."""
    email = draw(good_email)
    email = draw(st.sampled_from(["", " "])) + email + draw(st.sampled_from(["", "  "]))
    name = draw(st.one_of(safe_text, st.just("N" * MAX_NAME)))
    # "|" separates lists in a cell (tests/cli/test_import.py): one list a row here
    list_name = draw(
        st.one_of(
            st.just(""), st.sampled_from(["news", "Offers 2030"]), safe_text.map(lambda text: text.replace("|", "/"))
        )
    )
    defect = draw(st.none() | st.sampled_from(DEFECTS))
    if defect == "address":
        email = draw(st.sampled_from(BAD_EMAILS))
    elif defect == "control":
        name = name[:5] + draw(st.sampled_from(BREAKS)) + name[5:]
    elif defect == "long name":
        name = "n" * (MAX_NAME + 1)
    elif defect == "long list":
        list_name = "l" * (MAX_LIST + 1)
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
    content = [
        b"\xef\xbb\xbf" if bom else b"",
        ",".join(f" {c.upper()} " if c == "email" else c for c in columns).encode() + newline.encode(),
    ]
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
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, capsys: pytest.CaptureFixture, file
) -> None:
    content, records = file
    account = f"property-{next(account_numbers)}"
    path = tmp_path / f"{account}.csv"
    path.write_bytes(content)

    code, out, err = await import_in_process(str(path), account, dsn, capsys)

    counts = check_import_output(code, out, err)
    assert counts is not None, err
    good = [
        (email.strip(" "), name.strip(" "), list_name.strip(" "))
        for _, email, name, list_name, defect in records
        if defect is None
    ]
    bad_lines = [line for line, *_, defect in records if defect is not None]
    assert [int(n) for n in re.findall(r"^line (\d+):", created_aside(err), re.M)] == bad_lines, err
    first = {}  # one subscriber per mailbox key: the spelling and name of its first row
    for email, name, _ in good:
        first.setdefault(email_key(email), (email, name))
    first_names = dict(first.values())
    assert counts == (len(first_names), len(good) - len(first_names), len(bad_lines))
    stored = await conn.fetch(
        "SELECT s.email, s.name, l.name AS list FROM einmal.subscribers s"
        " JOIN einmal.accounts a ON a.id = s.account_id AND a.name = $1"
        " JOIN einmal.list_members m ON m.subscriber_id = s.id"
        " JOIN einmal.lists l ON l.id = m.list_id",
        account,
    )
    assert {r["email"]: r["name"] for r in stored} == first_names
    # the lists each row names; `default` for a new subscriber whose first row names none (a later row naming
    # none finds the subscriber present, and keeps its lists)
    seen: set[str] = set()
    lists = set()
    for email, _, list_name in good:
        key = email_key(email)
        if list_name or key not in seen:
            lists.add((first[key][0], list_name or "default"))
        seen.add(key)
    assert {(r["email"], r["list"]) for r in stored} == lists


garbage_text = st.text(st.characters(codec="utf-8") | st.sampled_from(',"\r\n@.\x00'), max_size=200)
garbage = st.one_of(
    st.binary(max_size=400),
    st.binary(max_size=400).map(lambda body: b"email,name,list\n" + body),
    st.tuples(
        garbage_text,
        st.sampled_from(["latin-1", "utf-16", "utf-16-le", "utf-16-be", "shift_jis", "utf-8-sig", "utf-8"]),
        st.booleans(),
    ).map(lambda t: (("email,name,list\n" if t[2] else "") + t[0]).encode(t[1], "replace")),
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=garbage)
async def test_any_bytes_give_a_full_import_or_nothing_and_every_rejection_counted(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, capsys: pytest.CaptureFixture, content: bytes
) -> None:
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
    stored = await conn.fetchval(
        "SELECT count(*) FROM einmal.subscribers s JOIN einmal.accounts a ON a.id = s.account_id WHERE a.name = $1",
        account,
    )
    assert stored == imported
    # every record after the header is stored, already present or reported
    text = content.decode("utf-8-sig", "surrogateescape")
    records = list(csv.reader(io.StringIO(text, newline="")))[1:]
    assert imported + present + rejected == sum(1 for record in records if record)
