"""/api/v1/account/domains and /api/v1/account/identity: the key's own account's sender identity
(service/accounts/senders.py; docs/guide/accounts-identity.md) — its From domains, a DKIM key generated for
one of them (the answer is the TXT record to publish, never the key), its return path and unsubscribe mailto.

A From domain is the operator's to give (`einmal account domain add`): a key may read its account's
domains, give one up and make its DKIM keys, never add one, or any key holder could send as any domain.

The relays are the operator's (`einmal relay …`, `einmal account relay attach`): shared by accounts and
holding passwords, they are neither listed nor changed here; the identity names the account's relays and
their weights only. No answer holds a secret: the return-path secret is answered as set or not."""

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from service import audit
from service.accounts import senders
from service.api.deps import ERRORS, Conn, Key

router = APIRouter(prefix="/account", tags=["account"])
DomainName = Annotated[str, Path(min_length=1, max_length=253, description="e.g. news.example.org")]


class DkimRecord(BaseModel):
    selector: str
    name: str = Field(description="where to publish it: SELECTOR._domainkey.DOMAIN")
    record: str = Field(description="the TXT record's value: v=DKIM1; k=rsa|ed25519; p=…")

    @classmethod
    def of(cls, published: senders.Published) -> "DkimRecord":
        return cls(selector=published.selector, name=published.name, record=published.record)


class FromDomain(BaseModel):
    domain: str
    keys: list[DkimRecord] = Field(description="its DKIM keys' records; none: the installation's DKIM settings sign")

    @classmethod
    def of(cls, domain: senders.Domain) -> "FromDomain":
        return cls(domain=domain.domain, keys=[DkimRecord.of(k) for k in domain.keys])


class NewKey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    selector: str = Field(min_length=1, max_length=63, description="e.g. s2027; the domain's key of it is replaced")
    algorithm: Literal["rsa", "ed25519"] = Field("rsa", description="rsa: 2048 bits")


class RelayShare(BaseModel):
    name: str
    weight: int


class Identity(BaseModel):
    domains: list[FromDomain] = Field(description="the From domains it may use; none: any From")
    relays: list[RelayShare] = Field(description="the relays it sends through (the operator's); none: the default")
    return_path: str | None = Field(description="VERP's envelope sender; null: the installation's")
    return_path_secret_set: bool = Field(description="whether the account has its own VERP key (never answered)")
    unsubscribe_mailto: str | None = Field(description="List-Unsubscribe's mailto; null: the installation's")


class IdentityFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    return_path: str | None = Field(
        None, max_length=200, description='of one of its domains or a subdomain of one; null or "" clears it'
    )
    return_path_secret: str | None = Field(
        None,
        min_length=senders.MIN_SECRET,
        max_length=1000,
        description="the VERP key; write only. Absent: the one it has, else a new one generated",
    )
    unsubscribe_mailto: str | None = Field(None, max_length=254, description='an address; null or "" clears it')


@router.get("/domains", operation_id="list_domains", summary="the account's From domains and their DKIM records")
async def list_domains(conn: Conn, key: Key) -> list[FromDomain]:
    return [FromDomain.of(d) for d in await senders.domains(conn, account_id=key.account_id)]


@router.delete(
    "/domains/{domain}",
    operation_id="delete_domain",
    status_code=204,
    responses=ERRORS,
    summary="remove a From domain and its DKIM keys (no domain left: any From)",
)
async def delete_domain(domain: DomainName, conn: Conn, key: Key) -> Response:
    name = senders.checked_domain(domain)
    async with conn.transaction():
        await senders.remove_domain(conn, account_id=key.account_id, domain=name)
        await audit.by_key(conn, key, "domain.remove", f"domain {name}")
    return Response(status_code=204)


@router.post(
    "/domains/{domain}/dkim",
    operation_id="create_dkim_key",
    status_code=201,
    responses=ERRORS,
    summary="generate a DKIM key for a selector of the domain; answers the TXT record to publish",
)
async def create_dkim_key(domain: DomainName, new: NewKey, conn: Conn, key: Key) -> DkimRecord:
    name, selector = senders.checked_domain(domain), senders.checked_selector(new.selector)
    pem = senders.generated_key(new.algorithm)
    async with conn.transaction():
        [published] = await senders.set_keys(conn, account_id=key.account_id, domain=name, keys={selector: pem})
        await audit.by_key(conn, key, "domain.dkim", f"domain {name} selector {selector}")
    return DkimRecord.of(published)


async def _identity(conn, account_id: int) -> Identity:
    found = await senders.show(conn, account_id=account_id)
    return Identity(
        domains=[FromDomain.of(d) for d in found.domains],
        relays=[RelayShare(name=r.name, weight=r.weight) for r in found.relays],
        return_path=found.return_path,
        return_path_secret_set=found.return_path_secret_set,
        unsubscribe_mailto=found.unsubscribe_mailto,
    )


@router.get("/identity", operation_id="get_identity", summary="what the account sends as; never a secret")
async def get_identity(conn: Conn, key: Key) -> Identity:
    return await _identity(conn, key.account_id)


@router.patch(
    "/identity", operation_id="change_identity", summary="its return path, VERP key and unsubscribe mailto, as given"
)
async def change_identity(fields: IdentityFields, conn: Conn, key: Key) -> Identity:
    given = fields.model_fields_set
    path, secret, mailto = fields.return_path, fields.return_path_secret, fields.unsubscribe_mailto
    async with conn.transaction():
        await senders.set_identity(
            conn,
            account_id=key.account_id,
            given=given - ({"return_path_secret"} if secret is None else set()),
            return_path=senders.checked_return_path(path) if path and path.strip() else None,
            return_path_secret=senders.checked_secret(secret) if secret is not None else None,
            unsubscribe_mailto=senders.checked_mailto(mailto) if mailto and mailto.strip() else None,
        )
        await audit.by_key(conn, key, "identity.change", "identity: " + ", ".join(sorted(given)))
    return await _identity(conn, key.account_id)
