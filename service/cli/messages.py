"""`einmal message send|show` and `einmal message template add|list|remove`: transactional messages
(service/messages/messages.py, docs/design.md#messages)."""

import argparse
import json
from dataclasses import asdict

from service import db
from service.accounts.account import find_account
from service.cli import campaign_stats
from service.cli.tables import aligned
from service.engagement import counts
from service.errors import ArgumentError
from service.mail.mailing import Mailing
from service.messages import messages
from service.settings import Settings
from service.text import shown


def _data(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ArgumentError(f"--data: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ArgumentError("--data: a JSON object is needed")
    return value


async def send_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        made = await messages.send(
            conn,
            queueing=messages.Queueing.of(settings),
            account_id=account_id,
            to=args.to,
            template_name=args.template,
            subject=args.subject,
            body_text=args.text,
            body_html=args.html,
            from_address=args.from_address,
            data=_data(args.data),
            honour_unsubscribe=args.honour_unsubscribe,
            idempotency_key=args.idempotency_key,
        )
    print(made.id)  # the id alone on stdout: `ID=$(einmal message send …)`
    return 0


async def show_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        m = await messages.show(conn, account_id=account_id, message_id=args.id)
    print(f"message {m.id}: {m.state}")
    print(f"to: {m.email}\nsubject: {m.subject}\nfrom: {m.from_address}\ntemplate: {m.template or '-'}")
    print(f"attempts: {m.attempts}\nlast reply: {m.last_reply or '-'}")
    print(f"created: {m.created_at.isoformat(timespec='seconds')}")
    print(f"sent: {m.sent_at.isoformat(timespec='seconds') if m.sent_at else '-'}")
    for bounce in m.bounces:
        print(f"bounce: {bounce}")
    return 0


async def template_add_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        _, created = await messages.put_template(
            conn,
            mailing=Mailing.of(settings),
            account_id=account_id,
            name=args.name,
            subject=args.subject,
            body_text=args.text,
            body_html=args.html,
            from_address=args.from_address,
        )
    print(f"{'added' if created else 'replaced'} template {args.name}")
    return 0


async def template_list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        found = await messages.templates(conn, account_id=account_id)
    table = [(t.name, t.subject, t.from_address or "", t.updated_at.isoformat(timespec="seconds")) for t in found]
    for line in aligned(("name", "subject", "from", "changed"), table):
        print(line)
    return 0


async def template_remove_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        await messages.remove_template(conn, account_id=account_id, name=args.name)
    print(f"removed template {args.name}")
    return 0


async def template_stats_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        found = await counts.of_template(conn, account_id=account_id, name=args.name)
    if args.json:
        print(json.dumps(asdict(found)))
    else:
        print(f"template {shown(found.template)}: {campaign_stats.figures(found)}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("message", help="transactional messages: one-off, exactly once, ahead of bulk")
    commands = group.add_subparsers(dest="message_command", required=True)

    send = commands.add_parser("send", help="queue one message; prints its id")
    send.add_argument("--account", required=True, help="the account that sends it")
    send.add_argument("--to", required=True, help="the recipient's address")
    send.add_argument("--template", help="one of the account's templates")
    send.add_argument("--subject", help="without --template: the subject")
    send.add_argument("--text", help="without --template: the text body")
    send.add_argument("--html", help="without --template: an HTML body")
    send.add_argument("--from", dest="from_address", help="the From (else the template's)")
    send.add_argument("--data", default="{}", help="a JSON object merged over the subscriber's attributes")
    send.add_argument(
        "--honour-unsubscribe", action="store_true", help="an address unsubscribed from the lists gets none either"
    )
    send.add_argument("--idempotency-key", help="a retry with the same key makes nothing new")
    send.set_defaults(func=send_command)

    show = commands.add_parser("show", help="a message's state")
    show.add_argument("--account", required=True, help="the message's account")
    show.add_argument("id", type=int, help="the id `message send` printed")
    show.set_defaults(func=show_command)

    template = commands.add_parser("template", help="the account's message templates")
    templates = template.add_subparsers(dest="template_command", required=True)
    add = templates.add_parser("add", help="add or replace a template (queued messages keep their copy)")
    add.add_argument("--account", required=True, help="the template's account")
    add.add_argument("name", help="its name, unique in the account")
    add.add_argument("--subject", required=True, help="the subject (a template)")
    add.add_argument("--text", required=True, help="the text body (a template)")
    add.add_argument("--html", help="an HTML body (a template)")
    add.add_argument("--from", dest="from_address", help="the From of its messages (else each one's)")
    add.set_defaults(func=template_add_command)
    listed = templates.add_parser("list", help="the account's templates")
    listed.add_argument("--account", required=True, help="whose templates")
    listed.set_defaults(func=template_list_command)
    remove = templates.add_parser("remove", help="remove a template (messages made from it keep their copy)")
    remove.add_argument("--account", required=True, help="the template's account")
    remove.add_argument("name", help="the template to remove")
    remove.set_defaults(func=template_remove_command)
    stats = templates.add_parser(
        "stats", help="the engagement of its messages: delivered, bounced, complained, unsubscribed"
    )
    stats.add_argument("--account", required=True, help="the template's account")
    stats.add_argument("name", help="the template's name (its messages are counted while it had it)")
    stats.add_argument("--json", action="store_true", help="one JSON object instead of a line")
    stats.set_defaults(func=template_stats_command)
