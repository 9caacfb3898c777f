"""An account's own sender identity (docs/design.md#accounts): the From domains it may use, each with its
DKIM selectors and keys, the relays it sends through (a relay is shared: its rate limit and quotas are the
relay's, for every account that uses it), its return path and that path's secret, and its unsubscribe
mailto. An account that sets a part uses the installation's environment settings for it, so a
single-account installation changes nothing.

Secrets (private keys, relay passwords, return-path secrets) are `repr=False` here and are never printed,
logged, counted or answered: only `shown()` forms leave this module."""

from dataclasses import dataclass, field

import asyncpg
from pydantic import SecretStr

from service import db
from service.errors import NotFound


@dataclass(frozen=True)
class DomainKeys:
    """A From domain an account may use (domain_key form) and the DKIM keys that sign its mail: selector i
    with PEM private key i, at most two (RSA of 2048 bits or more, or Ed25519). No keys: the domain is
    allowed but its mail is signed by the installation's DKIM settings, if any."""

    domain: str
    selectors: tuple[str, ...] = ()
    keys: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class AccountRelay:
    """A relay an account sends through. `url` is an EINMAL_SMTP_URLS entry (service/relays.py) and may hold
    a password; `name` is the operator's name for it, shared by every account that uses the relay.
    `rate` (messages a second), `quota_hour` and `quota_day` are the relay's, for all nodes and accounts
    together (None: no limit); `weight` is this account's share among its own relays."""

    name: str
    url: str = field(repr=False)
    weight: int = 1
    rate: float | None = None
    quota_hour: int | None = None
    quota_day: int | None = None


@dataclass(frozen=True)
class Identity:
    """What an account sends as. Empty or None parts fall back to the environment settings."""

    account_id: int
    domains: tuple[DomainKeys, ...] = ()  # empty: any From the installation allows
    relays: tuple[AccountRelay, ...] = ()  # empty: EINMAL_SMTP_URLS / EINMAL_SMTP_*
    return_path: str | None = None  # None: EINMAL_RETURN_PATH
    return_path_secret: SecretStr | None = None  # None: EINMAL_RETURN_PATH_SECRET
    unsubscribe_mailto: str | None = None  # None: EINMAL_UNSUBSCRIBE_MAILTO


async def of_account(conn: asyncpg.Connection, *, account_id: int) -> Identity:
    """Account `account_id`'s identity as stored; NotFound when there is no such account."""
    row = await conn.fetchrow(*db.sql("identity_of_account", account_id=account_id))
    if row is None:
        raise NotFound(f"no account with id {account_id}")
    secret = row["return_path_secret"]
    return Identity(
        account_id=account_id,
        domains=tuple(DomainKeys(d, tuple(s), tuple(k)) for d, s, k in row["domains"]),
        relays=tuple(AccountRelay(*r) for r in row["relays"]),
        return_path=row["return_path"],
        return_path_secret=SecretStr(secret) if secret is not None else None,
        unsubscribe_mailto=row["unsubscribe_mailto"],
    )
