"""Configuration: environment variables only, prefix EINMAL_."""

import ipaddress
import os
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.errors import ConfigError


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EINMAL_", extra="ignore", frozen=True, allow_inf_nan=False)

    database_url: str | None = None
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(25, ge=1, le=65535)
    smtp_tls: Literal["none", "starttls", "tls"] = "none"
    smtp_tls_ca_file: str | None = None
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_connections: int = Field(4, ge=1, le=256)
    smtp_timeout_seconds: float = Field(30.0, gt=0)
    batch_size: int = Field(200, ge=1, le=10_000)
    tick_seconds: float = Field(5.0, ge=0.05, le=3600)
    node_timeout_seconds: float = Field(30.0, gt=0)
    in_doubt: Literal["hold", "resend"] = "hold"
    max_attempts: int = Field(5, ge=1)
    retry_base_seconds: float = Field(60.0, ge=0)
    retry_max_seconds: float = Field(3600.0, ge=0)
    rate_limit: float = Field(0.0, ge=0)
    message_id_domain: str | None = None
    unsubscribe_url: str | None = None
    unsubscribe_secret: SecretStr | None = None
    shutdown_grace_seconds: float = Field(10.0, gt=0)
    restart_intensity: int = Field(10, ge=0)
    restart_period_seconds: float = Field(60.0, gt=0)
    node_id: str | None = None
    http_address: str | None = None  # host:port; unset: no HTTP listener
    log_format: Literal["text", "json"] = "text"
    log_level: str = "INFO"

    @model_validator(mode="after")
    def _heartbeat_outpaces_the_timeout(self) -> "Settings":
        # the scheduler heartbeats once per tick: a tick near the timeout gets a live node declared dead
        if self.tick_seconds * 2 > self.node_timeout_seconds:
            raise ValueError(f"EINMAL_TICK_SECONDS: must be at most half of EINMAL_NODE_TIMEOUT_SECONDS "
                             f"({self.node_timeout_seconds:g}) (got {self.tick_seconds:g})")
        return self

    @field_validator("message_id_domain", "unsubscribe_url", "smtp_host")
    @classmethod
    def _no_line_breaks(cls, value: str | None) -> str | None:
        if value is not None and any(c in value for c in "\r\n\0"):
            raise ValueError("must not contain line breaks")
        return value


    @field_validator("unsubscribe_url")
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

    @field_validator("unsubscribe_secret")
    @classmethod
    def _keys_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parts = value.get_secret_value().split(",")
            if any(not part.strip() for part in parts):
                raise ValueError("one or more comma-separated keys, none of them empty")
        return value

    @field_validator("log_level")
    @classmethod
    def _a_level(cls, value: str) -> str:
        if value.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError("expected DEBUG, INFO, WARNING or ERROR")
        return value.upper()

    @field_validator("http_address")
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


def load() -> Settings:
    """Read the environment; a malformed value raises ConfigError naming the variable."""
    overrides = {}
    if not os.environ.get("EINMAL_DATABASE_URL") and os.environ.get("DATABASE_URL"):
        overrides["database_url"] = os.environ["DATABASE_URL"]
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
        shown = "" if given is None or "PASSWORD" in name or "SECRET" in name else f" (got {given!r})"
        raise ConfigError(f"{name}: {error['msg'].removeprefix('Value error, ')}{shown}") from None
