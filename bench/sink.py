"""Postfix's smtp-sink and smtp-source: the wire's limit, and the server einmal sends to.

smtp-sink throws every message away; with `-c` it prints a running counter
(`sess=S quit=Q mesg=M`, one update per final dot, per QUIT and per session
end) on its standard output, which a thread here reads as it comes: that is
how the bench counts what arrived and sees when the first message of a
campaign reached the server. smtp-sink advertises PIPELINING, as by default.
With ``dump`` (a folder smtp-sink's user can write to) it also writes each message it
receives to a file there (`-d`: the dot-unstuffed message with LF line ends, after a few
lines of its own).
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALL_TIMEOUT = 600
_COUNTER = re.compile(rb"sess=(\d+) quit=\d+ mesg=(\d+)")
_NO_MAIL_SYSTEM = "postfix postfix/main_mailer_type select No configuration\n"
_MASTER = "/usr/lib/postfix/sbin/master"


class Unavailable(Exception):
    """smtp-sink/smtp-source are missing and cannot be installed here."""


def _tools() -> tuple[str, str] | None:
    paths = tuple(shutil.which(name) or f"/usr/sbin/{name}" for name in ("smtp-sink", "smtp-source"))
    return paths if all(os.access(path, os.X_OK) for path in paths) else None


def _masters() -> set[int]:
    found = set()
    for proc in psutil.process_iter(["exe", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["exe"] == _MASTER or (cmdline and cmdline[0] == _MASTER):
            found.add(proc.pid)
    return found


def _run(command: list[str], **kwargs) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, **kwargs)
    if done.returncode:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise Unavailable(f"smtp-sink is not installed and `{' '.join(command)}` failed: {last[0]}")


def ensure_tools(say=print) -> tuple[str, str]:
    """The paths of smtp-sink and smtp-source; installs Debian's postfix package when missing.

    The package is installed without a mail system configuration ("No configuration"), so
    its scripts neither configure nor start a Postfix daemon; a master process that appears
    all the same is stopped. Only smtp-sink and smtp-source are used.
    """
    if tools := _tools():
        return tools
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable("smtp-sink is not installed and cannot be installed here (needs root and apt-get)")
    say("setting up: installing Debian's postfix package for smtp-sink and smtp-source (no mail daemon)")
    before = _masters()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if shutil.which("debconf-set-selections"):
        _run(["debconf-set-selections"], input=_NO_MAIL_SYSTEM)
    _run(["apt-get", "update", "-q"], env=env)
    _run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "postfix"], env=env)
    for pid in _masters() - before:
        say(f"setting up: the postfix package started a master process ({pid}); stopping it")
        subprocess.run(["postfix", "stop"], capture_output=True, timeout=60)
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGTERM)
    if not (tools := _tools()):
        raise Unavailable("the postfix package was installed but smtp-sink/smtp-source are not there")
    return tools


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sink:
    """smtp-sink on 127.0.0.1, counting messages; `with Sink(path) as sink:`."""

    def __init__(self, path: str, dump: str | None = None) -> None:
        self.path, self.dump = path, dump
        self.port = free_port()
        self.messages = 0
        self.sessions = 0
        self._armed: int | None = None
        self.first_at: float | None = None  # monotonic time of the first message past the armed count
        self.last_at: float | None = None  # monotonic time of the latest message
        self._lock = threading.Lock()

    def command(self) -> list[str]:
        user = ["-u", "nobody"] if os.geteuid() == 0 else []
        dump = ["-d", f"{self.dump}/m."] if self.dump else []
        return [self.path, *user, *dump, "-c", f"127.0.0.1:{self.port}", "256"]

    def __enter__(self) -> "Sink":
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        self._reader = threading.Thread(target=self._read, name="smtp-sink counter", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(
                        f"the SMTP server did not start: {self.proc.stderr.read().decode()[:300]}"
                    ) from exc
                time.sleep(0.05)
        self.wait_sessions(1, timeout=5)  # the probe's session ends in the counter
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)

    def _read(self) -> None:
        stream = self.proc.stdout
        tail = b""
        while chunk := stream.read1(65536):
            now = time.monotonic()
            found = _COUNTER.findall(tail + chunk)
            tail = chunk[-64:]
            if not found:
                continue
            sessions, messages = max(int(s) for s, _ in found), max(int(m) for _, m in found)
            with self._lock:
                if messages > self.messages:
                    self.last_at = now
                self.sessions, self.messages = max(self.sessions, sessions), max(self.messages, messages)
                if self._armed is not None and self.first_at is None and self.messages > self._armed:
                    self.first_at = now

    def arm(self) -> int:
        """Watch for the next message; returns the count so far."""
        with self._lock:
            self._armed, self.first_at = self.messages, None
            return self.messages

    def wait_messages(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.messages < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.messages >= count

    def wait_sessions(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.sessions < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.sessions >= count


def wire(source: str, sink: Sink, messages: int, sessions: int = 10, size: int = 4096) -> tuple[float, int]:
    """smtp-source -> smtp-sink over `sessions` persistent sessions: (seconds, sessions used)."""
    before_messages, before_sessions = sink.messages, sink.sessions
    command = [
        source,
        "-s",
        str(sessions),
        "-m",
        str(messages),
        "-l",
        str(size),
        "-d",
        "-M",
        "bench.example",
        "-f",
        "bench@example.com",
        "-t",
        "rcpt@example.com",
        f"127.0.0.1:{sink.port}",
    ]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    if done.returncode:
        raise RuntimeError(f"smtp-source failed: {done.stderr.strip()[:300]}")
    if not sink.wait_messages(before_messages + messages, timeout=10):
        raise RuntimeError(f"smtp-sink counted {sink.messages - before_messages} of {messages} messages")
    sink.wait_sessions(before_sessions + sessions, timeout=5)
    return seconds, sink.sessions - before_sessions
