"""A query of sql/queries/ with a segment's predicate in it: the file holds the marker `/* segment */ true`
where the predicate goes (the recipient build, a segment's count and sample); its own `:name` parameters come
first and the predicate's after them (service/segments/rules.py). Without a rule the marker stays, `true`."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from service import db
from service.segments import rules

MARKER = "/* segment */ true"


def bound(query: str, rule: Any, *, owner: int, now: datetime, **values: object) -> tuple[str, *tuple[object, ...]]:
    """sql/queries/<query>.sql bound by keyword, as db.sql, with `rule`'s predicate (None: none) over the subscribers
    of account `owner` in it."""
    query_text, *args = db.sql(query, **values)
    text: str = query_text
    if text.count(MARKER) != 1:
        raise ValueError(f"sql/queries/{query}.sql: no single {MARKER!r} for a segment's predicate")
    if rule is None:
        return (text, *args)
    where, extra = rules.predicate(rules.parse(rule), account_id=owner, now=now, start=len(args) + 1)
    bound_args: list[object] = [*args, *extra]
    return (text.replace(MARKER, where), *bound_args)


@dataclass(frozen=True)
class Build:
    """What a campaign's recipient build puts in each chunk: its segment's rule, if any, compiled as it was made."""

    campaign_id: int
    account_id: int
    rule: Any
    started_at: datetime

    def chunk(self, *, after: str, size: int) -> tuple[str, *tuple[object, ...]]:
        """recipients_build_chunk.sql for the chunk after `after`, narrowed by the segment."""
        return bound(
            "recipients_build_chunk",
            self.rule,
            owner=self.account_id,
            now=self.started_at,
            campaign_id=self.campaign_id,
            after=after,
            size=size,
        )


async def build(conn: asyncpg.Connection, *, campaign_id: int) -> Build:
    """The campaign's build: its account, its segment's rule (None: its lists alone), when it started."""
    row = await conn.fetchrow(*db.sql("campaign_segment", campaign_id=campaign_id))
    if row is None:  # no such campaign: the chunk finds none either and adds nothing
        return Build(campaign_id, 0, None, datetime.now().astimezone())
    rule = json.loads(row["segment_rule"]) if row["segment_rule"] is not None else None
    return Build(campaign_id, row["account_id"], rule, row["started_at"])
