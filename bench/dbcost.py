"""`python -m bench.dbcost`: CPU time per message (bench/cpu.py), PostgreSQL's and the node's,
measured alone: one node at the defaults (or what the environment's EINMAL_ variables set).
This is how the reference figure in bench/report.py was taken.
"""

import argparse
import sys

import anyio
import asyncpg

from bench import database, report, send
from bench.sink import Sink, Unavailable, ensure_tools


def main(argv: list[str] | None = None) -> int:
    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # one line, not the usage block
            self.exit(2, f"{self.prog}: {message}\n")

    parser = Parser(prog="python -m bench.dbcost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="recipients (default 20000)")
    args = parser.parse_args(argv)
    if args.messages < 100:
        parser.error("--messages must be at least 100")
    try:
        sink_path, _ = ensure_tools()
        server, _ = database.server_url()
        with Sink(sink_path) as sink:
            run = anyio.run(
                lambda: send.campaign(
                    server, sink, nodes=1, messages=args.messages, tick=60, timeout=max(120.0, args.messages / 60)
                )
            )
    except Unavailable as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 3
    except (RuntimeError, OSError, TimeoutError, asyncpg.PostgresError) as exc:
        print(f"bench: could not run: {exc}", file=sys.stderr)
        return 1
    print(report.run_line(run))
    print(f"statements per message: {run.statements / run.messages:.3f} ({run.statements:,} {run.statement_method})")
    for line in report.cpu_lines([run]):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
