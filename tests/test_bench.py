"""The throughput benchmark runs end to end (`python -m bench --quick`) and prints every
figure next to its target with a verdict. Nothing here is asserted about speed.

The bench's set-up installs Postfix's smtp-sink/smtp-source when they are missing (as
root, with apt); where that is impossible it exits 3 and this test is skipped."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

UNAVAILABLE = 3

FIGURES = [
    r"wire: smtp-source -> smtp-sink, 3,000 msgs\s+[\d,]+ msg/s",
    r"einmal 1 node: approval -> sent\s+.*msg/s.*(PASS|MISS)$",
    r"einmal 2 nodes: approval -> sent\s+.*msg/s.*(PASS|MISS)$",
    r"statements per message, 1 node\s+\d+\.\d+ .*(PASS|MISS)$",
    r"statements per message, 2 nodes\s+\d+\.\d+ .*(PASS|MISS)$",
    r"peak RSS per node, 1 node\s+\d+ MB\s.*(PASS|MISS)$",
    r"peak RSS per node, 2 nodes\s+\d+ MB / \d+ MB\s.*(PASS|MISS)$",
    r"approve -> first message, 1 node\s+\d+\.\d+ s\s.*(PASS|MISS)$",
    r"approve -> first message, 2 nodes\s+\d+\.\d+ s\s.*(PASS|MISS)$",
    r"einmal 1 node, DKIM ed25519: approval -> sent\s+.*× unsigned.*(PASS|MISS)$",
    r"einmal 1 node, DKIM rsa-2048: approval -> sent\s+.*msg/s",
    r"DKIM ed25519: dkimpy, what the sink got\s+verified 3,000 of 3,000\s.*PASS$",
    r"DKIM rsa-2048: dkimpy, what the sink got\s+verified 3,000 of 3,000\s.*PASS$",
    r"recipient build, 20,000 subscribers\s+.*× bare.*(PASS|MISS)$",
    r"bare INSERT … SELECT DISTINCT ON\s+\d+\.\d+ s \([\d,]+ rows\)",
]


def bench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ), timeout=timeout)


@pytest.mark.slow
def test_quick_bench_prints_every_figure_with_its_target_and_verdict():
    done = bench("--quick")
    if done.returncode == UNAVAILABLE:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    for figure in FIGURES:
        assert any(re.search(figure, line) for line in lines), f"no line matches {figure!r}:\n{done.stdout}"
    assert "Traceback" not in done.stderr


def test_bad_option_is_one_line_and_exit_2():
    done = bench("--messages", "5", timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--messages" in done.stderr
