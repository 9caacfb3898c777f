"""GET /api/v1/doctor: `einmal doctor --json` for the key's account (service/accounts/doctor.py)."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from service.accounts import doctor
from service.api.deps import Conn, Key

router = APIRouter(prefix="/doctor", tags=["account"])


class Finding(BaseModel):
    number: int
    check: str = Field(description="dkim, spf, dmarc, alignment, bounces, unsubscribe, tls or dns")
    severity: Literal["fail", "warn", "ok"]
    title: str
    found: str | None = Field(description="the record found")
    expected: str | None = Field(description="the record expected")
    fix: str | None


class Report(BaseModel):
    domain: str = Field(description="the From domain checked")
    ok: bool = Field(description="true when no finding fails")
    findings: list[Finding]


@router.get(
    "",
    operation_id="doctor",
    summary="what mailbox providers require of a bulk sender, checked from DNS for the account's From domain",
)
async def run_doctor(
    request: Request,
    conn: Conn,
    key: Key,
    domain: Annotated[
        str | None,
        Query(max_length=253, description="the From domain to check; absent: the account's first, else the DKIM one"),
    ] = None,
) -> Report:
    identity = await doctor.identity_of(conn, account_id=key.account_id)
    return Report(**(await doctor.examine(identity, request.app.state.settings, domain=domain)).as_json())
