"""The command line: `einmal …`, also `python -m service`.

Every command is a coroutine taking (args, settings) and returning an exit
code. Errors are translated here, once: an EinmalError becomes one line on
stderr and its exit code; nothing else prints a traceback to a person.
"""

import argparse
import os
import re
import sys
from importlib.metadata import PackageNotFoundError, version

import anyio
import asyncpg

from service import settings as settings_module
from service import settings_doc
from service.errors import EinmalError, leaves


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        self.exit(2, f"{self.prog}: {message}\n")


# the environment variables `einmal run` reads, for its --help: written from Settings' descriptions
RUN_VARIABLES = settings_doc.run_variables()


def einmal_version() -> str:
    try:
        return version("einmal")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def reply_pattern(value: str) -> re.Pattern:
    """`campaign retry --reply`: a regular expression searched in a row's last reply, ignoring case (a plain
    substring such as 5.7.26 matches itself); a bad one is a one-line usage error (exit 2)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    try:
        return re.compile(value, re.IGNORECASE)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a regular expression: {exc}") from None


def days(value: str) -> float:
    """`prune --older-than`: a number of days, 0 or more (fractions too)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of days") from None
    if not 0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more days (got {value})")
    return number


def build_parser() -> argparse.ArgumentParser:
    from service.campaigns.status import STATUSES
    from service.cli import commands
    from service.reasons import REASONS

    parser = _Parser(prog="einmal", description="Send email campaigns from PostgreSQL, each recipient once.")
    parser.add_argument(
        "--version", action="version", version=f"einmal {einmal_version()}", help="print einmal's version and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    sub.add_parser("migrate", help="apply pending migrations (idempotent)").set_defaults(func=commands.migrate)
    sub.add_parser(
        "run",
        help="run one node until SIGTERM",
        epilog=RUN_VARIABLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).set_defaults(func=commands.run)
    sub.add_parser("serve", help="serve only HTTP (EINMAL_HTTP_ADDRESS) until SIGTERM").set_defaults(
        func=commands.serve
    )
    demo = sub.add_parser("demo", help="embedded PostgreSQL + capture SMTP + sample data, end to end")
    demo.add_argument("--subscribers", type=int, default=3000, help="how many sample subscribers (default 3000)")
    demo.add_argument("--out", default=None, help="folder for captured messages")
    demo.add_argument(
        "--keep-serving",
        action="store_true",
        help="after the campaign, keep the node and its HTTP surface up until Ctrl-C",
    )
    demo.add_argument(
        "--database-url",
        help="seed and use this database (default: the embedded one; a URL only in the environment is refused)",
    )
    demo.set_defaults(func=commands.demo)

    subscribers = sub.add_parser("subscribers", help="manage subscribers").add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser
    )
    imp = subscribers.add_parser("import", help="import a CSV file (header row; email, name, list, attributes)")
    imp.add_argument("--account", required=True, help="the account the subscribers belong to; it must exist")
    imp.add_argument("--create-account", action="store_true", help="create the account when it does not exist")
    imp.add_argument("file", help="UTF-8 CSV: a header row, then one subscriber a line (, ; or tab separated)")
    imp.set_defaults(func=commands.subscribers_import)
    for verb, text in (
        ("list", "an account's subscribers: email, name, status, lists"),
        ("export", "an account's subscribers as CSV that import reads back"),
    ):
        p = subscribers.add_parser(verb, help=text)
        p.add_argument("--account", required=True, help="whose subscribers")
        p.add_argument("--list", help="only the members of this list")
        p.set_defaults(func=commands.lazy("service.cli.subscribers_cmd", f"{verb}_command"))
    for verb, text in (
        ("show", "one subscriber: lists, attributes, suppression"),
        ("delete", "erase a subscriber's data (GDPR); the address stays suppressed"),
    ):
        p = subscribers.add_parser(verb, help=text)
        p.add_argument("--account", required=True, help="the subscriber's account")
        p.add_argument("email", help="the subscriber's address")
        p.set_defaults(func=commands.lazy("service.cli.subscribers_cmd", f"{verb}_command"))

    accounts = sub.add_parser("accounts", aliases=["account"], help="an account's settings and API keys")
    accounts = accounts.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
    p = accounts.add_parser("set", help="what its unsubscribe page shows: display name, language, contact")
    p.add_argument("account", help="the account's name")
    p.add_argument("--display-name", help="the sender's name on the page ('' clears it: the message's From name)")
    p.add_argument("--language", help="the page's language, e.g. en or de (a campaign's own comes first)")
    p.add_argument("--contact", help="an address shown when a link does not work ('' clears it)")
    p.set_defaults(func=commands.lazy("service.cli.accounts", "set_command"))
    accounts.add_parser("list", help="every account: name, when created, how many subscribers").set_defaults(
        func=commands.lazy("service.cli.subscribers_cmd", "accounts_list_command")
    )
    key = accounts.add_parser("key", help="keys for /api/v1 (docs/guide/http-api.md)").add_subparsers(
        dest="verb", metavar="VERB", parser_class=_Parser, required=True
    )

    lists = sub.add_parser("lists", help="lists: members, titles, sign-up forms (open, close)")
    lists.add_argument("--account", help="only this account's lists")
    lists.set_defaults(func=commands.lazy("service.cli.lists_cmd", "list_command"))
    verbs = lists.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
    p = verbs.add_parser("set", help="what the list's public pages call it")
    p.add_argument("list", help="the list's name")
    p.add_argument("--account", required=True, help="the list's account")
    p.add_argument(
        "--title",
        required=True,
        help="the title its sign-up form, confirmation page and preference page "
        "show, e.g. 'Weekly news' ('': none, they say 'the mailing list')",
    )
    p.set_defaults(func=commands.lazy("service.cli.lists_cmd", "set_command"))
    form = verbs.add_parser("form", help="open or close a list's sign-ups: its public form and POST /api/v1/subscribe")
    form = form.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser, required=True)
    for verb, text in (("open", "take sign-ups; prints the form's address"), ("close", "take no more sign-ups")):
        p = form.add_parser(verb, help=text)
        p.add_argument("list", help="the list's name")
        p.add_argument("--account", required=True, help="the list's account")
        if verb == "open":
            p.add_argument(
                "--origin",
                dest="origins",
                action="append",
                default=[],
                metavar="URL",
                help="a site besides this one whose pages may post the form, e.g. https://shop.example.org "
                "(repeatable; replaces the list's; none given: they stay)",
            )
        p.set_defaults(func=commands.lazy("service.cli.lists_cmd", "form_command"), origins=[])

    campaign = sub.add_parser("campaign", help="manage campaigns").add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser
    )
    create = campaign.add_parser("create", help="create a draft; prints its id")
    create.add_argument("--account", required=True, help="the account whose lists it goes to")
    create.add_argument("--name", required=True, help="a name for operators (campaign.name in templates)")
    create.add_argument("--subject", required=True, help="the subject line: a Jinja2 template")
    create.add_argument("--from", dest="from_address", required=True, help="the sender, 'Name <address>' or an address")
    body = create.add_mutually_exclusive_group(required=True)
    body.add_argument("--text-file", help="the text body from a UTF-8 file: a Jinja2 template")
    body.add_argument("--text", help="the text body itself: a Jinja2 template")
    create.add_argument("--html-file", help="an HTML body from a UTF-8 file (autoescaped Jinja2 template)")
    create.add_argument(
        "--list",
        dest="lists",
        action="append",
        default=[],
        help="a list to send to; repeat for several (default: default)",
    )
    create.add_argument(
        "--at",
        help="when to start: ISO-8601 with an offset or an IANA zone after a space "
        "('2026-12-01T09:00 Europe/Berlin'; neither: UTC), or 'now' (the default)",
    )
    create.add_argument("--reply-to", help="Reply-To address")
    create.add_argument("--list-id", help="List-Id: 'Name <id.example.org>' or 'id.example.org'")
    create.add_argument(
        "--header", dest="headers", action="append", default=[], help="an extra header 'X-Name: value' (repeatable)"
    )
    create.add_argument(
        "--language",
        help="the language of its unsubscribe page (default: the account's now, kept when the account's changes)",
    )
    create.add_argument(
        "--no-unsubscribe",
        action="store_true",
        help="it may go out without a one-click unsubscribe where EINMAL_UNSUBSCRIBE_URL and "
        "_SECRET are not set (Gmail and Yahoo require one of bulk mail); default: refused",
    )
    create.set_defaults(func=commands.campaign_create)
    for verb in ("approve", "pause", "resume", "cancel"):
        p = campaign.add_parser(verb, help=f"{verb} a campaign")
        p.add_argument("id", type=int, help="the campaign's id")
        if verb == "approve":
            p.add_argument(
                "--force", action="store_true", help="approve even if its trial render fails for every subscriber tried"
            )
        p.set_defaults(func=commands.campaign_transition, verb=verb)
    status = campaign.add_parser("status", help="counts per state, the pause reason, the top failure replies")
    status.add_argument("id", type=int, help="the campaign's id")
    status.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    status.add_argument("--follow", action="store_true", help="show a progress bar until the campaign ends")
    status.set_defaults(func=commands.campaign_status)
    retry = campaign.add_parser("retry", help="put failed rows back in the queue (same Message-ID)")
    retry.add_argument("id", type=int, help="the campaign's id")
    retry.add_argument(
        "--failed",
        action="store_true",
        required=True,
        help="the failed rows (never accepted by the server); a campaign that was sent sends again",
    )
    which = retry.add_mutually_exclusive_group()
    which.add_argument(
        "--reason", choices=REASONS, help="only rows whose last reply has this reason (docs/guide/bounces.md)"
    )
    which.add_argument(
        "--reply",
        metavar="PATTERN",
        type=reply_pattern,
        help="only rows whose last reply matches this regular expression, ignoring case",
    )
    retry.set_defaults(func=commands.lazy("service.cli.campaigns", "retry_command"))
    listing = campaign.add_parser("list", help="campaigns, newest first")
    listing.add_argument("--status", choices=STATUSES, help="only campaigns in this status")
    listing.set_defaults(func=commands.campaign_list)
    preview = campaign.add_parser("preview", help="the exact message one subscriber would get")
    preview.add_argument("id", type=int, help="the campaign's id")
    preview.add_argument("--subscriber", metavar="EMAIL", help="whose message (default: the first on its lists)")
    preview.add_argument("--out", metavar="FILE.eml", help="write the message's bytes there instead of stdout")
    preview.add_argument(
        "--raw", action="store_true", help="print the message as it goes on the wire (quoted-printable), not decoded"
    )
    preview.set_defaults(func=commands.campaign_preview)
    test = campaign.add_parser("test", help="send one message through the relay, outside the campaign")
    test.add_argument("id", type=int, help="the campaign's id")
    test.add_argument("--to", required=True, metavar="ADDR", help="the mailbox that gets the test message")
    test.add_argument("--subscriber", metavar="EMAIL", help="whose message (default: the first on its lists)")
    test.add_argument(
        "--subject-prefix", default="[TEST] ", metavar="TEXT", help="put before the subject (default: '[TEST] ')"
    )
    test.set_defaults(func=commands.campaign_test)

    suppress = sub.add_parser("suppress", help="suppress addresses for an account")
    suppress.add_argument("--account", required=True, help="the account the addresses are suppressed for")
    suppress.add_argument("--reason", default="manual", help="recorded with each suppression (default: manual)")
    suppress.add_argument("emails", nargs="+", metavar="EMAIL", help="the addresses")
    suppress.set_defaults(func=commands.suppress)

    suppressions = sub.add_parser("suppressions", help="list or remove suppressions").add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser
    )
    p = suppressions.add_parser("list", help="an account's suppressed addresses, reasons and times")
    p.add_argument("--account", required=True, help="whose suppressions")
    p.set_defaults(func=commands.lazy("service.cli.subscribers_cmd", "suppressions_list_command"))
    p = suppressions.add_parser("remove", help="mail these addresses again (running nodes: after a restart)")
    p.add_argument("--account", required=True, help="whose suppressions")
    p.add_argument("emails", nargs="+", metavar="EMAIL", help="the addresses")
    p.set_defaults(func=commands.lazy("service.cli.subscribers_cmd", "suppressions_remove_command"))
    p = suppressions.add_parser(
        "review", help="bounce suppressions that today's reasons would not make; --lift deletes them"
    )
    p.add_argument("--account", required=True, help="whose suppressions")
    p.add_argument("--lift", action="store_true", help="delete the ones listed (without it: only list them)")
    p.set_defaults(func=commands.lazy("service.cli.subscribers_cmd", "suppressions_review_command"))

    prune = sub.add_parser(
        "prune", help="remove the send rows of campaigns finished long ago; their counts, bounces and suppressions stay"
    )
    prune.add_argument(
        "--older-than",
        type=days,
        metavar="DAYS",
        help="campaigns sent or cancelled more than DAYS days ago (default: EINMAL_RETENTION_DAYS)",
    )
    prune.add_argument("--campaign", type=int, metavar="ID", help="only this campaign (finished: any age)")
    prune.add_argument("--dry-run", action="store_true", help="list what would be pruned, remove nothing")
    prune.set_defaults(func=commands.lazy("service.cli.prune", "prune_command"))

    reconcile = sub.add_parser("reconcile", help="list or decide a campaign's in-doubt rows")
    reconcile.add_argument("id", type=int, help="the campaign's id")
    decide = reconcile.add_mutually_exclusive_group()
    decide.add_argument("--resend", action="store_true", help="queue them again (same Message-ID)")
    decide.add_argument("--mark-sent", action="store_true", help="record them as sent")
    reconcile.add_argument(
        "--id",
        dest="ids",
        type=int,
        action="append",
        metavar="N",
        help="only the in-doubt row with this id (as listed); repeatable",
    )
    reconcile.add_argument(
        "--address",
        dest="addresses",
        action="append",
        metavar="EMAIL",
        help="only the in-doubt row of this address (any spelling of it); repeatable",
    )
    reconcile.set_defaults(func=commands.reconcile)

    p = key.add_parser("create", help="a new key; printed once, alone on stdout")
    p.add_argument("--account", required=True, help="the account the key acts for, and only it")
    p.add_argument("--scope", choices=("read", "write"), default="write", help="read: GET only (default write)")
    p.add_argument("--name", default="", help="what the key is for, shown by `key list`")
    p.set_defaults(func=commands.lazy("service.cli.keys", "create_command"))
    p = key.add_parser("list", help="an account's keys: prefix, scope, name, created, last used, revoked")
    p.add_argument("--account", required=True, help="whose keys")
    p.set_defaults(func=commands.lazy("service.cli.keys", "list_command"))
    p = key.add_parser("revoke", help="refuse a key from now on")
    p.add_argument("--account", required=True, help="whose key")
    p.add_argument("id", type=int, help="the key's id (`key list`)")
    p.set_defaults(func=commands.lazy("service.cli.keys", "revoke_command"))
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
        print(f"einmal: {exc}", file=sys.stderr)
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
