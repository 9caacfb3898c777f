"""/api/v1/keys: the key's account's own keys — list, create (the key shown once, in the answer), revoke
(another key than the one asking).

A read key may list; only a write key creates or revokes (deps.key refuses a read key on anything but GET),
so a read key cannot mint a write key. Another account's keys are neither listed nor revoked (404)."""

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from service import audit
from service.accounts import keys
from service.api.deps import DB_SECONDS, ERRORS, Conn, IdempotencyKey, Key, Problem

router = APIRouter(prefix="/keys", tags=["keys"])
Scope = Literal["read", "write"]


class ApiKey(BaseModel):
    id: int
    name: str
    scope: Scope
    prefix: str = Field(description="the key's first characters, to tell keys apart")
    created_at: datetime
    used_at: datetime | None = Field(description="its last use, to the minute")
    revoked_at: datetime | None


class NewApiKey(ApiKey):
    key: str = Field(description="the key itself: shown in this answer only, never again (only its hash is kept)")


class KeyFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field("", max_length=keys.MAX_NAME)
    scope: Scope = "write"


@router.get(
    "", operation_id="list_keys", summary="the account's keys, revoked ones included (never the keys themselves)"
)
async def list_keys(conn: Conn, key: Key) -> list[ApiKey]:
    return [ApiKey(**asdict(k)) for k in await keys.of_account(conn, account_id=key.account_id, timeout=DB_SECONDS)]


@router.post(
    "",
    operation_id="create_key",
    status_code=201,
    responses={
        409: {
            "model": Problem,
            "description": ("its Idempotency-Key's request was done: the key it made is not shown again"),
        }
    },
    summary="a new key of the account; the key is in this answer only (a write key may do this)",
)
async def create_key(
    fields: KeyFields, conn: Conn, key: Key, response: Response, idempotency_key: IdempotencyKey = None
) -> NewApiKey:
    name = keys.check_name(fields.name)
    async with conn.transaction():
        made, secret = await keys.mint(conn, account_id=key.account_id, name=name, scope=fields.scope)
        await audit.by_key(conn, key, "key.create", f"key {made.id}")
    response.headers["Cache-Control"] = "no-store"  # and service/api/idempotency.py keeps no copy of it
    return NewApiKey(**asdict(made), key=secret)


@router.delete(
    "/{key_id}",
    operation_id="revoke_key",
    responses={**ERRORS, 409: {"model": Problem, "description": "the key asking is that key"}},
    summary="revoke another key of the account (a write key may do this)",
)
async def revoke_key(key_id: Annotated[int, Path(ge=1, le=2**63 - 1)], conn: Conn, key: Key) -> ApiKey:
    async with conn.transaction():
        revoked = await keys.revoke_own(
            conn, account_id=key.account_id, key_id=key_id, asking=key.id, timeout=DB_SECONDS
        )
        await audit.by_key(conn, key, "key.revoke", f"key {key_id}")
    return ApiKey(**asdict(revoked))
