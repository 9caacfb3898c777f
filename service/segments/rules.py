"""A segment's rule: typed JSON read into a tree (`parse`), then compiled to one parameterised SQL predicate
over a subscriber row `s` (`predicate`), docs/guide/segments.md.

    {"all": [c, …]}  {"any": [c, …]}  {"not": c}
    {"attribute": "plan", "op": "eq", "value": "pro"}      ops: eq ne lt le gt ge in contains exists
    {"member": "news"}                                      a confirmed member of the account's list
    {"subscribed": {"after": "2026-01-01", "before": "2026-07-01", "within_days": 30}}
    {"received": {"campaign": 12}}  {"received": {"last": 3}}   sent that campaign / any of the last 3
    {"clicked": {"campaign": 12}}   {"clicked": {"last": 3}}    a person (not a machine) clicked a link of it

Nothing a user writes becomes SQL text: the SQL is made of this module's fixed fragments, and every name and
value given (an attribute's key, a list's name, a value, a date) is a `$n` parameter, sent as text and cast
in the statement. A rule is bounded (its depth, its conditions, its values' sizes); what is wrong is one line
naming the JSON path of the part, e.g. `rule $.all[1].op: …`. Every condition compiles to a predicate that is
true or false, never NULL, so `not` is the complement of what it holds.
"""

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from service.errors import Invalid
from service.text import shown

MAX_DEPTH = 8  # conditions inside conditions
MAX_CONDITIONS = 64  # conditions of a rule, all, any and not included
MAX_RULE = 16_384  # characters of the rule as JSON
MAX_TEXT = 256  # characters of a value, a list's name
MAX_KEY = 128  # characters of an attribute's name
MAX_IN = 100  # values of `in`
MAX_LAST = 100  # campaigns of `received.last` and `clicked.last`
MAX_DAYS = 36_500
MAX_NUMBER = 10**15

OPS = ("eq", "ne", "lt", "le", "gt", "ge", "in", "contains", "exists")
KINDS = ("all", "any", "not", "attribute", "member", "subscribed", "received", "clicked")
LATER = ("opened",)  # engagement: a kind kept for when einmal records opens
_ORDER = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@dataclass(frozen=True)
class Group:
    op: str  # AND | OR
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Not:
    item: "Node"


@dataclass(frozen=True)
class Attribute:
    key: str
    op: str
    value: Any = None  # a JSON scalar; a tuple of them for `in`


@dataclass(frozen=True)
class Member:
    list: str
    path: str = field(compare=False)


@dataclass(frozen=True)
class Subscribed:
    after: datetime | None
    before: datetime | None
    within_days: int | None


@dataclass(frozen=True)
class Received:
    """`received` (a send row of the campaign sent to the mailbox) or `clicked` (a click on a link of it that
    einmal tagged `human`, docs/design.md#click-tracking)."""

    kind: str
    campaign: int | None
    last: int | None
    path: str = field(compare=False)


Node = Group | Not | Attribute | Member | Subscribed | Received


def _fail(path: str, message: str) -> Invalid:
    return Invalid(f"rule {path}: {message}")


def parse(rule: Any) -> Node:
    """The rule's tree; Invalid, naming the path of the first part that is wrong."""
    try:
        size = len(json.dumps(rule, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise _fail("$", "not JSON (a number that is no number?)") from exc
    if size > MAX_RULE:
        raise _fail("$", f"{size} characters as JSON, more than {MAX_RULE}")
    return _Reader().node(rule, "$", 1)


class _Reader:
    def __init__(self) -> None:
        self.count = 0

    def node(self, given: Any, path: str, depth: int) -> Node:
        if not isinstance(given, dict):
            raise _fail(path, 'a condition is a JSON object, e.g. {"member": "news"}')
        if depth > MAX_DEPTH:
            raise _fail(path, f"conditions nested deeper than {MAX_DEPTH}")
        self.count += 1
        if self.count > MAX_CONDITIONS:
            raise _fail(path, f"more than {MAX_CONDITIONS} conditions")
        if "attribute" in given:
            return self.attribute(given, path)
        if len(given) != 1:
            raise _fail(path, f"one key of {', '.join(KINDS)}; found {len(given)}")
        ((kind, argument),) = given.items()
        here = f"{path}.{kind}"
        if kind in ("all", "any"):
            if not isinstance(argument, list) or not argument:
                raise _fail(here, "a list of one condition or more")
            items = tuple(self.node(c, f"{here}[{i}]", depth + 1) for i, c in enumerate(argument))
            return Group("AND" if kind == "all" else "OR", items)
        if kind == "not":
            return Not(self.node(argument, here, depth + 1))
        if kind == "member":
            return Member(_text(argument, here, MAX_TEXT, "a list's name"), here)
        if kind == "subscribed":
            return _subscribed(argument, here)
        if kind in ("received", "clicked"):
            return _received(kind, argument, here)
        if kind in LATER:
            raise _fail(here, "einmal records no opens yet")
        raise _fail(here, f"unknown condition {shown(kind)}: one of {', '.join(KINDS)}")

    def attribute(self, given: dict[str, Any], path: str) -> Attribute:
        _keys(given, path, ("attribute", "op", "value"))
        key = _text(given["attribute"], f"{path}.attribute", MAX_KEY, "an attribute's name")
        if "op" not in given:
            raise _fail(path, f"an op: one of {', '.join(OPS)}")
        op = given["op"]
        if op not in OPS:
            shown_op = shown(op) if isinstance(op, str) else json.dumps(op)[:40]
            raise _fail(f"{path}.op", f"unknown op {shown_op}: one of {', '.join(OPS)}")
        if op == "exists":
            if "value" in given:
                raise _fail(f"{path}.value", "exists takes no value")
            return Attribute(key, op)
        if "value" not in given:
            raise _fail(path, f"{op} needs a value")
        here, value = f"{path}.value", given["value"]
        if op == "in":
            if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN:
                raise _fail(here, f"a list of 1 to {MAX_IN} values")
            return Attribute(key, op, tuple(_scalar(v, f"{here}[{i}]") for i, v in enumerate(value)))
        value = _scalar(value, here)
        if op in _ORDER and (isinstance(value, bool) or not isinstance(value, int | float | str)):
            raise _fail(here, f"{op} compares a number or a string")
        return Attribute(key, op, value)


def _keys(given: dict[str, Any], path: str, allowed: tuple[str, ...]) -> None:
    for key in given:
        if key not in allowed:
            raise _fail(f"{path}.{key}" if key.isidentifier() else path, f"unknown key {shown(key)}")


def _text(value: Any, path: str, limit: int, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > limit or "\0" in value:
        raise _fail(path, f"{what}: a string of 1 to {limit} characters")
    return value


def _scalar(value: Any, path: str) -> Any:
    """A string, a number or true/false; not null, a list or an object."""
    if isinstance(value, str):
        if len(value) > MAX_TEXT or "\0" in value:
            raise _fail(path, f"a string of at most {MAX_TEXT} characters")
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            raise _fail(path, f"a number between -{MAX_NUMBER:.0e} and {MAX_NUMBER:.0e}")
        return value
    raise _fail(path, "a string, a number, true or false")


def _moment(value: Any, path: str) -> datetime:
    """2026-01-01 (midnight UTC) or 2026-01-01T09:00:00+01:00 (without an offset: UTC)."""
    if not isinstance(value, str) or len(value) > 40:
        raise _fail(path, "a date, 2026-01-01, or a time, 2026-01-01T09:00:00+01:00")
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC)
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise _fail(path, "a date, 2026-01-01, or a time, 2026-01-01T09:00:00+01:00") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _whole(value: Any, path: str, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise _fail(path, f"a whole number from 1 to {top}")
    return value


def _subscribed(given: Any, path: str) -> Subscribed:
    if not isinstance(given, dict) or not given:
        raise _fail(path, "an object of after, before, within_days")
    _keys(given, path, ("after", "before", "within_days"))
    after = _moment(given["after"], f"{path}.after") if "after" in given else None
    before = _moment(given["before"], f"{path}.before") if "before" in given else None
    days = _whole(given["within_days"], f"{path}.within_days", MAX_DAYS) if "within_days" in given else None
    return Subscribed(after, before, days)


def _received(kind: str, given: Any, path: str) -> Received:
    if not isinstance(given, dict) or len(given) != 1:
        raise _fail(path, 'one of {"campaign": <id>} or {"last": <number>}')
    _keys(given, path, ("campaign", "last"))
    if "campaign" in given:
        return Received(kind, _whole(given["campaign"], f"{path}.campaign", 2**63 - 1), None, path)
    return Received(kind, None, _whole(given["last"], f"{path}.last", MAX_LAST), path)


def references(node: Node) -> tuple[list[Member], list[Received]]:
    """The lists and campaigns the rule names, to check that the account has them."""
    if isinstance(node, Group):
        found = [references(item) for item in node.items]
        return [m for ms, _ in found for m in ms], [r for _, rs in found for r in rs]
    if isinstance(node, Not):
        return references(node.item)
    if isinstance(node, Member):
        return [node], []
    if isinstance(node, Received) and node.campaign is not None:
        return [], [node]
    return [], []


class _Params:
    """The predicate's parameters, numbered from `start`: each sent as text and cast in the statement."""

    def __init__(self, start: int, account_id: int, now: datetime) -> None:
        self.start, self.values = start, list[str]()
        self.account_id, self.now = account_id, now
        self.named: dict[str, str] = {}

    def __call__(self, value: str, cast: str = "") -> str:
        self.values.append(value)
        return f"${self.start + len(self.values) - 1}::text{cast}"

    def once(self, name: str, value: str, cast: str) -> str:
        if name not in self.named:
            self.named[name] = self(value, cast)
        return self.named[name]

    def account(self) -> str:
        return self.once("account", str(self.account_id), "::bigint")

    def moment(self) -> str:
        return self.once("now", self.now.isoformat(), "::timestamptz")


def predicate(node: Node, *, account_id: int, now: datetime, start: int) -> tuple[str, list[str]]:
    """(the SQL predicate over subscriber `s` of account `account_id`, its parameters from `$start`); `now`: the
    moment `within_days` and `received.last` count back from."""
    params = _Params(start, account_id, now)
    return _sql(node, params), params.values


def _sql(node: Node, p: _Params) -> str:
    if isinstance(node, Group):
        return "(" + f" {node.op} ".join(_sql(item, p) for item in node.items) + ")"
    if isinstance(node, Not):
        return f"(NOT {_sql(node.item, p)})"
    if isinstance(node, Attribute):
        return _attribute(node, p)
    if isinstance(node, Member):
        return (
            "EXISTS (SELECT 1 FROM einmal.list_members AS sm WHERE sm.subscriber_id = s.id AND sm.state = 'confirmed' "
            f"AND sm.list_id = (SELECT sl.id FROM einmal.lists AS sl WHERE sl.account_id = {p.account()} "
            f"AND sl.name = {p(node.list)}))"
        )
    if isinstance(node, Subscribed):
        parts = []
        if node.after is not None:
            parts.append(f"s.created_at >= {p(node.after.isoformat(), '::timestamptz')}")
        if node.before is not None:
            parts.append(f"s.created_at < {p(node.before.isoformat(), '::timestamptz')}")
        if node.within_days is not None:
            days = p(str(node.within_days), "::integer")
            parts.append(f"s.created_at >= {p.moment()} - make_interval(days => {days})")
        return "(" + " AND ".join(parts) + ")"
    if node.campaign is not None:
        campaigns = f"{p(str(node.campaign), '::bigint')}"
    else:  # the account's last campaigns started before this one (or before now)
        campaigns = (
            f"ANY (ARRAY(SELECT sc.id FROM einmal.campaigns AS sc WHERE sc.account_id = {p.account()} "
            f"AND sc.kind = 'campaign' AND sc.started_at < {p.moment()} "
            f"ORDER BY sc.started_at DESC, sc.id DESC LIMIT {p(str(node.last), '::integer')}))"
        )
    if node.kind == "clicked":  # the clicks of the subscriber the campaign's row went to, a person's
        return (
            f"EXISTS (SELECT 1 FROM einmal.clicks AS sk WHERE sk.campaign_id = {campaigns} "
            f"AND sk.account_id = {p.account()} AND sk.subscriber_id = s.id AND sk.tag = 'human')"
        )
    return (
        f"EXISTS (SELECT 1 FROM einmal.sends AS sr WHERE sr.campaign_id = {campaigns} "
        f"AND sr.account_id = {p.account()} AND sr.email_lower = s.email_lower AND sr.status = 'sent')"
    )


def _attribute(node: Attribute, p: _Params) -> str:
    key = p(node.key)
    got = f"(s.attributes -> {key})"
    if node.op == "exists":
        return f"(s.attributes ? {key})"
    if node.op == "eq":
        return f"coalesce({got} = {p(json.dumps(node.value), '::jsonb')}, false)"
    if node.op == "ne":
        return f"({got} IS DISTINCT FROM {p(json.dumps(node.value), '::jsonb')})"
    if node.op == "in":
        return f"coalesce({p(json.dumps(list(node.value)), '::jsonb')} @> jsonb_build_array({got}), false)"
    if node.op == "contains":  # an array attribute holding the value
        return f"coalesce(jsonb_typeof({got}) = 'array' AND {got} @> {p(json.dumps([node.value]), '::jsonb')}, false)"
    compare = _ORDER[node.op]
    if isinstance(node.value, str):
        return (
            f"coalesce(CASE WHEN jsonb_typeof({got}) = 'string' "
            f'THEN (s.attributes ->> {key}) COLLATE "C" {compare} {p(node.value)} END, false)'
        )
    return (
        f"coalesce(CASE WHEN jsonb_typeof({got}) = 'number' "
        f"THEN (s.attributes ->> {key})::numeric {compare} {p(json.dumps(node.value), '::numeric')} END, false)"
    )
