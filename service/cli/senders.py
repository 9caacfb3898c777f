"""An account's sender identity and the installation's relays (docs/guide/accounts-identity.md):

    einmal account domain add|remove|list --account A [DOMAIN]
    einmal account dkim generate --account A --domain D --selector S [--algorithm rsa|ed25519] [--bits N]
    einmal account dkim import --account A --domain D --selector S --key-file PEM
    einmal account dkim remove --account A --domain D --selector S
    einmal account identity show --account A
    einmal account identity set --account A [--return-path …] [--return-path-secret-file F]
                                            [--unsubscribe-mailto …]
    einmal account relay attach|detach --account A RELAY [--weight N]
    einmal relay add NAME --url URL|- [--rate N/s] [--quota-hour N] [--quota-day N]
    einmal relay list | remove NAME

The service is service/accounts/senders.py's and shared_relays.py's. A DKIM key is never printed: generate
and import print the TXT record to publish, as a zone file line. A relay URL is printed masked; `--url -`
reads it from stdin, out of the process list and the shell's history."""

import argparse
import sys

from service import db
from service.accounts import senders, shared_relays
from service.accounts.account import find_account
from service.cli.tables import aligned
from service.errors import ArgumentError
from service.settings import Settings
from service.text import shown

MAX_FILE = 64 * 1024


def zone_line(published: senders.Published) -> str:
    """The record as a zone file has it: strings of at most 255 characters, which DNS joins."""
    record = published.record
    strings = " ".join(f'"{record[i : i + 255]}"' for i in range(0, len(record), 255))
    return f"{published.name}. IN TXT {strings}"


def read_file(path: str, option: str) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE + 1)
    except FileNotFoundError:
        raise ArgumentError(f"{option} {path}: no such file") from None
    except OSError as exc:
        raise ArgumentError(f"{option} {path}: {exc.strerror or 'cannot be read'}") from None
    if len(data) > MAX_FILE:
        raise ArgumentError(f"{option} {path}: larger than {MAX_FILE} bytes")
    return data


async def domain_command(args: argparse.Namespace, settings: Settings) -> int:
    domain = senders.checked_domain(args.domain, "domain") if args.verb != "list" else ""
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        if args.verb == "add":
            added = await senders.add_domain(conn, account_id=account_id, domain=domain)
            print(f"account {shown(args.account)} {'may now' if added else 'already may'} send from {domain}")
        elif args.verb == "remove":
            await senders.remove_domain(conn, account_id=account_id, domain=domain)
            left = await senders.domains(conn, account_id=account_id)
            print(f"account {shown(args.account)} no longer sends from {domain}")
            if not left:
                print(
                    f"einmal: account {shown(args.account)} has no From domain left: any From is allowed",
                    file=sys.stderr,
                )
        else:
            found = await senders.domains(conn, account_id=account_id)
            rows = [(d.domain, " ".join(k.selector for k in d.keys)) for d in found]
            for line in aligned(("domain", "dkim selectors"), rows) if rows else ():
                print(line)
    return 0


async def dkim_command(args: argparse.Namespace, settings: Settings) -> int:
    domain = senders.checked_domain(args.domain, "--domain")
    selector = senders.checked_selector(args.selector)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        if args.verb == "remove":
            await senders.remove_key(conn, account_id=account_id, domain=domain, selector=selector)
            print(f"{domain}: the key of selector {selector} removed; unpublish {selector}._domainkey.{domain}")
            return 0
        if args.verb == "generate":
            pem = senders.generated_key(args.algorithm, args.bits)
        else:
            pem = senders.imported_key(read_file(args.key_file, "--key-file"))
        [published] = await senders.set_keys(conn, account_id=account_id, domain=domain, keys={selector: pem})
    print(zone_line(published))
    print(f"einmal: publish this TXT record at {published.name}; mail from {domain} is signed with it", file=sys.stderr)
    return 0


async def show_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        found = await senders.show(conn, account_id=await find_account(conn, name=args.account))
    print(f"account {shown(args.account)}")
    for d in found.domains:
        print(f"domain {d.domain}")
        for key in d.keys:
            print(f"  dkim {key.selector}: {zone_line(key)}")
    if not found.domains:
        print("domains: none (any From; the DKIM variables sign)")
    for r in found.relays:
        limits = [f"{r.rate:g}/s" if r.rate else "", f"{r.quota_hour}/h" if r.quota_hour else ""]
        limits.append(f"{r.quota_day}/day" if r.quota_day else "")
        said = " ".join(x for x in limits if x) or "no limits"
        print(f"relay {r.name} weight {r.weight}: {shared_relays.masked(r.url)} ({said})")
    if not found.relays:
        print("relays: none (EINMAL_SMTP_URLS)")
    secret = "set" if found.return_path_secret_set else "not set"
    print(f"return path: {found.return_path or '- (EINMAL_RETURN_PATH)'}; its secret {secret}")
    print(f"unsubscribe mailto: {found.unsubscribe_mailto or '- (EINMAL_UNSUBSCRIBE_MAILTO)'}")
    return 0


async def set_command(args: argparse.Namespace, settings: Settings) -> int:
    given: dict[str, str | None] = {}
    if args.return_path is not None:
        given["return_path"] = senders.checked_return_path(args.return_path) if args.return_path.strip() else None
    if args.return_path_secret_file is not None:
        data = read_file(args.return_path_secret_file, "--return-path-secret-file")
        try:
            given["return_path_secret"] = senders.checked_secret(data.decode())
        except UnicodeDecodeError:
            raise ArgumentError("--return-path-secret-file: not UTF-8 text") from None
    if args.unsubscribe_mailto is not None:
        mailto = args.unsubscribe_mailto
        given["unsubscribe_mailto"] = senders.checked_mailto(mailto) if mailto.strip() else None
    if not given:
        raise ArgumentError("nothing to set: give --return-path, --return-path-secret-file or --unsubscribe-mailto")
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        await senders.set_identity(conn, account_id=account_id, given=set(given), **given)
    return await show_command(args, settings)


async def attach_command(args: argparse.Namespace, settings: Settings) -> int:
    name = shared_relays.checked_name(args.relay)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        if args.verb == "attach":
            await shared_relays.attach(conn, account_id=account_id, name=name, weight=args.weight)
            print(f"account {shown(args.account)} sends through relay {name}, weight {args.weight}")
        else:
            await shared_relays.detach(conn, account_id=account_id, name=name)
            print(f"account {shown(args.account)} no longer sends through relay {name}")
    return 0


async def relay_add_command(args: argparse.Namespace, settings: Settings) -> int:
    name = shared_relays.checked_name(args.name)
    url = sys.stdin.readline() if args.url == "-" else args.url
    url = shared_relays.checked_url(url)
    rate = shared_relays.checked_rate(args.rate) if args.rate is not None else None
    hour = shared_relays.checked_quota(args.quota_hour, "quota_hour")
    day = shared_relays.checked_quota(args.quota_day, "quota_day")
    async with db.connection(db.url(settings)) as conn:
        await shared_relays.add(conn, name=name, url=url, rate=rate, quota_hour=hour, quota_day=day)
    print(f"relay {name}: {shared_relays.masked(url)}")
    return 0


async def relay_list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        found = await shared_relays.every(conn)
    rows = [
        (r.name, r.url, f"{r.rate:g}/s" if r.rate else "", r.quota_hour or "", r.quota_day or "", r.accounts)
        for r in found
    ]
    for line in aligned(("name", "url", "rate", "quota/hour", "quota/day", "accounts"), rows) if rows else ():
        print(line)
    return 0


async def relay_remove_command(args: argparse.Namespace, settings: Settings) -> int:
    name = shared_relays.checked_name(args.name)
    async with db.connection(db.url(settings)) as conn:
        await shared_relays.remove(conn, name=name)
    print(f"relay {name} removed")
    return 0


def _accounts_verbs(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The verbs of `einmal account` (service/cli/accounts.py), to add ours to."""
    parser = subparsers.choices["accounts"]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def register(subparsers: argparse._SubParsersAction) -> None:
    account = _accounts_verbs(subparsers)
    domain = account.add_parser("domain", help="the From domains it may use (none: any)")
    domain = domain.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, text in (("add", "allow a From domain"), ("remove", "remove a From domain and its keys")):
        p = domain.add_parser(verb, help=text)
        p.add_argument("--account", required=True, help="the account's name")
        p.add_argument("domain", help="e.g. news.example.org; exactly this domain, not its subdomains")
        p.set_defaults(func=domain_command)
    p = domain.add_parser("list", help="its From domains and their DKIM selectors")
    p.add_argument("--account", required=True, help="the account's name")
    p.set_defaults(func=domain_command)

    dkim = account.add_parser("dkim", help="a From domain's DKIM keys: generate, import, remove")
    dkim = dkim.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, text in (
        ("generate", "a new key for a selector; prints the TXT record to publish"),
        ("import", "a PEM key for a selector (RSA >= 2048 bits or Ed25519); prints the TXT record"),
        ("remove", "the key of a selector"),
    ):
        p = dkim.add_parser(verb, help=text)
        p.add_argument("--account", required=True, help="the account's name")
        p.add_argument("--domain", required=True, help="one of the account's domains")
        p.add_argument("--selector", required=True, help="e.g. s2027: the key's DNS name is SELECTOR._domainkey.DOMAIN")
        if verb == "generate":
            p.add_argument("--algorithm", choices=senders.ALGORITHMS, default="rsa", help="default rsa")
            p.add_argument("--bits", type=int, default=senders.MIN_RSA_BITS, help="an RSA key's size (2048 to 4096)")
        if verb == "import":
            p.add_argument("--key-file", required=True, help="an unencrypted PEM private key")
        p.set_defaults(func=dkim_command)

    ident = account.add_parser("identity", help="its domains, keys, relays, return path, unsubscribe mailto")
    ident = ident.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = ident.add_parser("show", help="every part, the DKIM records to publish; never a secret")
    p.add_argument("--account", required=True, help="the account's name")
    p.set_defaults(func=show_command)
    p = ident.add_parser("set", help="its return path and unsubscribe mailto ('' clears; unset: the environment's)")
    p.add_argument("--account", required=True, help="the account's name")
    p.add_argument("--return-path", help="e.g. bounces@news.example.org: of one of its domains or a subdomain")
    p.add_argument(
        "--return-path-secret-file", help="a file with the VERP key (16 characters or more); default: generated"
    )
    p.add_argument("--unsubscribe-mailto", help="an address for List-Unsubscribe's mailto")
    p.set_defaults(func=set_command)

    relay = account.add_parser("relay", help="the relays it sends through (`einmal relay add` makes them)")
    relay = relay.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, text in (("attach", "send through a relay, or change its weight"), ("detach", "no longer")):
        p = relay.add_parser(verb, help=text)
        p.add_argument("--account", required=True, help="the account's name")
        p.add_argument("relay", help="the relay's name")
        if verb == "attach":
            p.add_argument("--weight", type=int, default=1, help="its share among the account's relays (1 to 1000)")
        p.set_defaults(func=attach_command)

    relays = subparsers.add_parser("relay", aliases=["relays"], help="the installation's relays, for accounts")
    relays = relays.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = relays.add_parser("add", help="a relay accounts may send through")
    p.add_argument("name", help="its name, e.g. ses-eu")
    p.add_argument(
        "--url",
        required=True,
        help="as in EINMAL_SMTP_URLS, e.g. smtp://user:pass@host:587?tls=starttls; - reads it from stdin",
    )
    p.add_argument("--rate", help="messages a second for all accounts and nodes, e.g. 14/s")
    p.add_argument("--quota-hour", type=int, help="messages an hour, all accounts and nodes together")
    p.add_argument("--quota-day", type=int, help="messages a day, all accounts and nodes together")
    p.set_defaults(func=relay_add_command)
    relays.add_parser("list", help="every relay, its URL without password, limits and accounts").set_defaults(
        func=relay_list_command
    )
    p = relays.add_parser("remove", help="a relay no account sends through")
    p.add_argument("name", help="its name")
    p.set_defaults(func=relay_remove_command)
