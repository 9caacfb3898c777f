"""A segment's rule: what is wrong is one line naming its JSON path; bounds on depth, conditions and sizes; each
kind of condition takes exactly the subscribers it says over a real PostgreSQL; names and values that look like
SQL stay data."""

import json
from datetime import datetime

import asyncpg
import pytest

from service.errors import Invalid
from service.segments import rules, segments
from tests.segments.helpers import seed

pytestmark = pytest.mark.anyio

OPS = "eq, ne, lt, le, gt, ge, in, contains, exists"
KINDS = "all, any, not, attribute, member, subscribed, received, clicked"


def nested(depth: int) -> dict:
    rule: dict = {"member": "news"}
    for _ in range(depth - 1):
        rule = {"not": rule}
    return rule


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ({"attribute": "plan", "op": "like", "value": "p%"}, f"rule $.op: unknown op 'like': one of {OPS}"),
        ({"attribute": "plan", "value": "pro"}, f"rule $: an op: one of {OPS}"),
        (
            {"all": [{"member": "news"}, {"colour": "red"}]},
            f"rule $.all[1].colour: unknown condition 'colour': one of {KINDS}",
        ),
        ({"attribute": "plan", "op": "eq", "value": "pro", "extra": 1}, "rule $.extra: unknown key 'extra'"),
        ({"member": "news", "not": {"member": "x"}}, f"rule $: one key of {KINDS}; found 2"),
        ({"all": []}, "rule $.all: a list of one condition or more"),
        ({"any": {"member": "news"}}, "rule $.any: a list of one condition or more"),
        ([{"member": "news"}], 'rule $: a condition is a JSON object, e.g. {"member": "news"}'),
        ({"not": "news"}, 'rule $.not: a condition is a JSON object, e.g. {"member": "news"}'),
        (nested(rules.MAX_DEPTH + 1), "rule $" + ".not" * rules.MAX_DEPTH + ": conditions nested deeper than 8"),
        ({"any": [{"member": "news"}] * 70}, "rule $.any[63]: more than 64 conditions"),
        ({"attribute": "plan", "op": "eq", "value": None}, "rule $.value: a string, a number, true or false"),
        ({"attribute": "plan", "op": "eq", "value": {"a": 1}}, "rule $.value: a string, a number, true or false"),
        ({"attribute": "plan", "op": "eq"}, "rule $: eq needs a value"),
        ({"attribute": "plan", "op": "exists", "value": 1}, "rule $.value: exists takes no value"),
        ({"attribute": "plan", "op": "eq", "value": "x" * 257}, "rule $.value: a string of at most 256 characters"),
        (
            {"attribute": "p" * 129, "op": "exists"},
            "rule $.attribute: an attribute's name: a string of 1 to 128 characters",
        ),
        ({"attribute": 7, "op": "exists"}, "rule $.attribute: an attribute's name: a string of 1 to 128 characters"),
        ({"attribute": "plan", "op": "in", "value": list(range(101))}, "rule $.value: a list of 1 to 100 values"),
        ({"attribute": "plan", "op": "in", "value": ["a", [1]]}, "rule $.value[1]: a string, a number, true or false"),
        ({"attribute": "age", "op": "gt", "value": True}, "rule $.value: gt compares a number or a string"),
        ({"attribute": "age", "op": "gt", "value": float("nan")}, "rule $: not JSON (a number that is no number?)"),
        ({"attribute": "age", "op": "gt", "value": 10**16}, "rule $.value: a number between -1e+15 and 1e+15"),
        ({"attribute": "plan", "op": "eq", "value": "a\0b"}, "rule $.value: a string of at most 256 characters"),
        ({"member": ""}, "rule $.member: a list's name: a string of 1 to 256 characters"),
        (
            {"subscribed": {"after": "yesterday"}},
            "rule $.subscribed.after: a date, 2026-01-01, or a time, 2026-01-01T09:00:00+01:00",
        ),
        ({"subscribed": {"since": "2026-01-01"}}, "rule $.subscribed.since: unknown key 'since'"),
        ({"subscribed": {}}, "rule $.subscribed: an object of after, before, within_days"),
        ({"subscribed": {"within_days": 0}}, "rule $.subscribed.within_days: a whole number from 1 to 36500"),
        ({"received": {"last": 101}}, "rule $.received.last: a whole number from 1 to 100"),
        ({"received": {"campaign": "7"}}, "rule $.received.campaign: a whole number from 1 to 9223372036854775807"),
        ({"received": {"campaign": 1, "last": 2}}, 'rule $.received: one of {"campaign": <id>} or {"last": <number>}'),
        ({"opened": {"last": 3}}, "rule $.opened: einmal records no opens yet"),
        ({"clicked": {"last": 0}}, "rule $.clicked.last: a whole number from 1 to 100"),
    ],
)
def test_a_rule_that_is_not_right_is_one_line_naming_its_path(rule, said) -> None:
    with pytest.raises(Invalid) as refused:
        rules.parse(rule)
    assert str(refused.value) == said
    assert "\n" not in str(refused.value)


def test_a_rule_over_its_size_says_how_big_before_it_is_read() -> None:
    rule = {"any": [{"member": "x" * 250}] * 80}
    with pytest.raises(Invalid) as refused:
        rules.parse(rule)
    assert str(refused.value) == f"rule $: {len(json.dumps(rule))} characters as JSON, more than {rules.MAX_RULE}"


def test_the_deepest_and_the_largest_rules_allowed_compile() -> None:
    assert isinstance(rules.parse(nested(rules.MAX_DEPTH)), rules.Not)
    sql, args = rules.predicate(
        rules.parse({"any": [{"attribute": "a", "op": "eq", "value": i} for i in range(63)]}),
        account_id=1,
        now=datetime.now().astimezone(),
        start=3,
    )
    assert sql.count("$") == len(args) == 126 and "$3::text" in sql and "$128::text" in sql


async def names(conn: asyncpg.Connection, account_id: int, rule: dict, label: str = "s") -> list[str]:
    """The addresses the rule takes, by the segment's sample; its count agrees."""
    await segments.create(conn, account_id=account_id, name=label, rule=rule)
    found = [s.email for s in await segments.sample(conn, account_id=account_id, name=label, limit=100)]
    assert (await segments.count(conn, account_id=account_id, name=label)).subscribers == len(found)
    await segments.delete(conn, account_id=account_id, name=label)
    return [e.split("@")[0] for e in found]


PRO = {"attribute": "plan", "op": "eq", "value": "pro"}
TAKES = [
    (PRO, ["ann", "bob", "dan", "eve"]),
    ({"all": [PRO, {"not": {"member": "churned"}}, {"subscribed": {"after": "2026-01-01"}}]}, ["ann", "eve"]),
    ({"not": PRO}, ["cat", "fay"]),
    ({"attribute": "plan", "op": "ne", "value": "pro"}, ["cat", "fay"]),
    ({"attribute": "age", "op": "gt", "value": 30}, ["ann", "cat"]),
    ({"not": {"attribute": "age", "op": "gt", "value": 30}}, ["bob", "dan", "eve", "fay"]),
    ({"attribute": "age", "op": "ge", "value": 41}, ["ann"]),
    ({"attribute": "age", "op": "lt", "value": "p"}, ["dan"]),
    ({"attribute": "plan", "op": "le", "value": "free"}, ["cat"]),
    ({"attribute": "age", "op": "eq", "value": 41.0}, ["ann"]),
    ({"attribute": "age", "op": "eq", "value": "41"}, []),
    ({"attribute": "plan", "op": "in", "value": ["free", "team"]}, ["cat"]),
    ({"attribute": "tags", "op": "contains", "value": "vip"}, ["ann"]),
    ({"attribute": "plan", "op": "contains", "value": "pro"}, []),
    ({"attribute": "age", "op": "exists"}, ["ann", "bob", "cat", "dan"]),
    ({"any": [{"member": "offers"}, {"attribute": "age", "op": "eq", "value": 29}]}, ["bob", "eve"]),
    ({"member": "churned"}, ["bob"]),
    ({"subscribed": {"before": "2026-03-01"}}, ["ann", "dan"]),
    ({"subscribed": {"after": "2026-03-01T00:00:00+01:00", "before": "2026-03-05"}}, ["bob"]),
    ({"subscribed": {"within_days": 36500}}, ["ann", "bob", "cat", "dan", "eve", "fay"]),
]


async def test_each_condition_takes_exactly_the_subscribers_it_says(conn: asyncpg.Connection) -> None:
    account_id = await seed(conn)
    for rule, expected in TAKES:
        assert await names(conn, account_id, rule) == expected, rule


async def test_received_takes_those_a_campaign_was_sent_to(conn: asyncpg.Connection) -> None:
    account_id = await seed(conn)
    other = await seed(conn, "other")
    made = []
    for n, (owner, sent) in enumerate([(account_id, ["ann", "bob"]), (account_id, ["cat"]), (other, ["dan"])]):
        campaign = await conn.fetchval(
            "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status, "
            "started_at) VALUES ($1, 'c', 's', 'a@example.com', 't', '{}', 'sent', now() - make_interval(days => $2)) "
            "RETURNING id",
            owner,
            10 - n,
        )
        made.append(campaign)
        await conn.execute(
            "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status) "
            "SELECT $1::bigint, $2, s.id, s.email, s.email_lower, 'campaign:' || $1::bigint || ':' || s.id, "
            "CASE WHEN s.email LIKE 'bob%' THEN 'failed' ELSE 'sent' END "
            "FROM einmal.subscribers s WHERE s.account_id = $2 AND split_part(s.email, '@', 1) = ANY ($3::text[])",
            campaign,
            owner,
            sent,
        )
    assert await names(conn, account_id, {"received": {"campaign": made[0]}}) == ["ann"]  # bob's failed
    assert await names(conn, account_id, {"received": {"last": 1}}) == ["cat"]
    assert await names(conn, account_id, {"received": {"last": 2}}) == ["ann", "cat"]
    assert await names(conn, account_id, {"not": {"received": {"last": 2}}}) == ["bob", "dan", "eve", "fay"]
    with pytest.raises(Invalid) as refused:  # another account's campaign is none of this one's
        await segments.create(
            conn, account_id=account_id, name="x", rule={"all": [{"received": {"campaign": made[2]}}]}
        )
    assert str(refused.value) == f"rule $.all[0].received.campaign: the account has no campaign {made[2]}"


async def test_clicked_takes_those_a_person_clicked_for_not_a_machine(conn: asyncpg.Connection) -> None:
    account_id = await seed(conn)
    campaigns = []
    for days in (3, 2, 1):
        campaigns.append(
            await conn.fetchval(
                "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status, "
                "started_at) VALUES ($1, 'c', 's', 'a@example.com', 't', '{}', 'sent', "
                "now() - make_interval(days => $2)) RETURNING id",
                account_id,
                days,
            )
        )
    clicks = [
        (0, "ann", "human", []),
        (1, "bob", "machine", ["early"]),
        (2, "cat", "human", []),
        (2, "dan", "machine", ["burst"]),
    ]
    for n, (campaign, who, tag, reasons) in enumerate(clicks):
        await conn.execute(
            "INSERT INTO einmal.clicks (id, account_id, campaign_id, subscriber_id, link, url, at, tag, reasons) "
            "SELECT $1, $2, $3, s.id, 1, 'https://example.org/', now(), $5, $6 FROM einmal.subscribers s "
            "WHERE s.account_id = $2 AND s.email = $4 || '@example.org'",
            f"k{n}",
            account_id,
            campaigns[campaign],
            who,
            tag,
            reasons,
        )
    assert await names(conn, account_id, {"clicked": {"campaign": campaigns[0]}}) == ["ann"]
    assert await names(conn, account_id, {"clicked": {"campaign": campaigns[1]}}) == []  # bob's was a machine's
    assert await names(conn, account_id, {"clicked": {"last": 1}}) == ["cat"]  # dan's: a machine's
    assert await names(conn, account_id, {"clicked": {"last": 3}}) == ["ann", "cat"]
    rule = {"all": [{"attribute": "plan", "op": "eq", "value": "pro"}, {"clicked": {"last": 3}}]}
    assert await names(conn, account_id, rule) == ["ann"]


async def test_a_rule_naming_a_list_the_account_lacks_is_refused(conn: asyncpg.Connection) -> None:
    account_id = await seed(conn)
    await seed(conn, "other")
    await conn.execute(
        "INSERT INTO einmal.lists (account_id, name) SELECT id, 'theirs' FROM einmal.accounts WHERE name = 'other'"
    )
    for missing in ("nope", "theirs"):
        with pytest.raises(Invalid) as refused:
            await segments.create(
                conn, account_id=account_id, name="x", rule={"any": [PRO, {"not": {"member": missing}}]}
            )
        assert str(refused.value) == f"rule $.any[1].not.member: the account has no list named '{missing}'"
    assert await conn.fetchval("SELECT count(*) FROM einmal.segments") == 0


HOSTILE = [
    "plan' OR '1'='1",
    "x'); DROP TABLE einmal.subscribers; --",
    '"} OR true --',
    "$1",
    "a' || (SELECT pg_sleep(5)) || '",
    "\\x00; SELECT 1",
]


async def test_names_and_values_that_look_like_sql_stay_data(conn: asyncpg.Connection) -> None:
    people = {
        f"p{i}@example.org": ({word: word, "plan": word}, ["news", word], "2026-01-01")
        for i, word in enumerate(HOSTILE)
    }
    account_id = await seed(conn, people={**people, "zed@example.org": ({"plan": "pro"}, ["news"], "2026-01-01")})
    for word in HOSTILE:
        await conn.execute(
            "INSERT INTO einmal.lists (account_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING", account_id, word
        )
    await conn.execute(  # seed() put them on the lists that existed then: now on their own too
        "INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM einmal.lists l "
        "JOIN einmal.subscribers s ON s.attributes ->> 'plan' = l.name WHERE l.account_id = $1",
        account_id,
    )
    for i, word in enumerate(HOSTILE):
        said = f"p{i}"
        assert await names(conn, account_id, {"attribute": word, "op": "exists"}) == [said], word
        assert await names(conn, account_id, {"attribute": word, "op": "eq", "value": word}) == [said], word
        assert await names(conn, account_id, {"attribute": "plan", "op": "in", "value": [word]}) == [said], word
        assert await names(conn, account_id, {"member": word}) == [said], word
        assert await names(conn, account_id, {"attribute": "plan", "op": "eq", "value": word}, label=word) == [said]
    assert await names(conn, account_id, {"attribute": "plan", "op": "eq", "value": "pro' OR '1'='1"}) == []
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers") == len(HOSTILE) + 1
