"""The embedded PostgreSQL, in a data directory of the test's own.

These start real servers (initdb, pg_ctl) in a temporary EINMAL_EMBEDDED_DIR,
so they never touch the embedded server other tests or a person may be using.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from service.db import embedded
from tests.conftest import ROOT, applied_by, applied_everything, einmal, every_migration

ATTACH_AND_WAIT = (
    "from service.db import embedded; embedded.url(); print('attached', flush=True); import time; time.sleep(60)"
)


def _postgres_processes(pgdata: Path) -> list[psutil.Process]:
    """Running postgres processes started for this data directory."""
    found = []
    for proc in psutil.process_iter(attrs=("name", "cmdline", "status")):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] == "postgres" and proc.info["status"] != psutil.STATUS_ZOMBIE and str(pgdata) in cmdline:
            found.append(proc)
    return found


def _pids(pgdata: Path) -> list[int]:
    path = pgdata / ".handle_pids.json"
    return json.loads(path.read_text() or "[]") if path.exists() else []


@pytest.fixture
def embedded_dir() -> Iterator[Path]:
    """A fresh EINMAL_EMBEDDED_DIR; any server left in it is stopped afterwards.

    Not under pytest's tmp_path: each pytest session takes group and other
    access away from /tmp/pytest-of-<user>, which the `pgserver` user (as
    root) needs to traverse, so a concurrent session would break the server.
    """
    folder = Path(tempfile.mkdtemp(prefix="einmal-embedded-"))
    yield folder
    for proc in _postgres_processes((folder / "pgdata").resolve()):
        proc.terminate()
        psutil.wait_procs([proc], timeout=5)
    shutil.rmtree(folder, ignore_errors=True)


def _env(embedded_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env["EINMAL_EMBEDDED_DIR"] = str(embedded_dir)
    return env


def _start_attached_client(embedded_dir: Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", ATTACH_AND_WAIT],
        cwd=ROOT,
        env=_env(embedded_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = child.stdout.readline()  # blocks until attached, or "" if it died
    if line.strip() != "attached":
        child.kill()
        _, err = child.communicate(timeout=10)
        pytest.fail(f"the client did not attach: {err}")
    return child


def test_a_sigkilled_client_does_not_keep_the_server_running(embedded_dir: Path) -> None:
    pgdata = (embedded_dir / "pgdata").resolve()
    child = _start_attached_client(embedded_dir)
    assert child.pid in _pids(pgdata)
    assert _postgres_processes(pgdata)

    child.kill()
    child.wait(timeout=10)
    child.stdout.close()
    child.stderr.close()
    assert child.pid in _pids(pgdata), "SIGKILL leaves the PID behind: the situation under test"

    result = einmal("migrate", env={"EINMAL_EMBEDDED_DIR": str(embedded_dir)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == applied_everything()

    deadline = time.monotonic() + 5
    while _postgres_processes(pgdata) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _postgres_processes(pgdata) == []
    assert _pids(pgdata) == [], "no dead PID is left behind"


def test_two_concurrent_commands_share_one_embedded_server(embedded_dir: Path) -> None:
    pgdata = (embedded_dir / "pgdata").resolve()
    command = [sys.executable, "-m", "service", "migrate"]
    procs = [
        subprocess.Popen(
            command, cwd=ROOT, env=_env(embedded_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = [(*proc.communicate(timeout=60), proc.returncode) for proc in procs]

    assert [code for _, _, code in results] == [0, 0], [err for _, err, _ in results]
    assert applied_by([out for out, _, _ in results]) == every_migration(), results
    assert _postgres_processes(pgdata) == [], "the last of them to exit stops the server"
    assert _pids(pgdata) == []


def test_drop_stale_handles_keeps_live_pids_and_drops_dead_and_unreaped_ones(embedded_dir: Path) -> None:
    pgdata = (embedded_dir / "pgdata").resolve()
    attached = _start_attached_client(embedded_dir)  # a running server, and a live user of it
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    unreaped = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while psutil.Process(unreaped.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        (pgdata / ".handle_pids.json").write_text(json.dumps([attached.pid, finished.pid, unreaped.pid]))

        assert sorted(embedded.drop_stale_handles(pgdata)) == sorted([finished.pid, unreaped.pid])
        assert _pids(pgdata) == [attached.pid]
        assert embedded.drop_stale_handles(pgdata) == []
    finally:
        unreaped.wait()
        attached.kill()
        attached.communicate(timeout=10)


def test_drop_stale_handles_drops_every_pid_when_the_server_is_not_running(tmp_path: Path) -> None:
    # after a reboot the recorded PIDs may belong to unrelated live processes, like this one
    (tmp_path / ".handle_pids.json").write_text(json.dumps([os.getpid()]))
    assert embedded.drop_stale_handles(tmp_path) == [os.getpid()]
    assert _pids(tmp_path) == []


def test_drop_stale_handles_without_a_pids_file_does_nothing(tmp_path: Path) -> None:
    assert embedded.drop_stale_handles(tmp_path) == []
    assert not (tmp_path / ".handle_pids.json").exists()


def test_a_misspelled_variable_is_named_and_the_embedded_fallback_said(embedded_dir: Path) -> None:
    """EINMAL_DATABSE_URL is no variable einmal knows: one warning line names the closest one, and the
    command, falling back to the embedded PostgreSQL, says so (before: silence, and the embedded
    database's data read as if it were the one meant)."""
    result = einmal(
        "migrate",
        env={
            "EINMAL_EMBEDDED_DIR": str(embedded_dir),
            "EINMAL_DATABSE_URL": "postgresql://postgres@db.example.org/prod",
        },
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "einmal: warning: unknown variable EINMAL_DATABSE_URL ignored; did you mean EINMAL_DATABASE_URL?" in lines
    assert (
        f"einmal: EINMAL_DATABASE_URL and DATABASE_URL are unset: using the embedded PostgreSQL in "
        f"{embedded_dir / 'pgdata'}"
    ) in lines
    assert "db.example.org" not in result.stderr


def test_every_variable_einmal_reads_is_known_to_the_check() -> None:
    from service.settings import unknown_variables

    assert unknown_variables({"EINMAL_EMBEDDED_DIR": "x", "EINMAL_SMTP_HOST": "h", "OTEL_X": "y"}) == []
    assert unknown_variables({"EINMAL_SMTP_HSOT": "h", "EINMAL_ZZZ": "1"}) == [
        "unknown variable EINMAL_SMTP_HSOT ignored; did you mean EINMAL_SMTP_HOST?",
        "unknown variable EINMAL_ZZZ ignored",
    ]
