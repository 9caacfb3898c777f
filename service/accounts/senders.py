"""Managing an account's sender identity (docs/design.md#accounts; docs/guide/accounts-identity.md), for
`einmal account domain|dkim|identity …` and /api/v1/account/…: its From domains, each domain's DKIM keys
(generated here or imported, and the DNS record to publish for each), its return path with that path's
secret, and its unsubscribe mailto. The relays are service/accounts/shared_relays.py's; what a node reads
is service/accounts/identity.py's; the From rule is service/mail/from_rule.py's.

Secrets never leave this module but into the database: a private key is validated and stored, and only its
public record is ever answered; the return-path secret is answered as set or not."""

import secrets
from dataclasses import dataclass

import asyncpg
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from service import db
from service.accounts import identity
from service.addresses import address_problem
from service.domains import domain_key
from service.errors import ArgumentError, NotFound
from service.mail import dkim, from_rule
from service.text import shown, unsafe_text

MIN_RSA_BITS, MAX_RSA_BITS = 2048, 4096
ALGORITHMS = ("rsa", "ed25519")
MIN_SECRET = 16


def checked_domain(value: str, field: str = "domain") -> str:
    """A domain name in its key form (news.acme.example); ArgumentError for anything else."""
    name = value.strip().rstrip(".")
    if not name or unsafe_text(name) or "@" in name or "." not in name or address_problem(f"x@{name}"):
        raise ArgumentError(
            f"{field} {shown(value)} is not a domain name, e.g. news.example.org", code="domain.invalid", field=field
        )
    return domain_key(name)


def checked_selector(value: str) -> str:
    """A DKIM selector: labels of letters, digits and '-', joined by '.' (RFC 6376 3.1)."""
    labels = value.split(".")
    if len(value) > 63 or not all(
        label and label.isascii() and label.replace("-", "").isalnum() and label[0] != "-" and label[-1] != "-"
        for label in labels
    ):
        raise ArgumentError(
            f"selector {shown(value)}: letters, digits and '-', e.g. s2027", code="selector.invalid", field="selector"
        )
    return value.lower()


@dataclass(frozen=True)
class Published:
    """A DKIM key's public half as DNS must hold it: a TXT record `record` at `name`."""

    domain: str
    selector: str
    record: str

    @property
    def name(self) -> str:
        return f"{self.selector}._domainkey.{self.domain}"


@dataclass(frozen=True)
class Domain:
    domain: str
    keys: tuple[Published, ...] = ()


def generated_key(algorithm: str = "rsa", bits: int = MIN_RSA_BITS) -> str:
    """A new private key in PEM (PKCS#8): RSA of `bits` (2048 to 4096) or Ed25519."""
    if algorithm not in ALGORITHMS:
        raise ArgumentError(
            f"algorithm {shown(algorithm)}: rsa or ed25519", code="algorithm.unknown", field="algorithm"
        )
    if algorithm == "ed25519":
        key: dkim.PrivateKey = ed25519.Ed25519PrivateKey.generate()
    elif not MIN_RSA_BITS <= bits <= MAX_RSA_BITS:
        raise ArgumentError(
            f"bits {bits}: an RSA key of {MIN_RSA_BITS} to {MAX_RSA_BITS} bits", code="bits.out_of_range", field="bits"
        )
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    return _pem(key)


def _pem(key: dkim.PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def imported_key(data: bytes) -> str:
    """A PEM private key to sign with, as PEM (PKCS#8); ArgumentError (field private_key), one line that quotes
    nothing of it, unless it is an unencrypted RSA key of 2048 to 4096 bits or an Ed25519 key (dkim.parse_key's
    rules)."""
    key = dkim.parse_key(data, "private_key", least_bits=MIN_RSA_BITS, most_bits=MAX_RSA_BITS, error=_unusable_key)
    return _pem(key)


def _unusable_key(message: str) -> ArgumentError:
    return ArgumentError(message, code="private_key.unusable", field="private_key")


def public_record(pem: str) -> str:
    """The TXT record of a stored key's public half; a placeholder for a key that cannot be read."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (TypeError, ValueError, UnsupportedAlgorithm):
        return "(the stored key cannot be read: import it again)"
    if not isinstance(key, rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey):
        return "(the stored key is neither RSA nor Ed25519: import it again)"
    return dkim.public_record(key).decode()


async def add_domain(conn: asyncpg.Connection, *, account_id: int, domain: str) -> bool:
    """Allow the account to send from `domain` (checked before); False when it already could. ArgumentError when
    the domain, a domain above it or one under it is another account's (a From domain is one account's)."""
    try:
        return await conn.fetchval(*db.sql("account_domain_add", account_id=account_id, domain=domain)) is not None
    except asyncpg.UniqueViolationError:
        raise ArgumentError(
            f"the domain {shown(domain)} is another account's, or above or under one of its domains: "
            "a domain is given to one account only (`einmal account domain remove` it there first)"
        ) from None


async def remove_domain(conn: asyncpg.Connection, *, account_id: int, domain: str) -> None:
    """Remove the domain and its keys; NotFound when the account has no such domain."""
    if await conn.fetchval(*db.sql("account_domain_remove", account_id=account_id, domain=domain)) is None:
        raise NotFound(f"the account has no domain {shown(domain)}")


def _domains(found: identity.Identity) -> list[Domain]:
    return [
        Domain(
            d.domain, tuple(Published(d.domain, s, public_record(k)) for s, k in zip(d.selectors, d.keys, strict=True))
        )
        for d in found.domains
    ]


async def domains(conn: asyncpg.Connection, *, account_id: int) -> list[Domain]:
    """The account's domains, each with the records of its keys, by name."""
    return _domains(await identity.of_account(conn, account_id=account_id))


async def set_keys(conn: asyncpg.Connection, *, account_id: int, domain: str, keys: dict[str, str]) -> list[Published]:
    """Give the domain these keys by selector (checked before): a selector it has gets the new key, another
    is added beside its keys; at most two in all (ArgumentError). The records of the keys given."""
    try:
        done = await conn.fetchval(
            *db.sql(
                "account_domain_keys_set",
                account_id=account_id,
                domain=domain,
                selectors=list(keys),
                keys=list(keys.values()),
            )
        )
    except asyncpg.CheckViolationError:
        raise ArgumentError(
            f"the domain {shown(domain)} would have more than two keys: remove one first (`einmal account dkim remove`)"
        ) from None
    if done is None:
        raise NotFound(f"the account has no domain {shown(domain)}: add it first")
    return [Published(domain, selector, public_record(pem)) for selector, pem in keys.items()]


async def remove_key(conn: asyncpg.Connection, *, account_id: int, domain: str, selector: str) -> None:
    found = await conn.fetchval(
        *db.sql("account_domain_key_remove", account_id=account_id, domain=domain, selector=selector)
    )
    if found is None:
        raise NotFound(f"the account's domain {shown(domain)} has no key of selector {shown(selector)}")


def checked_return_path(value: str) -> str:
    """A plain ASCII address without '+' (VERP adds one), as EINMAL_RETURN_PATH."""
    local, at, domain = value.strip().rpartition("@")
    if (
        not (at and local and domain)
        or "+" in local
        or len(value) > 200
        or not value.isascii()
        or not value.strip().isprintable()
        or any(c in value.strip() for c in ' <>"(),;:[]')
        or address_problem(value.strip())
    ):
        raise ArgumentError(
            f"return_path {shown(value)}: a plain ASCII address without '+', e.g. bounces@example.org",
            code="return_path.invalid",
            field="return_path",
        )
    return value.strip()


def checked_mailto(value: str) -> str:
    """A plain ASCII address, as EINMAL_UNSUBSCRIBE_MAILTO."""
    value = value.strip()
    if address_problem(value) or not value.isascii() or any(c in value for c in "<>?&%, ") or unsafe_text(value):
        raise ArgumentError(
            f"unsubscribe_mailto {shown(value)}: a plain ASCII address, e.g. unsubscribe@example.org",
            code="unsubscribe_mailto.invalid",
            field="unsubscribe_mailto",
        )
    return value


def checked_secret(value: str) -> str:
    """Keys of the VERP signature, comma-separated (the first signs, each verifies), each of 16 printable
    ASCII characters or more; the message never quotes it."""
    value = value.strip()
    parts = value.split(",")
    if not all(len(p) >= MIN_SECRET and p.isascii() and p.isprintable() and " " not in p for p in parts):
        raise ArgumentError(
            f"return_path_secret: one or more comma-separated keys, each of {MIN_SECRET} printable characters or more",
            code="return_path_secret.invalid",
            field="return_path_secret",
        )
    return value


async def set_identity(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    given: set[str] | frozenset[str],
    return_path: str | None = None,
    return_path_secret: str | None = None,
    unsubscribe_mailto: str | None = None,
) -> None:
    """Set the parts named in `given` (None clears; checked before). A return path of an account with From
    domains is of one of them or a subdomain of one (DMARC's relaxed SPF alignment); with no secret yet,
    setting one generates it."""
    if return_path is not None and (domains := await from_rule.given(conn, account_id=account_id)):
        own = domain_key(return_path.rpartition("@")[2])
        if not any(own == d or own.endswith("." + d) for d in domains):
            raise ArgumentError(
                f"return path {shown(return_path)}: its domain is none of the account's ({', '.join(domains)}) "
                "nor a subdomain of one"
            )
    await conn.execute(
        *db.sql(
            "account_identity_set",
            account_id=account_id,
            return_path_given="return_path" in given,
            return_path=return_path,
            secret=return_path_secret if "return_path_secret" in given else None,
            generated=secrets.token_urlsafe(32),
            mailto_given="unsubscribe_mailto" in given,
            mailto=unsubscribe_mailto,
        )
    )


@dataclass(frozen=True)
class Shown:
    """An account's identity as it may be shown: public records, relay names, whether the secret is set."""

    domains: list[Domain]
    relays: list[identity.AccountRelay]  # their URLs for the operator's eyes only, masked (shared_relays.masked)
    return_path: str | None
    return_path_secret_set: bool
    unsubscribe_mailto: str | None


async def show(conn: asyncpg.Connection, *, account_id: int) -> Shown:
    found = await identity.of_account(conn, account_id=account_id)
    return Shown(
        _domains(found),
        list(found.relays),
        found.return_path,
        found.return_path_secret is not None,
        found.unsubscribe_mailto,
    )
