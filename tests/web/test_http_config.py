"""The HTTP surface's configuration and commands: one line and exit 2 for a bad variable, one
line and exit 1 for an address that cannot be listened on, `einmal --version`, the soft file limit
raised to the hard one at start."""

import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, einmal
from tests.support.smtp_servers import free_port

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nowhere"


def one_line(stderr: str, start: str) -> None:
    assert stderr.count("\n") == 1 and stderr.startswith(start), stderr
    assert "Traceback" not in stderr


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = einmal("--version")
    assert (result.returncode, result.stdout) == (0, f"einmal {version('einmal')}\n"), result.stderr


@pytest.mark.parametrize(
    "url",
    ["http://news.example.org/unsubscribe", "http://10.0.0.1/u", "ftp://x.org/u", "unsubscribe", "https:///nohost"],
)
def test_an_unsubscribe_url_that_is_not_https_is_refused_unless_loopback(url: str) -> None:
    result = einmal("campaign", "status", "1", dsn=UNREACHABLE, env={"EINMAL_UNSUBSCRIBE_URL": url})
    assert result.returncode == 2
    one_line(result.stderr, "einmal: EINMAL_UNSUBSCRIBE_URL: must be an https:// URL")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/unsubscribe",
        "http://localhost/u",
        "http://[::1]:80/u",
        "https://news.example.org/unsubscribe",
    ],
)
def test_https_or_a_loopback_http_unsubscribe_url_is_taken(url: str) -> None:
    from service.settings import Settings

    assert Settings(unsubscribe_url=url).unsubscribe_url == url


@pytest.mark.parametrize("secret", ["new,", ",old", "new,,old", " , "])
def test_an_empty_key_in_the_unsubscribe_secret_is_refused_without_showing_it(secret: str) -> None:
    result = einmal("campaign", "status", "1", dsn=UNREACHABLE, env={"EINMAL_UNSUBSCRIBE_SECRET": secret})
    assert result.returncode == 2
    one_line(result.stderr, "einmal: EINMAL_UNSUBSCRIBE_SECRET: one or more comma-separated keys")
    assert "new" not in result.stderr and "old" not in result.stderr


@pytest.mark.parametrize("address", ["8080", "localhost", "127.0.0.1:http", "127.0.0.1:70000", ":8080", "a b:1"])
def test_a_malformed_http_address_is_refused(address: str) -> None:
    result = einmal("serve", dsn=UNREACHABLE, env={"EINMAL_HTTP_ADDRESS": address})
    assert result.returncode == 2
    one_line(result.stderr, "einmal: EINMAL_HTTP_ADDRESS: ")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EINMAL_HTTP_HEADER_TIMEOUT_SECONDS", "0"),
        ("EINMAL_HTTP_BODY_TIMEOUT_SECONDS", "soon"),
        ("EINMAL_HTTP_MAX_CONNECTIONS", "0"),
        ("EINMAL_HTTP_BODY_BUFFER_BYTES", "1000"),
    ],
)
def test_a_bad_bound_of_the_http_surface_is_refused(variable: str, value: str) -> None:
    result = einmal("serve", dsn=UNREACHABLE, env={"EINMAL_HTTP_ADDRESS": "127.0.0.1:0", variable: value})
    assert result.returncode == 2
    one_line(result.stderr, f"einmal: {variable}: ")


def test_serve_without_an_address_is_refused() -> None:
    result = einmal("serve", dsn=UNREACHABLE)
    assert result.returncode == 2
    one_line(result.stderr, "einmal: EINMAL_HTTP_ADDRESS: must be set for einmal serve")


@pytest.mark.parametrize("command", ["serve", "run"])
def test_an_address_in_use_stops_the_command_with_one_line(command: str, dsn: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = einmal(command, dsn=dsn, env={"EINMAL_HTTP_ADDRESS": address})
    assert result.returncode == 1
    one_line(result.stderr, f"einmal: EINMAL_HTTP_ADDRESS: cannot listen on {address}: ")


def test_a_node_raises_its_soft_file_limit_to_the_hard_one(dsn: str, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_")}
    env.update(EINMAL_DATABASE_URL=dsn, EINMAL_HTTP_ADDRESS=f"127.0.0.1:{port}")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))

    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service", "serve"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=limit,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, (tmp_path / "serve.log").read_text()
    assert re.search(r"^Max open files\s+4096\s+4096\s", limits, re.M), limits
