"""Garbage in the environment: each EINMAL_ variable is taken as a valid value or named in one line
(exit 2 from the command line); a secret is never shown.
"""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service import settings as settings_module
from service.errors import ConfigError
from service.settings import Settings
from tests.conftest import einmal

PASSWORD = "pa55-never-shown"


# -- environment variables ----------------------------------------------------------------

CHECKED = {  # variable -> a test of the loaded value
    "EINMAL_SMTP_PORT": lambda s: type(s.smtp_port) is int and 1 <= s.smtp_port <= 65535,
    "EINMAL_BATCH_SIZE": lambda s: type(s.batch_size) is int and 1 <= s.batch_size <= 10_000,
    "EINMAL_IN_DOUBT": lambda s: s.in_doubt in ("hold", "resend"),
    "EINMAL_RATE_LIMIT": lambda s: s.rate_limit >= 0,
    "EINMAL_SMTP_TLS": lambda s: s.smtp_tls in ("none", "starttls", "tls"),
    "EINMAL_TICK_SECONDS": lambda s: s.tick_seconds > 0,
}
numberish = st.one_of(
    st.integers().map(str), st.floats().map(str), st.from_regex(r"\s*[-+]?[0-9_.eE]{0,8}\s*", fullmatch=True)
)
# an environment can hold only what bytes decode to: no NUL, no lone surrogate but the escaped bytes
env_value = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=30),
    numberish,
    st.sampled_from(
        [
            "",
            " ",
            "hold ",
            "TLS",
            "StartTLS",
            "inf",
            "-inf",
            "nan",
            "1e999",
            "0x19",
            "２５",
            "25\n",
            "١٢",
            "\udcff",
            "true",
            "null",
            "[]",
            "{}",
        ]
    ),
)


def load_with(variables: dict[str, str]) -> Settings:
    saved = dict(os.environ)
    try:
        os.environ.update(variables)
        return settings_module.load()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(CHECKED)), value=env_value)
def test_a_garbage_variable_is_taken_as_a_valid_value_or_named_in_one_line(name: str, value: str) -> None:
    try:
        loaded = load_with({name: value, "EINMAL_SMTP_PASSWORD": PASSWORD})
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith(f"{name}: ") and "\n" not in message and "\r" not in message, message
        assert PASSWORD not in message
        return
    assert CHECKED[name](loaded), (name, value)
    assert loaded.smtp_password.get_secret_value() == PASSWORD and PASSWORD not in repr(loaded)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["EINMAL_SMTP_PASSWORD", "EINMAL_UNSUBSCRIBE_SECRET"]), garbage=env_value)
def test_a_garbage_secret_is_never_shown(name: str, garbage: str) -> None:
    try:
        loaded = load_with({name: PASSWORD + garbage})
    except ConfigError as exc:  # a secret that is not text (bytes that are not UTF-8)
        assert str(exc).startswith(f"{name}: ") and PASSWORD not in str(exc)
        return
    assert PASSWORD not in repr(loaded) and PASSWORD not in str(loaded)


@pytest.mark.parametrize("value", ["inf", "1e999"])
def test_an_infinite_tick_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="EINMAL_TICK_SECONDS"):
        load_with({"EINMAL_TICK_SECONDS": value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("EINMAL_SMTP_PORT", "2\udcff5"),
        ("EINMAL_BATCH_SIZE", " "),
        ("EINMAL_SMTP_TLS", "starttls\n"),
        ("EINMAL_IN_DOUBT", "hold" * 500),
    ],
)
def test_a_garbage_variable_stops_the_command_line_with_exit_2(name: str, value: str) -> None:
    result = einmal(
        "campaign",
        "status",
        "1",
        dsn="postgresql://postgres@127.0.0.1:1/nowhere",
        env={"EINMAL_SMTP_PASSWORD": PASSWORD, name: value},
    )
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"einmal: {name}: "), result.stderr
    assert "Traceback" not in result.stderr and PASSWORD not in result.stderr
