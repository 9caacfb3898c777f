"""`einmal subscribers import --account A FILE.csv`: a CSV file into subscribers and lists.

This is the import's one path; the command is service/subscribers/import_command.py, and the exports of other
tools (`--from listmonk|mailchimp`) are read into the same rows by service/subscribers/sources.py. A row makes
its memberships 'confirmed' (einmal's own format asserts consent), or, as such a source says, 'unconfirmed' (a
sign-up awaiting confirmation, which no campaign goes to), with the source's time of confirmation; a
membership already there stays as it is, and no suppression is ever lifted.

The file is streamed, never held in memory. A worker thread reads and
validates it and hands chunks of good rows over a bounded channel (two
chunks deep: a slow database slows the reader down instead of filling
memory); the event loop COPYs each chunk into a temporary staging table and
moves it into einmal.lists, einmal.subscribers and einmal.list_members with
INSERT … SELECT … ON CONFLICT DO NOTHING. The whole import is one
transaction: a database error or a file that fails half-way leaves nothing
half-written, and a re-import of the same file adds nothing.

The file: a header row (names case-insensitive, surrounding spaces ignored);
`email` required (also spelt `E-Mail`, `Email Address`, `mail`), `name` and
`list` optional (`news|vip` puts the address on both). A row naming no list (no `list` column, or an empty
cell) goes on the lists of `--list` when given; without it, a new subscriber goes on `default` and one already
present joins nothing (a file of `email,plan` changes the plan, not the lists). Besides the summary line, stderr
says what the import did per list (`list news: 3 added, 2 already on it`). An `unconfirmed` column (as
`subscribers export` writes it: sign-ups awaiting confirmation) never
makes a membership: a row whose `list` is empty and whose `unconfirmed` is not goes on no list, since only
the person's own confirmation makes a sign-up a member. A `suppressed` column (as `subscribers export`
writes it) suppresses each row's address whose cell is not empty, with the cell as the reason, so that an
export copied into another account mails none of its opt-outs. Every other column is kept as a string
attribute of the subscriber
(`{{ attributes.city }}` in a template), named by its header in lower case;
a column named like a reserved field (`attributes`, `campaign`, `id`, …), a
header row of more than MAX_COLUMNS columns or an attribute value over
MAX_ATTRIBUTE characters is refused. Fields are separated by `,`, `;` or a
tab: whichever the header row holds most of. UTF-8, with or without a BOM. A
blank line is skipped. The account must exist unless --create-account is given.

A bad row is not fatal: it is reported on stderr as `line N: reason` (N is
the physical line the record starts on; the header is line 1) and skipped.
Bad means: not the header's number of fields, bytes that are not UTF-8, a
line break (a quoted field spanning lines) or any other control character in
any field, an empty email, an email over 254 characters, a name over 1000, a
list name over 200, or an address whose syntax email_validator rejects.

Exit code: 0 when the file was imported, even when some rows were rejected —
the good rows are in, the summary line on stdout counts the rejected ones
(`imported N, already present M, rejected K`; `already present M (attributes
changed for C)` when the file changed some), and re-running after a fix
adds only what is missing. 2, with one line, when the file is missing or
cannot be opened (a bad argument). 1, with one line and nothing written, when the
file cannot be used at all: empty, no email column,
a header that is not UTF-8 (UTF-16, say), or a record the CSV reader cannot
delimit — longer than MAX_RECORD characters (a binary file, a line without
end), with a field longer than the csv module's field_size_limit, or with
broken quoting (a quote never closed, which would take in every line after
it, or one closed in the middle of a field). Past
such a record nobody can tell where the next one starts (it may sit inside
a quoted field), so no row of the file is trusted. Memory stays bounded:
lines are read at most MAX_RECORD characters at a time.

A subscriber is a mailbox: each row gets its mailbox key (`email_lower`,
service/addresses.py), and the account has one subscriber per key, so
`A@x.org` and `a@x.org` are one subscriber, kept in the spelling first
imported; a row in another spelling updates it (the summary counts them:
`2 under another spelling`). Imports into one account take turns (an
advisory lock), so two at once never add one mailbox twice. An
existing subscriber keeps its name and status; a new list adds a membership. Its
attributes are merged with the file's: a column of the file sets that key (an
empty cell sets nothing: an export writes one where the subscriber has no value), a key the file has no
column for is kept. Rows of one
address within the file merge in file order, the later winning, as a batch of the API merges its rows
(service/subscribers/batch.py): the first row makes the subscriber (spelling, name), a later one adds its lists
(naming none, it adds no `default`) and sets its attributes; its name is not taken (an import renames nobody).
Once the whole file is in, stderr names each later row: `line 9: 'ann@x.org' repeats line 2 ('Ann@x.org'):
merged into its subscriber, …`; the summary counts it as already present.
"""

import csv
import dataclasses
import functools
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, NamedTuple

import anyio
import anyio.from_thread
import anyio.to_thread
import asyncpg

from service import db
from service.addresses import address_problem, email_key
from service.errors import ArgumentError, Invalid, leaves
from service.text import MAX_ATTRIBUTE, MAX_EMAIL, MAX_LIST, MAX_NAME, MAX_REASON, shown, unsafe_text

DEFAULT_LIST = "default"
CHUNK_ROWS = 10_000
MAX_RECORD = 1 << 20  # characters in one record (its lines together): far beyond any real row
COLUMNS = [
    "line",
    "email",
    "email_key",
    "name",
    "list_name",
    "attributes",
    "unnamed",
    "state",
    "confirmed_at",
    "source",
]
MAX_COLUMNS = 200
DELIMITERS = (",", ";", "\t")
# header spellings, compared without case, spaces, "-" and "_"
SUPPRESSED = "suppressed"  # the column of `subscribers export` that holds a suppression's reason
UNCONFIRMED = "unconfirmed"  # the column of `subscribers export` that holds the sign-ups awaiting confirmation
SPELLINGS = {
    "email": "email",
    "emailaddress": "email",
    "mail": "email",
    "mailaddress": "email",
    "name": "name",
    "fullname": "name",
    "list": "list",
    "lists": "list",
    SUPPRESSED: SUPPRESSED,
    UNCONFIRMED: UNCONFIRMED,
}
SPECIAL = ("email", "name", "list", SUPPRESSED, UNCONFIRMED)
RESERVED = frozenset(("attributes", "campaign", "unsubscribe_url", "id", "account", "status", "subscriber"))


class Lines:
    """The file's lines for csv.reader, each read at most MAX_RECORD characters at a time.

    ``start_record()`` before each record; a record whose lines together pass MAX_RECORD
    raises Invalid instead of growing without bound."""

    def __init__(self, file: IO[str], path: str):
        self.file, self.path = file, path
        self.line = 0  # physical lines handed out
        self.start = 1
        self.room = MAX_RECORD
        self.first: str | None = None  # the first line, when it was read ahead to find the delimiter

    def peek(self) -> str:
        """The first line, read ahead and handed to the reader later all the same."""
        self.first = self.file.readline(MAX_RECORD + 1)
        return self.first

    def start_record(self) -> None:
        self.start, self.room = self.line + 1, MAX_RECORD

    def __iter__(self) -> "Lines":
        return self

    def __next__(self) -> str:
        if self.first is not None:
            text, self.first = self.first, None
        else:
            text = self.file.readline(self.room + 1)
        if not text:
            raise StopIteration
        if len(text) > self.room:
            raise Invalid(
                f"{self.path}: the record on line {self.start} is longer than {MAX_RECORD} "
                "characters (not a CSV file of subscribers?); nothing imported"
            )
        self.room -= len(text)
        self.line += 1
        return text


class Header(NamedTuple):
    width: int
    email: int
    name: int | None
    list: int | None
    attributes: tuple[tuple[int, str], ...] = ()
    suppressed: int | None = None  # (column, attribute name) of the other columns
    unconfirmed: int | None = None
    fallback: tuple[str, ...] = ()  # --list: the lists of a row naming none (none: `default`, for new ones only)


@dataclass
class Counts:
    good: int = 0
    imported: int = 0
    rejected: int = 0
    changed: int = 0  # subscribers already present whose attributes the file changed
    respelled: int = 0  # subscribers already present that the file names in another spelling
    suppressed: int = 0  # mailboxes the file's suppressed column suppressed that were not before
    unlisted: int = 0  # rows with only sign-ups awaiting confirmation, put on no list
    kept: int = 0  # subscribers already present of rows naming no list: put on no list
    optouts: int = 0  # rows that made no subscriber: only a suppression, or a list left
    lists: dict[str, "OnList"] = dataclasses.field(default_factory=dict)  # per list named
    reasons: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # per suppression reason: [added, given]


@dataclass
class OnList:
    """What an import did to one list."""

    added: int = 0  # memberships it made
    named: int = 0  # mailboxes its rows put on the list
    pending: int = 0  # of those added, sign-ups awaiting confirmation
    barred: int = 0  # mailboxes named that had left the list here: not put back
    gone: int = 0  # mailboxes the source says left the list: not put on it
    still: int = 0  # of those, mailboxes on the list here all the same: kept (an import takes no one off)


def header_row(reader: Iterator[list[str]], lines: Lines, path: str) -> list[str]:
    """The header row, its names stripped and in lower case; Invalid for one no import can read."""
    lines.start_record()
    try:
        row = next(reader)
    except StopIteration:
        raise Invalid(f"{path} is empty: a header row with an email column is required") from None
    except csv.Error as exc:
        raise Invalid(f"{path}: the header row is not valid CSV: {exc}") from None
    text = "".join(row)
    if text.startswith(("\udcff\udcfe", "\udcfe\udcff")) or "\0" in text:
        raise Invalid(f"{path}: the header row is not UTF-8 (UTF-16?): save the file as UTF-8")
    if any("\udc80" <= c <= "\udcff" for c in text):
        raise Invalid(f"{path}: the header row is not valid UTF-8")
    if len(row) > MAX_COLUMNS:
        raise Invalid(f"{path}: the header row has {len(row)} columns, at most {MAX_COLUMNS} are allowed")
    return [field.strip().lower() for field in row]


def attribute_name(name: str, path: str, column: int, taken: list[str]) -> str:
    """A column's name as a subscriber's attribute; Invalid for one that cannot be."""
    if not name or unsafe_text(name) or len(name) > MAX_LIST:
        raise Invalid(f"{path}: column {column + 1} of the header row has no usable name")
    if name in RESERVED:
        raise Invalid(f"{path}: column {shown(name)} is named like a reserved field; rename it")
    if name in taken:
        raise Invalid(f"{path}: the header row names the {shown(name)} column twice")
    return name


def read_header(reader: Iterator[list[str]], lines: Lines, path: str) -> Header:
    row = header_row(reader, lines, path)
    names = [SPELLINGS.get(re.sub(r"[\s_-]", "", name), name) for name in row]
    for name in SPECIAL:
        if names.count(name) > 1:
            raise Invalid(f"{path}: the header row names the {name} column twice")
    if "email" not in names:
        raise Invalid(f"{path}: the header row has no email column")
    attributes: list[tuple[int, str]] = []
    for column, name in enumerate(names):
        if name not in SPECIAL:
            attributes.append((column, attribute_name(name, path, column, [n for _, n in attributes])))
    where = {name: names.index(name) for name in ("name", "list", SUPPRESSED, UNCONFIRMED) if name in names}
    return Header(
        len(row),
        names.index("email"),
        where.get("name"),
        where.get("list"),
        tuple(attributes),
        where.get(SUPPRESSED),
        where.get(UNCONFIRMED),
    )


class Good(NamedTuple):
    """A row that passed its checks: what it asks of the account."""

    email: str
    key: str  # its mailbox key
    name: str
    lists: list[str]  # the lists it joins
    attributes: str  # JSON
    reason: str  # the reason to suppress its mailbox, or ""
    unnamed: bool  # its lists are `default` for want of any named: for a new subscriber only
    state: str = "confirmed"  # of the memberships it makes: 'confirmed', or 'unconfirmed' (a sign-up awaiting it)
    confirmed_at: datetime | None = None  # when the source says the person confirmed
    left: tuple[str, ...] = ()  # lists the source says the person left: not joined
    joins: bool = True  # False: an opt-out's row, which only suppresses its mailbox


Check = Callable[[list[str]], Good | str]  # a record of the file's format to its good row, or why it is refused
Reading = Callable[[Iterator[list[str]], Lines, str], Check]  # reads the header row, gives the check of the rows


def checked(email: str, name: str, lists: list[str], attributes: dict[str, str], reason: str, **more) -> Good | str:
    """The row of these values, or why it is rejected: the bounds every format's rows are held to."""
    if not email:
        return "empty email"
    if len(email) > MAX_EMAIL:
        return f"email longer than {MAX_EMAIL} characters"
    if len(name) > MAX_NAME:
        return f"name longer than {MAX_NAME} characters"
    if any(len(list_name) > MAX_LIST for list_name in lists):
        return f"list name longer than {MAX_LIST} characters"
    if len(reason) > MAX_REASON:
        return f"suppressed reason longer than {MAX_REASON} characters"
    if any(len(value) > MAX_ATTRIBUTE for value in attributes.values()):
        return f"attribute longer than {MAX_ATTRIBUTE} characters"
    problem = address_problem(email)
    if problem:
        return f"invalid address {shown(email)}: {problem}"
    text = json.dumps(attributes, ensure_ascii=False)
    return Good(email, email_key(email), name, lists, text, reason, more.pop("unnamed", False), **more)


def fields_problem(row: list[str], width: int) -> str | None:
    """Why a record's fields cannot be read as a row of the header's `width`, or None."""
    if len(row) != width:
        return f"expected {width} fields, found {len(row)}"
    return next((problem for problem in map(unsafe_text, row) if problem), None)


def check_row(row: list[str], header: Header) -> Good | str:
    """The good row of a record of einmal's own CSV format, or why it is rejected."""
    problem = fields_problem(row, header.width)
    if problem:
        return problem
    email = row[header.email].strip(" ")
    name = row[header.name].strip(" ") if header.name is not None else ""
    cell = row[header.list] if header.list is not None else ""
    lists = list(dict.fromkeys(name.strip(" ") for name in cell.split("|") if name.strip(" ")))
    pending = row[header.unconfirmed].strip(" ") if header.unconfirmed is not None else ""
    unnamed = not lists and not pending and not header.fallback
    lists = lists or ([] if pending else list(header.fallback) or [DEFAULT_LIST])  # a sign-up awaiting
    # confirmation joins nothing
    reason = row[header.suppressed].strip(" ") if header.suppressed is not None else ""
    attributes = {name: row[column].strip(" ") for column, name in header.attributes if row[column].strip(" ")}
    return checked(email, name, lists, attributes, reason, unnamed=unnamed)


def csv_reading(reader: Iterator[list[str]], lines: Lines, path: str, fallback: tuple[str, ...] = ()) -> Check:
    """The check of einmal's own format, from its header row."""
    return functools.partial(check_row, header=read_header(reader, lines, path)._replace(fallback=fallback))


def _malformed(exc: csv.Error) -> str:
    """What the strict reader's error says of a record, for the refusal."""
    text = str(exc)
    if "field larger" in text:
        return f"has a field longer than {csv.field_size_limit()} characters"
    if "unexpected end of data" in text:  # a quote opened and never closed: it took in every line after it
        return "opens a quote that is never closed (broken quoting)"
    if "expected after" in text:
        return "has a quote that is not closed where its field ends (broken quoting)"
    return f"is malformed CSV ({exc})"


def records(reader: Iterator[list[str]], lines: Lines) -> Iterator[tuple[int, list[str]]]:
    """(line the record starts on, its fields); blank lines skipped.

    Invalid for a record the reader cannot delimit: after one, the reader would start
    afresh in what may be the middle of a quoted field, and read its lines as records."""
    while True:
        lines.start_record()
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise Invalid(
                f"{lines.path}: the record on line {lines.start} {_malformed(exc)}; nothing imported"
            ) from None
        if row:
            yield lines.start, row


Rejected = list[tuple[int, str]]  # (line, reason) of the rows refused


def staged(line: int, row: Good, source: str | None) -> list[tuple]:
    """The staging table's rows of a good row: one per list it joins (one with no list when it joins none and
    leaves none), one per list it left (state 'left': it joins no list, and makes no subscriber); none for an
    opt-out's row."""
    if not row.joins:
        return []
    fields = (line, row.email, row.key, row.name)
    joined: list[str | None] = [*row.lists] or ([] if row.left else [None])  # None: the row names no list
    return [
        (*fields, list_name, row.attributes, row.unnamed, row.state, row.confirmed_at, source) for list_name in joined
    ] + [(*fields, list_name, "{}", False, "left", None, source) for list_name in row.left]


def produce(
    reader: Iterator[list[str]],
    lines: Lines,
    check: Check,
    source: str | None,
    send,
    counts: Counts,
    report: Callable[[Rejected], None],
) -> None:
    """Worker thread: validate rows, send chunks of good ones, each with the (key, reason) of its rows to
    suppress, and hand the bad ones to ``report``, run in the event loop, before the chunk they precede and
    before an error that ends the file."""
    chunk: list[tuple] = []
    suppress: list[tuple[str, str]] = []
    rejected: Rejected = []

    def reported() -> None:
        if rejected:
            anyio.from_thread.run_sync(report, rejected.copy())
            rejected.clear()

    try:
        for line, row in records(reader, lines):
            result = check(row)
            if isinstance(result, str):
                counts.rejected += 1
                rejected.append((line, result))
                if len(rejected) >= CHUNK_ROWS:
                    reported()
                continue
            rows = staged(line, result, source)
            chunk.extend(rows)
            makes = any(r[7] != "left" for r in rows)  # a subscriber, new or merged into
            counts.good += makes
            counts.optouts += not makes
            counts.unlisted += makes and not result.lists
            if result.reason:
                suppress.append((result.key, result.reason))
            if len(chunk) >= CHUNK_ROWS or len(suppress) >= CHUNK_ROWS:
                reported()
                anyio.from_thread.run(send.send, (chunk, suppress))
                chunk, suppress = [], []
        reported()
        if chunk or suppress:
            anyio.from_thread.run(send.send, (chunk, suppress))
    except anyio.BrokenResourceError:
        return  # the loader failed; its error is the one reported
    finally:
        reported()  # the rows refused before a record that ends the import


async def load_chunk(conn: asyncpg.Connection, account_id: int, chunk: list[tuple], counts: Counts) -> None:
    """Stage one chunk and move it, counting in `counts` the subscribers new, those whose attributes changed,
    those named in another spelling, those kept off `default`, and per list the members added and named."""
    if not chunk:
        return
    await conn.execute(*db.sql("subscribers_stage_clear"))
    await conn.copy_records_to_table("einmal_import", schema_name="pg_temp", columns=COLUMNS, records=chunk)
    await conn.execute(*db.sql("subscribers_seen_staged"))
    counts.kept += await conn.fetchval(*db.sql("subscribers_unname_staged", account_id=account_id))
    await conn.execute(*db.sql("list_insert_staged", account_id=account_id))
    moved = await conn.fetchrow(*db.sql("subscribers_insert_staged", account_id=account_id))
    assert moved is not None  # one row of counts
    added, changed, respelled = moved
    for row in await conn.fetch(*db.sql("list_members_insert_staged", account_id=account_id)):
        done = counts.lists.setdefault(row["name"], OnList())
        for field in ("added", "named", "pending", "barred", "gone", "still"):
            setattr(done, field, getattr(done, field) + row[field])
    counts.imported += added
    counts.changed += changed
    counts.respelled += respelled


async def import_file(
    conn: asyncpg.Connection,
    account_id: int,
    file: IO[str],
    path: str,
    report: Callable[[Rejected], None],
    fallback: tuple[str, ...] = (),
    reading: Reading | None = None,
    source: str | None = None,
) -> Counts:
    """Stream an open CSV file into the account, inside the caller's transaction; ``report`` is given the
    rows refused, in file order, as they are found, then, once the file is in, the rows that repeat an earlier
    row's mailbox and were merged into it; `fallback` are the lists of a row naming none (--list). `reading`
    reads the header of another tool's export and gives the check of its rows (service/subscribers/sources.py;
    None: einmal's own format); `source` is what the memberships made keep as where they came from."""
    lines = Lines(file, path)
    try:
        first = await anyio.to_thread.run_sync(lines.peek)
    except OSError as exc:
        raise Invalid(f"cannot read {path}: {exc.strerror or exc}") from None
    # strict: a stray quote is an error, not the start of a field that takes in the rest of the file
    reader = csv.reader(lines, delimiter=max(DELIMITERS, key=first.count), strict=True)  # a comma on a tie
    check = await anyio.to_thread.run_sync(
        reading or functools.partial(csv_reading, fallback=fallback), reader, lines, path
    )
    await conn.execute(*db.sql("subscribers_import_lock", account_id=account_id))
    await conn.execute(*db.sql("subscribers_stage_create"))
    await conn.execute(*db.sql("subscribers_seen_create"))
    counts = Counts()
    send, receive = anyio.create_memory_object_stream[tuple[list[tuple], list[tuple[str, str]]]](2)

    async def read() -> None:
        async with send:
            try:
                await anyio.to_thread.run_sync(produce, reader, lines, check, source, send, counts, report)
            except OSError as exc:
                raise Invalid(f"cannot read {path}: {exc.strerror or exc}") from None

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            async with receive:
                async for chunk, suppress in receive:
                    await load_chunk(conn, account_id, chunk, counts)
                    for reason in dict.fromkeys(r for _, r in suppress):
                        keys = [key for key, r in suppress if r == reason]
                        row = await conn.fetchrow(
                            *db.sql("suppression_insert", account_id=account_id, email_keys=keys, reason=reason)
                        )
                        assert row is not None  # one row of counts
                        given, added = row
                        counts.suppressed += added
                        done = counts.reasons.setdefault(reason, [0, 0])
                        done[0], done[1] = done[0] + added, done[1] + given
    except BaseExceptionGroup as group:
        # the error that failed the import; a broken channel is only its echo in the other task
        errors = leaves(group)
        raise next((e for e in errors if not isinstance(e, anyio.BrokenResourceError)), errors[0]) from None
    await report_repeats(conn, report)
    return counts


def repeat(row: asyncpg.Record) -> str:
    """What the import did with a row whose mailbox an earlier row named: it merged them."""
    earlier = f" ({shown(row['first_email'])})" if row["email"] != row["first_email"] else ""
    said = (
        f"{shown(row['email'])} repeats line {row['first_line']}{earlier}: merged into its subscriber, its lists "
        "added, its attributes over the earlier rows'"
    )
    if row["name"] and row["name"] != row["first_name"]:
        said += f"; its name {shown(row['name'])} not taken (a subscriber keeps its name)"
    return said


async def report_repeats(conn: asyncpg.Connection, report: Callable[[Rejected], None]) -> None:
    """Hand ``report`` each row that repeats an earlier row's mailbox, in file order, CHUNK_ROWS at a time: once
    the whole file is in, so that an import that fails says of no row that it was merged."""
    said: Rejected = []
    async for row in conn.cursor(*db.sql("subscribers_repeats_staged"), prefetch=1000):
        said.append((row["line"], repeat(row)))
        if len(said) >= CHUNK_ROWS:
            report(said)
            said = []
    if said:
        report(said)


def open_csv(path: str) -> IO[str]:
    try:
        # surrogateescape: bytes that are not UTF-8 become lone surrogates, rejected row by row
        return open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")
    except OSError as exc:  # a file that is not there (or a folder): a bad argument, exit 2
        raise ArgumentError(f"cannot read {path}: {exc.strerror or exc}") from None


def print_rejected(rejected: Rejected) -> None:
    for line, reason in rejected:
        print(f"line {line}: {reason}", file=sys.stderr)


def fallback_lists(given: list[str]) -> tuple[str, ...]:
    """The lists of --list, each once; ArgumentError for a name no list can have."""
    for name in given:
        if not name.strip() or unsafe_text(name) or len(name) > MAX_LIST or name != name.strip():
            raise ArgumentError(f"--list {shown(name)}: 1 to {MAX_LIST} printable characters, no spaces around")
    return tuple(dict.fromkeys(given))
