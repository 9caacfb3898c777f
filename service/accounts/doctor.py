"""`einmal doctor` and GET /api/v1/doctor (docs/operations/doctor.md): what the large mailbox providers require
of a bulk sender (Gmail and Yahoo since 2024, Outlook.com since May 2025), checked from DNS against what only
einmal knows — its DKIM keys, its relays, its return path — for an account's From domain. Each finding is
numbered in the order checked, with its severity (fail: providers reject or junk the mail; warn: worth a
look; ok), the record found, the record expected and the fix (the records' checks:
service/accounts/doctor_records.py).

For an account (the API and approve: `checked`) the doctor cannot hurt another one (docs/design.md#doctor):
no connection is held while DNS is asked (`connect` gives one for each step); the domain is one of the
account's own (`domains_of`); what DNS said is kept in einmal.doctor_reports for EINMAL_DOCTOR_CACHE_SECONDS,
read by every node and process (not a run where DNS did not answer); and the runs that ask DNS are bounded per
account: IN_FLIGHT at a time in a process, RUNS_PER_WINDOW per WINDOW_SECONDS on all nodes (Busy, 429).
Each run takes at most RUN_SECONDS, however many names time out."""

import contextlib
import hashlib
import ipaddress
import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from email.utils import parseaddr
from typing import Any

import anyio
import asyncpg
import dns.asyncresolver
import idna
from cryptography.hazmat.primitives import serialization

from service import clients, db, relays
from service.accounts import dns_checks
from service.accounts import doctor_records as records
from service.accounts.dns_checks import Lookup
from service.accounts.doctor_records import Finding
from service.accounts.identity import Identity, of_account
from service.errors import ArgumentError, Busy, EinmalError
from service.mail import dkim
from service.mail.mailing import Mailing
from service.settings import Settings

RUN_SECONDS = 30.0  # the whole run, however many names time out
IN_FLIGHT = 2  # runs of one account at a time, in a process
RUNS_PER_WINDOW, WINDOW_SECONDS = 20, 900.0  # runs that ask DNS, of one account, on all nodes together
RUNS_KIND = "doctor-run"  # their count in einmal.client_counts, as `account <id>`
SENDER_ADDRESSES = 1000  # the From addresses of its campaigns an account's domains are taken from

Connect = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


@dataclass(frozen=True)
class Checkup:
    """The doctor's section of the settings, read once from Settings: the identity the mail goes out with
    (Mailing), the relays of an account without its own, the DNS servers asked (EINMAL_DNS_SERVERS as given,
    and parsed) and how long a report is kept (EINMAL_DOCTOR_CACHE_SECONDS)."""

    mailing: Mailing
    relays: tuple[relays.Relay, ...]
    dns_servers: str | None
    dns_server_list: tuple[tuple[str, int], ...]
    cache_seconds: float

    @classmethod
    def of(cls, settings: Settings) -> "Checkup":
        return cls(
            Mailing.of(settings),
            tuple(relays.from_settings(settings)),
            settings.dns_servers,
            settings.dns_server_list,
            settings.doctor_cache_seconds,
        )


@dataclass(frozen=True)
class Report:
    domain: str
    findings: tuple[Finding, ...]
    dns_servers: tuple[str, ...] = ()  # those asked: EINMAL_DNS_SERVERS, else the system's resolvers

    def failing(self, *, skip: tuple[str, ...] = ()) -> list[int]:
        return [f.number for f in self.findings if f.severity == "fail" and f.check not in skip]

    def unchecked(self) -> list[int]:
        """The findings DNS did not answer for: nothing judged, neither failing nor passing."""
        return [f.number for f in self.findings if f.severity == "unchecked"]

    def as_json(self) -> dict[str, Any]:
        ok = not self.failing() and not self.unchecked()
        findings = [asdict(f) for f in self.findings]
        return {"domain": self.domain, "ok": ok, "dns_servers": list(self.dns_servers), "findings": findings}


async def identity_of(conn: asyncpg.Connection, *, account_id: int) -> Identity:
    """The account's sender identity as stored (its empty parts: the environment's settings)."""
    return await of_account(conn, account_id=account_id)


def a_label(domain: str) -> str:
    try:
        return idna.encode(domain.strip().rstrip("."), uts46=True).decode().lower()
    except (idna.IDNAError, UnicodeError):
        raise ArgumentError(f"{domain[:60]!r} is not a domain name") from None


def default_domain(identity: Identity, mailing: Mailing, sender: str | None = None) -> str:
    """The From domain checked when none is named: the account's first (its own, else EINMAL_FROM_DOMAINS'),
    else the installation's DKIM domain, else `sender` (the From domain of its newest campaign), and only
    when it has no From domain at all its return path's domain."""
    if identity.domains:
        return identity.domains[0].domain
    if mailing.default_from_domains:
        return mailing.default_from_domains[0]
    if mailing.dkim_domain:
        return mailing.dkim_domain
    if sender:
        return sender
    if return_path(identity, mailing):
        return return_path(identity, mailing).rpartition("@")[2]  # type: ignore[union-attr]
    raise ArgumentError("no From domain to check: name one (--domain), or set EINMAL_DKIM_DOMAIN")


async def newest_sender(conn: asyncpg.Connection, identity: Identity) -> str | None:
    """The From domain of the account's newest campaign: default_domain's `sender`."""
    rows = await conn.fetch(*db.sql("doctor_sender_domains", account_id=identity.account_id, limit=1))
    return next((parseaddr(row["address"])[1].rpartition("@")[2] or None for row in rows), None)


def return_path(identity: Identity, mailing: Mailing) -> str | None:
    return identity.return_path or mailing.return_path


def signs(identity: Identity, mailing: Mailing) -> bool:
    """Whether the account or the installation signs with DKIM: then approve asks the doctor."""
    return any(d.keys for d in identity.domains) or mailing.dkim_domain is not None


def _keys(identity: Identity, mailing: Mailing, domain: str) -> tuple[str | None, list[tuple[str, object]]]:
    """The DKIM d= of mail from `domain` and its (selector, key or the ConfigError that says why not)."""
    for own in identity.domains:
        if a_label(own.domain) == domain and own.keys:
            return domain, [(s, _pem(pem)) for s, pem in zip(own.selectors, own.keys, strict=False)]
    if mailing.dkim_domain:
        found: list[tuple[str, object]] = []
        for selector, path in zip(mailing.dkim_selectors, mailing.dkim_key_files, strict=True):
            try:
                found.append((selector, dkim.load_key(path)))
            except EinmalError as exc:
                found.append((selector, exc))
        return mailing.dkim_domain, found
    return None, []


def _pem(pem: str) -> object:
    try:
        return serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return EinmalError(f"the account's key is not a readable PEM private key: {type(exc).__name__}")


@dataclass(frozen=True)
class Plan:
    """What a run asks of DNS for mail from `domain` sent as `identity`, and the digest of it (`inputs`): a
    kept report made of other inputs (another key, relay, return path, unsubscribe URL or DNS server) is not
    this one's. `servers`: those `resolver` asks, as a person names them."""

    identity: Identity
    domain: str
    d: str | None
    keys: list[tuple[str, object]]
    envelope: str
    chosen: list[relays.Relay]
    inputs: str
    resolver: dns.asyncresolver.Resolver
    servers: tuple[str, ...]


def plan(identity: Identity, checkup: Checkup, domain: str | None, sender: str | None = None) -> Plan:
    domain = a_label(domain or default_domain(identity, checkup.mailing, sender))
    d, keys = _keys(identity, checkup.mailing, domain)
    path = return_path(identity, checkup.mailing)
    envelope = a_label(path.rpartition("@")[2]) if path else domain
    chosen = [relays.parse_url(r.url) for r in identity.relays] or list(checkup.relays)
    published = [(s, str(k) if isinstance(k, EinmalError) else dkim.public_record(k).decode()) for s, k in keys]  # type: ignore[arg-type]
    asked = [domain, d, published, envelope, [(r.name, r.host) for r in chosen], checkup.dns_servers or ""]
    asked.append(checkup.mailing.unsubscribe_url or "")
    inputs = hashlib.sha256(json.dumps(asked).encode()).hexdigest()
    resolver = dns_checks.resolver(checkup.dns_server_list)
    servers = tuple(dns_checks.server_names(resolver))
    return Plan(identity, domain, d, keys, envelope, chosen, inputs, resolver, servers)


async def examine(
    identity: Identity, checkup: Checkup, *, domain: str | None = None, sender: str | None = None
) -> Report:
    """The findings for mail from `domain` (default_domain when None) sent as `identity`, all asked now."""
    planned = plan(identity, checkup, domain, sender)
    return _report(planned, checkup, await _asked(planned, checkup))


async def _asked(planned: Plan, checkup: Checkup) -> list[Finding]:
    """What DNS says, within RUN_SECONDS: the findings of the DKIM keys, SPF, DMARC, the bounces' MX, then
    the unsubscribe URL's host where subscribers cannot reach it (the last finding, if any)."""
    notes = records.Notes()
    lookup = Lookup(planned.resolver)
    try:
        with anyio.fail_after(RUN_SECONDS):
            await records.dkim_keys(notes, lookup, planned.domain, planned.d, planned.keys)
            await records.spf(notes, lookup, planned.envelope, planned.chosen)
            await records.dmarc(notes, lookup, planned.domain, planned.d, planned.envelope)
            await records.bounces(notes, lookup, planned.envelope)
            if checkup.mailing.unsubscribe_url:
                await records.unsubscribe_host(notes, lookup, checkup.mailing.unsubscribe_url)
    except TimeoutError:
        title = f"could not check every record: DNS did not answer them all within {RUN_SECONDS:g} s"
        notes.add("dns", "unchecked", title, fix="retry later")
    return notes.findings


def _report(planned: Plan, checkup: Checkup, asked: list[Finding]) -> Report:
    """The DNS findings, then those of einmal's own settings: the one-click unsubscribe (and whether
    subscribers reach its host, asked with DNS), the relays' TLS."""
    notes = records.Notes()
    for f in asked:  # numbered again: the unsubscribe URL's finding follows the one-click one
        if f.check != "unsubscribe":
            notes.add(f.check, f.severity, f.title, f.found, f.expected, f.fix)
    if checkup.mailing.unsubscribe_url and checkup.mailing.unsubscribe_secret:
        notes.add("unsubscribe", "ok", f"one-click unsubscribe (RFC 8058) at {checkup.mailing.unsubscribe_url}")
    else:
        notes.add(
            "unsubscribe",
            "fail",
            "no one-click unsubscribe: Gmail and Yahoo require List-Unsubscribe-Post of bulk mail",
            found="EINMAL_UNSUBSCRIBE_URL or EINMAL_UNSUBSCRIBE_SECRET unset",
            expected="both set",
            fix="set EINMAL_UNSUBSCRIBE_URL (einmal's own: <public URL>/unsubscribe) and EINMAL_UNSUBSCRIBE_SECRET",
        )
    for f in asked:
        if f.check == "unsubscribe":
            notes.add(f.check, f.severity, f.title, f.found, f.expected, f.fix)
    for relay in planned.chosen:
        if relay.tls != "none" or _local(relay.host):
            notes.add("tls", "ok", f"relay {relay.name}: {relay.tls if relay.tls != 'none' else 'on loopback'}")
            continue
        notes.add(
            "tls",
            "fail" if relay.username else "warn",
            f"relay {relay.name}: no TLS" + (", and its password goes in clear" if relay.username else ""),
            found="tls=none",
            expected="starttls or tls",
            fix="smtp://…?tls=starttls or smtps:// (EINMAL_SMTP_TLS)",
        )
    return Report(planned.domain, tuple(notes.findings), planned.servers)


def _local(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


async def domains_of(conn: asyncpg.Connection, identity: Identity, mailing: Mailing) -> list[str]:
    """The domains the doctor checks for the account: its own (else EINMAL_FROM_DOMAINS), those of its
    campaigns' From addresses and of its return path, and the one it checks when none is named."""
    found = [d.domain for d in identity.domains] or list(mailing.default_from_domains)
    rows = await conn.fetch(*db.sql("doctor_sender_domains", account_id=identity.account_id, limit=SENDER_ADDRESSES))
    found += [parseaddr(row["address"])[1].rpartition("@")[2] for row in rows]
    if path := return_path(identity, mailing):
        found.append(path.rpartition("@")[2])
    if identity.domains or mailing.default_from_domains or mailing.dkim_domain or rows or path:
        sender = parseaddr(rows[0]["address"])[1].rpartition("@")[2] if rows else None
        found.append(default_domain(identity, mailing, sender))
    named = []
    for domain in found:
        try:
            named.append(a_label(domain))
        except ArgumentError:
            continue
    return list(dict.fromkeys(named))


class Runs:
    """The runs of each account in flight in this process: at most IN_FLIGHT each."""

    def __init__(self) -> None:
        self.running: dict[int, int] = {}

    def take(self, account_id: int) -> None:
        if self.running.get(account_id, 0) >= IN_FLIGHT:
            raise Busy(f"the doctor checks {IN_FLIGHT} domains of the account already; try again shortly", 5)
        self.running[account_id] = self.running.get(account_id, 0) + 1

    def give(self, account_id: int) -> None:
        self.running[account_id] -= 1
        if not self.running[account_id]:
            del self.running[account_id]


RUNS = Runs()


async def checked(
    connect: Connect,
    checkup: Checkup,
    *,
    account_id: int,
    domain: str | None = None,
    bounded: bool = True,
    own: bool = True,
) -> Report:
    """The report of the account's `domain` (its default when None): kept, else asked of DNS with no connection
    held, then kept. ArgumentError (422) for a domain not the account's; Busy (429) past the account's
    runs, in flight or in the window, where `bounded` (the API's calls; an operator's command is not). `own`:
    the domain is judged the account's (approve's is its campaign's From, which the From rule judged)."""
    with contextlib.ExitStack() as slot:  # the account's run in flight, from its count to its last question
        async with connect() as conn:
            identity = await of_account(conn, account_id=account_id)
            sender = await newest_sender(conn, identity) if domain is None else None
            planned = plan(identity, checkup, domain, sender)
            if (
                own
                and domain is not None
                and planned.domain not in (theirs := await domains_of(conn, identity, checkup.mailing))
            ):
                listed = ", ".join(theirs[:10]) or "none"
                raise ArgumentError(f"domain: {planned.domain} is not one of the account's domains ({listed})")
            keyed = {"account_id": account_id, "domain": planned.domain, "inputs": planned.inputs}
            kept = await conn.fetchval(*db.sql("doctor_report_get", **keyed))
            if kept is not None:
                return _report(planned, checkup, [Finding(**f) for f in json.loads(kept)])
            if bounded:
                RUNS.take(account_id)
                slot.callback(RUNS.give, account_id)
                count = await clients.hit(conn, RUNS_KIND, f"account {account_id}", WINDOW_SECONDS)
                if count.hits > RUNS_PER_WINDOW:
                    raise Busy(
                        f"the doctor asked DNS {RUNS_PER_WINDOW} times for the account within "
                        f"{WINDOW_SECONDS / 60:g} minutes; try again later",
                        int(count.retry_after()),
                    )
        asked = await _asked(planned, checkup)  # no connection held
    if checkup.cache_seconds > 0 and not any(f.severity == "unchecked" for f in asked):
        findings = json.dumps([asdict(f) for f in asked])
        async with connect() as conn:
            await conn.execute(*db.sql("doctor_report_put", **keyed, findings=findings, seconds=checkup.cache_seconds))
    return _report(planned, checkup, asked)


async def prune(conn: asyncpg.Connection) -> int:
    """Remove the kept reports past their expiry: how many."""
    pruned: int = await conn.fetchval(*db.sql("doctor_report_prune"))
    return pruned
