"""Every query file is used by the code and is valid SQL for the schema."""

import re

import asyncpg
import pytest

from service import db
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio


def python_sources() -> str:
    return "\n".join(p.read_text() for folder in ("service", "actors") for p in (ROOT / folder).rglob("*.py"))


def test_every_query_file_is_used() -> None:
    source = python_sources()
    called = set(re.findall(r'query\("([a-z_]+)"\)', source))
    named = set(re.findall(r'"([a-z_]+)"', source))  # e.g. a table of transitions to query names
    assert set(db.QUERIES) - named == set(), "query files nobody uses"
    assert called - set(db.QUERIES) == set(), "queries used without a file"


async def test_every_query_prepares_against_the_schema(conn: asyncpg.Connection) -> None:
    failures = {}
    for name in sorted(db.QUERIES):
        try:
            async with conn.transaction():
                if name.endswith("_staged"):  # they read the import's staging table, dropped at commit
                    await conn.execute(db.query("subscribers_stage_create"))
                await conn.prepare(db.query(name))
        except asyncpg.PostgresError as exc:
            failures[name] = str(exc)
    assert failures == {}
