"""The From rule (docs/design.md#accounts): an account that has From domains (given by the operator,
`einmal account domain add`) may send only from an address of one of them; an account with none, from one
of EINMAL_FROM_DOMAINS, and where that is unset from any address, as before accounts had domains.

The match is exact: `news.acme.example` allows neither `acme.example` nor `x.news.acme.example`, each is
added on its own. A domain given to an account is reserved to it: no other account may send from it or a domain
under it, whatever EINMAL_FROM_DOMAINS says, nor be given it or a domain above or under it (migration 0120's
trigger; an installation that gave two accounts overlapping domains before keeps them, each sending from its own,
and `einmal doctor` names them). DMARC's relaxed alignment would pass a subdomain, but a subdomain is also where another
party's mail lives (a help desk's, a shop's), and what an account may send as is the operator's choice,
domain by domain. Domains compare in their key form (service/domains.py domain_key): case and the A-label
spelling of an international name do not matter.

The display name may not carry another sender's address: an address-like name (`"security@bank.example"
<a@example.org>`, in any of the forms Unicode folds to it) is refused unless its domain is the From's or one the
account was given.

Every place a From enters asks `check`: campaign create and a draft's change (service/campaigns/drafts.py),
a test message (service/campaigns/preview.py), approve (a campaign made before its domain was removed) and
the confirmation messages of double opt-in (service/subscribers/optin.py). A From once stored is judged again
by the rule as it is when its mail is made (`sendable`, in actors/claims.py): a campaign, a sequence's step, a
message or a confirmation whose From the rule now refuses is paused with the reason. It lives in mail, the
subject below every other that asks it."""

import re
import unicodedata
from email.utils import parseaddr

import asyncpg

from service import db
from service.domains import domain_key
from service.errors import ArgumentError
from service.mail.mailing import Mailing
from service.text import shown

# an address in a display name, once folded (NFKC makes a fullwidth at sign '@'): its domain is group 1
_ADDRESS_LIKE = re.compile(r"[^\s@<>()\[\]\\\",;:]+@([^\s@<>()\[\]\\\",;:]+)")


def domain_of(address: str) -> str:
    """The domain of a From (`Name <a@b>` or a bare address) in its key form; '' when it has none."""
    _, bare = parseaddr(address)
    domain = (bare or address).rpartition("@")[2]
    try:
        return domain_key(domain) if domain else ""
    except ValueError:
        return domain.lower()


def _above(domain: str) -> list[str]:
    """The domain and each domain it is under, but the top-level one: a.b.example, b.example."""
    labels = domain.split(".")
    return [".".join(labels[i:]) for i in range(max(len(labels) - 1, 1))]


def _named_domains(address: str) -> list[str]:
    """The domains of the addresses the display name of `address` carries, in their key form."""
    name, _ = parseaddr(address)
    found = []
    for domain in _ADDRESS_LIKE.findall(unicodedata.normalize("NFKC", name)):
        try:
            found.append(domain_key(domain.rstrip(".")))
        except ValueError:
            found.append(domain.lower())
    return found


async def allowed(
    conn: asyncpg.Connection, *, mailing: Mailing, account_id: int, timeout: float | None = None
) -> list[str]:
    """The account's From domains, by name, else EINMAL_FROM_DOMAINS; empty: any From."""
    return await given(conn, account_id=account_id, timeout=timeout) or list(mailing.default_from_domains)


async def given(conn: asyncpg.Connection, *, account_id: int, timeout: float | None = None) -> list[str]:
    """The From domains the account was given, by name."""
    domains: list[str] = await conn.fetchval(*db.sql("account_from_domains", account_id=account_id), timeout=timeout)
    return domains


async def check(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    account_id: int,
    address: str,
    said: str = "from",
    timeout: float | None = None,
) -> None:
    """ArgumentError (422, exit 2), one line, when the account has From domains (or EINMAL_FROM_DOMAINS gives it
    some) and `address` is of none of them (naming them), when its domain is another account's or under one, or
    when its display name carries an address of a domain that is neither the From's nor the account's (`said`:
    how the caller names the From)."""
    if found := await problem(conn, mailing=mailing, account_id=account_id, address=address, timeout=timeout):
        raise ArgumentError(f"{said} {shown(address)}: {found}")


async def problem(
    conn: asyncpg.Connection, *, mailing: Mailing, account_id: int, address: str, timeout: float | None = None
) -> str | None:
    """What the From rule finds wrong with `address` as the account's From, or None: one round trip, what it
    reads of the account and of the others read together (a message's From is judged twice on its way out)."""
    domain = domain_of(address)
    found = await conn.fetchrow(
        *db.sql("account_from_rule", account_id=account_id, names=_above(domain)), timeout=timeout
    )
    assert found is not None  # the query returns one row
    own: list[str] = found["own"]
    domains = own or list(mailing.default_from_domains)
    if domains and domain not in domains:
        return (
            f"the account sends only from its domains ({', '.join(domains)}): "
            "add the domain first (`einmal account domain add`)"
        )
    if domain not in own and (taken := found["taken"]):
        return f"{taken} is another account's domain: only it sends from {taken} and the domains under it"
    for named in _named_domains(address):
        if named != domain and named not in own:
            return f"its name carries an address at {named}, which is not the account's: give a name without it"
    return None


async def installation_warnings(conn: asyncpg.Connection, *, mailing: Mailing) -> list[str]:
    """What an operator of several accounts should know of the From rule: accounts that may send from any
    domain no other account was given, and domains given to two accounts (kept from before they were
    reserved to one)."""
    said = []
    counts = await conn.fetchrow(*db.sql("accounts_unbound"))
    assert counts is not None  # the query returns one row
    if counts["accounts"] > 1 and counts["unbound"] and not mailing.default_from_domains:
        said.append(
            f"{counts['unbound']} of {counts['accounts']} accounts have no From domain and EINMAL_FROM_DOMAINS "
            "is unset: each may send from any domain no other account was given "
            "(give each its domains: `einmal account domain add`, or set EINMAL_FROM_DOMAINS)"
        )
    for row in await conn.fetch(*db.sql("account_domains_shared")):
        said.append(
            f"account {row['account']}'s domain {row['domain']} overlaps account {row['other']}'s "
            f"{row['other_domain']}: both may send from it (remove it from one: `einmal account domain remove`)"
        )
    return said
