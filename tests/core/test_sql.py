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
    called = set(re.findall(r'\bsql\(\s*"([a-z_]+)"', source))
    named = set(re.findall(r'"([a-z_]+)"', source))  # e.g. a table of transitions to query names
    assert set(db.QUERIES) - named == set(), "query files nobody uses"
    assert called - set(db.QUERIES) == set(), "queries used without a file"


async def test_every_query_prepares_against_the_schema(conn: asyncpg.Connection) -> None:
    failures = {}
    for name in sorted(db.QUERIES):
        try:
            async with conn.transaction():
                if name.endswith("_staged"):  # they read the import's staging tables, dropped at commit
                    await conn.execute(*db.sql("subscribers_stage_create"))
                    await conn.execute(*db.sql("subscribers_seen_create"))
                await conn.prepare(db.QUERIES[name].text)
        except asyncpg.PostgresError as exc:
            failures[name] = str(exc)
    assert failures == {}


def test_named_parameters_are_bound_by_keyword_and_checked() -> None:
    q = db.Query("example", "SELECT :id::bigint, ':not' -- :nor\n, $$ :nor $$, :name, :id")
    assert q.text == "SELECT $1::bigint, ':not' -- :nor\n, $$ :nor $$, $2, $1"
    assert q.bind(name="a", id=7) == (q.text, 7, "a")
    with pytest.raises(TypeError, match=r"missing \['name'\], unknown \['nme'\]"):
        q.bind(id=7, nme="a")
    with pytest.raises(ValueError, match=r"name its parameters \(:name\), not \$2"):
        db.Query("mixed", "SELECT :id, $2")
    with pytest.raises(ValueError, match=r"not \$1"):
        db.Query("positional", "SELECT $1 -- :a comment's colon")
    assert db.sql("session_name", name="einmal")[1:] == ("einmal",), "a parameter called name, as sql()'s own"
