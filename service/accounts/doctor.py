"""`einmal doctor` and GET /api/v1/doctor (docs/operations/doctor.md): what the large mailbox providers require
of a bulk sender (Gmail and Yahoo since 2024, Outlook.com since May 2025), checked from DNS against what only
einmal knows — its DKIM keys, its relays, its return path — for an account's From domain. Each finding is
numbered in the order checked, with its severity (fail: providers reject or junk the mail; warn: worth a
look; ok), the record found, the record expected and the fix (the records' checks:
service/accounts/doctor_records.py).

Approve (service/campaigns/approval.py) asks `cached`: one report per account and From domain, kept
EINMAL_DOCTOR_CACHE_SECONDS in the process."""

import ipaddress
import time
from dataclasses import asdict, dataclass

import anyio
import asyncpg
import idna
from cryptography.hazmat.primitives import serialization

from service import relays
from service.accounts import dns_checks
from service.accounts import doctor_records as records
from service.accounts.dns_checks import Lookup
from service.accounts.doctor_records import Finding
from service.accounts.identity import Identity, of_account
from service.errors import ArgumentError, EinmalError
from service.mail import dkim
from service.settings import Settings

RUN_SECONDS = 30.0  # the whole run, however many names time out


@dataclass(frozen=True)
class Report:
    domain: str
    findings: tuple[Finding, ...]

    def failing(self, *, skip: tuple[str, ...] = ()) -> list[int]:
        return [f.number for f in self.findings if f.severity == "fail" and f.check not in skip]

    def as_json(self) -> dict:
        return {"domain": self.domain, "ok": not self.failing(), "findings": [asdict(f) for f in self.findings]}


async def identity_of(conn: asyncpg.Connection, *, account_id: int) -> Identity:
    """The account's sender identity as stored (its empty parts: the environment's settings)."""
    return await of_account(conn, account_id=account_id)


def a_label(domain: str) -> str:
    try:
        return idna.encode(domain.strip().rstrip("."), uts46=True).decode().lower()
    except (idna.IDNAError, UnicodeError):
        raise ArgumentError(f"{domain[:60]!r} is not a domain name") from None


def default_domain(identity: Identity, settings: Settings) -> str:
    """The From domain checked when none is named: the account's first, else the installation's DKIM domain,
    else its return path's domain."""
    if identity.domains:
        return identity.domains[0].domain
    if settings.dkim_domain:
        return settings.dkim_domain
    if return_path(identity, settings):
        return return_path(identity, settings).rpartition("@")[2]  # type: ignore[union-attr]
    raise ArgumentError("no From domain to check: name one (--domain), or set EINMAL_DKIM_DOMAIN")


def return_path(identity: Identity, settings: Settings) -> str | None:
    return identity.return_path or settings.return_path


def signs(identity: Identity, settings: Settings) -> bool:
    """Whether the account or the installation signs with DKIM: then approve asks the doctor."""
    return any(d.keys for d in identity.domains) or settings.dkim_domain is not None


def _keys(identity: Identity, settings: Settings, domain: str) -> tuple[str | None, list[tuple[str, object]]]:
    """The DKIM d= of mail from `domain` and its (selector, key or the ConfigError that says why not)."""
    for own in identity.domains:
        if a_label(own.domain) == domain and own.keys:
            return domain, [(s, _pem(pem)) for s, pem in zip(own.selectors, own.keys, strict=False)]
    if settings.dkim_domain:
        found: list[tuple[str, object]] = []
        for selector, path in zip(settings.dkim_selectors, settings.dkim_key_files, strict=True):
            try:
                found.append((selector, dkim.load_key(path)))
            except EinmalError as exc:
                found.append((selector, exc))
        return settings.dkim_domain, found
    return None, []


def _pem(pem: str) -> object:
    try:
        return serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return EinmalError(f"the account's key is not a readable PEM private key: {type(exc).__name__}")


async def examine(identity: Identity, settings: Settings, *, domain: str | None = None) -> Report:
    """The findings for mail from `domain` (default_domain when None) sent as `identity`."""
    domain = a_label(domain or default_domain(identity, settings))
    notes = records.Notes()
    lookup = Lookup(dns_checks.resolver(settings.dns_server_list))
    try:
        with anyio.fail_after(RUN_SECONDS):
            await _checks(notes, lookup, identity, settings, domain)
    except TimeoutError:
        notes.add("dns", "fail", f"DNS did not answer every question within {RUN_SECONDS:g} s", fix="retry later")
    return Report(domain, tuple(notes.findings))


async def _checks(notes: records.Notes, lookup: Lookup, identity: Identity, settings: Settings, domain: str) -> None:
    d, keys = _keys(identity, settings, domain)
    await records.dkim_keys(notes, lookup, domain, d, keys)
    path = return_path(identity, settings)
    envelope = a_label(path.rpartition("@")[2]) if path else domain
    chosen = [relays.parse_url(r.url) for r in identity.relays] or relays.from_settings(settings)
    await records.spf(notes, lookup, envelope, chosen)
    await records.dmarc(notes, lookup, domain, d, envelope)
    await records.bounces(notes, lookup, envelope)
    if settings.unsubscribe_url and settings.unsubscribe_secret:
        notes.add("unsubscribe", "ok", f"one-click unsubscribe (RFC 8058) at {settings.unsubscribe_url}")
    else:
        notes.add(
            "unsubscribe",
            "fail",
            "no one-click unsubscribe: Gmail and Yahoo require List-Unsubscribe-Post of bulk mail",
            found="EINMAL_UNSUBSCRIBE_URL or EINMAL_UNSUBSCRIBE_SECRET unset",
            expected="both set",
            fix="set EINMAL_UNSUBSCRIBE_URL (einmal's own: <public URL>/unsubscribe) and EINMAL_UNSUBSCRIBE_SECRET",
        )
    for relay in chosen:
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


def _local(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


_cache: dict[tuple[int, str, str | None], tuple[float, Identity, Report]] = {}


async def cached(identity: Identity, settings: Settings, *, domain: str) -> Report:
    """examine(), its answer kept EINMAL_DOCTOR_CACHE_SECONDS per account and domain in this process (not
    one where DNS did not answer: the next approve asks again)."""
    key, now = (identity.account_id, a_label(domain), settings.dns_servers), time.monotonic()
    kept = _cache.get(key)
    if kept and kept[1] == identity and now - kept[0] < settings.doctor_cache_seconds:
        return kept[2]
    report = await examine(identity, settings, domain=domain)
    if not any(f.check == "dns" and f.severity == "fail" for f in report.findings):  # DNS did not answer: ask again
        _cache[key] = (now, identity, report)
    while len(_cache) > 1000:
        del _cache[next(iter(_cache))]
    return report
