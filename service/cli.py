"""The command line: `einmal …`, also `python -m service`.

Every command is a coroutine taking (args, settings) and returning an exit
code. Errors are translated here, once: an EinmalError becomes one line on
stderr and its exit code; nothing else prints a traceback to a person.
"""

import argparse
import sys

import anyio
import asyncpg

from service import settings as settings_module
from service.errors import EinmalError, leaves


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        self.exit(2, f"{self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from service import commands

    parser = _Parser(prog="einmal", description="Send email campaigns from PostgreSQL, each recipient once.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("migrate", help="apply pending migrations (idempotent)").set_defaults(func=commands.migrate)
    sub.add_parser("run", help="run one node until SIGTERM").set_defaults(func=commands.run)
    demo = sub.add_parser("demo", help="embedded PostgreSQL + capture SMTP + sample data, end to end")
    demo.add_argument("--subscribers", type=int, default=3000)
    demo.add_argument("--out", default=None, help="folder for captured messages")
    demo.set_defaults(func=commands.demo)

    subscribers = sub.add_parser("subscribers", help="manage subscribers").add_subparsers(
        dest="subcommand", required=True, parser_class=_Parser)
    imp = subscribers.add_parser("import", help="import a CSV file (header row; email, name, list)")
    imp.add_argument("--account", required=True)
    imp.add_argument("file")
    imp.set_defaults(func=commands.subscribers_import)

    campaign = sub.add_parser("campaign", help="manage campaigns").add_subparsers(
        dest="subcommand", required=True, parser_class=_Parser)
    create = campaign.add_parser("create", help="create a draft; prints its id")
    create.add_argument("--account", required=True)
    create.add_argument("--name", required=True)
    create.add_argument("--subject", required=True)
    create.add_argument("--from", dest="from_address", required=True)
    body = create.add_mutually_exclusive_group(required=True)
    body.add_argument("--text-file")
    body.add_argument("--text")
    create.add_argument("--html-file")
    create.add_argument("--list", dest="lists", action="append", default=[])
    create.add_argument("--at", help="ISO-8601 time to start sending")
    create.add_argument("--reply-to", help="Reply-To address")
    create.add_argument("--list-id", help="List-Id: 'Name <id.example.org>' or 'id.example.org'")
    create.add_argument("--header", dest="headers", action="append", default=[],
                        help="an extra header 'X-Name: value' (repeatable)")
    create.set_defaults(func=commands.campaign_create)
    for verb in ("approve", "pause", "resume", "cancel"):
        p = campaign.add_parser(verb, help=f"{verb} a campaign")
        p.add_argument("id", type=int)
        p.set_defaults(func=commands.campaign_transition, verb=verb)
    status = campaign.add_parser("status", help="counts per state")
    status.add_argument("id", type=int)
    status.add_argument("--json", action="store_true")
    status.add_argument("--follow", action="store_true", help="show a progress bar until the campaign ends")
    status.set_defaults(func=commands.campaign_status)

    suppress = sub.add_parser("suppress", help="suppress addresses for an account")
    suppress.add_argument("--account", required=True)
    suppress.add_argument("--reason", default="manual")
    suppress.add_argument("emails", nargs="+")
    suppress.set_defaults(func=commands.suppress)

    reconcile = sub.add_parser("reconcile", help="list or decide a campaign's in-doubt rows")
    reconcile.add_argument("id", type=int)
    decide = reconcile.add_mutually_exclusive_group()
    decide.add_argument("--resend", action="store_true", help="queue them again (same Message-ID)")
    decide.add_argument("--mark-sent", action="store_true", help="record them as sent")
    reconcile.set_defaults(func=commands.reconcile)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_module.load()
        code = run(args.func, args, settings)
    except EinmalError as exc:
        print(f"einmal: {exc}", file=sys.stderr)
        code = exc.exit_code
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
