"""The relays a node sends through, and which of them are up (docs/design.md#sending-budget).

EINMAL_SMTP_URLS names several, comma-separated:

    smtp://user:pass@relay1:587?tls=starttls&weight=3,smtps://relay2:465

`smtp://` is plain or, with `?tls=starttls`, STARTTLS (required); `smtps://` is
implicit TLS. `weight` (default 1) shares the node's connections out; `ca_file`
names a PEM bundle to verify the relay with. The user name and password are
percent-encoded. Unset, the EINMAL_SMTP_HOST/PORT/TLS/USERNAME/PASSWORD
variables describe the one relay.

A relay that refuses connections, TLS or AUTH is marked down and tried again
after a pause that doubles while it stays down; meanwhile every connection
sends through the relays still up. Only when none is up do the connections
wait. A message that reached no relay was not sent: it goes to the next relay
up in the same `sending` transition, and carries the same Message-ID
whichever relay takes it.
"""

import logging
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("einmal.sender")

MIN_PAUSE, MAX_FIRST_PAUSE, MAX_PAUSE = 0.05, 0.5, 30.0  # seconds a relay is left alone once down
_SCHEMES = {"smtp": "none", "smtps": "tls"}
_HINT = " (percent-encode '/', '?', '#', '@' and ',' in the user name and password)"


@dataclass(frozen=True)
class Relay:
    host: str
    port: int
    tls: str = "none"  # none | starttls | tls
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    weight: int = 1

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"


def parse_url(url: str) -> Relay:
    """One relay from its URL; ValueError that never quotes the URL (it may hold a password)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ValueError("a relay URL is not host:port with a port from 1 to 65535" + _HINT) from None
    if parts.scheme not in _SCHEMES:
        raise ValueError("a relay URL must start with smtp:// or smtps://")
    if not parts.hostname or any(c in parts.hostname for c in " \r\n\0"):
        raise ValueError("a relay URL names no host" + _HINT)
    if parts.fragment or parts.path not in ("", "/"):
        raise ValueError("a relay URL has nothing after the port but ?name=value options" + _HINT)
    try:
        options = {k: v[-1] for k, v in parse_qs(parts.query, strict_parsing=True).items()} if parts.query else {}
    except ValueError:
        raise ValueError("a relay URL's options are not name=value pairs joined by '&'") from None
    unknown = set(options) - {"tls", "weight", "ca_file"}
    if unknown:
        raise ValueError(f"a relay URL has an unknown option: {sorted(unknown)[0]} (known: tls, weight, ca_file)")
    tls = options.get("tls", _SCHEMES[parts.scheme])
    if tls not in (("tls",) if parts.scheme == "smtps" else ("none", "starttls")):
        raise ValueError("tls= must be none or starttls for smtp://, tls for smtps://")
    weight = options.get("weight", "1")
    if not (weight.isascii() and weight.isdigit() and 1 <= int(weight) <= 1000):
        raise ValueError("weight= must be a whole number from 1 to 1000")
    return Relay(
        parts.hostname,
        port or (465 if tls == "tls" else 25),
        tls,
        unquote(parts.username) if parts.username else None,
        unquote(parts.password) if parts.password is not None else None,
        options.get("ca_file"),
        int(weight),
    )


def parse_urls(value: str) -> list[Relay]:
    relays = [parse_url(url) for url in value.split(",") if url.strip()]
    if not relays:
        raise ValueError("expected one or more smtp:// or smtps:// URLs, comma-separated")
    return relays


def from_settings(settings) -> list[Relay]:
    if settings.smtp_urls:
        return parse_urls(settings.smtp_urls)
    password = settings.smtp_password.get_secret_value() if settings.smtp_password else None
    return [
        Relay(
            settings.smtp_host,
            settings.smtp_port,
            settings.smtp_tls,
            settings.smtp_username,
            password if settings.smtp_username is not None else None,
            settings.smtp_tls_ca_file,
        )
    ]


def share(relays: list[Relay], connections: int) -> list[int]:
    """Each connection's own relay (an index), by weight: 4 connections, weights 3 and 1 -> 0, 0, 0, 1."""
    total = sum(r.weight for r in relays)
    owed = [0.0] * len(relays)
    chosen = []
    for _ in range(connections):  # smooth weighted round robin
        owed = [o + r.weight for o, r in zip(owed, relays, strict=True)]
        best = max(range(len(relays)), key=lambda i: owed[i])
        owed[best] -= total
        chosen.append(best)
    return chosen


class RelayState:
    """Whether a relay is up, and for how long a relay that is down is left alone."""

    def __init__(self, relay: Relay, first_pause: float) -> None:
        self.relay, self.first_pause = relay, first_pause
        self.pause = first_pause  # the next pause; doubles while the relay stays down
        self.down_until = 0.0  # time.monotonic()
        self.reached = 0  # messages that reached this relay, on any connection
        self.reason: str | None = None  # why it is down

    def up(self) -> None:
        self.reached += 1
        self.pause, self.reason = self.first_pause, None

    def down(self, reason: str, reached_before: int) -> bool:
        """Mark the relay down after a try that reached nothing; False when another connection reached it
        meanwhile (the relay is up: only that connection was refused)."""
        if self.reached > reached_before:
            return False
        now = time.monotonic()
        if now >= self.down_until:  # else a try of the pause under way
            self.reason = reason
            log.warning(
                "%s; nothing sent, the row is back in the queue with no attempt counted; next try in %.1fs",
                reason,
                self.pause,
            )
            self.down_until = now + self.pause
            self.pause = min(self.pause * 2, MAX_PAUSE)
        return True


class Relays:
    def __init__(self, relays: list[Relay], retry_base_seconds: float) -> None:
        self.first_pause = min(MAX_FIRST_PAUSE, max(retry_base_seconds, MIN_PAUSE))
        self.states = [RelayState(relay, self.first_pause) for relay in relays]

    def order(self, own: int) -> list[RelayState]:
        """The relays up now, a connection's own first, then the others in the order configured."""
        now = time.monotonic()
        states = [self.states[own]] + [s for i, s in enumerate(self.states) if i != own]
        return [s for s in states if s.down_until <= now]

    def next_up(self) -> float:
        """time.monotonic() when the first relay down may be tried again (0: one is up)."""
        return min(s.down_until for s in self.states)

    def unavailable(self) -> str | None:
        """Why nothing can be sent, when every relay is down."""
        if all(s.reason is not None for s in self.states):
            return "; ".join(s.reason for s in self.states if s.reason)
        return None
