"""The README's shell examples, run as they are written there, against a real node."""

import os
import re
import sys
from pathlib import Path

import anyio

from tests.conftest import ROOT


def example(heading: str, fence: str) -> str:
    """The one ```<fence> block of the README's section `heading` (up to the next "## " heading)."""
    section = (ROOT / "README.md").read_text().split(f"{heading}\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(rf"```{fence}\n(.*?)```", section, re.S)
    return block


async def run(block: str, dsn: str, base: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `block` in bash -euo pipefail, with einmal on the PATH, the database
    and the API's URL (API_URL) in the environment and nothing else of einmal's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # einmal on the PATH
    env.update(EINMAL_DATABASE_URL=dsn, API_URL=f"{base}/api/v1")
    done = await anyio.run_process(["bash", "-euo", "pipefail", "-c", block], env=env, cwd=ROOT, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()
