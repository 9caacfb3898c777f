"""Configuration: environment variables only, prefix EINMAL_."""

import difflib
import ipaddress
import os
import re
from collections.abc import Mapping
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

import idna
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.addresses import address_problem
from service.domains import parse_limits
from service.errors import ConfigError
from service.relays import parse_urls

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_SELECTOR = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
MAX_DKIM_KEYS = 4  # dual signing (RFC 8463) needs two; a key rotation beside it, four


def _items(value: str, what: str, fold=str) -> str:
    """A comma-separated list, its items stripped and joined again; ValueError for an empty or repeated
    item or more than MAX_DKIM_KEYS of them (what: "selectors", "key files")."""
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise ValueError(f"one or more comma-separated {what}, without an empty item")
    if len(items) > MAX_DKIM_KEYS:
        raise ValueError(f"at most {MAX_DKIM_KEYS} comma-separated {what}, not {len(items)}")
    seen = set()
    for item in items:
        if fold(item) in seen:
            raise ValueError(f"{item!r} is given twice")
        seen.add(fold(item))
    return ",".join(items)


# after the first attempt (at once): 5 s, 5 min, 30 min, 2 h, 5 h, then 10 h six times; about 2.8 days in all
WEBHOOK_DELAYS = (5.0, 300.0, 1800.0, 7200.0, 18000.0) + (36000.0,) * 6


def webhook_delays(value: str) -> tuple[float, ...]:
    """`5,300,1800` as seconds; ValueError unless each is a number from 0 to a week, at most 30 of them."""
    try:
        delays = tuple(float(part) for part in value.split(","))
    except ValueError:
        raise ValueError("comma-separated seconds, e.g. 5,300,1800") from None
    if not 1 <= len(delays) <= 30 or not all(0 <= d <= 7 * 86400 for d in delays):
        raise ValueError("from 1 to 30 comma-separated waits, each from 0 to 604800 seconds")
    return delays


def networks(value: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """`10.0.0.0/8,fd00::/8` as networks; ValueError naming the first that is not one."""
    found = []
    for item in (part.strip() for part in value.split(",")):
        try:
            found.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item[:60]!r} is not a network (CIDR), e.g. 10.20.0.0/16") from None
    return tuple(found)


def dns_servers(value: str) -> tuple[tuple[str, int], ...]:
    """`127.0.0.1:5353,[::1]` as (address, port) pairs; ValueError unless each is an IP address and a port."""
    found = []
    for item in (part.strip() for part in value.split(",")):
        host, port = item, "53"
        if item.startswith("["):
            host, _, port = item[1:].partition("]")
            port = port.removeprefix(":") or "53"
        elif item.count(":") == 1:
            host, _, port = item.partition(":")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            raise ValueError(
                f"{item[:60]!r} is not an IP address with an optional :port, e.g. 127.0.0.1:5353"
            ) from None
        if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"{item[:60]!r}: the port must be from 1 to 65535")
        found.append((address, int(port)))
    return tuple(found)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EINMAL_", extra="ignore", frozen=True, allow_inf_nan=False)

    database_url: str | None = Field(
        None,
        description=(
            "PostgreSQL URL (`postgresql://user:password@host:port/db`; several hosts `h1:p1,h2:p2`; "
            "percent-encode `/ ? # @` in the user name and password); when unset `DATABASE_URL` is used; when both "
            "are unset, the embedded PostgreSQL. A malformed URL stops any command with one line naming the "
            "variable; no part of the URL is ever printed but its hosts and database"
        ),
        examples=["postgresql://einmal@db.example.org:5432/einmal"],
    )
    # docs/design.md#liveness
    database_pooler: Literal["none", "session", "transaction"] = Field(
        "none",
        description=(
            "`none`, `session` or `transaction`: what stands between einmal and PostgreSQL at "
            "`EINMAL_DATABASE_URL`, a pooler such as PgBouncer (see [PgBouncer](../operations/database.md#pgbouncer))"
        ),
    )
    listen_database_url: str | None = Field(
        None,
        description=(
            "the listener's own URL for `LISTEN`, to the same database without the pooler; needed with "
            "`EINMAL_DATABASE_POOLER=transaction`; unset: `EINMAL_DATABASE_URL`"
        ),
        examples=["postgresql://einmal@db.example.org:5432/einmal"],
    )
    smtp_host: str = Field("127.0.0.1", description="the SMTP server (submission relay) einmal hands every message to")
    smtp_port: int = Field(25, ge=1, le=65535, description="its port (1–65535)")
    smtp_tls: Literal["none", "starttls", "tls"] = Field(
        "none",
        description=(
            "`none`, `starttls` (required, not opportunistic: fails if the server does not offer it) or `tls` "
            "(implicit TLS, port 465)"
        ),
    )
    smtp_tls_ca_file: str | None = Field(
        None,
        description="PEM file of CA certificates to verify the SMTP server with; unset: the system's",
        examples=["/etc/ssl/certs/relay-ca.pem"],
    )
    smtp_username: str | None = Field(None, description="SMTP AUTH user name; unset: no AUTH", examples=["einmal"])
    smtp_password: SecretStr | None = Field(
        None, description="SMTP AUTH password; never printed, logged or traced", examples=[""]
    )
    smtp_urls: str | None = Field(  # service/relays.py
        None,
        description=(
            "several relays instead of the `EINMAL_SMTP_*` ones above, comma-separated. `smtp://` is plain or, "
            "with `tls=starttls`, STARTTLS; `smtps://` implicit TLS; `weight` (1–1000, default 1) shares the "
            "node's connections out; `ca_file=` a PEM bundle to verify with; percent-encode `/ ? # @ ,` in the "
            "user name and password. A relay that refuses connections, TLS or AUTH is left alone, with a pause "
            "that doubles, while the others take its messages (same Message-ID); never printed: it holds passwords"
        ),
        examples=["smtp://user:pass@relay1.example.org:587?tls=starttls&weight=3,smtps://relay2.example.org:465"],
    )
    smtp_connections: int = Field(  # measured: docs/design.md#process
        20,
        ge=1,
        le=256,
        description=(
            "persistent SMTP connections per node (1–256), each reused for many messages; a relay caps a client's "
            "connections (Postfix: `smtpd_client_connection_count_limit`, 50 per client address), so keep nodes × "
            "connections per host below it; with 8 or more, one of them is kept for transactional messages"
        ),
    )
    smtp_timeout_seconds: float = Field(
        30.0, gt=0, description="seconds to wait for the SMTP server on any one command"
    )
    batch_size: int = Field(200, ge=1, le=10_000, description="recipients claimed per batch (1–10000)")
    tick_seconds: float = Field(
        5.0,
        ge=0.05,
        le=3600,
        description=(
            "seconds between scheduler ticks and heartbeats (0.05–3600, at most half of "
            "`EINMAL_NODE_TIMEOUT_SECONDS`); `NOTIFY` wakes nodes sooner"
        ),
    )
    node_timeout_seconds: float = Field(
        30.0, gt=0, description="a node whose heartbeat is older than this is dead: its rows are taken back"
    )
    sequence_batch: int = Field(
        500,
        ge=1,
        le=10_000,
        description=(
            "members of a sequence the sweep advances per statement (1–10000): the work of one tick, whatever the "
            "list's size ([Sequences](../design.md#sequences))"
        ),
    )
    sequence_tick_seconds: float = Field(
        1.0,
        ge=0.05,
        le=3600,
        description=(
            "seconds between sweeps of the sequences (0.05–3600): a step falls due at most this late; a join wakes "
            "the sweep at once (`NOTIFY`)"
        ),
    )
    sequence_wait_seconds: float = Field(
        5.0,
        ge=0.05,
        le=3600,
        description=(
            "seconds a member waits before the sweep looks again when its previous step's message is not settled "
            "yet (queued, being sent, in doubt): a sequence's steps go in order"
        ),
    )
    db_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description=(
            "seconds a node waits for any one database statement; then it drops that connection and the actor "
            "restarts ([A hung or lost database connection]"
            "(../operations/database.md#a-hung-or-lost-database-connection))"
        ),
    )
    db_wait_seconds: float | None = Field(
        None,
        ge=0,
        description=(
            "seconds `einmal run` waits at start for a database it cannot reach (one line as the wait begins, one "
            "every 30 s); unset: as long as it takes, as a running node rides out an outage; `0`: exit 1 at once "
            "with one line, for deployments that prefer exit-and-restart "
            "([The database goes away](../operations/database.md#the-database-goes-away))"
        ),
        examples=[""],
    )
    in_doubt: Literal["hold", "resend"] = Field(
        "hold",
        description=(
            "what to do with rows whose SMTP transaction a dead node left unanswered: `hold` (never twice: they "
            "wait for `einmal reconcile`) or `resend` (queued again, same Message-ID) "
            "([The honest limit](../guide/promise.md#the-honest-limit-smtp))"
        ),
    )
    # docs/design.md#liveness
    require_synchronous_replication: bool = Field(
        False,
        description=(
            "`true`: while the database has standbys but none synchronous, `/readyz` is 503 and the node claims "
            "nothing; `false`: one warning line and a `/readyz` note ([Failover](../operations/failover.md))"
        ),
    )
    # docs/design.md#liveness
    journal_seconds: float = Field(
        10.0,
        ge=0,
        description=(
            "the outcomes a node keeps to write again on a new primary after a failover: those recorded within "
            "this many seconds of the newest (the lag an asynchronous standby may have with no duplicate; "
            "[Failover](../operations/failover.md))"
        ),
    )
    journal_size: int = Field(
        50_000, ge=0, le=1_000_000, description="at most this many of those outcomes (about 250 bytes each)"
    )
    max_attempts: int = Field(
        5, ge=1, description="delivery attempts (4xx replies, lost connections) before a row is `failed`"
    )
    retry_base_seconds: float = Field(
        60.0, ge=0, description="first retry delay in seconds; doubles with each attempt (±20% jitter)"
    )
    retry_max_seconds: float = Field(3600.0, ge=0, description="longest retry delay in seconds")
    rate_limit: float = Field(
        0.0,
        ge=0,
        description=(
            "messages per second for **all nodes sharing the database together** (set the relay's own limit, not "
            "a share of it); `0`: no limit. Every claimed row gets a send slot, 1/rate apart across the cluster"
        ),
    )
    quota_hour: int = Field(
        0,
        ge=0,
        description=(
            "messages in any hour, for all nodes together (a sliding window); the rest wait, queued; `0`: none"
        ),
    )
    quota_day: int = Field(0, ge=0, description="messages in any 24 hours, for all nodes together; `0`: none")
    account_rate_limit: float = Field(
        0.0,
        ge=0,
        description=(
            "messages per second of any one account, for all nodes together, unless the account has its own "
            "(`einmal accounts set --rate`); `0`: none. Within `EINMAL_RATE_LIMIT`, which all accounts share in turn"
        ),
    )
    account_quota_hour: int = Field(
        0,
        ge=0,
        description="messages of any one account in any hour, unless it has its own (`--quota-hour`); `0`: none",
    )
    account_quota_day: int = Field(
        0,
        ge=0,
        description="messages of any one account in any 24 hours, unless it has its own (`--quota-day`); `0`: none",
    )
    account_messages_queued: int = Field(
        10_000,
        ge=0,
        description=(
            "transactional messages an account may have queued and not yet sent, unless it has its own "
            "(`--messages-queued`); past it a new message is refused, 429 with Retry-After; `0`: no bound"
        ),
    )
    quota_hour_seconds: float = Field(
        3600.0,
        gt=0,
        description="the length of the `EINMAL_QUOTA_HOUR` window; shortened only by tests, which cannot wait an hour",
    )
    quota_day_seconds: float = Field(
        86400.0, gt=0, description="the length of the `EINMAL_QUOTA_DAY` window; shortened only by tests"
    )
    domain_limits: str | None = Field(  # service/domains.py
        None,
        description=(
            "per recipient domain, `N/s` messages a second to it from all nodes together, `Nconn` a node's "
            "connections carrying a message to it at once. A domain is what follows `@`, as einmal keys addresses"
        ),
        examples=["gmail.com=20/s,5conn;outlook.com=10/s"],
    )
    domain_pause_seconds: float = Field(
        60.0,
        gt=0,
        description=(
            "how long a domain that answered `421`/`451` with status `4.7.x`, or refused by policy or "
            "authentication (`5.7.x`), is left alone by every node; doubles with each failed probe, at most "
            "`EINMAL_DOMAIN_PAUSE_MAX_SECONDS`. Its rows keep their place in the queue and are charged no attempt "
            "(but a refused row itself: one attempt and its backoff); other domains go on"
        ),
    )
    domain_pause_max_seconds: float = Field(3600.0, gt=0, description="the longest such pause")
    domain_probes: int = Field(
        1,
        ge=1,
        le=100,
        description="messages sent to a paused domain when its pause is over; one accepted closes the pause",
    )
    from_domains: str | None = Field(
        None,
        description=(
            "the From domains, comma-separated, of an account that was given none of its own (`einmal account domain "
            "add`); unset: such an account may use any From, as an installation of one account does"
        ),
        examples=["news.example.org,example.org"],
    )
    message_id_domain: str | None = Field(
        None,
        description="domain of the Message-ID; unset: the From address's domain",
        examples=["mail.example.org"],
    )
    unsubscribe_url: str | None = Field(
        None,
        description=(
            "the one-click unsubscribe endpoint (einmal's own is `<public URL of EINMAL_HTTP_ADDRESS>/unsubscribe`); "
            "einmal adds `?token=<signed token>` (`&token=` when it has a query). Required, with "
            "`EINMAL_UNSUBSCRIBE_SECRET`, to send a campaign not made with `--no-unsubscribe`. Set, every message "
            "carries `List-Unsubscribe` and `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058). Must be "
            "`https://`; `http://` only for a loopback host"
        ),
        examples=["https://example.org/unsubscribe"],
    )
    unsubscribe_secret: SecretStr | None = Field(
        None,
        description=(
            "keys of the HMAC-SHA256 signature on unsubscribe tokens, comma-separated: the first signs, every one "
            "verifies (to rotate, put the new key first and keep the old one while its links may be used). Each key "
            "at least 32 characters (`openssl rand -hex 32`): a short key can be guessed offline from one token, so "
            "`einmal run` and `serve` refuse one, exit 2"
        ),
        examples=[""],
    )
    unsubscribe_mailto: str | None = Field(
        None,
        description=(
            "an ASCII address; set, `List-Unsubscribe` also carries `<mailto:ADDR?subject=unsubscribe%20<token>>` "
            "(the same signed token as the link; needs `EINMAL_UNSUBSCRIBE_SECRET`)"
        ),
        examples=["unsubscribe@example.org"],
    )
    # double opt-in (service/subscribers/optin.py, docs/design.md#api): the flood bounds are counted in PostgreSQL
    # for the whole cluster; a client is a network (service/clients.py) or an API key
    confirm_url: str | None = Field(
        None,
        description=(
            "double opt-in: the URL of this surface's `/confirm` as subscribers reach it (https, or http for a "
            "loopback host); with `EINMAL_UNSUBSCRIBE_SECRET` (it signs the links) and a confirmations' From "
            "(`EINMAL_OPTIN_FROM`, or a list's own) it turns "
            "on `POST /api/v1/subscribe` and the sign-up forms ([Double opt-in](../guide/double-opt-in.md))"
        ),
        examples=["https://example.org/confirm"],
    )
    # click tracking (service/mail/clicks.py, service/web/clicks.py, docs/guide/click-tracking.md)
    click_url: str | None = Field(
        None,
        description=(
            "click and open tracking: the URL of this surface's `/c` as readers reach it (https, or http for a "
            "loopback host, no query); einmal adds `/<signed token>` for a link, `/o/<signed token>` for an open's "
            "pixel. With `EINMAL_UNSUBSCRIBE_SECRET` (it signs them) it lets a campaign made with `--track-clicks` "
            "or `--track-opens` go out ([Click tracking](../guide/click-tracking.md))"
        ),
        examples=["https://example.org/c"],
    )
    click_scanners_file: str | None = Field(
        None,
        description=(
            "click tracking: a file of the networks whose clicks are a machine's (one CIDR a line, `#` comments), "
            "read instead of the list einmal ships (service/web/scanners.txt)"
        ),
        examples=["/etc/einmal/scanners.txt"],
    )
    open_proxies_file: str | None = Field(
        None,
        description=(
            "open tracking: a file of the networks of mail proxies whose opens are a machine's (Apple Mail Privacy "
            "Protection's: one CIDR a line, `#` comments, or Apple's `egress-ip-ranges.csv` as it is), read "
            "instead of the list einmal ships (service/web/proxies.txt)"
        ),
        examples=["/etc/einmal/egress-ip-ranges.csv"],
    )
    optin_from: str | None = Field(
        None,
        description="the default From of the confirmation messages of double opt-in, for the lists given none "
        "of their own (`einmal lists form open LIST --from`)",
        examples=["Example News <news@example.org>"],
    )
    optin_window_hours: float = Field(
        72.0,
        gt=0,
        le=24 * 365,
        description=(
            "how long a sign-up waits for its confirmation: no second message meanwhile, its link expires after "
            "it, and the pruner then removes it"
        ),
    )
    message_key_hours: float = Field(
        72.0,
        ge=24,
        le=24 * 365,
        description=(
            "how long an Idempotency-Key is kept, by the API for every POST and with a transactional message: a "
            "retry with it within this time finds the same answer and the same message, whichever node answers and "
            "whatever died between, and another request with it is 422 ([Messages](../guide/messages.md)); "
            "forgotten after"
        ),
    )
    message_retention_days: float | None = Field(
        None,
        gt=0,
        description=(
            "the pruner deletes transactional messages made more than this many days ago, with their send row and "
            "campaign, unless in doubt; unset: they stay"
        ),
    )
    optin_address_limit: int = Field(
        3, ge=1, description="confirmation messages to one mailbox of an account in any 24 hours, over all its lists"
    )
    optin_client_limit: int = Field(
        30,
        ge=1,
        le=100_000,
        description=(
            "sign-ups one client (on the form its network: an IPv4 address's /24, an IPv6 address's /64; on the "
            "API its key) may make in an hour, counted in PostgreSQL for all nodes together; past it 429 with "
            "`Retry-After`"
        ),
    )
    optin_list_limit: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        description=(
            "new confirmation messages of one list in an hour, for all nodes together: past it a sign-up is "
            "answered the same and its message waits for a sign-up in a later hour"
        ),
    )
    shutdown_grace_seconds: float = Field(
        10.0, gt=0, description="seconds `SIGTERM` waits for claimed work to finish or be released before exiting"
    )
    restart_intensity: int = Field(
        10,
        ge=0,
        description=(
            "an actor that fails more often than this within `EINMAL_RESTART_PERIOD_SECONDS` stops the node "
            "(exit 1, one line naming the actor and its error) so that systemd or the container runtime restarts "
            "it; the restarts back off 0.2 s, doubling to 5 s. A failure that only says the database is "
            "unreachable is not counted: a node rides out a database outage of any length"
        ),
    )
    restart_period_seconds: float = Field(
        60.0, gt=0, description="the window, in seconds, in which those failures are counted"
    )
    node_id: str | None = Field(
        None,
        description=(
            "this node's name; unset: `<hostname>-<pid>-<random>`. Its claim tokens, its rows in `einmal.nodes`, "
            "are `<node id>/<process>.<n>`, unique to each process even when the id is fixed"
        ),
        examples=["mail-1"],
    )
    http_address: str | None = Field(
        None,
        description=(
            "`host:port` (`[::1]:8080` for IPv6; port 0: a free one) of the HTTP surface: one-click unsubscribe, "
            "the API, `/healthz`, `/readyz`, `/metrics`. `einmal run` serves it beside the sending actors; "
            "`einmal serve` serves only it. Unset: no listener (`einmal serve` refuses to start)"
        ),
        examples=["127.0.0.1:8080"],
    )
    http_header_timeout_seconds: float = Field(  # a request head's deadline (actors/http.py)
        10.0,
        gt=0,
        description=(
            "a connection's time to send a request's head, from its opening or its previous answer; then it is closed"
        ),
    )
    http_body_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description=(
            "a request's time to send its body, from its head, and a client's to take an answer it has stopped "
            "reading; then its connection is closed"
        ),
    )
    http_max_connections: int = Field(
        1000,
        ge=1,
        description=(
            "HTTP connections at once, and at most a quarter of the soft limit on open files (raised to the hard "
            "limit at start) ([HTTP surface](http.md))"
        ),
    )
    http_body_buffer_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024 * 1024,
        description=(
            "bytes of request bodies held at once, by all requests together (at least 1048576, the largest body); "
            "a request finding no room within a second is 503"
        ),
    )
    http_client_connections: int = Field(
        100,
        ge=1,
        description=(
            "HTTP connections at once from one client network (an IPv4 /24, an IPv6 /64: service/clients.py), at "
            "most EINMAL_HTTP_MAX_CONNECTIONS; past it the network's own connection that waited longest for a request "
            "head is closed, else the new one is answered 503. A reverse proxy at `FORWARDED_ALLOW_IPS` is not "
            "bound by it"
        ),
    )
    http_client_body_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024 * 1024,
        description=(
            "bytes of request bodies one client network holds room for at once, at most "
            "EINMAL_HTTP_BODY_BUFFER_BYTES; >= the largest body (1 MiB); behind a reverse proxy, the client is its "
            "`X-Forwarded-For`"
        ),
    )
    console_session_idle_seconds: float = Field(
        1800.0,
        gt=0,
        description=(
            "a console session unused this long ends; its user signs in again ([console](../guide/console.md#sessions))"
        ),
    )
    console_session_lifetime_seconds: float = Field(
        43200.0,
        gt=0,
        description="a console session ends this long after its sign-in, however much it is used",
    )
    return_path: str | None = Field(
        None,
        description=(
            "VERP: each message's envelope sender (MAIL FROM) becomes "
            "`bounces+<campaign>.<subscriber>.<signature>@example.org` for `bounces@example.org`, naming its send "
            "row; unset: the From address ([Bounces and complaints](../guide/bounces.md))"
        ),
        examples=["bounces@example.org"],
    )
    return_path_secret: SecretStr | None = Field(
        None,
        description=(
            "keys of the HMAC-SHA256 signature in VERP tokens, comma-separated: the first signs, every one "
            "verifies; unset: those of `EINMAL_UNSUBSCRIBE_SECRET`. One of the two must be set with "
            "`EINMAL_RETURN_PATH`"
        ),
        examples=[""],
    )
    inbound_smtp_address: str | None = Field(
        None,
        description=(
            "`host:port` of the inbound listener for bounces (DSN) and complaints (ARF); accepts only the return "
            "path's mailbox (needs `EINMAL_RETURN_PATH`); unset: no listener"
        ),
        examples=["127.0.0.1:2525"],
    )
    inbound_protocol: Literal["smtp", "lmtp"] = Field(
        "smtp", description="`smtp` or `lmtp` (Postfix `mailbox_transport = lmtp:inet:host:port`)"
    )
    inbound_max_bytes: int = Field(
        10_000_000, ge=1_000, le=100_000_000, description="largest inbound message; larger ones are refused with 552"
    )
    inbound_timeout_seconds: float = Field(
        60.0, gt=0, description="an idle inbound connection is closed after this many seconds"
    )
    soft_bounce_limit: int = Field(
        3,
        ge=1,
        description=(
            "bounces that count (a full mailbox, routing trouble, an expiry, any temporary failure: the reasons "
            "under [Bounces and complaints](../guide/bounces.md)) of one address within "
            "`EINMAL_SOFT_BOUNCE_DAYS` that suppress it"
        ),
    )
    soft_bounce_days: float = Field(7.0, gt=0, description="the window, in days, for `EINMAL_SOFT_BOUNCE_LIMIT`")
    # a campaign pauses itself when a rate passes its threshold (service/campaigns/self_pause.py; the defaults' sources:
    # docs/design.md#sending-budget)
    pause_complaint_rate: float = Field(
        0.3,
        description=(
            "per cent (`0.3` or `0.3%`, from 0 to 100): a campaign whose complaints since its last resume are "
            "above this share of its delivered messages pauses itself; `0` or empty: never "
            "([A campaign that pauses itself](../guide/sending-policy.md#a-campaign-that-pauses-itself))"
        ),
    )
    pause_hard_bounce_rate: float = Field(
        2.0,
        description=(
            "per cent: the same for hard bounces for an address reason (by mail, webhook, or `550 5.1.1` at send "
            "time) over messages delivered or so rejected"
        ),
    )
    pause_policy_rejection_rate: float = Field(
        5.0,
        description=(
            "per cent: the same for `5.7.x` refusals at send time, one per refused attempt, over attempts "
            "delivered or refused"
        ),
    )
    pause_min_sample: int = Field(
        1000,
        ge=1,
        le=1_000_000_000,
        description=(
            "a rate is judged only once what it is over (delivered, attempts) reaches this many since the last resume"
        ),
    )
    # service/campaigns/retention.py, docs/design.md#retention
    retention_days: float | None = Field(
        None,
        ge=0,
        description=(
            "a node prunes, at start and every hour, the send rows of campaigns sent or cancelled more than this "
            "many days ago (as `einmal prune --older-than`; one node at a time); their counts, bounces and "
            "suppressions stay ([Retention](../operations/retention.md)); unset: nothing is pruned"
        ),
        examples=["90"],
    )
    # provider webhooks (service/inbound/webhook_credentials.py): the global credentials serve a single account
    ses_certificate_file: str | None = Field(
        None,
        description=(
            "PEM file of the certificate(s) Amazon SNS signs with (download the `SigningCertURL` of your topic's "
            "messages yourself: einmal fetches nothing); set, `POST /inbound/ses` takes SES bounce and complaint "
            "notifications, else it answers 404. Read at start-up: an unusable file stops `einmal run` with one "
            "line, exit 2 ([Provider webhooks](../guide/bounces.md#provider-webhooks))"
        ),
        examples=["/etc/einmal/sns-signing.pem"],
    )
    ses_topic_arn: str | None = Field(
        None,
        description=(
            "a single-account installation's comma-separated SNS topic ARNs that `/inbound/ses` accepts; it needs "
            "at least one, here or per account in `EINMAL_WEBHOOK_ACCOUNTS_FILE`, else start-up stops with one "
            "line, exit 2"
        ),
        examples=["arn:aws:sns:us-west-2:123456789012:ses-feedback"],
    )
    postmark_webhook_secret: SecretStr | None = Field(
        None,
        description=(
            "a single-account installation's `user:password`, the HTTP basic auth credentials in the Postmark "
            "webhook's URL; set (or per account), `POST /inbound/postmark` is served"
        ),
        examples=["einmal:change-me"],
    )
    mailgun_webhook_signing_key: SecretStr | None = Field(
        None,
        description=(
            "a single-account installation's Mailgun HTTP webhook signing key; set (or per account), "
            "`POST /inbound/mailgun` is served"
        ),
        examples=["change-me"],
    )
    webhook_accounts_file: str | None = Field(
        None,
        description=(
            "TOML file of each account's own webhook credentials, a table per account: its SNS topics, Postmark "
            '`user:password`, Mailgun signing key (`[acme] ses_topic_arn = "arn:aws:sns:…"`); a credential reaches '
            "only its account's rows ([Provider webhooks](../guide/bounces.md#provider-webhooks))"
        ),
        examples=["/etc/einmal/webhooks.toml"],
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description=(
            "`text`, or `json`: one JSON object a line (`time`, `level`, `logger`, `message`, and "
            "`trace_id`/`span_id` inside a traced batch)"
        ),
    )
    log_level: str = Field("INFO", description="`DEBUG`, `INFO`, `WARNING` or `ERROR`: what a node logs on stderr")
    dkim_domain: str | None = Field(
        None,
        description=(
            "DKIM signing domain (`d=`; an international name is signed as its A-label). The three `EINMAL_DKIM_*` "
            "are set together or not at all"
        ),
        examples=["example.org"],
    )
    dkim_selector: str | None = Field(
        None,
        description=(
            "DKIM selector (`s=`): the public key is the TXT record `<selector>._domainkey.<domain>`. Several, "
            "comma-separated (at most 4, none twice), sign each message once per selector "
            "([Two DKIM keys](configuration.md#two-dkim-keys))"
        ),
        examples=["mail2026"],
    )
    dkim_private_key_file: str | None = Field(
        None,
        description=(
            "PEM private key, RSA (`rsa-sha256`, at least 1024 bits, 2048 advised) or Ed25519 (`ed25519-sha256`, "
            "RFC 8463; dkimpy's base64 seed works too); with several selectors, as many files, comma-separated, in "
            "the same order. Read once at start-up: a missing, unreadable or unsupported key stops `einmal run` "
            "with one line, exit 2. Every header einmal writes is signed, relaxed/relaxed"
        ),
        examples=["/etc/einmal/dkim.pem"],
    )
    # `einmal doctor` and approve's check of DNS (service/accounts/doctor.py, docs/operations/doctor.md)
    dns_servers: str | None = Field(
        None,
        description=(
            "the DNS servers `einmal doctor` and `campaign approve` ask, comma-separated `host:port` (an IP address; "
            "IPv6 in brackets, `[::1]:53`; port default 53); unset: the system's resolver "
            "([einmal doctor](../operations/doctor.md))"
        ),
        examples=["127.0.0.1:5353"],
    )
    doctor_cache_seconds: float = Field(
        300.0,
        ge=0,
        description=(
            "how long the doctor's findings from DNS for an account's From domain are kept in PostgreSQL, for "
            "every node and process, before `GET /api/v1/doctor` or `campaign approve` asks DNS again; `0`: every time"
        ),
    )

    # outbound webhooks (service/webhooks/, actors/webhooks.py, docs/design.md#webhooks)
    webhook_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=60,
        description=(
            "the longest one webhook delivery may take, connection and answer together; a delivery that takes "
            "longer is a failed attempt, tried again on the schedule ([Webhooks](../guide/webhooks.md))"
        ),
    )
    webhook_retry_seconds: str | None = Field(
        None,
        description=(
            "the seconds to wait before each further attempt of a webhook delivery, comma-separated; after the "
            "last, a delivery is parked (kept, replayable). Unset: 5, 300, 1800, 7200, 18000, then six times "
            "36000 (the Standard Webhooks schedule, extended to about three days); each wait is jittered by 10%"
        ),
        examples=["5,300,1800"],
    )
    webhook_in_flight: int = Field(
        16,
        ge=1,
        le=256,
        description=(
            "webhook deliveries a node has on the wire at once, over all endpoints (see "
            "`EINMAL_WEBHOOK_ENDPOINT_IN_FLIGHT`)"
        ),
    )
    webhook_endpoint_in_flight: int = Field(
        4,
        ge=1,
        le=64,
        description=(
            "webhook deliveries one endpoint has on the wire at once, in the whole cluster: a slow or hanging "
            "endpoint holds this many places, never another endpoint's delivery; `1` delivers each endpoint's "
            "events one after the other"
        ),
    )
    webhook_account_in_flight: int = Field(
        8,
        ge=1,
        le=256,
        description=(
            "webhook deliveries one account has on the wire at once, in the whole cluster; when more accounts "
            "have deliveries due or in flight, each gets at most `EINMAL_WEBHOOK_IN_FLIGHT` divided by their "
            "number (at least 1): an account whose endpoints hang never holds every place of a node"
        ),
    )
    webhook_tick_seconds: float = Field(
        5.0,
        gt=0,
        description=(
            "how often a node looks for due webhook deliveries when no notification woke it (a new event "
            "notifies; retries come due on this tick)"
        ),
    )
    webhook_allowed_networks: str | None = Field(
        None,
        description=(
            "networks (CIDRs, comma-separated) a webhook endpoint's address may be in although it is not public "
            "(private, loopback, link-local or otherwise special addresses are refused, at registration and at "
            "each delivery); unset: public addresses only"
        ),
        examples=["10.20.0.0/16"],
    )
    webhook_allow_http_loopback: bool = Field(
        False,
        description=(
            "for tests and local development: an endpoint may be `http://` to a loopback address (127.0.0.0/8, "
            "::1), and loopback addresses are allowed; otherwise only `https://`"
        ),
    )
    webhook_rotation_hours: float = Field(
        24.0,
        ge=0,
        description=(
            "after a webhook secret is rotated, how long deliveries are signed with the previous secret too, so "
            "that a receiver can switch without refusing a delivery"
        ),
    )
    webhook_retention_days: float = Field(
        7.0,
        gt=0,
        description=(
            "webhook events delivered to every endpoint are deleted this many days after they were made; parked "
            "and pending ones are kept"
        ),
    )

    @model_validator(mode="after")
    def _listen_beside_a_transaction_pooler(self) -> "Settings":
        if self.database_pooler == "transaction" and not self.listen_database_url:
            raise ValueError(
                "EINMAL_DATABASE_POOLER=transaction: EINMAL_LISTEN_DATABASE_URL must be set too, to a "
                "URL of the same database without the pooler (LISTEN needs a session of its own)"
            )
        return self

    @field_validator("listen_database_url")
    @classmethod
    def _a_database_url(cls, value: str | None) -> str | None:
        if value is not None and (problem := database_url_problem(value)):
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _heartbeat_outpaces_the_timeout(self) -> "Settings":
        # the scheduler heartbeats once per tick: a tick near the timeout gets a live node declared dead
        if self.tick_seconds * 2 > self.node_timeout_seconds:
            raise ValueError(
                f"EINMAL_TICK_SECONDS: must be at most half of EINMAL_NODE_TIMEOUT_SECONDS "
                f"({self.node_timeout_seconds:g}) (got {self.tick_seconds:g})"
            )
        return self

    @model_validator(mode="after")
    def _dkim_all_or_nothing(self) -> "Settings":
        given = {
            "EINMAL_DKIM_DOMAIN": self.dkim_domain,
            "EINMAL_DKIM_SELECTOR": self.dkim_selector,
            "EINMAL_DKIM_PRIVATE_KEY_FILE": self.dkim_private_key_file,
        }
        missing = [name for name, value in given.items() if value is None]
        if missing and len(missing) < len(given):
            raise ValueError(f"{', '.join(missing)}: must be set too, when any of {', '.join(given)} is")
        if not missing and len(self.dkim_selectors) != len(self.dkim_key_files):
            selectors, files = len(self.dkim_selectors), len(self.dkim_key_files)
            raise ValueError(
                f"EINMAL_DKIM_SELECTOR, EINMAL_DKIM_PRIVATE_KEY_FILE: {selectors} selector"
                f"{'s' * (selectors != 1)} and {files} key file{'s' * (files != 1)}; selector i signs "
                "with key file i"
            )
        return self

    @property
    def default_from_domains(self) -> tuple[str, ...]:
        """EINMAL_FROM_DOMAINS in their key form (service/domains.py), in order; () when unset."""
        from service.domains import domain_key

        return tuple(domain_key(d) for d in (self.from_domains or "").split(",") if d.strip())

    @field_validator("from_domains")
    @classmethod
    def _from_domains(cls, value: str | None) -> str | None:
        from service.domains import domain_key

        for domain in (value or "").split(","):
            if domain.strip() and ("@" in domain or not domain_key(domain)):
                raise ValueError(f"{domain.strip()!r} is not a domain name")
        return value

    @property
    def dkim_selectors(self) -> tuple[str, ...]:
        """EINMAL_DKIM_SELECTOR's selectors, in order; () when unset."""
        return tuple(self.dkim_selector.split(",")) if self.dkim_selector else ()

    @property
    def dkim_key_files(self) -> tuple[str, ...]:
        """EINMAL_DKIM_PRIVATE_KEY_FILE's files, in order, one for each selector; () when unset."""
        return tuple(self.dkim_private_key_file.split(",")) if self.dkim_private_key_file else ()

    @field_validator("dkim_domain")
    @classmethod
    def _dkim_domain_a_label(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ascii_domain = idna.encode(value.strip().rstrip("."), uts46=True).decode()
        except (idna.IDNAError, UnicodeError):
            raise ValueError("must be a domain name, e.g. example.org") from None
        if "." not in ascii_domain:
            raise ValueError("must be a domain name with a dot, e.g. example.org")
        return ascii_domain

    @field_validator("dkim_selector")
    @classmethod
    def _dkim_selector_labels(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not all(_SELECTOR.fullmatch(item.strip()) for item in value.split(",") if item.strip()):
            raise ValueError(
                "must be one or more DNS labels of letters, digits, '-' and '_', e.g. mail2026, "
                "or several selectors comma-separated"
            )
        return _items(value, "selectors", str.lower)  # DNS names: Mail and mail are one selector

    @field_validator("dkim_private_key_file")
    @classmethod
    def _dkim_key_files(cls, value: str | None) -> str | None:
        return None if value is None else _items(value, "key files")

    @field_validator("webhook_retry_seconds")
    @classmethod
    def _webhook_retry_seconds(cls, value: str | None) -> str | None:
        if value is not None:
            webhook_delays(value)
        return value

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _webhook_allowed_networks(cls, value: str | None) -> str | None:
        if value is not None:
            networks(value)
        return value

    @field_validator("dns_servers")
    @classmethod
    def _dns_servers(cls, value: str | None) -> str | None:
        if value is not None:
            dns_servers(value)
        return value

    @property
    def webhook_delays(self) -> tuple[float, ...]:
        """EINMAL_WEBHOOK_RETRY_SECONDS as seconds; the Standard Webhooks schedule, extended, when unset."""
        return webhook_delays(self.webhook_retry_seconds) if self.webhook_retry_seconds else WEBHOOK_DELAYS

    @property
    def webhook_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """EINMAL_WEBHOOK_ALLOWED_NETWORKS as networks; () when unset."""
        return networks(self.webhook_allowed_networks) if self.webhook_allowed_networks else ()

    @property
    def dns_server_list(self) -> tuple[tuple[str, int], ...]:
        """EINMAL_DNS_SERVERS as (address, port) pairs; () when unset: the system's resolver."""
        return dns_servers(self.dns_servers) if self.dns_servers else ()

    @field_validator("unsubscribe_mailto")
    @classmethod
    def _mailto_address(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        problem = address_problem(value)
        if problem is not None or not value.isascii() or any(c in value for c in "<>?&%, "):
            why = f" ({problem})" if problem else ""
            raise ValueError(f"must be a plain ASCII address, e.g. unsubscribe@example.org{why}")
        return value

    @model_validator(mode="after")
    def _return_path_is_signed(self) -> "Settings":
        if (self.return_path or self.inbound_smtp_address) and not (self.return_path_secret or self.unsubscribe_secret):
            raise ValueError(
                "EINMAL_RETURN_PATH_SECRET (or EINMAL_UNSUBSCRIBE_SECRET) must be set "
                "when EINMAL_RETURN_PATH or EINMAL_INBOUND_SMTP_ADDRESS is"
            )
        if (self.confirm_url or self.optin_from) and not self.unsubscribe_secret:
            raise ValueError(
                "EINMAL_UNSUBSCRIBE_SECRET must be set when EINMAL_CONFIRM_URL or EINMAL_OPTIN_FROM is "
                "(it signs the confirmation links)"
            )
        if self.inbound_smtp_address and not self.return_path:
            raise ValueError("EINMAL_RETURN_PATH must be set when EINMAL_INBOUND_SMTP_ADDRESS is")
        return self

    @field_validator("return_path")
    @classmethod
    def _plain_address(cls, value: str | None) -> str | None:
        if value is None:
            return value
        local, at, domain = value.rpartition("@")
        if (
            not at
            or not local
            or not domain
            or "+" in local
            or len(value) > 200
            or not value.isascii()
            or any(c in value for c in ' <>"(),;:[]')
            or not value.isprintable()
        ):
            raise ValueError("expected a plain ASCII address without '+', e.g. bounces@example.org")
        return value

    @field_validator("message_id_domain", "unsubscribe_url", "confirm_url", "click_url", "smtp_host")
    @classmethod
    def _no_line_breaks(cls, value: str | None) -> str | None:
        if value is not None and any(c in value for c in "\r\n\0"):
            raise ValueError("must not contain line breaks")
        return value

    @field_validator("unsubscribe_url", "confirm_url", "click_url")
    @classmethod
    def _https_unless_loopback(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme == "https" and parts.hostname:
            return value
        if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
            return value
        raise ValueError("must be an https:// URL (http:// only for a loopback host)")

    @field_validator("click_url")
    @classmethod
    def _no_query(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).query or urlsplit(value).fragment or "?" in value):
            raise ValueError("a link's token goes after the path: no query or fragment, e.g. https://example.org/c")
        return value

    @field_validator("unsubscribe_secret", "return_path_secret")
    @classmethod
    def _keys_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parts = value.get_secret_value().split(",")
            if any(not part.strip() for part in parts):
                raise ValueError("one or more comma-separated keys, none of them empty")
        return value

    @field_validator("postmark_webhook_secret")
    @classmethod
    def _user_and_password(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            user, colon, password = value.get_secret_value().partition(":")
            if not (user and colon and password):
                raise ValueError("expected user:password, the basic auth credentials of the webhook's URL")
        return value

    @field_validator("ses_topic_arn")
    @classmethod
    def _topic_arns(cls, value: str | None) -> str | None:
        if value is not None and not all(t.strip().startswith("arn:") for t in value.split(",")):
            raise ValueError(
                "expected one or more comma-separated SNS topic ARNs, e.g. "
                "arn:aws:sns:us-west-2:123456789012:ses-feedback"
            )
        return None if value is None else ",".join(t.strip() for t in value.split(","))

    @field_validator("domain_limits")
    @classmethod
    def _domain_limits(cls, value: str | None) -> str | None:
        if value is not None:
            parse_limits(value)
        return value

    @field_validator("smtp_urls")
    @classmethod
    def _relay_urls(cls, value: str | None) -> str | None:
        if value is not None:
            parse_urls(value)
        return value

    @field_validator("pause_complaint_rate", "pause_hard_bounce_rate", "pause_policy_rejection_rate", mode="before")
    @classmethod
    def _per_cent(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip().removesuffix("%").strip()
            try:
                value = float(text) if text else 0.0
            except ValueError:
                value = None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
            raise ValueError("a percentage from 0 to 100, e.g. 0.3 or 0.3% (0 or empty: never pause for it)")
        return float(value)

    @field_validator("log_level")
    @classmethod
    def _a_level(cls, value: str) -> str:
        if value.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError("expected DEBUG, INFO, WARNING or ERROR")
        return value.upper()

    @field_validator("http_address", "inbound_smtp_address")
    @classmethod
    def _host_and_port(cls, value: str | None) -> str | None:
        if value is not None:
            split_address(value)
        return value


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_address(address: str) -> tuple[str, int]:
    """host:port ([v6]:port) -> (host, port); port 0 picks a free one."""
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or any(c.isspace() for c in host) or not (port.isascii() and port.isdigit()):
        raise ValueError("expected host:port, e.g. 127.0.0.1:8080 or [::1]:8080")
    if int(port) > 65535:
        raise ValueError("port must be 0-65535")
    return host, int(port)


_ENCODE_HINT = " (percent-encode '/', '?', '#' and '@' in the user name and password: %2F %3F %23 %40)"
_IPV6_HOST = re.compile(r"\[[^\]]+\](?::(.*))?")


def _port_problem(port: str) -> str | None:
    port = unquote(port)
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return "a port is not a number from 1 to 65535" + _ENCODE_HINT
    return None


def database_url_problem(url: str) -> str | None:
    """Why `url` is not a PostgreSQL URL einmal can use, or None when it is.

    Parses as asyncpg does (several hosts `h1:p1,h2:p2`, `[v6]:port`, `?host=/socket/dir`),
    so a URL that passes here does not fail later with a parser's traceback. The answer
    never quotes the URL: any part of it may be the password."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # urllib's messages may quote the URL: never show them
        if "IPv6" in str(exc):
            return "the '[' or ']' around an IPv6 host is not closed or not opened" + _ENCODE_HINT
        return "not a valid URL" + _ENCODE_HINT
    if parts.scheme not in ("postgresql", "postgres"):
        return "must start with postgresql:// (or postgres://)"
    if "#" in url:
        return "has a '#' (a URL fragment means nothing here)" + _ENCODE_HINT
    try:
        query = parse_qs(parts.query, strict_parsing=True) if parts.query else {}
    except ValueError:
        return "the part after '?' is not name=value pairs joined by '&'" + _ENCODE_HINT
    auth, _, hosts = parts.netloc.rpartition("@")
    if "@" in auth:
        return "has more than one '@' before the host" + _ENCODE_HINT
    if hosts:
        for host in hosts.split(","):
            if not host:
                return "has an empty host in its list of hosts"
            if host.startswith("["):
                match = _IPV6_HOST.fullmatch(host)
                if match is None:
                    return "an IPv6 host must be written [address] or [address]:port" + _ENCODE_HINT
                port = match.group(1)
            else:
                port = host.partition(":")[2]
            if port and (problem := _port_problem(port)):
                return problem
    for port in ",".join(query.get("port", [])).split(","):
        if port and (problem := _port_problem(port)):
            return problem
    return None


def _database_url() -> tuple[str, str] | None:
    """(variable, value) of the database URL in use: EINMAL_DATABASE_URL, else DATABASE_URL."""
    for name in ("EINMAL_DATABASE_URL", "DATABASE_URL"):
        if os.environ.get(name):
            return name, os.environ[name]
    return None


# the EINMAL_ variable read outside Settings: the embedded server's folder (service/db/embedded.py)
MIN_SECRET = 32  # characters of each unsubscribe key: 128 bits and more for a random hex or base64 key
TRACES_EXPORTERS = ("none", "console", "otlp")


def weak_unsubscribe_secret(settings: "Settings") -> str | None:
    """Why EINMAL_UNSUBSCRIBE_SECRET is too weak for a node that signs and checks links with it, or None.
    A short key can be guessed offline from one token, and then every subscriber of every account can be
    unsubscribed. `einmal run` and `einmal serve` refuse to start with one (checked there, so that a test
    or a preview may use any key)."""
    if settings.unsubscribe_secret is None:
        return None
    keys = [key.strip() for key in settings.unsubscribe_secret.get_secret_value().split(",")]
    short = [n for n, key in enumerate(keys, 1) if len(key) < MIN_SECRET]
    if not short:
        return None
    which = "the key" if len(keys) == 1 else f"key {short[0]} of {len(keys)}"
    return (
        f"EINMAL_UNSUBSCRIBE_SECRET: {which} has {len(keys[short[0] - 1])} characters; each key needs at "
        f"least {MIN_SECRET} (128 bits or more of randomness, e.g. `openssl rand -hex 32`)"
    )


def traces_exporter(environ: Mapping[str, str]) -> str:
    """OTEL_TRACES_EXPORTER, checked by every command alike: none, console or otlp; ConfigError otherwise."""
    kind = environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower() or "none"
    if kind not in TRACES_EXPORTERS:
        raise ConfigError(f"OTEL_TRACES_EXPORTER: expected none, console or otlp (got {kind[:40]!r})")
    return kind


OTHER_VARIABLES = ("EINMAL_EMBEDDED_DIR",)


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A warning for each EINMAL_ variable einmal does not read (a typo, most likely), naming the closest
    one it does: a misspelled database URL variable would otherwise leave the embedded database in use,
    silently."""
    known = {f"EINMAL_{name.upper()}" for name in Settings.model_fields} | set(OTHER_VARIABLES)
    found = []
    for name in sorted(environ):
        if name.startswith("EINMAL_") and name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
            found.append(f"unknown variable {name[:60]} ignored" + (f"; did you mean {close[0]}?" if close else ""))
    return found


def load() -> Settings:
    """Read the environment; a malformed value raises ConfigError naming the variable."""
    found = _database_url()
    if found and (problem := database_url_problem(found[1])):
        raise ConfigError(f"{found[0]}: {problem}")
    try:
        return Settings(database_url=found[1]) if found else Settings()
    except ValidationError as exc:
        error = exc.errors()[0]
        if not error["loc"]:  # a rule across variables names them itself
            raise ConfigError(error["msg"].removeprefix("Value error, ")) from None
        name = "EINMAL_" + str(error["loc"][0]).upper()
        given = os.environ.get(name)
        if given is not None and len(given) > 60:
            given = given[:57] + "..."
        hidden = given is None or any(
            word in name for word in ("PASSWORD", "SECRET", "SIGNING_KEY", "DATABASE_URL", "URLS")
        )
        shown = "" if hidden else f" (got {given!r})"
        raise ConfigError(f"{name}: {error['msg'].removeprefix('Value error, ')}{shown}") from None
