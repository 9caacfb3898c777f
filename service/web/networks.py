"""Lists of networks that tell a machine from a person (docs/design.md#click-tracking): the scanners' of click
and open tracking (service/web/scanners.txt) and the mail proxies' of open tracking (service/web/proxies.txt),
each replaceable by a file of the operator's.

A list is one network a line, ``#`` starting a comment; a line's text up to its first comma counts, so a CSV
whose first column is the network reads as it is (Apple's egress-ip-ranges.csv of iCloud Private Relay, some
hundred thousand lines). The networks are merged into sorted ranges once and a lookup bisects them: a long list
costs the answer to a request no more than a short one.
"""

import bisect
import ipaddress
from importlib import resources
from pathlib import Path

from service.errors import ConfigError


class Networks:
    """``host in networks``: whether the address is in one of them (False for a host that is no address)."""

    __slots__ = ("_ends", "_starts")

    def __init__(self, networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
        ranges: list[tuple[int, int]] = []  # IPv6 numbers shifted past IPv4's: one sorted list for both
        for network in networks:
            offset = 0 if network.version == 4 else 1 << 32
            ranges.append((int(network.network_address) + offset, int(network.broadcast_address) + offset))
        merged: list[list[int]] = []
        for start, end in sorted(ranges):
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._starts = [start for start, _ in merged]
        self._ends = [end for _, end in merged]

    def __contains__(self, host: object) -> bool:
        try:
            address = ipaddress.ip_address(host if isinstance(host, str) else "")
        except ValueError:
            return False
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        number = int(address) + (0 if address.version == 4 else 1 << 32)
        at = bisect.bisect_right(self._starts, number) - 1
        return at >= 0 and number <= self._ends[at]

    def __len__(self) -> int:
        return len(self._starts)

    @classmethod
    def read(cls, path: str | None, shipped: str, setting: str) -> "Networks":
        """The networks of the file at `path`, else of service/web/`shipped`; ConfigError naming `setting` for a
        file that cannot be read, and for a line that is no network."""
        where = path or f"service/web/{shipped}"
        try:
            text = Path(path).read_text() if path else (resources.files("service.web") / shipped).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{setting}: cannot read {path}: {exc}") from None
        networks = []
        for number, line in enumerate(text.splitlines(), 1):
            if entry := line.partition("#")[0].partition(",")[0].strip():
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    raise ConfigError(f"{where}: line {number}: {entry[:60]!r} is not a network") from None
        return cls(networks)
