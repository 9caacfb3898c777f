"""GET /api/v1/doctor: `einmal doctor --json` for the key's account (service/accounts/doctor.py), of one of its
own domains, kept EINMAL_DOCTOR_CACHE_SECONDS for every node, its runs bounded per account (429). No
connection is held while DNS is asked: the route takes one for each step (deps.KeyAlone)."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from service.accounts import doctor
from service.api.deps import CheckupConfig, KeyAlone, checkout, problem

router = APIRouter(prefix="/doctor", tags=["account"])


class Finding(BaseModel):
    number: int
    check: str = Field(description="dkim, spf, dmarc, alignment, bounces, unsubscribe, tls or dns")
    severity: Literal["fail", "warn", "ok", "unchecked"] = Field(
        description="fail: providers reject or junk the mail; warn: worth a look; unchecked: DNS did not answer"
    )
    title: str
    found: str | None = Field(description="the record found")
    expected: str | None = Field(description="the record expected")
    fix: str | None


class Report(BaseModel):
    domain: str = Field(description="the From domain checked")
    ok: bool = Field(description="true when no finding fails and none is unchecked")
    dns_servers: list[str] = Field(
        description="the DNS servers asked, `host:port` (port 53 left out): EINMAL_DNS_SERVERS, else the system's "
        "resolvers"
    )
    findings: list[Finding]


@router.get(
    "",
    operation_id="doctor",
    summary="what mailbox providers require of a bulk sender, checked from DNS for the account's From domain",
    responses={
        422: problem("the domain is not one of the account's, or not a domain name"),
        429: problem("the account's doctor runs are past their bound: try again after `Retry-After`"),
    },
)
async def run_doctor(
    request: Request,
    key: KeyAlone,
    checkup: CheckupConfig,
    domain: Annotated[
        str | None,
        Query(
            max_length=253,
            description=(
                "the From domain to check, one of the account's own (its domains, its campaigns' From and its "
                "return path's); absent: the account's first (its own, else EINMAL_FROM_DOMAINS'), else the DKIM "
                "one, else its newest campaign's From"
            ),
        ),
    ] = None,
) -> Report:
    report = await doctor.checked(checkout(request), checkup, account_id=key.account_id, domain=domain)
    return Report(**report.as_json())
