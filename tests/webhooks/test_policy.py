"""The URL policy: https only (http to loopback when a test setting allows it), no private, loopback or
otherwise special address unless its network is allowed; checked at registration."""

import pytest

from service.errors import Invalid
from service.settings import Settings
from service.webhooks import policy

STRICT = policy.Reach.of(Settings())
LOOPBACK = policy.Reach.of(Settings(webhook_allow_http_loopback=True))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.5.4",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        # IPv6 forms that carry a private IPv4 address: judged by that address
        "64:ff9b::a9fe:a9fe",  # NAT64 (well-known prefix) of 169.254.169.254
        "64:ff9b::a00:1",
        "64:ff9b:1::a00:1",  # the local-use NAT64 prefix: refused whatever it carries
        "64:ff9b:1:5db8:d8:2200::",
        "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
        "2001:0:a00:1::1",  # Teredo, server 10.0.0.1
        "::a00:1",  # IPv4-compatible
        "::7f00:1",
        "::ffff:0:a00:1",  # SIIT (IPv4-translated)
        "::ffff:0:7f00:1",
        "fec0::1",  # site-local
        "feff::1",
        "224.0.0.1",
        "192.0.2.10",
        "not an address",
    ],
)
def test_special_addresses_are_refused(address: str) -> None:
    assert not policy.allowed(address, STRICT)


def test_public_addresses_and_allowed_networks_pass() -> None:
    assert policy.allowed("93.184.216.34", STRICT) and policy.allowed("2606:2800:220:1::1", STRICT)
    # an embedded public address passes, as the public address itself would
    for public in ("64:ff9b::5db8:d822", "2002:5db8:d822::1", "::ffff:0:5db8:d822", "::ffff:5db8:d822"):
        assert policy.allowed(public, STRICT), public
    assert policy.allowed("64:ff9b::a14:101", policy.Reach.of(Settings(webhook_allowed_networks="10.20.0.0/16")))
    assert not policy.allowed("64:ff9b::7f00:1", LOOPBACK)  # NAT64 of loopback is no loopback of this host
    assert policy.allowed("10.20.1.1", policy.Reach.of(Settings(webhook_allowed_networks="10.20.0.0/16")))
    assert not policy.allowed("10.21.1.1", policy.Reach.of(Settings(webhook_allowed_networks="10.20.0.0/16")))
    assert policy.allowed("127.0.0.1", LOOPBACK) and not policy.allowed("10.0.0.1", LOOPBACK)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://example.org/hook", "https://"),
        ("ftp://example.org/hook", "https://"),
        ("https:///hook", "no host"),
        ("https://user:pw@example.org/", "user name"),
        ("https://example.org/a b", "without spaces"),
        ("https://example.org:99999/", "not a URL"),
    ],
)
def test_urls_refused_by_their_form(url: str, why: str) -> None:
    with pytest.raises(policy.Refused, match=why):
        policy.parse(url, STRICT)


def test_http_only_to_loopback_and_only_when_allowed() -> None:
    assert policy.parse("http://127.0.0.1:8080/h", LOOPBACK) == ("127.0.0.1", 8080)
    with pytest.raises(policy.Refused):
        policy.parse("http://127.0.0.1:8080/h", STRICT)
    with pytest.raises(policy.Refused):
        policy.parse("http://example.org/h", LOOPBACK)


@pytest.mark.anyio
async def test_registration_refuses_a_name_that_resolves_to_a_private_address() -> None:
    with pytest.raises(Invalid, match="non-public"):
        await policy.check_url("https://localhost/hook", STRICT)
    with pytest.raises(Invalid, match="non-public"):
        await policy.check_url("https://127.0.0.1/hook", STRICT)
    assert await policy.check_url("https://127.0.0.1/hook", LOOPBACK)


def test_malformed_settings_are_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="is not a network"):
        Settings(webhook_allowed_networks="10.0.0.0/8,private")
    with pytest.raises(ValidationError, match="comma-separated seconds"):
        Settings(webhook_retry_seconds="5,soon")
    with pytest.raises(ValidationError, match="from 1 to 30"):
        Settings(webhook_retry_seconds="-1")
