"""The command line: `einmal …`, also `python -m service`.

Every command is a coroutine taking (args, settings) and returning an exit
code. Errors are translated here, once: an EinmalError becomes one line on
stderr and its exit code, the field it concerns named as an option (flags.py);
nothing else prints a traceback to a person.
"""

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

import anyio
import asyncpg

from service import settings as settings_module
from service import settings_doc
from service.cli import (
    accounts,
    campaigns,
    console_users,
    demo,
    doctor,
    lists_cmd,
    messages,
    prune,
    reconcile,
    segments_cmd,
    senders,
    sequences,
    server,
    subscribers_cmd,
    suppressions_cmd,
    webhooks,
)
from service.cli.flags import FLAGS
from service.errors import EinmalError, leaves


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(2, f"{self.prog}: {message}\n")


# the environment variables `einmal run` reads, for its --help: written from Settings' descriptions
RUN_VARIABLES = settings_doc.run_variables()


def einmal_version() -> str:
    try:
        return version("einmal")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command: each group of commands registers its own, in this order (`einmal --help`)."""
    parser = _Parser(prog="einmal", description="Send email campaigns from PostgreSQL, each recipient once.")
    parser.add_argument(
        "--version", action="version", version=f"einmal {einmal_version()}", help="print einmal's version and exit"
    )
    # the parsers of every group and verb below are _Parsers too: argparse makes them of the parser_class here
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    server.register(sub)
    sub.choices["run"].epilog = RUN_VARIABLES
    demo.register(sub)
    subscribers_cmd.register(sub)
    accounts.register(sub)
    senders.register(sub)
    lists_cmd.register(sub)
    campaigns.register(sub)
    sequences.register(sub)
    segments_cmd.register(sub)
    suppressions_cmd.register(sub)
    messages.register(sub)
    prune.register(sub)
    reconcile.register(sub)
    doctor.register(sub)
    webhooks.register(sub)
    console_users.register(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:  # `einmal` alone, or `einmal campaign`: what there is to do
        parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "--help"])
    try:
        settings = settings_module.load()
        settings_module.traces_exporter(os.environ)  # every command alike, not only those that trace
        for warning in settings_module.unknown_variables(os.environ):
            print(f"einmal: warning: {warning}", file=sys.stderr)
        code = run(args.func, args, settings)
    except EinmalError as exc:
        print(f"einmal: {exc.worded(FLAGS)}", file=sys.stderr)
        code = exc.exit_code
    except BrokenPipeError:  # the reader went away (`einmal … | head -1`): nothing more to say to anyone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush must not fail too
        code = 1
    except asyncpg.UndefinedTableError:
        print("einmal: the database has no einmal schema yet: run `einmal migrate`", file=sys.stderr)
        code = 1
    except (asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError) as exc:
        print(f"einmal: database error: {exc}".splitlines()[0], file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


def run(func, args: argparse.Namespace, settings) -> int:
    """Run a command; an EinmalError inside a task group comes out on its own."""
    try:
        return anyio.run(func, args, settings, backend_options=_backend_options())
    except BaseExceptionGroup as group:
        errors = [e for e in leaves(group) if isinstance(e, EinmalError | KeyboardInterrupt)]
        if errors:
            raise errors[0] from None
        raise


def _backend_options() -> dict:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}
