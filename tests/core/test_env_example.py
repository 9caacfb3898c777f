"""config/einmal.env.example works as its first lines say: sourced by a shell (`set -a; . ./einmal.env`), with
every example line uncommented, it sets each variable to the value shown, as systemd's EnvironmentFile= reads
it (a value in single quotes without them)."""

import re
import shlex
import subprocess

from tests.conftest import ROOT

EXAMPLE = ROOT / "config" / "einmal.env.example"
LINE = re.compile(r"(?:# )?((?:EINMAL|OTEL)_[A-Z_]+)=(.*)")


def test_the_example_sourced_by_a_shell_sets_every_value_as_shown() -> None:
    lines = [f"{m[1]}={m[2]}" if (m := LINE.fullmatch(line)) else line for line in EXAMPLE.read_text().splitlines()]
    shown = {
        m[1]: shlex.split(m[2])[0] if m[2].startswith("'") else m[2] for line in lines if (m := LINE.fullmatch(line))
    }
    script = "set -a\n. /dev/stdin\nset +a\n" + "".join(f'printf "%s=%s\\0" {name} "${name}"\n' for name in shown)
    done = subprocess.run(
        ["bash", "-c", script], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert dict(pair.split("=", 1) for pair in done.stdout.split("\0") if pair) == shown
