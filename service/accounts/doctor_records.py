"""The doctor's findings on each DNS record (service/accounts/doctor.py runs them in order): the DKIM keys, SPF
and each relay's address in it, DMARC and alignment, the return path's MX. Each `Notes.add` is one finding,
numbered in the order made.

The organisational domain (DMARC's fallback, relaxed alignment) is the public suffix of a name and one label
more (RFC 7489 3.2), from the Public Suffix List the `publicsuffixlist` package ships (none fetched at run
time): `mail.example.co.uk` is `example.co.uk`. A name under no known suffix (`good.test`) takes its last label
as the suffix. A subdomain sender whose DMARC record is its organisational domain's gets that record's `sp=`
(its `p=` when there is none, 6.6.3). A question DNS did not answer is `unchecked`, "could not check: …",
apart from a record that is missing (`fail`)."""

import functools
import ipaddress
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import anyio
from cryptography.hazmat.primitives.asymmetric import ed25519
from publicsuffixlist import PublicSuffixList

from service import relays
from service.accounts import dns_checks
from service.accounts.dns_checks import Lookup, Unanswered
from service.errors import EinmalError
from service.mail import dkim
from service.webhooks import policy

Severity = Literal["fail", "warn", "ok", "unchecked"]  # unchecked: DNS did not answer, nothing to judge


@dataclass(frozen=True)
class Finding:
    number: int
    check: str  # dkim, spf, dmarc, alignment, bounces, unsubscribe, tls; dns: the run's time was over
    severity: Severity
    title: str
    found: str | None = None
    expected: str | None = None
    fix: str | None = None


@dataclass
class Notes:
    findings: list[Finding] = field(default_factory=list)

    def add(
        self,
        check: str,
        severity: Severity,
        title: str,
        found: str | None = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.findings.append(Finding(len(self.findings) + 1, check, severity, title, found, expected, fix))


@functools.cache
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList()  # the list the package ships: read once, never fetched


def organisational(domain: str) -> str:
    """The registrable domain: the public suffix and one label more; a public suffix itself stays itself."""
    return _suffixes().privatesuffix(domain) or domain


def aligned(one: str, other: str, mode: str) -> bool:
    return one == other if mode == "s" else organisational(one) == organisational(other)


def fields(record: str) -> dict[str, str]:
    pairs = (part.partition("=") for part in record.split(";"))
    return {k.strip().lower(): "".join(v.split()) for k, _, v in pairs if k.strip()}


async def dkim_keys(notes: Notes, lookup: Lookup, domain: str, d: str | None, keys: list[tuple[str, object]]) -> None:
    """Each key's TXT record at selector._domainkey.d against the public half of the key einmal holds."""
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
            notes.add("dkim", "unchecked", f"DKIM {name}: could not check: {exc}", expected=expected)
            continue
        fix = f'publish TXT {name} "{expected}"'
        if len(records) != 1:
            found = " | ".join(records) if records else "no record"
            notes.add("dkim", "fail", f"DKIM {name}: {len(records)} key records", found, expected, fix)
        elif fields(records[0]).get("p") != fields(expected)["p"]:
            notes.add("dkim", "fail", f"DKIM {name}: the published key is not einmal's", records[0], expected, fix)
        else:
            weak = getattr(key, "key_size", 2048) < 2048
            title = f"DKIM {name}: the published key is einmal's" + (", but under 2048 bits" if weak else "")
            notes.add("dkim", "warn" if weak else "ok", title, records[0])
    if keys and all(isinstance(key, ed25519.Ed25519PrivateKey) for _, key in keys):
        notes.add(
            "dkim",
            "warn",
            f"DKIM of {d}: signed only with Ed25519, which Gmail, Yahoo and Outlook.com do not verify yet: "
            "their DMARC rests on SPF alone",
            "Ed25519 keys only: selector " + ", ".join(s for s, _ in keys),
            "an RSA key of 2048 bits beside it, under a selector of its own: each message signed with both",
            "add an RSA-2048 key: a second selector in EINMAL_DKIM_SELECTOR and its file in "
            "EINMAL_DKIM_PRIVATE_KEY_FILE (an account's: `einmal account dkim generate --algorithm rsa`)",
        )


async def spf(notes: Notes, lookup: Lookup, envelope: str, chosen: list[relays.Relay]) -> None:
    """The envelope domain's one SPF record within RFC 7208's limits, then each relay address against it."""
    expected = "v=spf1 ip4:<relay address> -all (or include: of the relay's provider)"
    try:
        records = await dns_checks.spf_records(lookup, envelope)
        with anyio.fail_after(dns_checks.SPF_SECONDS):
            spf = await dns_checks.walk(lookup, envelope, records[0]) if len(records) == 1 else None
    except TimeoutError:
        title = f"SPF of {envelope}: could not check: not walked within {dns_checks.SPF_SECONDS:g} s (temperror)"
        notes.add("spf", "unchecked", title, " | ".join(records), expected, "fewer includes; retry later")
        return
    except Unanswered as exc:
        notes.add("spf", "unchecked", f"SPF of {envelope}: could not check: {exc}", expected=expected)
        return
    if spf is None:
        title = f"SPF of {envelope}: " + (f"{len(records)} records, receivers take none" if records else "no record")
        fix = f'publish one TXT {envelope} "v=spf1 … -all" naming the relays'
        notes.add("spf", "fail", title, " | ".join(records) or "no record", expected, fix)
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
            f"at most {dns_checks.SPF_LOOKUPS} lookups (include, a, mx, ptr, exists, redirect), "
            f"{dns_checks.SPF_EXCHANGERS} exchangers an mx, {dns_checks.SPF_VOID} void",
            "replace includes by the ip4:/ip6: networks they name, or drop unused ones",
        )
        return  # every sender's answer is permerror: no relay to judge apart
    title = f"SPF of {envelope}: {spf.lookups} DNS lookups of {dns_checks.SPF_LOOKUPS}, {spf.void} void"
    notes.add("spf", "ok", title, spf.record)
    for relay in chosen:
        await _relay_spf(notes, lookup, spf, envelope, relay)


async def _relay_spf(notes: Notes, lookup: Lookup, spf: dns_checks.Spf, envelope: str, relay: relays.Relay) -> None:
    try:
        ipaddress.ip_address(relay.host)
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


async def dmarc(notes: Notes, lookup: Lookup, domain: str, d: str | None, envelope: str) -> None:
    """The From domain's DMARC record (or its organisational domain's) and its policy; then From aligned with
    the DKIM d= and with the envelope domain under its adkim and aspf (relaxed when there is no record)."""
    names = [f"_dmarc.{domain}"] + ([f"_dmarc.{organisational(domain)}"] if organisational(domain) != domain else [])
    records: list[str] = []
    for name in names:
        try:
            records = [r for r in await lookup.txt(name) if r.replace(" ", "").upper().startswith("V=DMARC1")]
        except Unanswered as exc:
            notes.add("dmarc", "unchecked", f"DMARC of {domain}: could not check: {exc}")
            return
        if records:
            break
    expected = f"v=DMARC1; p=quarantine; rua=mailto:dmarc@{domain}"
    tags = fields(records[0]) if len(records) == 1 else {}
    if len(records) != 1 or tags.get("p") not in ("none", "quarantine", "reject"):
        found = " | ".join(records) if records else "no record"
        fix = f'publish TXT _dmarc.{domain} "{expected}"'
        notes.add("dmarc", "fail", f"DMARC of {domain}: no valid record at {names[0]}", found, expected, fix)
    else:
        # a subdomain sender under its organisational domain's record: its sp= (else p=), RFC 7489 6.6.3
        tag = "sp" if name != names[0] and tags.get("sp") in ("none", "quarantine", "reject") else "p"
        if tags[tag] == "none":
            fix = f"{tag}=quarantine once the aggregate reports (rua=) show only your own mail failing"
            where = f" at {name}" if tag == "sp" else ""
            notes.add(
                "dmarc", "warn", f"DMARC of {domain}: {tag}=none{where}, monitoring only", records[0], expected, fix
            )
        else:
            notes.add("dmarc", "ok", f"DMARC of {domain}: {tag}={tags[tag]} at {name}", records[0])
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


async def bounces(notes: Notes, lookup: Lookup, envelope: str) -> None:
    """The return path's domain receives mail: an MX (not a null one), else at least an address."""
    try:
        exchanges = await lookup.mx(envelope)
        addresses = [] if exchanges else await lookup.addresses(envelope)
    except Unanswered as exc:
        notes.add("bounces", "unchecked", f"bounces to {envelope}: could not check: {exc}")
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


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return ""


async def unsubscribe_host(notes: Notes, lookup: Lookup, url: str) -> None:
    """The unsubscribe URL's host is one subscribers reach (the webhook policy's judgement of an address): an
    IP address or `localhost` is judged as it is, a name by the addresses DNS gives it. A name DNS does not
    answer for is not judged (the checks before say that DNS did not answer)."""
    host = _host(url)
    if not host:
        return
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        found, why = host, f"{host} is loopback"
    else:
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            addresses = [host]
        except ValueError:
            try:
                addresses = await lookup.addresses(host)
            except Unanswered:
                return
        private = [a for a in addresses if not policy.public(a)]
        if addresses and not private:
            return
        found = ", ".join(private) or "no address"
        if addresses == [host]:
            why = f"{host} is not a public address"
        elif private:
            why = f"{host} resolves to {found}, not a public address"
        else:
            why = f"{host} does not resolve"
    notes.add(
        "unsubscribe",
        "warn",
        f"one-click unsubscribe at {url}: {why}, subscribers cannot reach it",
        found,
        "an https:// URL at a name or address subscribers reach",
        "set EINMAL_UNSUBSCRIBE_URL to einmal's public URL (<public URL>/unsubscribe); fine for a test on loopback",
    )
