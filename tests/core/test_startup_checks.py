"""Checks every command, or every node, makes of its environment before it starts: the traces exporter,
the strength of the unsubscribe keys."""

import pytest
from pydantic import SecretStr

from service.settings import MIN_SECRET, Settings, weak_unsubscribe_secret
from tests.conftest import einmal

ZIPKIN = "einmal: OTEL_TRACES_EXPORTER: expected none, console or otlp (got 'zipkin')\n"
UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"  # never reached: the checks come first


@pytest.mark.parametrize("command", [("campaign", "list"), ("run",), ("subscribers", "list", "--account", "a")])
def test_an_unknown_traces_exporter_is_refused_alike_by_every_command(command: tuple[str, ...]) -> None:
    result = einmal(*command, dsn=UNREACHABLE, env={"OTEL_TRACES_EXPORTER": "zipkin"})
    assert (result.returncode, result.stderr, result.stdout) == (2, ZIPKIN, "")


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_node_refuses_an_unsubscribe_key_short_enough_to_guess(command: str) -> None:
    result = einmal(
        command, dsn=UNREACHABLE, env={"EINMAL_UNSUBSCRIBE_SECRET": "s3cre", "EINMAL_HTTP_ADDRESS": "127.0.0.1:0"}
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "einmal: EINMAL_UNSUBSCRIBE_SECRET: the key has 5 characters; each key needs at least "
        "32 (128 bits or more of randomness, e.g. `openssl rand -hex 32`)\n"
    )


def test_every_key_of_a_rotation_must_be_long_enough() -> None:
    strong = "k" * MIN_SECRET
    assert weak_unsubscribe_secret(Settings(unsubscribe_secret=SecretStr(strong))) is None
    assert weak_unsubscribe_secret(Settings()) is None
    old = weak_unsubscribe_secret(Settings(unsubscribe_secret=SecretStr(f"{strong}, old-key")))
    assert old.startswith("EINMAL_UNSUBSCRIBE_SECRET: key 2 of 2 has 7 characters; each key needs at least 32")
