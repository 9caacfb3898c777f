"""`einmal doctor` and GET /api/v1/doctor (docs/operations/doctor.md): what the large mailbox providers require
of a bulk sender (Gmail and Yahoo since 2024, Outlook.com since May 2025), checked from DNS against what only
einmal knows — its DKIM keys, its relays, its return path — for an account's From domain. Each finding is
numbered in the order checked, with its severity (fail: providers reject or junk the mail; warn: worth a
look; ok), the record found, the record expected and the fix.

The organisational domain (DMARC's fallback, relaxed alignment) is the last two labels of a name: no Public
Suffix List, so `mail.example.co.uk` counts as `co.uk` and relaxed alignment there is judged too kindly.

Approve (service/campaigns/approval.py) asks `cached`: one report per account and From domain, kept
EINMAL_DOCTOR_CACHE_SECONDS in the process."""

import time
from dataclasses import asdict, dataclass, field
from typing import Literal

import anyio
import asyncpg
import idna
from cryptography.hazmat.primitives import serialization

from service import relays
from service.accounts import dns_checks
from service.accounts.dns_checks import Lookup, Unanswered
from service.accounts.identity import Identity
from service.errors import ArgumentError, EinmalError
from service.mail import dkim
from service.settings import Settings

RUN_SECONDS = 30.0  # the whole run, however many names time out
Severity = Literal["fail", "warn", "ok"]


@dataclass(frozen=True)
class Finding:
    number: int
    check: str  # dkim, spf, dmarc, alignment, bounces, unsubscribe, tls
    severity: Severity
    title: str
    found: str | None = None
    expected: str | None = None
    fix: str | None = None


@dataclass(frozen=True)
class Report:
    domain: str
    findings: tuple[Finding, ...]

    def failing(self, *, skip: tuple[str, ...] = ()) -> list[int]:
        return [f.number for f in self.findings if f.severity == "fail" and f.check not in skip]

    def as_json(self) -> dict:
        return {"domain": self.domain, "ok": not self.failing(), "findings": [asdict(f) for f in self.findings]}


@dataclass
class _Notes:
    findings: list[Finding] = field(default_factory=list)

    def add(self, check: str, severity: Severity, title: str, found=None, expected=None, fix=None) -> None:
        self.findings.append(Finding(len(self.findings) + 1, check, severity, title, found, expected, fix))


async def identity_of(conn: asyncpg.Connection, *, account_id: int) -> Identity:
    """The account's sender identity: for now every account's is the environment's settings."""
    return Identity(account_id=account_id)


def a_label(domain: str) -> str:
    try:
        return idna.encode(domain.strip().rstrip("."), uts46=True).decode().lower()
    except (idna.IDNAError, UnicodeError):
        raise ArgumentError(f"{domain[:60]!r} is not a domain name") from None


def organisational(domain: str) -> str:
    return ".".join(domain.split(".")[-2:])


def aligned(one: str, other: str, mode: str) -> bool:
    return one == other if mode == "s" else organisational(one) == organisational(other)


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


def _tags(record: str) -> dict[str, str]:
    pairs = (part.partition("=") for part in record.split(";"))
    return {k.strip().lower(): "".join(v.split()) for k, _, v in pairs if k.strip()}


async def examine(identity: Identity, settings: Settings, *, domain: str | None = None) -> Report:
    """The findings for mail from `domain` (default_domain when None) sent as `identity`."""
    domain = a_label(domain or default_domain(identity, settings))
    notes = _Notes()
    lookup = Lookup(dns_checks.resolver(settings.dns_server_list))
    try:
        with anyio.fail_after(RUN_SECONDS):
            await _checks(notes, lookup, identity, settings, domain)
    except TimeoutError:
        notes.add("dns", "fail", f"DNS did not answer every question within {RUN_SECONDS:g} s", fix="retry later")
    return Report(domain, tuple(notes.findings))


async def _checks(notes: _Notes, lookup: Lookup, identity: Identity, settings: Settings, domain: str) -> None:
    d, keys = _keys(identity, settings, domain)
    await _dkim(notes, lookup, domain, d, keys)
    path = return_path(identity, settings)
    envelope = a_label(path.rpartition("@")[2]) if path else domain
    chosen = [relays.parse_url(r.url) for r in identity.relays] or relays.from_settings(settings)
    await _spf(notes, lookup, envelope, chosen)
    await _dmarc(notes, lookup, domain, d, envelope)
    await _bounces(notes, lookup, envelope)
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
        return dns_checks.ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


async def _dkim(notes: _Notes, lookup: Lookup, domain: str, d: str | None, keys: list[tuple[str, object]]) -> None:
    if d is None:
        notes.add(
            "dkim",
            "fail",
            f"no DKIM key signs mail from {domain}: providers require DKIM of bulk mail",
            expected=f"a key of selector S published at S._domainkey.{domain}",
            fix="set EINMAL_DKIM_DOMAIN, _SELECTOR and _PRIVATE_KEY_FILE (or the account's own domain keys)",
        )
        return
    for selector, key in keys:
        name = f"{selector}._domainkey.{d}"
        if isinstance(key, EinmalError):
            notes.add("dkim", "fail", f"DKIM {name}: einmal cannot read its key", found=str(key), fix="see the error")
            continue
        expected = dkim.public_record(key).decode()  # type: ignore[arg-type]
        try:
            records = [r for r in await lookup.txt(name) if "p=" in r]
        except Unanswered as exc:
            notes.add("dkim", "fail", f"DKIM {name}: DNS gave no answer", found=str(exc), expected=expected)
            continue
        fix = f'publish TXT {name} "{expected}"'
        if len(records) != 1:
            found = " | ".join(records) if records else "no record"
            notes.add("dkim", "fail", f"DKIM {name}: {len(records)} key records", found, expected, fix)
        elif _tags(records[0]).get("p") != _tags(expected)["p"]:
            notes.add("dkim", "fail", f"DKIM {name}: the published key is not einmal's", records[0], expected, fix)
        else:
            weak = getattr(key, "key_size", 2048) < 2048
            title = f"DKIM {name}: the published key is einmal's" + (", but under 2048 bits" if weak else "")
            notes.add("dkim", "warn" if weak else "ok", title, records[0])


async def _spf(notes: _Notes, lookup: Lookup, envelope: str, chosen: list[relays.Relay]) -> None:
    expected = "v=spf1 ip4:<relay address> -all (or include: of the relay's provider)"
    try:
        records = await dns_checks.spf_records(lookup, envelope)
        spf = await dns_checks.walk(lookup, envelope, records[0]) if len(records) == 1 else None
    except Unanswered as exc:
        notes.add("spf", "fail", f"SPF of {envelope}: DNS gave no answer", found=str(exc), expected=expected)
        return
    if spf is None:
        found = " | ".join(records) if records else "no record"
        notes.add("spf", "fail", f"SPF of {envelope}: {len(records)} records, not one", found, expected, "one v=spf1")
        return
    over = []
    if spf.lookups > dns_checks.SPF_LOOKUPS:
        over.append(f"{spf.lookups} DNS lookups, over {dns_checks.SPF_LOOKUPS}")
    if spf.void > dns_checks.SPF_VOID:
        over.append(f"{spf.void} void lookups, over {dns_checks.SPF_VOID}")
    if over or spf.problems:
        notes.add(
            "spf",
            "fail",
            f"SPF of {envelope}: receivers answer permerror: {'; '.join(over + spf.problems)}",
            spf.record,
            f"at most {dns_checks.SPF_LOOKUPS} lookups (include, a, mx, ptr, exists, redirect), 2 void",
            "replace includes by the ip4:/ip6: networks they name, or drop unused ones",
        )
        return  # every sender's answer is permerror: no relay to judge apart
    else:
        title = f"SPF of {envelope}: {spf.lookups} DNS lookups of {dns_checks.SPF_LOOKUPS}, {spf.void} void"
        notes.add("spf", "ok", title, spf.record)
    for relay in chosen:
        await _relay_spf(notes, lookup, spf, envelope, relay)


async def _relay_spf(notes: _Notes, lookup: Lookup, spf, envelope: str, relay: relays.Relay) -> None:
    try:
        dns_checks.ipaddress.ip_address(relay.host)
        addresses = [relay.host]
    except ValueError:
        try:
            addresses = await lookup.addresses(relay.host)
        except Unanswered:
            addresses = []
    public = [a for a in addresses if dns_checks.public(a)]
    if not public:
        title = f"SPF of {envelope}: relay {relay.name} has no public address einmal knows; check its own by hand"
        notes.add("spf", "warn", title, found=", ".join(addresses) or "no address")
        return
    for address in public:
        result = dns_checks.judge(spf, address)
        title = f"SPF of {envelope} for relay {relay.name} ({address}): {result}"
        if result == "pass":
            notes.add("spf", "ok", title)
        else:
            fix = f"add ip{6 if ':' in address else 4}:{address} before the all"
            severity: Severity = "warn" if result == "unknown" else "fail"
            notes.add("spf", severity, title, spf.record, f"a term that passes {address}", fix)


async def _dmarc(notes: _Notes, lookup: Lookup, domain: str, d: str | None, envelope: str) -> None:
    names = [f"_dmarc.{domain}"] + ([f"_dmarc.{organisational(domain)}"] if organisational(domain) != domain else [])
    records: list[str] = []
    for name in names:
        try:
            records = [r for r in await lookup.txt(name) if r.replace(" ", "").upper().startswith("V=DMARC1")]
        except Unanswered as exc:
            notes.add("dmarc", "fail", f"DMARC of {domain}: DNS gave no answer", found=str(exc))
            return
        if records:
            break
    expected = f"v=DMARC1; p=quarantine; rua=mailto:dmarc@{domain}"
    tags = _tags(records[0]) if len(records) == 1 else {}
    if len(records) != 1 or tags.get("p") not in ("none", "quarantine", "reject"):
        found = " | ".join(records) if records else "no record"
        fix = f'publish TXT _dmarc.{domain} "{expected}"'
        notes.add("dmarc", "fail", f"DMARC of {domain}: no valid record at {names[0]}", found, expected, fix)
    elif tags["p"] == "none":
        notes.add("dmarc", "warn", f"DMARC of {domain}: p=none, monitoring only", records[0], expected)
    else:
        notes.add("dmarc", "ok", f"DMARC of {domain}: p={tags['p']} at {name}", records[0])
    strict = {"s": "strict", "r": "relaxed"}
    for what, other, tag in (("DKIM d=", d, "adkim"), ("return path", envelope, "aspf")):
        mode = tags.get(tag, "r")[:1] or "r"
        if other is None:
            continue
        if aligned(domain, other, mode):
            notes.add("alignment", "ok", f"From {domain} aligns with {what} {other} ({strict.get(mode, mode)})")
        else:
            title = f"From {domain} does not align with {what} {other} ({tag}={mode}): DMARC cannot pass through it"
            expected = f"{domain}" + (f" or a name under {organisational(domain)}" if mode == "r" else "")
            fix = f"{'sign with d=' if tag == 'adkim' else 'a return path at'} {expected}"
            notes.add("alignment", "fail", title, other, expected, fix)


async def _bounces(notes: _Notes, lookup: Lookup, envelope: str) -> None:
    try:
        exchanges = await lookup.mx(envelope)
        addresses = [] if exchanges else await lookup.addresses(envelope)
    except Unanswered as exc:
        notes.add("bounces", "fail", f"bounces to {envelope}: DNS gave no answer", found=str(exc))
        return
    expected, fix = "an MX record", f"publish MX {envelope} of the host that receives its bounces"
    if exchanges and any(host in ("", ".") for _, host in exchanges):
        notes.add("bounces", "fail", f"bounces to {envelope}: a null MX refuses them", "MX 0 .", expected, fix)
    elif exchanges:
        shown = ", ".join(f"{p} {h}" for p, h in exchanges)
        notes.add("bounces", "ok", f"bounces to {envelope} reach MX {shown}", shown)
    elif addresses:
        notes.add("bounces", "warn", f"bounces to {envelope}: no MX, only its address", addresses[0], expected, fix)
    else:
        notes.add("bounces", "fail", f"bounces to {envelope}: no MX and no address", "nothing", expected, fix)


_cache: dict[tuple[int, str], tuple[float, Identity, Report]] = {}


async def cached(identity: Identity, settings: Settings, *, domain: str) -> Report:
    """examine(), its answer kept EINMAL_DOCTOR_CACHE_SECONDS per account and domain in this process."""
    key, now = (identity.account_id, a_label(domain)), time.monotonic()
    kept = _cache.get(key)
    if kept and kept[1] == identity and now - kept[0] < settings.doctor_cache_seconds:
        return kept[2]
    report = await examine(identity, settings, domain=domain)
    _cache[key] = (now, identity, report)
    while len(_cache) > 1000:
        del _cache[next(iter(_cache))]
    return report
