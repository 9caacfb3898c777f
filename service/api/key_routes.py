"""/api/v1/keys: the key's account's own keys — list, create (the key shown once, in the answer), revoke
(another key than the one asking).

A read key may list; only a write key creates or revokes (deps.key refuses a read key on anything but GET),
so a read key cannot mint a write key. Another account's keys are neither listed nor revoked (404)."""

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from service import db
from service.api import keys
from service.api.deps import DB_SECONDS, ERRORS, Conn, IdempotencyKey, Key, Problem, not_found
from service.errors import UsageError

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
    rows = await conn.fetch(db.query("api_keys_of_account"), key.account_id, timeout=DB_SECONDS)
    return [ApiKey(**dict(r)) for r in rows]


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
    try:
        name = keys.check_name(fields.name, "name")
    except UsageError as exc:
        raise HTTPException(422, str(exc)) from None
    row, secret = await keys.mint(conn, key.account_id, name, fields.scope)
    response.headers["Cache-Control"] = "no-store"  # and service/api/idempotency.py keeps no copy of it
    return NewApiKey(**dict(row), key=secret)


@router.delete(
    "/{key_id}",
    operation_id="revoke_key",
    responses={**ERRORS, 409: {"model": Problem, "description": "the key asking is that key"}},
    summary="revoke another key of the account (a write key may do this)",
)
async def revoke_key(key_id: Annotated[int, Path(ge=1, le=2**63 - 1)], conn: Conn, key: Key) -> ApiKey:
    if key_id == key.id:  # an application would lock itself out with its last key; the command line can
        raise HTTPException(
            409,
            "a key does not revoke itself: revoke it with another key of the account, or "
            "with `einmal account key revoke`",
        )
    row = await conn.fetchrow(db.query("api_key_revoke_own"), key.account_id, key_id, timeout=DB_SECONDS)
    if row is None:
        raise not_found("key")
    return ApiKey(**dict(row))
