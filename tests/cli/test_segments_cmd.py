"""`einmal segments …` on a real PostgreSQL, as an operator types it: a rule given inline or from a file, listed,
shown, counted, sampled, changed and deleted; what is wrong is one line and a non-zero exit, nothing written."""

import json
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import cells, einmal
from tests.segments.helpers import seed

pytestmark = pytest.mark.anyio

RULE = {"all": [{"attribute": "plan", "op": "eq", "value": "pro"}, {"not": {"member": "churned"}}]}


async def test_a_segment_from_the_command_line(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    await seed(conn)
    rule_file = tmp_path / "rule.json"
    rule_file.write_text(json.dumps(RULE))
    made = einmal("segments", "create", "pro", "--account", "acme", "--rule-file", str(rule_file), dsn=dsn)
    assert (made.returncode, made.stdout, made.stderr) == (0, "pro\n", "")
    inline = einmal("segments", "create", "churned", "--account", "acme", "--rule", '{"member": "churned"}', dsn=dsn)
    assert inline.returncode == 0, inline.stderr
    listed = einmal("segments", "list", "--account", "acme", dsn=dsn).stdout.splitlines()
    assert cells(listed[0]) == ["name", "updated", "rule"]
    assert [cells(line)[0] for line in listed[1:]] == ["churned", "pro"]
    assert json.loads(einmal("segments", "show", "pro", "--account", "acme", dsn=dsn).stdout) == RULE
    counted = einmal("segments", "count", "pro", "--account", "acme", dsn=dsn)
    assert counted.stdout == "3 subscribers, 0 of them suppressed\n"  # ann, dan, eve: bob is churned
    sampled = einmal("segments", "sample", "pro", "--account", "acme", "--limit", "2", dsn=dsn).stdout.splitlines()
    assert [cells(line)[0] for line in sampled] == ["email", "ann@example.org", "dan@example.org"]
    changed = einmal("segments", "change", "pro", "--account", "acme", "--rule", '{"member": "offers"}', dsn=dsn)
    assert changed.returncode == 0, changed.stderr
    assert einmal("segments", "count", "pro", "--account", "acme", dsn=dsn).stdout.startswith("1 subscribers")
    gone = einmal("segments", "delete", "pro", "--account", "acme", dsn=dsn)
    assert gone.returncode == 0 and "deleted" in gone.stdout
    assert await conn.fetchval("SELECT array_agg(name) FROM einmal.segments") == ["churned"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--rule", "{plan: pro}"],
            "einmal: --rule: not JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        (
            ["--rule", '{"attribute": "plan", "op": "like", "value": 1}'],
            "einmal: rule $.op: unknown op 'like': one of eq, ne, lt, le, gt, ge, in, contains, exists",
        ),
        (
            ["--rule", '{"all": [{"member": "nope"}]}'],
            "einmal: rule $.all[0].member: the account has no list named 'nope'",
        ),
        (["--rule", "[" * 5000 + "]" * 5000], "einmal: --rule: nested too deep"),
        (["--rule-file", "/nonexistent/rule.json"], "einmal: --rule-file /nonexistent/rule.json: no such file"),
    ],
)
async def test_a_bad_rule_is_one_line_and_writes_nothing(conn: asyncpg.Connection, dsn: str, args, said) -> None:
    await seed(conn)
    done = einmal("segments", "create", "x", "--account", "acme", *args, dsn=dsn)
    assert done.returncode != 0 and done.stdout == "" and done.stderr == said + "\n"
    assert await conn.fetchval("SELECT count(*) FROM einmal.segments") == 0


async def test_a_segment_of_no_such_name_or_account(conn: asyncpg.Connection, dsn: str) -> None:
    await seed(conn)
    missing = einmal("segments", "count", "nope", "--account", "acme", dsn=dsn)
    assert (missing.returncode, missing.stderr) == (1, "einmal: no such segment\n")
    nobody = einmal("segments", "list", "--account", "nobody", dsn=dsn)
    assert nobody.returncode == 1 and nobody.stderr.startswith("einmal: ") and "\n" == nobody.stderr[-1:]
