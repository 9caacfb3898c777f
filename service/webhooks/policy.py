"""Where a webhook may be delivered: `https://` to a public address, or `http://` to loopback when
EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK allows it. An address that is private, loopback, link-local, site-local,
shared, reserved, multicast or otherwise not global is refused unless it is in EINMAL_WEBHOOK_ALLOWED_NETWORKS;
an IPv6 address that carries an IPv4 one (NAT64, 6to4, Teredo, SIIT, IPv4-compatible or -mapped) is judged
by the IPv4 address it carries.
The check is made when an endpoint is registered (`check_url`) and again on each connection a delivery opens
(`allowed`, used by delivery.py's network backend, which connects to the very address it checked): a name
that resolved to a public address at registration may resolve to another since.

What it does not cover: a receiver's own redirects are not followed at all (a 3xx is a failed attempt);
what the receiver does with the request once it has it is its own business."""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver

from service.errors import Invalid
from service.settings import Settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_URL = 2000
RESOLVE_SECONDS = 5.0  # a name that takes longer does not resolve
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Reach:
    """The webhook policy's section of the settings, read once from Settings: the networks allowed besides
    the public ones (EINMAL_WEBHOOK_ALLOWED_NETWORKS), whether http:// to loopback is
    (EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK), and the DNS servers asked (EINMAL_DNS_SERVERS; none: the system's
    resolver)."""

    webhook_networks: tuple[Network, ...]
    webhook_allow_http_loopback: bool
    dns_server_list: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, settings: Settings) -> "Reach":
        return cls(settings.webhook_networks, settings.webhook_allow_http_loopback, settings.dns_server_list)


class Refused(Exception):
    """The policy refuses this URL or address; its message says why, in one line."""


def _plain(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


_V6 = ipaddress.IPv6Network
# IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64's well-known prefix (RFC 6052),
# IPv4-translated (SIIT, RFC 2765), IPv4-compatible (RFC 4291, deprecated; :: and ::1 included, which carry
# 0.0.0.0 and 0.0.0.1 and so are refused).
_LAST_32 = (_V6("64:ff9b::/96"), _V6("::ffff:0:0:0/96"), _V6("::/96"))
# refused whatever they carry: NAT64's local-use prefix (RFC 8215; where the IPv4 address sits depends on the
# length the operator chose) and the site-local addresses (RFC 3879)
_REFUSED = (_V6("64:ff9b:1::/48"), _V6("fec0::/10"))


def _carried(address: Address) -> list[ipaddress.IPv4Address] | None:
    """The IPv4 addresses an IPv6 address carries (6to4, Teredo's server and client, NAT64, SIIT,
    IPv4-compatible), judged in its stead; [] for none; None for an address refused whatever it carries."""
    if isinstance(address, ipaddress.IPv4Address) or address.ipv4_mapped is not None:
        return []
    if any(address in network for network in _REFUSED):
        return None
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    if any(address in network for network in _LAST_32):
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    return []


def allowed(address: str, reach: Reach) -> bool:
    """May a delivery connect to `address` (an IP address as text)? An IPv6 address that carries an IPv4
    one passes only when that address would (and not as loopback: it is another host's)."""
    try:
        ip = _plain(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return False
    if any(ip in network for network in reach.webhook_networks):
        return True
    carried = _carried(ip)
    if carried is None:
        return False
    if carried:
        return all(_public(inner) or any(inner in n for n in reach.webhook_networks) for inner in carried)
    if ip.is_loopback:
        return reach.webhook_allow_http_loopback
    return _public(ip)


def public(address: str) -> bool:
    """Whether anyone on the internet reaches `address` (an IP address as text), whatever the settings allow:
    not loopback, private, link-local, unique-local, shared or reserved; an IPv6 address that carries an IPv4
    one judged by it. What the doctor says of the unsubscribe URL's host (service/accounts/doctor_records.py)."""
    try:
        ip = _plain(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return False
    carried = _carried(ip)
    if carried is None:
        return False
    return all(_public(inner) for inner in carried) if carried else _public(ip)


def _public(ip: Address) -> bool:
    return ip.is_global and not ip.is_multicast


def _loopback_name(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return _plain(ipaddress.ip_address(host)).is_loopback
    except ValueError:
        return False


def parse(url: str, reach: Reach) -> tuple[str, int]:
    """(host, port) of an endpoint URL, or Refused: https (http to loopback only when allowed), a host, no
    user name or password in it."""
    if len(url) > MAX_URL or any(c.isspace() or ord(c) < 32 for c in url):
        raise Refused(f"the URL must be at most {MAX_URL} characters, without spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"not a URL: {exc}") from None
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise Refused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise Refused("the URL may not carry a user name or password")
    if parts.scheme == "http":
        if not (reach.webhook_allow_http_loopback and _loopback_name(host)):
            raise Refused(
                "the URL must be https:// (http:// only to loopback, with EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK)"
            )
        return host, port or 80
    if parts.scheme != "https":
        raise Refused("the URL must be https://")
    return host, port or 443


async def resolve(host: str, port: int, reach: Reach) -> list[str]:
    """The addresses `host` resolves to, within RESOLVE_SECONDS; Refused when it resolves to none. An IP
    address is itself; a name is asked of EINMAL_DNS_SERVERS when they are set, else of the system's
    resolver (its hosts file included)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        with anyio.fail_after(RESOLVE_SECONDS):
            if reach.dns_server_list:
                found = await _ask(host, reach.dns_server_list)
            else:
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                found = [str(sockaddr[0]) for *_, sockaddr in infos]
    except TimeoutError:
        raise Refused(f"{host} did not resolve within {RESOLVE_SECONDS:g}s") from None
    except (OSError, UnicodeError, dns.exception.DNSException) as exc:
        raise Refused(f"{host} does not resolve: {exc}") from None
    found = list(dict.fromkeys(found))
    if not found:
        raise Refused(f"{host} does not resolve")
    return found


async def _ask(host: str, servers: tuple[tuple[str, int], ...]) -> list[str]:
    resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.nameservers = [dns.nameserver.Do53Nameserver(address, port) for address, port in servers]
    resolver.lifetime = RESOLVE_SECONDS
    found: list[str] = []
    for kind in ("A", "AAAA"):
        try:
            answer = await resolver.resolve(host, kind, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            continue
        found += [record.to_text() for record in answer]
    return found


async def checked_addresses(host: str, port: int, reach: Reach) -> list[str]:
    """The addresses of `host` a delivery may connect to; Refused when there is none."""
    found = await resolve(host, port, reach)
    good = [a for a in found if allowed(a, reach)]
    if not good:
        raise Refused(f"{host} resolves only to addresses the webhook policy refuses ({', '.join(found[:3])})")
    return good


async def check_url(url: str, reach: Reach) -> str:
    """The URL, when an endpoint may be registered with it; Invalid (one line) otherwise. Every address its
    host resolves to must be allowed, not only one."""
    try:
        host, port = parse(url, reach)
        found = await resolve(host, port, reach)
        refused = [a for a in found if not allowed(a, reach)]
        if refused:
            raise Refused(
                f"{host} resolves to {refused[0]}, a private, loopback or otherwise non-public address "
                "(EINMAL_WEBHOOK_ALLOWED_NETWORKS allows such networks)"
            )
    except Refused as exc:
        raise Invalid(f"webhook URL refused: {exc}") from None
    return url
