"""The documentation's shell examples (docs/), run as they are written there, against a real node."""

import os
import re
import sys
from pathlib import Path

import anyio

from tests.conftest import ROOT


def example(page: str, fence: str, heading: str | None = None) -> str:
    """The one ```<fence> block of docs/<page>, or of those under its heading `heading` (e.g. "## Name": up to
    the next heading, as `blocks` tells them)."""
    text = (ROOT / "docs" / page).read_text()
    if heading is not None:
        section, in_code = [], False
        for line in f"\n{text}".split(f"\n{heading}\n", 1)[1].splitlines():
            in_code ^= line.startswith("```")
            if not in_code and re.match(r"#{1,6} ", line):
                break
            section.append(line)
        text = "\n".join(section) + "\n"
    [block] = re.findall(rf"```{fence}\n(.*?)```", text, re.S)
    return block


SHOWN = ("sh", "bash", "shell", "console", "python")  # the fences of blocks a reader runs


def blocks(page: str) -> list[tuple[str, str]]:
    """(fence, heading above it) of each block of docs/<page> fenced as one of SHOWN, or fenced bare ("") and
    opening with a command (`einmal `, `$ `, `curl `)."""
    found, heading, fence, body = [], "", None, []
    for line in (ROOT / "docs" / page).read_text().splitlines():
        if fence is None and line.startswith("#"):
            heading = line
        elif line.startswith("```"):
            if fence is None:
                fence, body = line[3:].strip(), []
                continue
            if fence in SHOWN or (fence == "" and body and body[0].startswith(("einmal ", "$ ", "curl "))):
                found.append((fence, heading))
            fence = None
        elif fence is not None:
            body.append(line)
    return found


def session(block: str) -> tuple[str, list[str]]:
    """A ```console block as its commands (`$ ` and `> ` lines, the prompt taken off) and the lines it shows
    them print."""
    commands, shown = [], []
    for line in block.splitlines():
        if line.startswith(("$ ", "> ")):
            commands.append(line[2:])
        elif line.strip():
            shown.append(line)
    return "\n".join(commands) + "\n", shown


def unprinted(shown: list[str], printed: str) -> list[str]:
    """The lines of `shown` (a ```console block's) that no line of `printed` is: `…` in one stands for any
    text, as a page cuts a key short."""
    lines = printed.splitlines()
    patterns = [re.compile(".*".join(map(re.escape, line.split("…")))) for line in shown]
    return [line for line, p in zip(shown, patterns, strict=True) if not any(p.fullmatch(got) for got in lines)]


def pasteable(block: str) -> None:
    """A block that reads API_URL gives it its default first (`API=${API_URL:-http://127.0.0.1:8080/api/v1}`):
    pasted into a shell where it is not set, a bare `$API_URL` would be empty and the block would fail."""
    bare = re.findall(r"\$API_URL\b|\$\{API_URL\}", block)
    assert not bare, f"the block uses {bare[0]} without a default: set API=${{API_URL:-…}} first"


async def run(block: str, dsn: str, base: str, *, cwd: Path = ROOT, input: str | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `block` in bash -euo pipefail in `cwd`, with einmal on the PATH, the
    database and the API's URL (API_URL) in the environment and nothing else of einmal's, `input` on its stdin
    (as typed at a prompt). The block must run pasted where API_URL is not set too (`pasteable`)."""
    pasteable(block)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # einmal on the PATH
    env.update(EINMAL_DATABASE_URL=dsn, API_URL=f"{base}/api/v1")
    done = await anyio.run_process(
        ["bash", "-euo", "pipefail", "-c", block], input=input and input.encode(), env=env, cwd=cwd, check=False
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()
