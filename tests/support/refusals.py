"""What the bad-input tests share: the rows every table holds, and the one-line refusal."""

import subprocess

import asyncpg


async def table_counts(conn: asyncpg.Connection) -> tuple[int, ...]:
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM einmal.accounts), (SELECT count(*) FROM einmal.subscribers),"
        " (SELECT count(*) FROM einmal.lists), (SELECT count(*) FROM einmal.list_members),"
        " (SELECT count(*) FROM einmal.campaigns), (SELECT count(*) FROM einmal.suppressions)"
    )
    return tuple(row)


def one_line_refusal(result: subprocess.CompletedProcess, starts: str = "einmal: ", code: int = 1) -> str:
    """The one line of a refusal with exit `code` (2: a bad argument, judged without the database)."""
    assert result.returncode == code, (result.returncode, result.stderr[:500])
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(starts), result.stderr[:500]
    assert len(result.stderr) < 400, "a refusal quotes a long value shortened"
    return result.stderr
