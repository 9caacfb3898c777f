"""/api/v1/lists: the key's account's lists — list them, make one (PUT), put a subscriber on one or take
it off. A subscriber's lists are in its own answer; `GET /subscribers?list=NAME` lists a list's members."""

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Response
from pydantic import BaseModel, Field

from service import db
from service.addresses import email_key
from service.api.deps import DB_SECONDS, ERRORS, Conn, Key, not_found
from service.subscribers.importer import MAX_EMAIL, MAX_LIST, unsafe_text

router = APIRouter(prefix="/lists", tags=["lists"])
ListName = Annotated[str, Path(min_length=1, max_length=MAX_LIST, description="the list's name")]
Email = Annotated[str, Path(max_length=MAX_EMAIL, description="the address, in any spelling of its mailbox")]


class MailingList(BaseModel):
    id: int
    name: str
    members: int = Field(description="confirmed members: the ones campaigns reach")
    unconfirmed: int = Field(description="sign-ups awaiting confirmation (double opt-in)")
    created_at: datetime


class Membership(BaseModel):
    list: str
    email: str
    added: bool
    state: Literal["confirmed", "unconfirmed"] = Field(
        description="unconfirmed: a sign-up awaiting its confirmation, which only its link gives")


@router.get("", operation_id="list_lists", summary="the account's lists, by name, with their member counts")
async def list_lists(conn: Conn, key: Key) -> list[MailingList]:
    return [MailingList(**dict(r)) for r in await conn.fetch(db.query("api_lists"), key.account_id,
                                                             timeout=DB_SECONDS)]


@router.put("/{name}", operation_id="put_list", summary="make the list (201), or find it (200)",
            responses={201: {"model": MailingList, "description": "made now"}})
async def put_list(name: ListName, conn: Conn, key: Key, response: Response) -> MailingList:
    if not name.strip() or unsafe_text(name) or name != name.strip():
        raise HTTPException(422, "a list's name is printable text without spaces around it")
    row = await conn.fetchrow(db.query("api_list_put"), key.account_id, name, timeout=DB_SECONDS)
    response.status_code = 201 if row["created"] else 200
    [found] = [r for r in await conn.fetch(db.query("api_lists"), key.account_id) if r["id"] == row["id"]]
    return MailingList(**dict(found))


@router.put("/{name}/members/{email}", operation_id="put_member",
            summary="put the subscriber on the list (added: false when it was)",
            responses=ERRORS)
async def put_member(name: ListName, email: Email, conn: Conn, key: Key) -> Membership:
    row = await conn.fetchrow(db.query("api_member_put"), key.account_id, name, email_key(email), email,
                              timeout=DB_SECONDS)
    if row["list_id"] is None:
        raise not_found("list")
    if row["subscriber_id"] is None:
        raise not_found("subscriber")
    return Membership(list=name, email=email, added=row["added"], state=row["state"])


@router.delete("/{name}/members/{email}", operation_id="delete_member",
               status_code=204, summary="take the subscriber off the list",
               responses=ERRORS)
async def delete_member(name: ListName, email: Email, conn: Conn, key: Key) -> Response:
    if not await conn.fetch(db.query("api_member_delete"), key.account_id, name, email_key(email),
                            timeout=DB_SECONDS):
        raise not_found("membership")
    return Response(status_code=204)
