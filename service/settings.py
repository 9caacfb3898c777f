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


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EINMAL_", extra="ignore", frozen=True, allow_inf_nan=False)

    database_url: str | None = None
    # what stands between einmal and PostgreSQL at EINMAL_DATABASE_URL: README 'PgBouncer', docs/design.md §4
    database_pooler: Literal["none", "session", "transaction"] = "none"
    listen_database_url: str | None = None  # the listener's own, direct URL (needed behind a transaction pooler)
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(25, ge=1, le=65535)
    smtp_tls: Literal["none", "starttls", "tls"] = "none"
    smtp_tls_ca_file: str | None = None
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_urls: str | None = None  # several relays: service/relays.py
    smtp_connections: int = Field(20, ge=1, le=256)  # measured: docs/design.md §5
    smtp_timeout_seconds: float = Field(30.0, gt=0)
    batch_size: int = Field(200, ge=1, le=10_000)
    tick_seconds: float = Field(5.0, ge=0.05, le=3600)
    node_timeout_seconds: float = Field(30.0, gt=0)
    db_timeout_seconds: float = Field(10.0, gt=0)
    db_wait_seconds: float | None = Field(None, ge=0)  # at start, wait this long for the database; unset: no end
    in_doubt: Literal["hold", "resend"] = "hold"
    # standbys but none synchronous: not ready, and nothing claimed while it holds (docs/design.md §4)
    require_synchronous_replication: bool = False
    # the outcomes a node keeps to write again after a failover: the last this many seconds, at most this
    # many (docs/design.md §4)
    journal_seconds: float = Field(10.0, ge=0)
    journal_size: int = Field(50_000, ge=0, le=1_000_000)
    max_attempts: int = Field(5, ge=1)
    retry_base_seconds: float = Field(60.0, ge=0)
    retry_max_seconds: float = Field(3600.0, ge=0)
    rate_limit: float = Field(0.0, ge=0)
    quota_hour: int = Field(0, ge=0)  # messages in any hour, for all nodes; 0: none
    quota_day: int = Field(0, ge=0)  # messages in any 24 hours, for all nodes; 0: none
    quota_hour_seconds: float = Field(3600.0, gt=0)  # the windows' lengths: shortened only by tests
    quota_day_seconds: float = Field(86400.0, gt=0)
    domain_limits: str | None = None  # service/domains.py
    domain_pause_seconds: float = Field(60.0, gt=0)  # a domain's first pause after 421/4.7.x; doubles
    domain_pause_max_seconds: float = Field(3600.0, gt=0)
    domain_probes: int = Field(1, ge=1, le=100)  # messages to a domain once its pause is over
    message_id_domain: str | None = None
    unsubscribe_url: str | None = None
    unsubscribe_secret: SecretStr | None = None
    unsubscribe_mailto: str | None = None
    # double opt-in (service/subscribers/optin.py, docs/design.md §16): the confirmation page's URL, the From of
    # the confirmation messages, how long a sign-up waits for its confirmation (no second message meanwhile;
    # then pruned), and the flood bounds: messages to one mailbox of an account in 24 hours, sign-ups from one
    # client (a network, service/clients.py; an API key) in an hour, and new confirmation messages of one list in
    # an hour, all counted in PostgreSQL for the whole cluster
    confirm_url: str | None = None
    optin_from: str | None = None
    optin_window_hours: float = Field(72.0, gt=0, le=24 * 365)
    optin_address_limit: int = Field(3, ge=1)
    optin_client_limit: int = Field(30, ge=1, le=100_000)
    optin_list_limit: int = Field(1000, ge=1, le=1_000_000)
    shutdown_grace_seconds: float = Field(10.0, gt=0)
    restart_intensity: int = Field(10, ge=0)
    restart_period_seconds: float = Field(60.0, gt=0)
    node_id: str | None = None
    http_address: str | None = None  # host:port; unset: no HTTP listener
    http_header_timeout_seconds: float = Field(10.0, gt=0)  # a request head's deadline (actors/http.py)
    http_body_timeout_seconds: float = Field(30.0, gt=0)  # its body's, from the head
    http_max_connections: int = Field(1000, ge=1)  # and at most a quarter of the soft file limit
    http_body_buffer_bytes: int = Field(16 * 1024 * 1024, ge=1024 * 1024)  # bodies held at once; >= the largest
    http_client_connections: int = Field(
        100,
        ge=1,
        description=(
            "HTTP connections at once from one client network (an IPv4 /24, an IPv6 /64: service/clients.py), at "
            "most EINMAL_HTTP_MAX_CONNECTIONS; past it the network's own connection that waited longest for a request "
            "head is closed, else the new one is answered 503"
        ),
    )
    http_client_body_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024 * 1024,
        description=(
            "bytes of request bodies one client network holds room for at once, at most "
            "EINMAL_HTTP_BODY_BUFFER_BYTES; >= the largest body (1 MiB)"
        ),
    )
    return_path: str | None = None  # bounces@example.org: VERP envelope senders bounces+<token>@example.org
    return_path_secret: SecretStr | None = None  # signs VERP tokens; unset: EINMAL_UNSUBSCRIBE_SECRET
    inbound_smtp_address: str | None = None  # host:port; unset: no inbound (bounce) listener
    inbound_protocol: Literal["smtp", "lmtp"] = "smtp"
    inbound_max_bytes: int = Field(10_000_000, ge=1_000, le=100_000_000)
    inbound_timeout_seconds: float = Field(60.0, gt=0)
    soft_bounce_limit: int = Field(3, ge=1)
    soft_bounce_days: float = Field(7.0, gt=0)
    # a campaign pauses itself when a rate passes its threshold, in per cent of its messages since its last
    # resume, once it has this many (service/campaigns/self_pause.py; the defaults' sources: docs/design.md §13); 0 or
    # empty: never for that rate
    pause_complaint_rate: float = 0.3
    pause_hard_bounce_rate: float = 2.0
    pause_policy_rejection_rate: float = 5.0
    pause_min_sample: int = Field(1000, ge=1, le=1_000_000_000)
    # a node prunes campaigns finished (sent or cancelled) more than this many days ago; unset: none
    # (service/campaigns/retention.py, docs/design.md §15)
    retention_days: float | None = Field(None, ge=0)
    # provider webhooks (service/inbound/webhook_credentials.py): the global credentials serve a single account
    ses_certificate_file: str | None = None  # PEM: SNS's signing certificate(s); unset: /inbound/ses answers 404
    ses_topic_arn: str | None = None  # comma-separated topics /inbound/ses accepts (one is needed, here or per account)
    postmark_webhook_secret: SecretStr | None = None  # user:password of /inbound/postmark's basic auth
    mailgun_webhook_signing_key: SecretStr | None = None  # Mailgun's HTTP webhook signing key
    webhook_accounts_file: str | None = None  # TOML: each account's own topics, credentials and keys
    log_format: Literal["text", "json"] = "text"
    log_level: str = "INFO"
    dkim_domain: str | None = None
    dkim_selector: str | None = None
    dkim_private_key_file: str | None = None

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

    @field_validator("message_id_domain", "unsubscribe_url", "confirm_url", "smtp_host")
    @classmethod
    def _no_line_breaks(cls, value: str | None) -> str | None:
        if value is not None and any(c in value for c in "\r\n\0"):
            raise ValueError("must not contain line breaks")
        return value

    @field_validator("unsubscribe_url", "confirm_url")
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


# the EINMAL_ variable read outside Settings: the embedded server's folder (service/embedded.py)
MIN_SECRET = 32  # characters of each unsubscribe key: 128 bits and more for a random hex or base64 key
TRACES_EXPORTERS = ("none", "console", "otlp")


def weak_unsubscribe_secret(settings: "Settings") -> str | None:
    """Why EINMAL_UNSUBSCRIBE_SECRET is too weak for a node that signs and checks links with it, or None.
    A short key can be guessed offline from one token, and then every subscriber of every account can be
    unsubscribed: `einmal run` and `einmal serve` refuse to start (checked there, so that a test or a
    preview may use any key)."""
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
    overrides = {}
    if found := _database_url():
        name, value = found
        if problem := database_url_problem(value):
            raise ConfigError(f"{name}: {problem}")
        overrides["database_url"] = value
    try:
        return Settings(**overrides)
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
