"""/api/v1/account: the key's own account — its name, what its unsubscribe page shows and its time zone (the
settings of `einmal accounts set`)."""

from dataclasses import asdict

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from service import audit
from service.accounts import account
from service.accounts.account import MAX_DISPLAY_NAME
from service.api.deps import DB_SECONDS, LEFT_OUT, Conn, Key
from service.subscribers import texts

router = APIRouter(prefix="/account", tags=["account"])


class Account(BaseModel):
    name: str
    display_name: str | None = Field(description="the sender the unsubscribe page names; null: the message's From name")
    language: str = Field(description="the unsubscribe page's language, unless a campaign has its own")
    contact: str | None = Field(description="the address the page offers when a link no longer works")
    time_zone: str = Field(
        description="an IANA time zone, e.g. Europe/Berlin: a campaign's local time for subscribers without a "
        "valid `time_zone` attribute"
    )


class AccountFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    display_name: str | None = Field(None, max_length=MAX_DISPLAY_NAME, description='null or "" clears it')
    language: str = Field(LEFT_OUT, max_length=20, description=f"one of {', '.join(texts.LANGUAGES)}")
    contact: str | None = Field(None, max_length=320, description='an address; null or "" clears it')
    time_zone: str = Field(LEFT_OUT, min_length=1, max_length=64, description="an IANA time zone, e.g. Europe/Berlin")


@router.get("", operation_id="get_account", summary="the account: its name and what its unsubscribe page shows")
async def get_account(conn: Conn, key: Key) -> Account:
    return Account(**asdict(await account.page(conn, account_id=key.account_id, timeout=DB_SECONDS)))


@router.patch(
    "",
    operation_id="change_account",
    summary="what the account's unsubscribe page shows: the fields given change, as `einmal accounts set`",
)
async def set_account(fields: AccountFields, conn: Conn, key: Key) -> Account:
    async with conn.transaction():
        page = await account.set_page(
            conn,
            account_id=key.account_id,
            display_name=account.display_name(fields.display_name or ""),
            language=texts.checked(fields.language) if fields.language is not None else None,
            contact=account.contact(fields.contact or ""),
            time_zone=fields.time_zone,
            given=fields.model_fields_set,
            timeout=DB_SECONDS,
        )
        await audit.by_key(conn, key, "account.change", "account: " + ", ".join(sorted(fields.model_fields_set)))
    return Account(**asdict(page))
