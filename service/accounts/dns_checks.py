"""What `einmal doctor` asks DNS (service/accounts/doctor.py): TXT, addresses and MX through dnspython's
asyncio resolver, each query bounded by QUERY_SECONDS (EINMAL_DNS_SERVERS points it at given servers, else
the system's), and SPF (RFC 7208) walked once per domain: its terms, the DNS lookups it costs receivers
(at most 10, 4.6.4) and its void lookups (at most 2), then judged for each relay address without DNS.

A walk stops where receivers stop (RFC 7208 4.6.4) and asks DNS nothing more: at the eleventh DNS-querying term
(include, a, mx, ptr, exists, redirect), at an `mx` of more than 10 exchangers (before any of their
addresses), at the third void lookup; its answer is then permerror. So a walk asks at most 1 + 10 * 21
questions however the record is made (an `mx`: its MX, then A and AAAA of up to 10 exchangers), and records.spf
bounds its time by SPF_SECONDS (temperror past it). `exists`, `ptr` and macros (%{…}) depend on the sender: an
address they would decide is "unknown", not guessed."""

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver

QUERY_SECONDS = 5.0
SPF_LOOKUPS, SPF_VOID, SPF_EXCHANGERS = 10, 2, 10  # RFC 7208 4.6.4
SPF_SECONDS = 20.0  # the walk's whole time (4.6.4: at least 20 s)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


# the networks a relay's address may be in that are not what receivers see: its own SPF is not knowable here
LOCAL = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)


def public(address: str) -> bool:
    """Whether a relay's address is the one receivers see (not loopback, link-local or private)."""
    ip = ipaddress.ip_address(address)
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or any(ip in n for n in LOCAL))


class Unanswered(Exception):
    """DNS gave no answer (timeout, SERVFAIL, refused): nothing can be said of the name. Its message says
    which server and how, to follow "could not check: "."""


def servers(resolver: dns.asyncresolver.Resolver) -> str:
    """The resolver's name servers as a person names them: 127.0.0.1:5353, [::1]:53, 192.0.2.1."""
    return ", ".join(server_names(resolver)) or "none"


def server_names(resolver: dns.asyncresolver.Resolver) -> list[str]:
    """Each of the resolver's name servers as `servers` names it."""
    named = []
    for server in resolver.nameservers:
        if isinstance(server, dns.nameserver.Do53Nameserver):
            host = f"[{server.address}]" if ":" in server.address else server.address
            named.append(f"{host}:{server.port}" if server.port != 53 or ":" in server.address else host)
        else:
            named.append(str(server))
    return named


def resolver(servers: tuple[tuple[str, int], ...]) -> dns.asyncresolver.Resolver:
    """The resolver of EINMAL_DNS_SERVERS ((host, port) pairs), or of the system when there are none."""
    if not servers:
        made = dns.asyncresolver.Resolver()
    else:
        made = dns.asyncresolver.Resolver(configure=False)
        made.nameservers = [dns.nameserver.Do53Nameserver(host, port) for host, port in servers]
    made.lifetime = QUERY_SECONDS
    return made


class Lookup:
    """The queries of one doctor run, each answered once (a name asked twice is asked once). Once a question
    went unanswered for QUERY_SECONDS the server is taken as silent for the rest of the run: the questions
    after it are not asked, and say so."""

    def __init__(self, resolver: dns.asyncresolver.Resolver) -> None:
        self.resolver = resolver
        # the rdata of each (name, kind): dnspython's classes by kind (TXT .strings, A .address, MX .exchange)
        self.answers: dict[tuple[str, str], list[Any] | Unanswered] = {}
        self.silent: Unanswered | None = None

    async def records(self, name: str, kind: str) -> list[Any]:
        """The records of `name`; [] for none (NXDOMAIN or no data); Unanswered when DNS does not say."""
        key = (name.lower().rstrip("."), kind)
        if key not in self.answers and self.silent is not None:
            raise self.silent
        if key not in self.answers:
            try:
                answer = await self.resolver.resolve(name, kind, search=False)
                self.answers[key] = list(answer)
            except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
                self.answers[key] = []
            except dns.exception.Timeout:
                said = f"no answer from DNS server {servers(self.resolver)} within {QUERY_SECONDS:g} s"
                self.answers[key] = self.silent = Unanswered(said)
            except (dns.exception.DNSException, OSError) as exc:
                said = f"DNS server {servers(self.resolver)} gave no answer for {name} {kind} ({type(exc).__name__})"
                self.answers[key] = Unanswered(said)
        found = self.answers[key]
        if isinstance(found, Unanswered):
            raise found
        return found

    async def txt(self, name: str) -> list[str]:
        """Each TXT record of `name`, its strings joined."""
        return [b"".join(r.strings).decode("utf-8", "replace") for r in await self.records(name, "TXT")]

    async def addresses(self, name: str) -> list[str]:
        return [r.address for kind in ("A", "AAAA") for r in await self.records(name, kind)]

    async def mx(self, name: str) -> list[tuple[int, str]]:
        return sorted((r.preference, r.exchange.to_text(omit_final_dot=True)) for r in await self.records(name, "MX"))


@dataclass
class Spf:
    """One SPF record and what it resolves to: its terms in order, (qualifier, mechanism, value, resolved)."""

    domain: str
    record: str
    terms: list[tuple[str, str, str, object]] = field(default_factory=list)
    redirect: "Spf | None" = None
    lookups: int = 0  # of the whole tree, includes and redirect too
    void: int = 0
    problems: list[str] = field(default_factory=list)


RESULTS = {"+": "pass", "-": "fail", "~": "softfail", "?": "neutral"}
LOOKUP_TERMS = ("include", "a", "mx", "ptr", "exists", "redirect")


async def spf_records(lookup: Lookup, domain: str) -> list[str]:
    return [t for t in await lookup.txt(domain) if t.lower() == "v=spf1" or t.lower().startswith("v=spf1 ")]


class _Past(Exception):
    """The walk is past one of RFC 7208's limits: receivers stop with permerror, and so does it."""


def _count(top: Spf, *, lookups: int = 0, void: int = 0) -> None:
    top.lookups += lookups
    top.void += void
    if top.lookups > SPF_LOOKUPS or top.void > SPF_VOID:
        raise _Past


async def walk(lookup: Lookup, domain: str, record: str, root: Spf | None = None, depth: int = 0) -> Spf:
    """The SPF record of `domain` with every include and redirect resolved; the root counts the lookups and
    void lookups of the whole tree (RFC 7208 4.6.4) and collects its problems. Past a limit the walk stops:
    the root is returned as far as it got, its count or problem saying which limit."""
    if root is None:
        spf = Spf(domain, record)
        try:
            await _walk(lookup, spf, spf, depth)
        except _Past:
            pass
        return spf
    spf = Spf(domain, record)
    await _walk(lookup, spf, root, depth)
    return spf


async def _walk(lookup: Lookup, spf: Spf, top: Spf, depth: int) -> None:
    domain, record = spf.domain, spf.record
    for term in record.split()[1:]:
        name, sep, value = term.partition(":") if ":" in term or "=" not in term else term.partition("=")
        if not sep and "/" in name:  # a/24, mx/24//64: the domain's own, with prefix lengths
            name, slash, value = name.partition("/")
            value = slash + value
        qualifier = name[0] if name[:1] in RESULTS else "+"
        mechanism = name.lstrip("+-~?").lower()
        if sep == "=":  # a modifier: redirect= and exp= (unknown ones are ignored, 6.)
            if mechanism == "redirect":
                _count(top, lookups=1)
                spf.redirect = await _child(lookup, value, top, depth)
            continue
        if mechanism == "all":
            spf.terms.append((qualifier, "all", "", None))
            continue
        if mechanism in LOOKUP_TERMS:
            _count(top, lookups=1)
        if mechanism in ("ip4", "ip6"):
            try:
                resolved: object = [ipaddress.ip_network(value.split("//")[0], strict=False)]
            except ValueError:
                top.problems.append(f"{domain}: {term!r} is not an address or network")
                resolved = []
        elif "%" in value or mechanism in ("ptr", "exists"):
            resolved = None  # depends on the sender: not decided here
        elif mechanism in ("a", "mx"):
            resolved = await _networks(lookup, mechanism, value, domain, top)
        elif mechanism == "include":
            resolved = await _child(lookup, value, top, depth)
        else:
            top.problems.append(f"{domain}: {term!r} is no SPF mechanism")
            continue
        spf.terms.append((qualifier, mechanism, value, resolved))


async def _child(lookup: Lookup, name: str, top: Spf, depth: int) -> Spf | None:
    if "%" in name or depth >= 10:
        return None
    found = await spf_records(lookup, name)
    if not found:
        top.problems.append(f"{name} (an include or redirect) has no SPF record")
        _count(top, void=1)
        return None
    if len(found) > 1:
        top.problems.append(f"{name} has {len(found)} SPF records; receivers take none of them")
    return await walk(lookup, name, found[0], top, depth + 1)


async def _networks(lookup: Lookup, mechanism: str, value: str, domain: str, top: Spf) -> list[Network]:
    """The networks of an `a` or `mx` term (a:name/24//64): its addresses, those of its exchanges."""
    name, _, lengths = (value or domain).partition("/")
    name = name or domain
    v4, _, v6 = lengths.partition("/")
    hosts = [name] if mechanism == "a" else [host for _, host in await lookup.mx(name)]
    if len(hosts) > SPF_EXCHANGERS:  # before any of their addresses is asked
        top.problems.append(f"{name} has {len(hosts)} MX records, over {SPF_EXCHANGERS}")
        raise _Past
    addresses = [a for host in hosts for a in await lookup.addresses(host)]
    if not addresses:
        _count(top, void=1)
    return [
        ipaddress.ip_network(f"{a}/{(v6.lstrip('/') if ':' in a else v4) or (128 if ':' in a else 32)}", strict=False)
        for a in addresses
    ]


def judge(spf: Spf | None, address: str, depth: int = 0) -> str:
    """check_host() for one address on a walked record: pass, fail, softfail, neutral, permerror, or
    unknown when a term that needs the sender (exists, ptr, a macro) comes before the answer."""
    if spf is None or depth > 10:
        return "permerror"
    ip = ipaddress.ip_address(address)
    for qualifier, mechanism, value, resolved in spf.terms:
        if mechanism == "all":
            return RESULTS[qualifier]
        if resolved is None:  # exists, ptr, a macro: the sender decides; an include past the walk's bounds
            return "unknown" if mechanism in ("exists", "ptr") or "%" in value else "permerror"
        if mechanism == "include":
            inner = judge(resolved, address, depth + 1) if isinstance(resolved, Spf) else "permerror"
            if inner in ("permerror", "unknown"):
                return inner
            matched = inner == "pass"
        else:
            matched = any(ip.version == net.version and ip in net for net in resolved)  # type: ignore[attr-defined]
        if matched:
            return RESULTS[qualifier]
    return judge(spf.redirect, address, depth + 1) if spf.redirect is not None else "neutral"
