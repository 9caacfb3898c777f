"""The command line: `einmal …`, also `python -m service`.

Every command is a coroutine taking (args, settings) and returning an exit
code. Errors are translated here, once: an EinmalError becomes one line on
stderr and its exit code; nothing else prints a traceback to a person.
"""

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version

import anyio
import asyncpg

from service import settings as settings_module
from service.cli import (
    accounts,
    campaigns,
    demo,
    lists_cmd,
    prune,
    reconcile,
    server,
    subscribers_cmd,
    suppressions_cmd,
)
from service.errors import EinmalError, leaves


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        self.exit(2, f"{self.prog}: {message}\n")


# the environment variables `einmal run` reads, for its --help (all of them: README.md)
RUN_VARIABLES = """environment (see README.md and config/einmal.env.example for every variable):
  EINMAL_DATABASE_URL (or DATABASE_URL)   PostgreSQL; unset: the embedded one
  EINMAL_DATABASE_POOLER, EINMAL_LISTEN_DATABASE_URL   none | session | transaction (PgBouncer), LISTEN's URL
  EINMAL_SMTP_HOST, EINMAL_SMTP_PORT       the relay every message goes to
  EINMAL_SMTP_TLS, EINMAL_SMTP_TLS_CA_FILE none | starttls | tls, and the CAs to check it with
  EINMAL_SMTP_USERNAME, EINMAL_SMTP_PASSWORD   SMTP AUTH
  EINMAL_SMTP_URLS                         several relays with weights and failover (instead)
  EINMAL_SMTP_CONNECTIONS, EINMAL_SMTP_TIMEOUT_SECONDS
  EINMAL_RATE_LIMIT, EINMAL_QUOTA_HOUR, EINMAL_QUOTA_DAY   limits for all nodes together
  EINMAL_QUOTA_HOUR_SECONDS, EINMAL_QUOTA_DAY_SECONDS      the quotas' windows (for tests)
  EINMAL_DOMAIN_LIMITS                     per-domain rate and connections: gmail.com=20/s,5conn;…
  EINMAL_DOMAIN_PAUSE_SECONDS, EINMAL_DOMAIN_PAUSE_MAX_SECONDS, EINMAL_DOMAIN_PROBES   421/4.7.x pauses
  EINMAL_BATCH_SIZE, EINMAL_TICK_SECONDS, EINMAL_NODE_TIMEOUT_SECONDS, EINMAL_NODE_ID
  EINMAL_IN_DOUBT                          hold | resend: rows a dead node left unanswered
  EINMAL_MAX_ATTEMPTS, EINMAL_RETRY_BASE_SECONDS, EINMAL_RETRY_MAX_SECONDS
  EINMAL_MESSAGE_ID_DOMAIN, EINMAL_UNSUBSCRIBE_URL, EINMAL_UNSUBSCRIBE_SECRET
  EINMAL_UNSUBSCRIBE_MAILTO                mailto: form of List-Unsubscribe
  EINMAL_CONFIRM_URL, EINMAL_OPTIN_FROM    double opt-in: the confirmation page, the messages' From
  EINMAL_OPTIN_WINDOW_HOURS, EINMAL_OPTIN_ADDRESS_LIMIT, EINMAL_OPTIN_CLIENT_LIMIT   its window and flood bounds
  EINMAL_OPTIN_LIST_LIMIT                  new confirmation messages of one list in an hour
  EINMAL_DKIM_DOMAIN, EINMAL_DKIM_SELECTOR, EINMAL_DKIM_PRIVATE_KEY_FILE   DKIM signing
  EINMAL_SHUTDOWN_GRACE_SECONDS, EINMAL_RESTART_INTENSITY, EINMAL_RESTART_PERIOD_SECONDS
  EINMAL_DB_TIMEOUT_SECONDS                longest wait for one database statement
  EINMAL_DB_WAIT_SECONDS                   longest wait at start for the database (unset: no end; 0: none)
  EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION   true: claim nothing while standbys exist but none is synchronous
  EINMAL_JOURNAL_SECONDS, EINMAL_JOURNAL_SIZE   the answers kept to write again after a failover
  EINMAL_HTTP_ADDRESS                      host:port of the HTTP surface (unsubscribe, health, metrics)
  EINMAL_HTTP_HEADER_TIMEOUT_SECONDS, EINMAL_HTTP_BODY_TIMEOUT_SECONDS   a request's deadlines
  EINMAL_HTTP_MAX_CONNECTIONS, EINMAL_HTTP_BODY_BUFFER_BYTES   HTTP connections, and body bytes held, at once
  EINMAL_HTTP_CLIENT_CONNECTIONS, EINMAL_HTTP_CLIENT_BODY_BYTES   the same, one client network's share
  EINMAL_RETURN_PATH, EINMAL_RETURN_PATH_SECRET   VERP envelope senders bounces+<token>@domain, and their keys
  EINMAL_INBOUND_SMTP_ADDRESS              host:port of the listener for bounces and complaints
  EINMAL_INBOUND_PROTOCOL, EINMAL_INBOUND_MAX_BYTES, EINMAL_INBOUND_TIMEOUT_SECONDS
  EINMAL_SOFT_BOUNCE_LIMIT, EINMAL_SOFT_BOUNCE_DAYS   soft bounces within the days that suppress
  EINMAL_PAUSE_COMPLAINT_RATE, EINMAL_PAUSE_HARD_BOUNCE_RATE, EINMAL_PAUSE_POLICY_REJECTION_RATE,
  EINMAL_PAUSE_MIN_SAMPLE   a campaign pauses itself when a rate (per cent) passes its threshold
  EINMAL_RETENTION_DAYS                    prune campaigns finished this many days ago (unset: never)
  EINMAL_SES_CERTIFICATE_FILE, EINMAL_SES_TOPIC_ARN   POST /inbound/ses: SNS's signing certificate, the topics
  EINMAL_POSTMARK_WEBHOOK_SECRET           POST /inbound/postmark: user:password of its basic auth
  EINMAL_MAILGUN_WEBHOOK_SIGNING_KEY       POST /inbound/mailgun: the webhook signing key
  EINMAL_WEBHOOK_ACCOUNTS_FILE             TOML: each account's own SNS topics, Postmark and Mailgun secrets
  EINMAL_LOG_LEVEL                         DEBUG | INFO | WARNING | ERROR
  EINMAL_LOG_FORMAT                        text | json
  OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME"""


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
    lists_cmd.register(sub)
    campaigns.register(sub)
    suppressions_cmd.register(sub)
    prune.register(sub)
    reconcile.register(sub)
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
