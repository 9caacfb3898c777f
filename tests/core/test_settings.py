"""Configuration from the environment: a malformed value stops every command
with one line naming the variable; secrets never reach the output."""

import os
import re

import pytest
from pydantic import ValidationError

from service.settings import Settings
from tests.conftest import ROOT, einmal

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
    command: tuple[str, ...], name: str, value: str
) -> None:
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


def _example() -> dict[str, tuple[str, bool]]:
    """NAME -> (value, set) for each `NAME=value` or `# NAME=value` line of config/einmal.env.example."""
    found = {}
    for line in (ROOT / "config" / "einmal.env.example").read_text().splitlines():
        match = re.fullmatch(r"(# )?((?:EINMAL|OTEL)_[A-Z_]+)=(.*)", line)
        if match:
            found[match[2]] = (match[3], match[1] is None)
    return found


def test_the_example_environment_file_lists_every_setting_with_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("EINMAL_")] + ["DATABASE_URL"]:
        monkeypatch.delenv(name, raising=False)
    example = _example()
    fields = Settings.model_fields

    assert {f"EINMAL_{name.upper()}" for name in fields} | {"EINMAL_EMBEDDED_DIR", "EINMAL_LOG_LEVEL"} == {
        name for name in example if name.startswith("EINMAL_")
    }
    for name, field in fields.items():
        value, is_set = example[f"EINMAL_{name.upper()}"]
        if is_set:
            assert getattr(Settings(**{name: value}), name) == field.default, name
        else:
            assert field.default is None, f"EINMAL_{name.upper()} has a default: show it, uncommented"
    assert {"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"} <= set(example)


SECRET_PART = "Zq7-not-for-your-eyes"
MALFORMED_URLS = {
    "port not a number": f"postgresql://einmal:{SECRET_PART}@127.0.0.1:notaport/einmal",
    "port out of range": f"postgresql://einmal:{SECRET_PART}@127.0.0.1:99999/einmal",
    "unclosed IPv6 host": f"postgresql://einmal:{SECRET_PART}@[::1/einmal",
    "unescaped ? in the password": f"postgresql://einmal:ab?{SECRET_PART}@127.0.0.1/einmal",
    "unescaped # in the password": f"postgresql://einmal:ab#{SECRET_PART}@127.0.0.1/einmal",
    "unescaped / in the password": f"postgresql://einmal:ab/{SECRET_PART}@127.0.0.1/einmal",
    "unescaped @ in the password": f"postgresql://einmal:ab@{SECRET_PART}@127.0.0.1/einmal",
    "empty host in a host list": f"postgresql://einmal:{SECRET_PART}@127.0.0.1,/einmal",
}


@pytest.mark.parametrize("variable", ["EINMAL_DATABASE_URL", "DATABASE_URL"])
@pytest.mark.parametrize("url", MALFORMED_URLS.values(), ids=MALFORMED_URLS.keys())
def test_a_malformed_database_url_is_one_line_naming_its_variable_without_the_password(variable: str, url: str) -> None:
    result = einmal("migrate", env={variable: url})

    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"einmal: {variable}: "), lines[0]
    assert result.stdout == ""
    for secret in (SECRET_PART, SECRET_PART[:8], SECRET_PART[-8:]):
        assert secret not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://einmal:p%3Fw%23d%40x@127.0.0.1:1,127.0.0.1:2/nowhere",  # encoded secrets, two hosts
        "postgresql://einmal@[::1]:1/nowhere",
        "postgres://einmal@127.0.0.1/nowhere?port=1&sslmode=disable",
    ],
)
def test_a_well_formed_database_url_goes_on_to_connect(url: str) -> None:
    result = einmal("migrate", dsn=url)
    assert result.returncode == 1, result.stderr
    # no server there, or (where the port in the query is not the one reached) one that refused the login
    assert re.match(r"einmal: (cannot reach PostgreSQL at |PostgreSQL at \S+ refused the login: )", result.stderr), (
        result.stderr
    )
    assert len(result.stderr.splitlines()) == 1
    assert "p%3Fw" not in result.stderr


def test_the_sign_up_bounds_are_checked() -> None:
    """Counted in PostgreSQL (service/clients.py), a client's limit is no longer held back by times kept in memory."""
    assert Settings(optin_client_limit=100_000, optin_list_limit=1).optin_client_limit == 100_000
    for bad in ({"optin_client_limit": 0}, {"optin_client_limit": 100_001}, {"optin_list_limit": 0}):
        with pytest.raises(ValidationError):
            Settings(**bad)
