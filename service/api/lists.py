"""/api/v1/lists: the key's account's lists — list them, make one (PUT), give it the title its public pages show
(`/lists/{name}/title`), put a subscriber on one or take it off, open or close its sign-ups
(`/lists/{name}/form`: its public form and POST /subscribe, closed until opened). A subscriber's lists are in
its own answer; `GET /subscribers?list=NAME` lists a list's members."""

import builtins
from datetime import datetime
from typing import Annotated, Literal

import anyio.to_thread
from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from service import audit
from service.api.deps import ERRORS, Conn, Key, KeyAlone, MailingConfig, connected, not_found
from service.campaigns.fields import MAX_FROM
from service.mail.mailing import Mailing
from service.subscribers import lists, optin, optin_wording, texts
from service.subscribers.lists import MAX_TITLE, set_title, title
from service.text import MAX_EMAIL, MAX_LIST

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
    from_address: str | None = Field(
        None,
        alias="from",
        max_length=MAX_FROM,
        description="the From of the list's confirmation messages, one of the account's From domains, e.g. "
        '"Weekly <news@mail.example.org>"; "" clears it (the installation\'s EINMAL_OPTIN_FROM again); '
        "absent or null: it stays",
    )
    subject: str | None = Field(
        None,
        description="the subject of the list's confirmation messages, one line of at most "
        f"{optin_wording.MAX_SUBJECT} characters, a template as a campaign's, e.g. "
        '"Confirm your subscription to {{ campaign.name }}"; "" clears it (einmal\'s again); absent or null: it stays',
    )
    text: str | None = Field(
        None,
        description=f"the text of the list's confirmation messages, at most {optin_wording.MAX_TEXT:,} characters, "
        "a template as a campaign's that must show the confirmation link, {{ confirm_url }} (einmal adds none); "
        '"" clears it (einmal\'s again); absent or null: it stays',
    )


class ListForm(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    list: str
    open: bool
    from_address: str | None = Field(
        alias="from", description="the list's own confirmations' From; null: the installation's EINMAL_OPTIN_FROM"
    )
    url: str | None = Field(
        description="the form's address, a random token's: the same when it is closed and "
        "opened again; null until it is first opened"
    )
    origins: builtins.list[str]  # `list` is the field above
    subject: str | None = Field(description="the list's own confirmations' subject; null: default_subject")
    text: str | None = Field(description="the list's own confirmations' text; null: default_text")
    default_subject: str = Field(
        description="einmal's subject of confirmation messages in the account's language: the list's when it has "
        "none of its own"
    )
    default_text: str = Field(description="einmal's text of confirmation messages, likewise")


class Membership(BaseModel):
    list: str
    email: str
    added: bool
    state: Literal["confirmed", "unconfirmed"] = Field(
        description="unconfirmed: a sign-up awaiting its confirmation, which only its link gives"
    )


def _listed(mailing: Mailing, found: lists.MailingList) -> MailingList:
    return MailingList(
        id=found.id,
        name=found.name,
        title=found.title,
        members=found.members,
        unconfirmed=found.unconfirmed,
        created_at=found.created_at,
        form_url=optin.form_url(mailing, found.form_token),
    )


def _form(mailing: Mailing, form: lists.Form) -> ListForm:
    default = texts.confirmation(form.language)
    return ListForm(
        list=form.name,
        open=form.form_open,
        from_address=form.optin_from,
        origins=form.form_origins,
        url=optin.form_url(mailing, form.form_token),
        subject=form.optin_subject,
        text=form.optin_text,
        default_subject=default.subject,
        default_text=default.body,
    )


@router.get("", operation_id="list_lists", summary="the account's lists, by name, with their member counts")
async def list_lists(conn: Conn, key: Key, mailing: MailingConfig) -> list[MailingList]:
    return [_listed(mailing, m) for m in await lists.lists(conn, account_id=key.account_id)]


@router.get(
    "/{name}/form",
    operation_id="get_list_form",
    responses=ERRORS,
    summary="whether the list takes sign-ups, its form's address, the origins allowed to post it, and its "
    "confirmations' From, subject and text",
)
async def get_list_form(name: ListName, conn: Conn, key: Key, mailing: MailingConfig) -> ListForm:
    return _form(mailing, await lists.form(conn, account_id=key.account_id, list_name=name))


@router.put(
    "/{name}/form",
    operation_id="put_list_form",
    responses=ERRORS,
    summary="open or close the list's sign-ups (its public form and POST /subscribe); set the origins "
    "allowed to post its form, and its confirmations' From, subject and text",
)
async def put_list_form(
    name: ListName, body: FormSetting, key: KeyAlone, request: Request, mailing: MailingConfig
) -> ListForm:
    allowed = optin.origins(body.origins)
    own = None if body.from_address is None else ""  # None: it stays; '': cleared
    if body.from_address and body.from_address.strip():  # compiled, as the templates are, in a worker thread
        own = await anyio.to_thread.run_sync(optin.checked_from, mailing, body.from_address)
    subject, text = await optin_wording.checked(body.subject, body.text)  # no connection taken yet
    try:
        async with connected(request) as conn, conn.transaction():
            row = await optin.set_form(conn, key.account_id, name, body.open, allowed, mailing, own, subject, text)
            await audit.by_key(conn, key, "list.form", f"list {name}")
    except optin.NoList:
        raise not_found("list") from None
    return _form(mailing, lists.Form.of(row))


@router.put(
    "/{name}/title",
    operation_id="put_list_title",
    responses=ERRORS,
    summary="what the list's public pages (sign-up form, confirmation, preference page) call it",
)
async def put_list_title(name: ListName, body: ListTitle, conn: Conn, key: Key) -> ListTitle:
    try:
        async with conn.transaction():
            row = await set_title(conn, key.account_id, name, title(body.title or ""))
            await audit.by_key(conn, key, "list.title", f"list {name}")
    except optin.NoList:
        raise not_found("list") from None
    return ListTitle(title=row["title"])


@router.put(
    "/{name}",
    operation_id="put_list",
    summary="make the list (201), or find it (200)",
    responses={201: {"model": MailingList, "description": "made now"}},
)
async def put_list(name: ListName, conn: Conn, key: Key, response: Response, mailing: MailingConfig) -> MailingList:
    async with conn.transaction():
        found, created = await lists.ensure(conn, account_id=key.account_id, list_name=name)
        await audit.by_key(conn, key, "list.put", f"list {name}")
    response.status_code = 201 if created else 200
    return _listed(mailing, found)


@router.put(
    "/{name}/members/{email}",
    operation_id="put_member",
    summary="put the subscriber on the list (added: false when it was)",
    responses=ERRORS,
)
async def put_member(name: ListName, email: Email, conn: Conn, key: Key) -> Membership:
    async with conn.transaction():
        added = await lists.add_member(conn, account_id=key.account_id, list_name=name, email=email)
        await audit.by_key(conn, key, "member.add", f"list {name}: {email}")
    return Membership(list=name, email=email, added=added.added, state=added.state)


@router.delete(
    "/{name}/members/{email}",
    operation_id="delete_member",
    status_code=204,
    summary="take the subscriber off the list",
    responses=ERRORS,
)
async def delete_member(name: ListName, email: Email, conn: Conn, key: Key) -> Response:
    async with conn.transaction():
        await lists.remove_member(conn, account_id=key.account_id, list_name=name, email=email)
        await audit.by_key(conn, key, "member.remove", f"list {name}: {email}")
    return Response(status_code=204)
