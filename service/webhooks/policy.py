"""Where a webhook may be delivered: `https://` to a public address, or `http://` to loopback when
EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK allows it. An address that is private, loopback, link-local, shared,
reserved, multicast or otherwise not global is refused unless it is in EINMAL_WEBHOOK_ALLOWED_NETWORKS.
The check is made when an endpoint is registered (`check_url`) and again on each connection a delivery opens
(`allowed`, used by delivery.py's network backend, which connects to the very address it checked): a name
that resolved to a public address at registration may resolve to another since.

What it does not cover: a receiver's own redirects are not followed at all (a 3xx is a failed attempt);
what the receiver does with the request once it has it is its own business."""

import ipaddress
import socket
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


class Refused(Exception):
    """The policy refuses this URL or address; its message says why, in one line."""


def _plain(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def allowed(address: str, settings: Settings) -> bool:
    """May a delivery connect to `address` (an IP address as text)?"""
    try:
        ip = _plain(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return False
    if any(ip in network for network in settings.webhook_networks):
        return True
    if ip.is_loopback:
        return settings.webhook_allow_http_loopback
    return ip.is_global and not ip.is_multicast


def _loopback_name(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return _plain(ipaddress.ip_address(host)).is_loopback
    except ValueError:
        return False


def parse(url: str, settings: Settings) -> tuple[str, int]:
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
        if not (settings.webhook_allow_http_loopback and _loopback_name(host)):
            raise Refused(
                "the URL must be https:// (http:// only to loopback, with EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK)"
            )
        return host, port or 80
    if parts.scheme != "https":
        raise Refused("the URL must be https://")
    return host, port or 443


async def resolve(host: str, port: int, settings: Settings) -> list[str]:
    """The addresses `host` resolves to, within RESOLVE_SECONDS; Refused when it resolves to none. An IP
    address is itself; a name is asked of EINMAL_DNS_SERVERS when they are set, else of the system's
    resolver (its hosts file included)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        with anyio.fail_after(RESOLVE_SECONDS):
            if settings.dns_server_list:
                found = await _ask(host, settings.dns_server_list)
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


async def checked_addresses(host: str, port: int, settings: Settings) -> list[str]:
    """The addresses of `host` a delivery may connect to; Refused when there is none."""
    found = await resolve(host, port, settings)
    good = [a for a in found if allowed(a, settings)]
    if not good:
        raise Refused(f"{host} resolves only to addresses the webhook policy refuses ({', '.join(found[:3])})")
    return good


async def check_url(url: str, settings: Settings) -> str:
    """The URL, when an endpoint may be registered with it; Invalid (one line) otherwise. Every address its
    host resolves to must be allowed, not only one."""
    try:
        host, port = parse(url, settings)
        found = await resolve(host, port, settings)
        refused = [a for a in found if not allowed(a, settings)]
        if refused:
            raise Refused(
                f"{host} resolves to {refused[0]}, a private, loopback or otherwise non-public address "
                "(EINMAL_WEBHOOK_ALLOWED_NETWORKS allows such networks)"
            )
    except Refused as exc:
        raise Invalid(f"webhook URL refused: {exc}") from None
    return url
