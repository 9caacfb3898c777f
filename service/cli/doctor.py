"""`einmal doctor [--account A] [--domain D] [--json]`: what the large mailbox providers require of a bulk
sender, checked from DNS (service/accounts/doctor.py). Exit 0 when nothing fails, 1 when a check fails or could
not be checked (DNS did not answer), 2 on bad input. It names the DNS servers it asked: EINMAL_DNS_SERVERS, else
the system's resolvers. Without --account it checks the installation's environment settings, without a
database; with one at hand it also notes what the From rule leaves open: several accounts that may send from
any domain, domains given to two accounts."""

import argparse
import json
from contextlib import suppress

from service import db
from service.accounts import account, doctor
from service.accounts.identity import Identity
from service.errors import ArgumentError, DatabaseUnavailable, NotFound
from service.mail import from_rule
from service.settings import Settings


async def doctor_command(args: argparse.Namespace, settings: Settings) -> int:
    notes: list[str] = []  # the installation's From rule (service/mail/from_rule.py), where its database is at hand
    sender = None  # the From domain of the account's newest campaign
    checkup = doctor.Checkup.of(settings)
    if args.account is None:
        identity = Identity(account_id=0)
        if settings.database_url is not None:
            with suppress(DatabaseUnavailable):
                async with db.connection(settings.database_url) as conn:
                    notes = await from_rule.installation_warnings(conn, mailing=checkup.mailing)
    else:
        async with db.connection(db.url(settings)) as conn:
            try:
                account_id = await account.find_account(conn, name=args.account)
            except NotFound as exc:
                raise ArgumentError(str(exc)) from None
            identity = await doctor.identity_of(conn, account_id=account_id)
            sender = await doctor.newest_sender(conn, identity)
            notes = await from_rule.installation_warnings(conn, mailing=checkup.mailing)
    report = await doctor.examine(identity, checkup, domain=args.domain, sender=sender)
    if args.json:
        # the installation's notes only when there are some: otherwise the same object as GET /api/v1/doctor
        print(json.dumps({**report.as_json(), **({"installation": notes} if notes else {})}, indent=2))
    else:
        asked = "EINMAL_DNS_SERVERS" if settings.dns_servers else "the system's resolvers"
        print("\n".join([text(report, args.account, asked), *(f"note: {n}" for n in notes)]))
    return 1 if report.failing() or report.unchecked() else 0


def text(report: doctor.Report, account_name: str | None = None, asked: str = "EINMAL_DNS_SERVERS") -> str:
    """The DNS servers asked (`asked`: where they were named), then the findings, numbered, each failing or
    warning one with what was found, expected, and the fix."""
    whose = f"account {account_name}, " if account_name else ""
    lines = [f"einmal doctor: {whose}mail from {report.domain}"]
    lines.append(f"DNS servers asked: {', '.join(report.dns_servers) or 'none'} ({asked})")
    width = max((len(f.severity) for f in report.findings), default=4)  # 9 where a check is unchecked
    for f in report.findings:
        lines.append(f"{f.number:>3}  {f.severity:<{width}}  {f.title}")
        if f.severity != "ok":
            for label, value in (("found", f.found), ("expected", f.expected), ("fix", f.fix)):
                if value:
                    lines.append(f"{'':>9}{label + ':':<10}{value}")
    failing, unchecked = report.failing(), report.unchecked()
    if unchecked:
        checks = ", ".join(str(n) for n in unchecked)
        lines.append(f"{len(unchecked)} check{'s' * (len(unchecked) != 1)} could not be checked: {checks}")
    if failing:
        checks = ", ".join(str(n) for n in failing)
        lines.append(f"{len(failing)} check{'s' * (len(failing) != 1)} fail{'s' * (len(failing) == 1)}: {checks}")
    elif not unchecked:
        lines.append("no check fails")
    return "\n".join(lines)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check from DNS what mailbox providers require of a bulk sender: DKIM, SPF, DMARC, bounces",
        description="Check from DNS what mailbox providers require of a bulk sender: DKIM, SPF, DMARC, bounces.",
        epilog=(
            "DNS: the servers of EINMAL_DNS_SERVERS (comma-separated host:port, e.g. 127.0.0.1:5353), else the "
            "system's resolvers (/etc/resolv.conf); the output names those asked. Exit 0 when no check fails, 1 "
            "when one fails or DNS did not answer, 2 on bad input."
        ),
    )
    p.add_argument("--account", help="the account whose sender identity to check (default: the environment's)")
    p.add_argument(
        "--domain",
        help="the From domain to check (default: the account's first, else EINMAL_DKIM_DOMAIN, else its newest "
        "campaign's From)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object instead of numbered lines")
    p.set_defaults(func=doctor_command)
