"""Every query file is used by the code and is valid SQL for the schema."""

import re

import asyncpg
import pytest

from service import db
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio


def python_sources() -> str:
    return "\n".join(p.read_text() for folder in ("service", "actors") for p in (ROOT / folder).rglob("*.py"))


# Query files whose parameters are still positional ($n): those of the campaign service, named when its code
# moves. The list may only shrink.
STILL_POSITIONAL = {
    "account_find",
    "account_name",
    "account_set_page",
    "api_account",
    "api_campaign_draft_update",
    "api_campaign_owner",
    "api_campaigns",
    "api_key_find",
    "api_key_insert",
    "api_key_revoke",
    "api_key_revoke_own",
    "api_keys_list",
    "api_keys_of_account",
    "campaign_approve",
    "campaign_cancel",
    "campaign_counts_clear",
    "campaign_counts_write",
    "campaign_create",
    "campaign_create_resolve",
    "campaign_figures",
    "campaign_for_render",
    "campaign_get",
    "campaign_list",
    "campaign_notify",
    "campaign_pause",
    "campaign_pruned",
    "campaign_reopen",
    "campaign_resume",
    "campaign_status",
    "campaign_tallies_rebase",
    "domains_paused",
    "prune_candidates",
    "prune_legacy_batch",
    "prune_lock",
    "prune_partition",
    "reconcile_list",
    "reconcile_lock_campaign",
    "reconcile_mark_sent",
    "reconcile_resend",
    "sends_cancel",
    "sends_failed_replies",
    "sends_retry_failed",
    "sends_top_failures",
    "subscriber_find",
    "subscriber_for_preview",
    "subscribers_list",
    "subscribers_render_sample",
    "suppression_delete",
    "suppressions_list",
}


def every_source() -> str:
    return "\n".join(
        p.read_text() for folder in ("service", "actors", "tests", "bench") for p in (ROOT / folder).rglob("*.py")
    )


def test_every_query_file_is_used() -> None:
    source = python_sources()
    called = set(re.findall(r'(?:query\(|sql\()"([a-z_]+)"', source))
    named = set(re.findall(r'"([a-z_]+)"', source))  # e.g. a table of transitions to query names
    assert set(db.QUERIES) - named == set(), "query files nobody uses"
    assert called - set(db.QUERIES) == set(), "queries used without a file"


async def test_every_query_prepares_against_the_schema(conn: asyncpg.Connection) -> None:
    failures = {}
    for name in sorted(db.QUERIES):
        try:
            async with conn.transaction():
                if name.endswith("_staged"):  # they read the import's staging table, dropped at commit
                    await conn.execute(*db.sql("subscribers_stage_create"))
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
    with pytest.raises(ValueError, match="mixes"):
        db.Query("mixed", "SELECT :id, $2")
    with pytest.raises(TypeError, match="named parameters"):
        db.query("client_count_hit")
    assert db.sql("session_name", name="einmal")[1:] == ("einmal",), "a parameter called name, as sql()'s own"


def test_query_files_name_their_parameters() -> None:
    positional = {name for name, q in db.QUERIES.items() if q.positional}
    assert positional - STILL_POSITIONAL == set(), "query files with $n parameters: name them (:name)"
    assert STILL_POSITIONAL - positional == set(), "named (or gone) now: take them off STILL_POSITIONAL"


def test_no_named_query_is_called_positionally() -> None:
    called = set(re.findall(r'\bquery\(\s*"([a-z_]+)"', every_source()))
    named = {name for name, q in db.QUERIES.items() if q.params}
    # client_count_hit: the test above checks that db.query refuses it
    assert called & named - {"client_count_hit"} == set(), "called with db.query() and $n arguments: use db.sql()"
    assert called - set(db.QUERIES) == set(), "db.query() of no query file"
