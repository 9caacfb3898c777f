"""The progress bar in a real terminal: `einmal demo` in a tmux pane of fixed size, logging at INFO
while its bar is up. Every captured screen is checked: a log line is a whole line of its own, a bar
line is nothing but the bar, and the last screen shows the final count with each state under the
log lines written while it was sending. Below it, the display itself: log lines handed to the bar's
console and back, plain lines into a pipe."""

import io
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from service.cli import progress
from tests.conftest import ROOT

LOG = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [\w.]+: ")
BAR_TEXT = re.compile(r"done \d+/\d+")
BAR_LINE = re.compile(r"(?:[━╸╺ ]{1,21}|\[[#.]{20}\]) done (\d+)/(\d+) \(([^)]*)\) +\d+%  \d+/s  ETA \S+(  \((\w+)\))?")
SUBSCRIBERS = 1500
SUPPRESSED = 3  # the demo suppresses reader7, reader38 and reader69 before it sends
DEADLINE = 180.0


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True, timeout=30).stdout


def test_log_lines_print_above_the_bar_never_inside_it(dsn: str, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is missing: .ci/run installs it")
        pytest.skip("needs tmux (apt-get install tmux)")
    socket = f"einmal-test-{uuid.uuid4().hex[:8]}"
    env = " ".join(f"-u {name}" for name in os.environ if name.startswith("EINMAL_") or name == "DATABASE_URL")
    command = (
        f"cd {shlex.quote(str(ROOT))} && env {env} EINMAL_LOG_LEVEL=INFO {shlex.quote(sys.executable)} "
        f"-m service demo --subscribers {SUBSCRIBERS} --database-url {shlex.quote(dsn)} "
        f"--out {shlex.quote(str(tmp_path / 'out'))}; echo EXIT=$?; sleep {DEADLINE:.0f}"
    )
    screens: list[list[str]] = []
    tmux(socket, "new-session", "-d", "-x", "150", "-y", "45", "-s", "demo", command)
    try:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            screen = tmux(socket, "capture-pane", "-p", "-t", "demo").splitlines()
            if not screens or screen != screens[-1]:
                screens.append(screen)
            if any(line.startswith("EXIT=") for line in screen):
                break
            time.sleep(0.05)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)

    last = screens[-1]
    assert "EXIT=0" in last, "\n".join(last)
    for screen in screens:
        for line in screen:
            if LOG.search(line):
                assert LOG.match(line) and not BAR_TEXT.search(line), f"log and bar on one line: {line!r}"
            if BAR_TEXT.search(line) and not line.startswith("campaign "):
                assert BAR_LINE.fullmatch(line.rstrip()), f"the bar line holds something else: {line!r}"
    live = [BAR_LINE.fullmatch(line.rstrip()) for screen in screens for line in screen]
    assert any(m and m[5] != "sent" for m in live), "the bar was never seen before the campaign was sent"

    bars = [i for i, line in enumerate(last) if BAR_LINE.fullmatch(line.rstrip())]
    assert len(bars) == 1, "\n".join(last)
    final = BAR_LINE.fullmatch(last[bars[0]].rstrip())
    assert (final[1], final[2], final[5]) == (str(SUBSCRIBERS), str(SUBSCRIBERS), "sent")
    assert final[3] == f"sent {SUBSCRIBERS - SUPPRESSED}, suppressed {SUPPRESSED}"
    sent_log = [i for i, line in enumerate(last) if LOG.match(line) and "sending -> sent" in line]
    assert sent_log and sent_log[0] < bars[0], "the log line written while the bar was up is not above it"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_while_the_bar_is_up_terminal_log_lines_go_through_its_console_and_come_back_after() -> None:
    screen, log_stream = Terminal(), Terminal()
    handler = logging.StreamHandler(log_stream)
    handler.setFormatter(logging.Formatter("LOG %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with progress.Display(screen, tty=True) as display:
            display.show("done 1/4 (sent 1)", 1, 4)
            logging.getLogger("einmal.test").warning("a warning while sending")
            display.show("done 4/4 (sent 3, suppressed 1)", 4, 4)
        logging.getLogger("einmal.test").warning("after the bar")
    finally:
        root.removeHandler(handler)
    text = screen.getvalue()
    assert "LOG a warning while sending\n" in text and text.index("LOG a warning") < text.rindex("done 4/4")
    assert log_stream.getvalue() == "LOG after the bar\n"


def test_into_a_pipe_the_display_is_plain_lines() -> None:
    out = io.StringIO()
    with progress.Display(out, tty=False) as display:
        display.show("done 1/4 (sent 1)", 1, 4)
        display.show("done 4/4 (sent 3, suppressed 1)", 4, 4)
    assert out.getvalue() == (
        "[#####...............] done 1/4 (sent 1)\n[####################] done 4/4 (sent 3, suppressed 1)\n"
    )
