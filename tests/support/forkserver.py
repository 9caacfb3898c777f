"""`python -m service …` without paying for Python's start and einmal's imports each time.

The tests run the command line some thousand times, and each child spent most of its CPU time (0.6 of
0.7 s here) starting Python and importing einmal before doing anything. A fork server imports einmal once
per test process; each command is then a child forked from it, with its own arguments, environment,
working directory and standard streams, running `service.cli.einmal.main` as `python -m service` would,
and ending with its own exit status. Each child is a real process: it can be signalled and killed by its
pid, and nothing it does reaches the test process but its exit status and what it writes.

    child = spawn(["campaign", "list"], env=env, stdout=fd, stderr=fd)   # a Popen-like Child
    child.wait(timeout=60)

The server (`serve`) forks a helper per request, which forks the command and reports its pid, then its exit
status, on the request's Unix socket: the server never waits on anybody, so commands may run at once.
`TESTS_FORKSERVER=0` makes every command a fresh `python -m service` instead.
"""

import array
import atexit
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENABLED = os.environ.get("TESTS_FORKSERVER", "1") != "0"
_server: subprocess.Popen | None = None
_path: str | None = None
_lock = threading.Lock()


# ---- the server side: runs in `python -m tests.support.forkserver PATH` -----------------------------------


def _run_command(request: dict, fds: list[int]) -> None:
    """In the forked command: become `python -m service ARGS` and never return."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import service.__main__

        sys.modules["__main__"] = service.__main__  # what anyio.to_process loads in its workers
        sys.argv = [service.__main__.__file__, *request["args"]]
        from service.cli.einmal import main

        main(request["args"])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:  # what Python prints for an uncaught exception, then exit 1
        import traceback

        traceback.print_exc()
    finally:
        # what Python does at exit before it flushes: join the threads left, then run the atexit functions (the
        # embedded PostgreSQL's client hands the server back there, service/db/embedded.py)
        try:
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
        except BaseException:
            import traceback

            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _handle(conn: socket.socket) -> None:
    """In the per-request helper: fork the command, report its pid, wait for it, report its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    message, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while not message.endswith(b"\n"):  # a long environment may come in more than one piece
        message += conn.recv(1 << 16) or b"\n"
    request = json.loads(message)
    pid = _fork()
    if pid == 0:
        conn.close()
        _run_command(request, fds)
    for fd in fds:
        os.close(fd)
    if pid < 0:
        os._exit(1)  # the Child sees its helper go away: a clear error in that one test, the server unharmed
    conn.sendall(struct.pack("!i", pid))
    _, status = os.waitpid(pid, 0)
    conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
    os._exit(0)


def _fork() -> int:
    """os.fork(), tried again for a few seconds while the machine is out of processes (EAGAIN): the server
    must outlive a busy moment, or every later command of its test process is refused. -1: no fork."""
    for _ in range(100):
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(0.05)
    return -1


def serve(path: str) -> None:
    import actors.node  # noqa: F401  what `einmal run` starts
    import service.cli.einmal  # noqa: F401  and everything a command imports before it starts

    assert threading.active_count() == 1, "a fork server must have no other thread"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # the path appears only once the socket listens: a client waits for the path (_server_path), and one that
    # connected between a bind and a listen at the path was refused
    listener.bind(f"{path}.new")
    listener.listen(64)
    os.rename(f"{path}.new", path)
    listener.settimeout(1.0)
    while os.getppid() != 1:  # the test process is gone: so is its server
        try:
            conn, _ = listener.accept()
        except (TimeoutError, ConnectionAbortedError):
            conn = None
        if conn is not None:
            if _fork() == 0:
                listener.close()
                try:
                    _handle(conn)
                except BaseException:
                    import traceback

                    traceback.print_exc()
                os._exit(1)  # a helper never goes back to serving: its error ends it alone
            conn.close()  # also when no helper could be forked: that request's Child says its helper went away
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


# ---- the test side -------------------------------------------------------------------------------------


def _server_path() -> str:
    global _server, _path
    with _lock:
        if _server is None or _server.poll() is not None:
            _path = os.path.join(tempfile.mkdtemp(prefix="einmal-fork-"), "socket")
            _server = subprocess.Popen(
                [sys.executable, "-m", "tests.support.forkserver", _path],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if not k.startswith("EINMAL_")},
            )
            atexit.register(_stop, _server)
            deadline = time.monotonic() + 60
            while not os.path.exists(_path):
                if _server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the test fork server did not start")
                time.sleep(0.02)
        assert _path is not None
        return _path


def _restart() -> None:
    """Forget a server that no longer listens, once it has exited, so that the next call starts a new one."""
    global _server
    with _lock:
        if _server is not None:
            _server.kill()  # no-op when it has exited already
            _server.wait(timeout=30)
            _server = None


def _stop(server: subprocess.Popen) -> None:
    server.kill()
    server.wait()  # its children's CPU time then counts as the test process's own children's


class Child:
    """A command forked by the server: what tests use of subprocess.Popen."""

    def __init__(self, args: list[str], conn: socket.socket) -> None:
        self.args, self._conn, self.returncode = args, conn, None
        self.pid = struct.unpack("!i", self._recv(4))[0]

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self._conn.recv(n - len(data))
            if not chunk:
                raise RuntimeError("the test fork server's helper went away")
            data += chunk
        return data

    def poll(self) -> int | None:
        if self.returncode is None:
            self._conn.setblocking(False)
            try:
                self._conn.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                return None
            finally:
                self._conn.setblocking(True)
            self.wait()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                self.returncode = struct.unpack("!i", self._recv(4))[0]
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            finally:
                self._conn.settimeout(None)
            self._conn.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def spawn(args: list[str], *, env: dict[str, str], stdin: int, stdout: int, stderr: int, cwd: Path = ROOT) -> Child:
    """Start `python -m service ARGS` with these open file descriptors as its standard streams."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_server_path())
    except (ConnectionRefusedError, FileNotFoundError):  # the server is gone, or going: start another
        _restart()
        conn.connect(_server_path())
    request = json.dumps({"args": list(args), "env": env, "cwd": str(cwd)}).encode() + b"\n"
    socket.send_fds(conn, [request], array.array("i", [stdin, stdout, stderr]))
    return Child(list(args), conn)


def run(args: list[str], *, env: dict[str, str], input: str | None, timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run([python, -m, service, *args], capture_output=True, text=True, …), forked."""
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if input is not None:
            stdin.write(input.encode())
            stdin.seek(0)
        child = spawn(args, env=env, stdin=stdin.fileno(), stdout=out.fileno(), stderr=err.fileno())
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        out.seek(0)
        err.seek(0)
        decode = lambda b: b.decode().replace("\r\n", "\n").replace("\r", "\n")  # noqa: E731  as text=True does
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "service", *args], child.returncode, decode(out.read()), decode(err.read())
        )


if __name__ == "__main__":
    serve(sys.argv[1])
