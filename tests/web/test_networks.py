"""The network lists of click and open tracking (service/web/networks.py): CIDR lines or a CSV whose first
column is the network (Apple's egress-ip-ranges.csv), merged and bisected; the same answers as ipaddress."""

import ipaddress
import random
from pathlib import Path

import pytest

from service.errors import ConfigError
from service.web.networks import Networks


def test_a_csv_of_apples_form_reads_as_it_is(tmp_path: Path) -> None:
    listed = tmp_path / "egress-ip-ranges.csv"
    listed.write_text(
        "# Apple's relays\n172.224.224.0/27,GB,GB-EN,London,\n2a02:26f7:b3c0:4000::/64,US,US-CA,Cupertino,\n"
        "104.28.0.9,DE,DE-BE,Berlin,\n"
    )
    networks = Networks.read(str(listed), "proxies.txt", "EINMAL_OPEN_PROXIES_FILE")
    inside = ["172.224.224.31", "2a02:26f7:b3c0:4000::1", "::ffff:172.224.224.1", "104.28.0.9"]
    outside = ["172.224.224.32", "2a02:26f7:b3c0:4001::", "104.28.0.10", "not an address", "", "::"]
    assert [host in networks for host in inside] == [True] * 4
    assert [host in networks for host in outside] == [False] * 6


def test_the_shipped_lists_read_and_a_bad_line_is_one_line(tmp_path: Path) -> None:
    assert "17.253.1.1" in Networks.read(None, "proxies.txt", "EINMAL_OPEN_PROXIES_FILE")
    assert "40.92.10.20" in Networks.read(None, "scanners.txt", "EINMAL_CLICK_SCANNERS_FILE")
    bad = tmp_path / "bad.csv"
    for line in ("10.0.0.0/33", "300.1.1.1", "2a02::/129", "10.0.0.0/x", "::ffff:1.2.3.4/120"):
        bad.write_text(f"17.0.0.0/8\n{line},US\n")
        with pytest.raises(ConfigError, match=r"^.*bad.csv: line 2: .* is not a network$"):
            Networks.read(str(bad), "proxies.txt", "EINMAL_OPEN_PROXIES_FILE")
    with pytest.raises(ConfigError, match="EINMAL_OPEN_PROXIES_FILE: cannot read"):
        Networks.read(str(tmp_path / "absent"), "proxies.txt", "EINMAL_OPEN_PROXIES_FILE")


def test_lookups_agree_with_ipaddress(tmp_path: Path) -> None:
    rng = random.Random(7)
    nets = [
        ipaddress.ip_network(f"{ipaddress.IPv4Address(rng.getrandbits(32))}/{rng.randint(8, 32)}", strict=False)
        for _ in range(300)
    ] + [
        ipaddress.ip_network(f"{ipaddress.IPv6Address(rng.getrandbits(128))}/{rng.randint(16, 128)}", strict=False)
        for _ in range(300)
    ]
    listed = tmp_path / "list.txt"
    listed.write_text("\n".join(map(str, nets)))
    networks = Networks.read(str(listed), "proxies.txt", "X")
    hosts = [str(n.network_address + rng.randint(0, min(n.num_addresses - 1, 5))) for n in nets]
    hosts += [str(ipaddress.IPv4Address(rng.getrandbits(32))) for _ in range(3000)]
    hosts += [str(n.broadcast_address + 1) for n in nets if int(n.broadcast_address) < (2**n.max_prefixlen - 1)]
    for host in hosts:
        assert (host in networks) == any(ipaddress.ip_address(host) in n for n in nets), host
