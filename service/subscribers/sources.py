"""The exports of other tools, read as `einmal subscribers import --from listmonk|mailchimp` reads them.

Each format reads the header row of its tool's export and gives the check of its rows (importer.Reading): a
record to the row importer.py stages, or why it is refused (`line N: …`). The rows then take einmal's one
import path (importer.import_file): staged by COPY, moved set-based, one transaction. What each state of the
source becomes (docs/guide/importing.md):

- listmonk's subscriber export (`uuid,email,name,attributes,status,created_at,updated_at`; one list at a time,
  optionally of one subscription status, since the export carries neither): `blocklisted` suppresses the
  mailbox (reason `blocklisted`) and makes no subscriber; `disabled` is refused with its line; `enabled` joins
  the list of --list as --subscription-status says: `confirmed` a member, `unconfirmed` (the default, since an
  export of every status cannot tell) a sign-up awaiting confirmation, `unsubscribed` nothing but the
  departure, which keeps every later import from putting the person on the list. `attributes`, a JSON
  object, becomes the subscriber's attributes (values as text).
- Mailchimp's audience export (`subscribed_…`, `unsubscribed_…` and `cleaned_…` CSV files, told apart by their
  UNSUB_TIME and CLEAN_TIME columns): a subscribed contact joins the list of --list, confirmed (at CONFIRM_TIME,
  else OPTIN_TIME) when the file says when it opted in, else as a sign-up awaiting confirmation; an unsubscribed
  one suppresses its mailbox (`unsubscribe`; `complaint` when UNSUB_REASON says abuse or spam), a cleaned one
  too (`bounce`); neither makes a subscriber. The merge fields become attributes, and TIMEZONE the `time_zone`
  attribute a campaign's local send time reads; Mailchimp's other columns (ratings, IP addresses, geolocation,
  ids) are not kept.
"""

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime

from service.errors import ArgumentError, Invalid
from service.subscribers import importer
from service.subscribers.importer import Check, Good, Lines, checked, fields_problem
from service.text import MAX_LIST, shown, unsafe_text

FORMATS = ("csv", "listmonk", "mailchimp")
STATUSES = ("confirmed", "unconfirmed", "unsubscribed")  # listmonk's subscription statuses
LISTMONK = ("uuid", "email", "name", "attributes", "status", "created_at", "updated_at")
MAILCHIMP_OWN = frozenset(  # Mailchimp's columns that are not the audience's merge fields, in lower case
    "email address,first name,last name,member_rating,optin_time,optin_ip,confirm_time,confirm_ip,latitude,"
    "longitude,gmtoff,dstoff,timezone,cc,region,last_changed,leid,euid,notes,tags,unsub_time,unsub_campaign_title,"
    "unsub_campaign_id,unsub_reason,unsub_reason_other,clean_time,clean_campaign_title,clean_campaign_id".split(",")
)
MAILCHIMP_TIME = "%Y-%m-%d %H:%M:%S"  # as its exports write OPTIN_TIME and CONFIRM_TIME, in UTC
COMPLAINT = re.compile(r"abuse|spam", re.IGNORECASE)
MAX_ATTRIBUTES = importer.MAX_COLUMNS


def source(name: str) -> str | None:
    """What the memberships an import of the format makes keep as where they came from (None: einmal's own)."""
    return None if name == "csv" else f"import:{name}"


def reading(name: str, lists: tuple[str, ...], status: str | None) -> importer.Reading | None:
    """The reading of format `name` (None: einmal's own, importer.csv_reading); ArgumentError for options that do
    not fit it."""
    if name == "csv":
        if status:
            raise ArgumentError("--subscription-status is for --from listmonk")
        return None
    if len(lists) != 1:
        raise ArgumentError(f"--from {name} needs one --list: the list its members join in einmal")
    if name == "mailchimp":
        if status:
            raise ArgumentError("--subscription-status is for --from listmonk")
        return lambda reader, lines, path: mailchimp(reader, lines, path, lists[0])
    return lambda reader, lines, path: listmonk(reader, lines, path, lists[0], status or "unconfirmed")


def columns(row: list[str], path: str, tool: str, needed: tuple[str, ...]) -> dict[str, int]:
    """Where each column is (names in lower case); Invalid, in one line, when one that is needed is missing."""
    where: dict[str, int] = {}
    for column, name in enumerate(row):
        if name in where:
            raise Invalid(f"{path}: the header row names the {shown(name)} column twice")
        where[name] = column
    missing = [name for name in needed if name not in where]
    if missing:
        raise Invalid(f"{path}: not a {tool} export: no {', '.join(missing)} column (see docs/guide/importing.md)")
    return where


def listmonk(reader: Iterator[list[str]], lines: Lines, path: str, list_name: str, status: str) -> Check:
    where = columns(importer.header_row(reader, lines, path), path, "listmonk subscriber", LISTMONK[1:5])
    width = len(where)

    def check(row: list[str]) -> Good | str:
        problem = fields_problem(row, width)
        if problem:
            return problem
        state = row[where["status"]].strip()
        if state not in ("enabled", "blocklisted"):
            return f"status {shown(state)}: einmal imports enabled and blocklisted subscribers"
        attributes = listmonk_attributes(row[where["attributes"]])
        if isinstance(attributes, str):
            return attributes
        email, name = row[where["email"]].strip(" "), row[where["name"]].strip(" ")
        if state == "blocklisted":
            return checked(email, name, [], {}, "blocklisted", joins=False)
        if status == "unsubscribed":
            return checked(email, name, [], attributes, "", left=(list_name,))
        return checked(email, name, [list_name], attributes, "", state=status)

    return check


def listmonk_attributes(cell: str) -> dict[str, str] | str:
    """A listmonk `attributes` cell as einmal's attributes (each value as text: a number or an object as its
    JSON), or why it cannot be."""
    try:
        value = json.loads(cell) if cell.strip() else {}
    except ValueError:
        return "attributes: not JSON"
    if not isinstance(value, dict):
        return "attributes: not a JSON object"
    if len(value) > MAX_ATTRIBUTES:
        return f"attributes: more than {MAX_ATTRIBUTES}"
    for key in value:
        if not key or unsafe_text(key) or len(key) > MAX_LIST or key in importer.RESERVED:
            return f"attributes: the name {shown(key)} cannot be an attribute's"
    texts = {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in value.items()}
    bad = next((k for k, v in texts.items() if unsafe_text(v)), None)
    return f"attributes: {shown(bad)} holds a line break or a control character" if bad is not None else texts


def mailchimp(reader: Iterator[list[str]], lines: Lines, path: str, list_name: str) -> Check:
    row = importer.header_row(reader, lines, path)
    where = columns(row, path, "Mailchimp audience", ("email address", "optin_time", "confirm_time"))
    width = len(where)
    reason = "unsubscribe" if "unsub_time" in where else "bounce" if "clean_time" in where else ""
    merge = [(c, name) for name, c in where.items() if name not in MAILCHIMP_OWN]
    for column, name in merge:
        importer.attribute_name(name, path, column, [])

    def cell(row: list[str], name: str) -> str:
        return row[where[name]].strip(" ") if name in where else ""

    def check(row: list[str]) -> Good | str:
        problem = fields_problem(row, width)
        if problem:
            return problem
        email = cell(row, "email address")
        name = " ".join(part for part in (cell(row, "first name"), cell(row, "last name")) if part)
        attributes = {name: row[c].strip(" ") for c, name in merge if row[c].strip(" ")}
        if zone := cell(row, "timezone"):  # its IANA name, as a campaign's --local-time reads it
            attributes.setdefault("time_zone", zone)
        if reason:  # an unsubscribed or cleaned contact: only its suppression
            said = cell(row, "unsub_reason") + " " + cell(row, "unsub_reason_other")
            return checked(email, name, [], {}, "complaint" if COMPLAINT.search(said) else reason, joins=False)
        when = cell(row, "confirm_time") or cell(row, "optin_time")
        if not when:
            return checked(email, name, [list_name], attributes, "", state="unconfirmed")
        try:
            confirmed_at = datetime.strptime(when, MAILCHIMP_TIME).replace(tzinfo=UTC)
        except ValueError:
            return f"time {shown(when)} is not YYYY-MM-DD HH:MM:SS"
        return checked(email, name, [list_name], attributes, "", confirmed_at=confirmed_at)

    return check
