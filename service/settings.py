"""Configuration: environment variables only, prefix EINMAL_."""

import os
import re
from typing import Literal

import idna
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.errors import ConfigError

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_SELECTOR = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


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
    unsubscribe_mailto: str | None = None
    shutdown_grace_seconds: float = Field(10.0, gt=0)
    restart_intensity: int = Field(10, ge=0)
    restart_period_seconds: float = Field(60.0, gt=0)
    node_id: str | None = None
    dkim_domain: str | None = None
    dkim_selector: str | None = None
    dkim_private_key_file: str | None = None

    @model_validator(mode="after")
    def _heartbeat_outpaces_the_timeout(self) -> "Settings":
        # the scheduler heartbeats once per tick: a tick near the timeout gets a live node declared dead
        if self.tick_seconds * 2 > self.node_timeout_seconds:
            raise ValueError(f"EINMAL_TICK_SECONDS: must be at most half of EINMAL_NODE_TIMEOUT_SECONDS "
                             f"({self.node_timeout_seconds:g}) (got {self.tick_seconds:g})")
        return self

    @model_validator(mode="after")
    def _dkim_all_or_nothing(self) -> "Settings":
        given = {"EINMAL_DKIM_DOMAIN": self.dkim_domain, "EINMAL_DKIM_SELECTOR": self.dkim_selector,
                 "EINMAL_DKIM_PRIVATE_KEY_FILE": self.dkim_private_key_file}
        missing = [name for name, value in given.items() if value is None]
        if missing and len(missing) < len(given):
            raise ValueError(f"{', '.join(missing)}: must be set too, when any of EINMAL_DKIM_* is")
        return self

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
        if value is not None and not _SELECTOR.fullmatch(value):
            raise ValueError("must be one or more DNS labels of letters, digits, '-' and '_', e.g. mail2026")
        return value

    @field_validator("unsubscribe_mailto")
    @classmethod
    def _mailto_address(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from service.importer import address_problem  # importer imports this module

        value = value.strip()
        problem = address_problem(value)
        if problem is not None or not value.isascii() or any(c in value for c in "<>?&%, "):
            why = f" ({problem})" if problem else ""
            raise ValueError(f"must be a plain ASCII address, e.g. unsubscribe@example.org{why}")
        return value

    @field_validator("message_id_domain", "unsubscribe_url", "smtp_host")
    @classmethod
    def _no_line_breaks(cls, value: str | None) -> str | None:
        if value is not None and any(c in value for c in "\r\n\0"):
            raise ValueError("must not contain line breaks")
        return value


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
        raise ConfigError(f"{name}: {error['msg']}{shown}") from None
