"""Configuration from the environment: a malformed value stops every command
with one line naming the variable; secrets never reach the output."""

import pytest

from tests.conftest import einmal

MALFORMED = [
    ("EINMAL_SMTP_PORT", "abc"),
    ("EINMAL_SMTP_TLS", "maybe"),
    ("EINMAL_BATCH_SIZE", "0"),
    ("EINMAL_IN_DOUBT", "never"),
    ("EINMAL_RATE_LIMIT", "-1"),
    ("EINMAL_TICK_SECONDS", "x"),
]
COMMANDS = [("migrate",), ("campaign", "status", "1")]
PASSWORD = "hunter2-do-not-print"
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nowhere"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize(("name", "value"), MALFORMED, ids=[name for name, _ in MALFORMED])
def test_a_malformed_variable_stops_any_command_with_one_line_naming_it(
        command: tuple[str, ...], name: str, value: str) -> None:
    # the database URL is unreachable: the command must stop before it is used
    result = einmal(*command, dsn=UNREACHABLE, env={name: value, "EINMAL_SMTP_PASSWORD": PASSWORD})

    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"einmal: {name}: ")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert PASSWORD not in result.stderr + result.stdout


def test_the_smtp_password_never_appears_in_a_database_error() -> None:
    result = einmal("migrate", dsn=UNREACHABLE, env={"EINMAL_SMTP_PASSWORD": PASSWORD})
    assert result.returncode == 1
    assert PASSWORD not in result.stderr + result.stdout


def test_the_smtp_password_never_appears_in_a_command_that_works(dsn: str) -> None:
    result = einmal("migrate", dsn=dsn, env={"EINMAL_SMTP_PASSWORD": PASSWORD})
    assert result.returncode == 0, result.stderr
    assert PASSWORD not in result.stderr + result.stdout


def test_database_url_is_used_when_einmal_database_url_is_unset(dsn: str) -> None:
    result = einmal("migrate", env={"DATABASE_URL": dsn})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "database is up to date"

    result = einmal("migrate", env={"DATABASE_URL": UNREACHABLE})
    assert result.returncode == 1
    assert result.stderr.startswith("einmal: cannot reach PostgreSQL at 127.0.0.1:1/nowhere")


def test_einmal_database_url_wins_over_database_url(dsn: str) -> None:
    result = einmal("migrate", dsn=dsn, env={"DATABASE_URL": UNREACHABLE})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "database is up to date"
