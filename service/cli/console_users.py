"""`einmal console user add|list|remove|password`: who may enter the operator's console (service/users/).

A password is never an argument (it would stay in the shell's history and the process list): it is read
from a prompt on a terminal (twice), else from the first line of stdin; or `--generate` makes one and
prints it once, alone on stdout. Each change is a line of the audit log, whose actor is `cli`."""

import argparse
import getpass
import sys

from service import db
from service.cli.tables import aligned
from service.errors import ArgumentError
from service.settings import Settings
from service.users import passwords, users
from service.users.sessions import Limits

ACTOR = "cli"


def read_password(generate: bool) -> str:
    """The new password: generated, prompted for on a terminal (twice), else stdin's first line."""
    if generate:
        return passwords.generated()
    if sys.stdin.isatty():
        given = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != given:
            raise ArgumentError("the two passwords differ")
        return passwords.checked(given)
    return passwords.checked(sys.stdin.readline().removesuffix("\n").removesuffix("\r"))


def _said(generate: bool, password: str, done: str) -> None:
    if generate:
        print(password)  # alone on stdout, once: `PASSWORD=$(einmal console user add … --generate)`
        print(done, file=sys.stderr)
    else:
        print(done)


async def add_command(args: argparse.Namespace, settings: Settings) -> int:
    users.checked_name(args.name)
    password = read_password(args.generate)
    async with db.connection(db.url(settings)) as conn:
        await users.add(conn, name=args.name, account=args.account, password=password, actor=ACTOR)
    role = f"member of account {args.account}" if args.account else "operator"
    _said(args.generate, password, f"added console user {args.name} ({role})")
    return 0


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    limits = Limits(settings.console_session_idle_seconds, settings.console_session_lifetime_seconds)
    async with db.connection(db.url(settings)) as conn:
        found = await users.listed(conn, limits=limits)
    rows = [(u.name, u.role, u.account or "", u.created_at.isoformat(timespec="seconds"), u.sessions) for u in found]
    for line in aligned(("name", "role", "account", "created", "sessions"), rows):
        print(line)
    return 0


async def remove_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        await users.remove(conn, name=args.name, actor=ACTOR)
    print(f"removed console user {args.name}; its sessions ended")
    return 0


async def password_command(args: argparse.Namespace, settings: Settings) -> int:
    password = read_password(args.generate)
    async with db.connection(db.url(settings)) as conn:
        await users.change_password(conn, name=args.name, password=password, actor=ACTOR)
    _said(args.generate, password, f"changed the password of console user {args.name}; its sessions ended")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    console = subparsers.add_parser("console", help="the operator's console: who may enter it")
    groups = console.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    user = groups.add_parser("user", help="console users: operators (every account) and members (one account)")
    verbs = user.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("add", help="a new user; its password from a prompt or stdin, or --generate")
    p.add_argument("name", metavar="NAME", help="an email address or a name")
    role = p.add_mutually_exclusive_group(required=True)
    role.add_argument("--operator", action="store_true", help="sees and changes every account")
    role.add_argument("--account", help="a member of this account: sees it alone")
    p.add_argument("--generate", action="store_true", help="make a password and print it once, alone on stdout")
    p.set_defaults(func=add_command)
    verbs.add_parser("list", help="every user: role, account, sessions open now").set_defaults(func=list_command)
    p = verbs.add_parser("remove", help="remove a user; its sessions end")
    p.add_argument("name", metavar="NAME", help="the user's name (any case)")
    p.set_defaults(func=remove_command)
    p = verbs.add_parser("password", help="a new password (prompt, stdin or --generate); the user's sessions end")
    p.add_argument("name", metavar="NAME", help="the user's name (any case)")
    p.add_argument("--generate", action="store_true", help="make a password and print it once, alone on stdout")
    p.set_defaults(func=password_command)
