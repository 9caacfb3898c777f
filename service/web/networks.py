"""Lists of networks that tell a machine from a person (docs/design.md#click-tracking): the scanners' of click
and open tracking (service/web/scanners.txt) and the mail proxies' of open tracking (service/web/proxies.txt),
each replaceable by a file of the operator's.

A list is one network a line, ``#`` starting a comment; a line's text up to its first comma counts, so a CSV
whose first column is the network reads as it is (Apple's egress-ip-ranges.csv of iCloud Private Relay, some
hundred thousand lines). The networks are merged into sorted ranges once and a lookup bisects them: a long list
costs the answer to a request no more than a short one.
"""

import bisect
import socket
from importlib import resources
from pathlib import Path

from service.errors import ConfigError

_V6 = 1 << 32  # IPv6 numbers shifted past IPv4's: one sorted list for both
_MAPPED = 0xFFFF << 32  # ::ffff:a.b.c.d, an IPv4 client on an IPv6 socket


def _number(address: str) -> int | None:
    """The address as one number of the shared order; None when it is no address."""
    try:
        if ":" not in address:
            return int.from_bytes(socket.inet_pton(socket.AF_INET, address), "big")
        number = int.from_bytes(socket.inet_pton(socket.AF_INET6, address.partition("%")[0]), "big")
    except (OSError, ValueError):
        return None
    return number - _MAPPED if number >> 32 == 0xFFFF else number + _V6


def _range(entry: str) -> tuple[int, int] | None:
    """The first and last number of a network ``address/length`` (host bits ignored); None when it is none."""
    address, slash, length = entry.partition("/")
    start = _number(address)
    if start is None or (slash and not (length.isascii() and length.isdigit())):
        return None
    v6 = ":" in address
    bits = 128 if v6 else 32
    prefix = int(length) if slash else bits
    if prefix > bits or (v6 and start < _V6):  # a mapped IPv4 address names no IPv6 network here
        return None
    host = (1 << (bits - prefix)) - 1
    start = ((start - _V6 if v6 else start) & ~host) + (_V6 if v6 else 0)
    return start, start + host


class Networks:
    """``host in networks``: whether the address is in one of them (False for a host that is no address)."""

    __slots__ = ("_ends", "_starts")

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(ranges):
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._starts = [start for start, _ in merged]
        self._ends = [end for _, end in merged]

    def __contains__(self, host: object) -> bool:
        number = _number(host) if isinstance(host, str) else None
        if number is None:
            return False
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
        ranges = []
        for number, line in enumerate(text.splitlines(), 1):
            if entry := line.partition("#")[0].partition(",")[0].strip():
                if (found := _range(entry)) is None:
                    raise ConfigError(f"{where}: line {number}: {entry[:60]!r} is not a network")
                ranges.append(found)
        return cls(ranges)
