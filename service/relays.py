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

An account with relays of its own (einmal.relays, einmal.account_relays) sends only through them,
by its weights (`Routes.of`); the others send through the environment's. A relay's state is one
per node, keyed by where it connects (host, port, TLS, user, password, CA), shared by every
account that uses it: a relay down is down for all of them, another relay is not touched
(docs/design.md#sending-identity).
"""

import logging
import time
from dataclasses import dataclass, field, replace
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
    label: str = field(default="", compare=False)  # the operator's name for an account's relay

    @property
    def name(self) -> str:
        return self.label or f"{self.host}:{self.port}"


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


@dataclass(frozen=True)
class Relaying:
    """What sending needs of the settings: the environment's relays, the first pause after a relay refused, and
    the seconds to wait for an SMTP server on any one command. A node's connections and a test message alike."""

    relays: tuple[Relay, ...]
    retry_base: float
    timeout: float

    @classmethod
    def of(cls, settings) -> "Relaying":
        return cls(tuple(from_settings(settings)), settings.retry_base_seconds, settings.smtp_timeout_seconds)


def from_account(relay) -> Relay:
    """An account's relay (service/accounts/identity.py AccountRelay) with its weight and name; ValueError
    naming the relay, never its URL."""
    try:
        parsed = parse_url(relay.url)
    except ValueError as exc:
        raise ValueError(f"relay {relay.name}: {exc}") from None
    return replace(parsed, weight=relay.weight, label=relay.name)


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
    """A set of relays by weight: the environment's, or one account's."""

    def __init__(self, relays: list[Relay], retry_base_seconds: float, states: list[RelayState] | None = None) -> None:
        self.first_pause = min(MAX_FIRST_PAUSE, max(retry_base_seconds, MIN_PAUSE))
        self.states = states if states is not None else [RelayState(relay, self.first_pause) for relay in relays]
        self.weights = [relay.weight for relay in relays]
        self.owed = [0] * len(relays)

    def pick(self) -> int:
        """The next relay by weight (smooth weighted round robin), for a message of an account's own."""
        total = sum(self.weights)
        self.owed = [o + w for o, w in zip(self.owed, self.weights, strict=True)]
        best = max(range(len(self.owed)), key=self.owed.__getitem__)
        self.owed[best] -= total
        return best

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


class Routes:
    """Every relay this node sends through, one RelayState each however many accounts use it: the
    environment's relays (`default`) and each account's set of them (`of`)."""

    def __init__(self, relaying: Relaying) -> None:
        self.retry_base = relaying.retry_base
        self.default = Relays(list(relaying.relays), self.retry_base)
        self.states: dict[Relay, RelayState] = {replace(s.relay, weight=1): s for s in self.default.states}
        self.sets: dict[tuple, Relays] = {}

    def of(self, account_relays: tuple) -> Relays:
        """The relays of an account (its AccountRelay tuple; empty: the environment's). ValueError for a
        relay whose URL cannot be used."""
        if not account_relays:
            return self.default
        key = tuple((r.name, r.url, r.weight) for r in account_relays)
        found = self.sets.get(key)
        if found is None:
            parsed = [from_account(r) for r in account_relays]
            states = []
            for relay in parsed:
                shared = replace(relay, weight=1)
                if shared not in self.states:
                    self.states[shared] = RelayState(relay, self.default.first_pause)
                states.append(self.states[shared])
            found = self.sets[key] = Relays(parsed, self.retry_base, states)
        return found

    def usable(self, account_relays: tuple) -> bool:
        """Whether a relay of the account's is up (or due to be tried again)."""
        try:
            return self.of(account_relays).next_up() <= time.monotonic()
        except ValueError:
            return True  # the claimer pauses the campaign for it
