"""/api/v1/lists: the key's account's lists — list them, make one (PUT), give it the title its public pages show
(`/lists/{name}/title`), put a subscriber on one or take it off, open or close its sign-ups
(`/lists/{name}/form`: its public form and POST /subscribe, closed until opened). A subscriber's lists are in
its own answer; `GET /subscribers?list=NAME` lists a list's members."""

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from service import db
from service.addresses import email_key
from service.api.deps import DB_SECONDS, ERRORS, Conn, Key, not_found
from service.settings import Settings
from service.subscribers import optin
from service.subscribers.lists import MAX_TITLE, set_title, title
from service.text import MAX_EMAIL, MAX_LIST, unsafe_text

router = APIRouter(prefix="/lists", tags=["lists"])
ListName = Annotated[str, Path(min_length=1, max_length=MAX_LIST, description="the list's name")]
Email = Annotated[str, Path(max_length=MAX_EMAIL, description="the address, in any spelling of its mailbox")]


class MailingList(BaseModel):
    id: int
    name: str
    title: str | None = Field(
        description="what its public pages (sign-up form, confirmation, preference page) call "
        'it; null: they say "the mailing list", never the name'
    )
    members: int = Field(description="confirmed members: the ones campaigns reach")
    unconfirmed: int = Field(description="sign-ups awaiting confirmation (double opt-in)")
    created_at: datetime
    form_url: str | None = Field(description="its public sign-up form while open (`PUT /lists/{name}/form`), else null")


class ListTitle(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(
        max_length=MAX_TITLE,
        description="what the list's public pages call it, e.g. "
        '"Weekly news"; null or "" clears it: they say '
        '"the mailing list"',
    )


class FormSetting(BaseModel):
    model_config = ConfigDict(extra="forbid")
    open: StrictBool = Field(
        description="true: the list takes sign-ups, from its public form and POST /subscribe; "
        "false: neither (a list's are closed until its account opens them)"
    )
    origins: list[str] = Field(
        [],
        max_length=optin.MAX_ORIGINS,
        description="origins (scheme://host[:port], as browsers send them in Origin) "
        "besides this site's own whose pages may post the form; replaces the "
        "list's (default: none)",
    )


class ListForm(BaseModel):
    list: str
    open: bool
    url: str | None = Field(
        description="the form's address, a random token's: the same when it is closed and "
        "opened again; null until it is first opened"
    )
    origins: list[str]


class Membership(BaseModel):
    list: str
    email: str
    added: bool
    state: Literal["confirmed", "unconfirmed"] = Field(
        description="unconfirmed: a sign-up awaiting its confirmation, which only its link gives"
    )


def _listed(settings: Settings, row) -> MailingList:
    return MailingList(
        id=row["id"],
        name=row["name"],
        title=row["title"],
        members=row["members"],
        unconfirmed=row["unconfirmed"],
        created_at=row["created_at"],
        form_url=optin.form_url(settings, row["form_token"]),
    )


def _form(settings: Settings, row) -> ListForm:
    return ListForm(
        list=row["name"],
        open=row["form_open"],
        origins=row["form_origins"],
        url=optin.form_url(settings, row["form_token"]),
    )


@router.get("", operation_id="list_lists", summary="the account's lists, by name, with their member counts")
async def list_lists(conn: Conn, key: Key, request: Request) -> list[MailingList]:
    return [
        _listed(request.app.state.settings, r)
        for r in await conn.fetch(*db.sql("lists_of_account", account_id=key.account_id), timeout=DB_SECONDS)
    ]


@router.get(
    "/{name}/form",
    operation_id="get_list_form",
    responses=ERRORS,
    summary="whether the list takes sign-ups, its form's address and the origins allowed to post it",
)
async def get_list_form(name: ListName, conn: Conn, key: Key, request: Request) -> ListForm:
    row = await conn.fetchrow(*db.sql("list_form", account_id=key.account_id, list_name=name), timeout=DB_SECONDS)
    if row is None:
        raise not_found("list")
    return _form(request.app.state.settings, row)


@router.put(
    "/{name}/form",
    operation_id="put_list_form",
    responses=ERRORS,
    summary="open or close the list's sign-ups (its public form and POST /subscribe) and set the origins "
    "allowed to post its form",
)
async def put_list_form(name: ListName, body: FormSetting, conn: Conn, key: Key, request: Request) -> ListForm:
    try:
        allowed = optin.origins(body.origins)
        row = await optin.set_form(conn, key.account_id, name, body.open, allowed)
    except optin.NoList:
        raise not_found("list") from None
    return _form(request.app.state.settings, row)


@router.put(
    "/{name}/title",
    operation_id="put_list_title",
    responses=ERRORS,
    summary="what the list's public pages (sign-up form, confirmation, preference page) call it",
)
async def put_list_title(name: ListName, body: ListTitle, conn: Conn, key: Key) -> ListTitle:
    try:
        row = await set_title(conn, key.account_id, name, title(body.title or "", "title"))
    except optin.NoList:
        raise not_found("list") from None
    return ListTitle(title=row["title"])


@router.put(
    "/{name}",
    operation_id="put_list",
    summary="make the list (201), or find it (200)",
    responses={201: {"model": MailingList, "description": "made now"}},
)
async def put_list(name: ListName, conn: Conn, key: Key, response: Response, request: Request) -> MailingList:
    if not name.strip() or unsafe_text(name) or name != name.strip():
        raise HTTPException(422, "a list's name is printable text without spaces around it")
    row = await conn.fetchrow(*db.sql("list_ensure", account_id=key.account_id, list_name=name), timeout=DB_SECONDS)
    response.status_code = 201 if row["created"] else 200
    lists = await conn.fetch(*db.sql("lists_of_account", account_id=key.account_id))
    [found] = [r for r in lists if r["id"] == row["id"]]
    return _listed(request.app.state.settings, found)


@router.put(
    "/{name}/members/{email}",
    operation_id="put_member",
    summary="put the subscriber on the list (added: false when it was)",
    responses=ERRORS,
)
async def put_member(name: ListName, email: Email, conn: Conn, key: Key) -> Membership:
    row = await conn.fetchrow(
        *db.sql("list_member_add", account_id=key.account_id, list_name=name, email_key=email_key(email), email=email),
        timeout=DB_SECONDS,
    )
    if row["list_id"] is None:
        raise not_found("list")
    if row["subscriber_id"] is None:
        raise not_found("subscriber")
    return Membership(list=name, email=email, added=row["added"], state=row["state"])


@router.delete(
    "/{name}/members/{email}",
    operation_id="delete_member",
    status_code=204,
    summary="take the subscriber off the list",
    responses=ERRORS,
)
async def delete_member(name: ListName, email: Email, conn: Conn, key: Key) -> Response:
    member = {"account_id": key.account_id, "list_name": name, "email_key": email_key(email)}
    if not await conn.fetch(*db.sql("list_member_delete", **member), timeout=DB_SECONDS):
        raise not_found("membership")
    return Response(status_code=204)
