"""The cost of DKIM signing: one node sending the same campaign unsigned, signed with Ed25519
and signed with RSA-2048, each kind against this series' own unsigned runs.

The runs are interleaved: round 1 in the order unsigned, Ed25519, RSA-2048, round 2 in the
reverse order, so a machine that gets busier or quieter during the series (other processes,
the server's checkpoints) weighs on every kind alike; a kind's rate is its messages over its
seconds in both rounds.

In round 1 the sink writes every message it receives to a file (for all three kinds, so the
cost is the same); after each signed run, outside its timing, dkimpy verifies every one of
those messages against the public key, its DNS answered by a stub that knows only the
bench's selector. Verifying is slow (dkimpy is pure Python: ~2 ms per Ed25519 message, ~4 ms
per RSA one), so it runs in one process per CPU.

`python -m bench.signing [--messages N] [--tick S]` runs this series alone and prints the DKIM
rows of `python -m bench` (same runs, same targets).
"""

import argparse
import functools
import importlib.util
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from bench import send
from bench.sink import Sink
from service.mail import dkim

KEYS = {
    "ed25519": lambda: ed25519.Ed25519PrivateKey.generate(),
    "rsa-2048": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
}
KINDS = ("unsigned", *KEYS)
DOMAIN, SELECTOR = "example.com", "bench"
CHUNK = 500  # messages per verification task


@dataclass
class Verified:
    received: int  # messages the sink counted in the run
    checked: int  # message files found
    good: int  # of them, verified by dkimpy
    first_bad: str = ""  # the name of the first file that did not verify

    @property
    def ok(self) -> bool:
        return self.received == self.checked == self.good


def key_env(folder: Path, kind: str) -> tuple[dict[str, str], bytes]:
    """The DKIM variables of a new key of this kind, and the key's DNS record."""
    key = KEYS[kind]()
    path = folder / f"{kind}.pem"
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    env = {"EINMAL_DKIM_DOMAIN": DOMAIN, "EINMAL_DKIM_SELECTOR": SELECTOR, "EINMAL_DKIM_PRIVATE_KEY_FILE": str(path)}
    return env, dkim.public_record(key)


def _dns(record: bytes, name, timeout=5) -> bytes | None:
    name = name.decode() if isinstance(name, bytes) else name
    return record if name.rstrip(".") == f"{SELECTOR}._domainkey.{DOMAIN}" else None


def _verify_files(paths: list[str], record: bytes) -> tuple[int, str]:
    """(how many verify, the first that does not): smtp-sink's files have LF line ends."""
    import dkim as dkimpy  # dkimpy: a dev dependency, the independent verifier

    good, first_bad = 0, ""
    for path in paths:
        message = Path(path).read_bytes().replace(b"\n", b"\r\n")
        if dkimpy.verify(message, dnsfunc=functools.partial(_dns, record), minkey=1024):
            good += 1
        elif not first_bad:
            first_bad = path
    return good, first_bad


def verify(folder: Path, record: bytes, received: int) -> Verified:
    """Every message file in ``folder`` checked with dkimpy; the files are removed."""
    paths = sorted(str(path) for path in folder.iterdir())
    if importlib.util.find_spec("dkim") is None:
        clear(folder)
        return Verified(received, len(paths), 0, "not verified: dkimpy is not installed (pip install -e '.[dev]')")
    chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
    result = Verified(received, len(paths), 0)
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=get_context("spawn")) as pool:
        for good, first_bad in pool.map(_verify_files, chunks, [record] * len(chunks)):
            result.good += good
            result.first_bad = result.first_bad or (first_bad and Path(first_bad).name)
    clear(folder)
    return result


def clear(folder: Path) -> None:
    for path in folder.iterdir():
        path.unlink()


def combined(runs: list[send.Run]) -> send.Run:
    """One kind's runs as one: messages over seconds, summed."""
    run = send.Run(
        1,
        sum(r.messages for r in runs),
        seconds=sum(r.seconds for r in runs),
        delivered=sum(r.delivered for r in runs),
        sent=all(r.sent for r in runs),
    )
    for r in runs:
        for status, count in r.counts.items():
            run.counts[status] = run.counts.get(status, 0) + count
    return run


async def runs(
    server: str, sink: Sink, *, messages: int, tick: float, say=print
) -> tuple[dict[str, send.Run], dict[str, Verified]]:
    """Each kind's runs combined (``unsigned`` among them), and round 1's verification per signed kind."""
    done: dict[str, list[send.Run]] = {kind: [] for kind in KINDS}
    verified: dict[str, Verified] = {}
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # the sink's files stay in memory
    with (
        tempfile.TemporaryDirectory(prefix="einmal-bench-dkim-") as folder,
        tempfile.TemporaryDirectory(prefix="einmal-bench-sink-", dir=shm) as dump_folder,
    ):
        keys = {kind: key_env(Path(folder), kind) for kind in KEYS}
        dump = Path(dump_folder)
        os.chmod(dump_folder, 0o733)  # smtp-sink runs as nobody when the bench runs as root
        with Sink(sink.path, dump=dump_folder) as dumping:
            for round_, order in enumerate((KINDS, KINDS[::-1])):
                for kind in order:
                    say(
                        f"einmal: 1 node, {messages:,} recipients, {'DKIM ' if kind in KEYS else ''}{kind}, "
                        f"round {round_ + 1}{' (the sink keeps the messages)' if round_ == 0 else ''}"
                    )
                    run = await send.campaign(
                        server,
                        dumping if round_ == 0 else sink,
                        nodes=1,
                        messages=messages,
                        tick=tick,
                        timeout=max(120.0, messages / 60),
                        say=say,
                        extra_env=keys[kind][0] if kind in KEYS else None,
                        label=f"{kind.replace('-', '')}{round_}",
                    )
                    done[kind].append(run)
                    say(f"  {send_line(run)}")
                    if round_ == 0 and kind in KEYS:
                        verified[kind] = verify(dump, keys[kind][1], run.delivered)
                        say(
                            f"  dkimpy verified {verified[kind].good:,} of the {verified[kind].checked:,} messages "
                            f"the sink kept ({run.delivered:,} received)"
                        )
                    clear(dump)
    return {kind: combined(kind_runs) for kind, kind_runs in done.items()}, verified


def send_line(run: send.Run) -> str:
    from bench.report import run_line

    return run_line(run)


def main(argv: list[str] | None = None) -> int:
    """The DKIM series alone, reported as ``python -m bench`` reports it."""
    import anyio
    import asyncpg

    from bench import database, report
    from bench.sink import Unavailable, ensure_tools
    from service.errors import EinmalError

    parser = argparse.ArgumentParser(prog="python -m bench.signing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="messages per run (default 20000)")
    parser.add_argument("--tick", type=float, default=60.0, help="EINMAL_TICK_SECONDS of the node (default 60)")
    args = parser.parse_args(argv)
    if args.messages < 100 or not 0 < args.tick <= 3600:
        parser.exit(2, f"{parser.prog}: --messages must be at least 100, --tick in (0, 3600]\n")

    async def measure(sink: Sink) -> None:
        server, _ = database.server_url()
        signed, verified = await runs(
            server, sink, messages=args.messages, tick=args.tick, say=functools.partial(print, flush=True)
        )
        report.dkim(signed.pop("unsigned"), signed, functools.partial(print, flush=True), verified)

    try:
        sink_path, _ = ensure_tools()
    except Unavailable as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 3
    try:
        with Sink(sink_path) as sink:
            anyio.run(measure, sink)
    except (RuntimeError, OSError, TimeoutError, asyncpg.PostgresError, EinmalError) as exc:
        print(f"bench: could not run: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
