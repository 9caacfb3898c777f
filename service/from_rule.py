"""The From rule (docs/design.md#accounts): an account that has From domains (given by the operator,
`einmal account domain add`) may send only from an address of one of them; an account with none, from one
of EINMAL_FROM_DOMAINS, and where that is unset from any address, as before accounts had domains.

The match is exact: `news.acme.example` allows neither `acme.example` nor `x.news.acme.example`, each is
added on its own. DMARC's relaxed alignment would pass a subdomain, but a subdomain is also where another
party's mail lives (a help desk's, a shop's), and what an account may send as is the operator's choice,
domain by domain. Domains compare in their key form (service/domains.py domain_key): case and the A-label
spelling of an international name do not matter.

Every place a From enters asks `check`: campaign create and a draft's change (service/campaigns/drafts.py),
a test message (service/campaigns/preview.py), approve (a campaign made before its domain was removed) and
the confirmation messages of double opt-in (service/subscribers/optin.py). It lives below the subjects
because all of them ask it."""

from email.utils import parseaddr

import asyncpg

from service import db
from service.domains import domain_key
from service.errors import ArgumentError
from service.settings import Settings
from service.text import shown


def domain_of(address: str) -> str:
    """The domain of a From (`Name <a@b>` or a bare address) in its key form; '' when it has none."""
    _, bare = parseaddr(address)
    domain = (bare or address).rpartition("@")[2]
    try:
        return domain_key(domain) if domain else ""
    except ValueError:
        return domain.lower()


async def allowed(
    conn: asyncpg.Connection, *, settings: Settings, account_id: int, timeout: float | None = None
) -> list[str]:
    """The account's From domains, by name, else EINMAL_FROM_DOMAINS; empty: any From."""
    return await given(conn, account_id=account_id, timeout=timeout) or list(settings.default_from_domains)


async def given(conn: asyncpg.Connection, *, account_id: int, timeout: float | None = None) -> list[str]:
    """The From domains the account was given, by name."""
    return await conn.fetchval(*db.sql("account_from_domains", account_id=account_id), timeout=timeout)


async def check(
    conn: asyncpg.Connection,
    *,
    settings: Settings,
    account_id: int,
    address: str,
    said: str = "from",
    timeout: float | None = None,
) -> None:
    """ArgumentError (422, exit 2), one line naming the allowed domains, when the account has From domains (or
    EINMAL_FROM_DOMAINS gives it some) and `address` is of none of them (`said`: how the caller names the From)."""
    domains = await allowed(conn, settings=settings, account_id=account_id, timeout=timeout)
    if domains and domain_of(address) not in domains:
        raise ArgumentError(
            f"{said} {shown(address)}: the account sends only from its domains ({', '.join(domains)}): "
            "add the domain first (`einmal account domain add`)"
        )
