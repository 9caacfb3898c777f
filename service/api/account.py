"""/api/v1/account: the key's own account — its name, and what its unsubscribe page shows (the settings of
`einmal accounts set`)."""

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from service import db
from service.api.deps import DB_SECONDS, Conn, Key
from service.cli.accounts import MAX_DISPLAY_NAME, contact, display_name
from service.errors import UsageError
from service.web import texts

router = APIRouter(prefix="/account", tags=["account"])


class Account(BaseModel):
    name: str
    display_name: str | None = Field(description="the sender the unsubscribe page names; null: the message's From name")
    language: str = Field(description="the unsubscribe page's language, unless a campaign has its own")
    contact: str | None = Field(description="the address the page offers when a link no longer works")


class AccountFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    display_name: str | None = Field(None, max_length=MAX_DISPLAY_NAME, description='null or "" clears it')
    language: str = Field(None, max_length=20, description=f"one of {', '.join(texts.LANGUAGES)}")
    contact: str | None = Field(None, max_length=320, description='an address; null or "" clears it')


@router.get("", operation_id="get_account", summary="the account: its name and what its unsubscribe page shows")
async def get_account(conn: Conn, key: Key) -> Account:
    return Account(**dict(await conn.fetchrow(db.query("api_account"), key.account_id, timeout=DB_SECONDS)))


@router.patch(
    "",
    operation_id="change_account",
    summary="what the account's unsubscribe page shows: the fields given change, as `einmal accounts set`",
)
async def set_account(fields: AccountFields, conn: Conn, key: Key) -> Account:
    given = fields.model_fields_set
    try:
        named = display_name(fields.display_name or "", "display_name")
        language = texts.checked(fields.language, "language") if fields.language is not None else None
        address = contact(fields.contact or "", "contact")
    except UsageError as exc:
        raise HTTPException(422, str(exc)) from None
    name = await conn.fetchval(db.query("account_name"), key.account_id, timeout=DB_SECONDS)
    row = await conn.fetchrow(
        db.query("account_set_page"),
        name,
        "display_name" in given,
        named,
        language,
        "contact" in given,
        address,
        timeout=DB_SECONDS,
    )
    return Account(name=name, **dict(row))
