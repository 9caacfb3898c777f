"""The JSON API under /api/v1 (docs/design.md §15; README "HTTP API"): FastAPI on the Starlette the HTTP
actor already serves, so that the OpenAPI document (/api/v1/openapi.json) is generated from the models
below, never written by hand.

Every route but the document needs `Authorization: Bearer <key>` (`einmal account key create`): 401
without a valid key, 403 for a read key on a route that writes. A request acts for its key's account
alone: anything of another account is 404, as if it did not exist. Bodies are bounded before they are
read by the HTTP surface (service/web/app.py BoundedBody)."""

import json
import logging
from datetime import datetime
from typing import Annotated, Literal

import asyncpg
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service import db
from service.addresses import address_problem, email_key
from service.api import keys
from service.subscribers import erasure
from service.subscribers.importer import MAX_ATTRIBUTE, MAX_EMAIL, MAX_NAME, unsafe_text

log = logging.getLogger("einmal.api")

DB_SECONDS = 10.0  # the most a request waits for the database
LOCK_SECONDS = 5.0  # the most an upsert waits for an import into its account to end (then 503)
Status = Literal["confirmed", "unconfirmed", "unsubscribed", "bounced"]
Email = Annotated[str, Path(max_length=MAX_EMAIL, description="the address, in any spelling of its mailbox")]


class Subscriber(BaseModel):
    id: int
    email: str
    name: str
    status: Status
    attributes: dict[str, str]
    lists: list[str]
    suppressed: str | None = Field(description="why the mailbox is suppressed for the account, if it is")
    created_at: datetime


class SubscriberPage(BaseModel):
    subscribers: list[Subscriber]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class SubscriberFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, max_length=MAX_NAME, description="unchanged when absent")
    attributes: dict[Annotated[str, Field(max_length=200)], Annotated[str, Field(max_length=MAX_ATTRIBUTE)]] | None \
        = Field(None, max_length=200, description="merged into the stored ones: a key given replaces its value")


class Problem(BaseModel):
    error: str


ERRORS = {status: {"model": Problem} for status in (400, 401, 403, 404, 422, 503)}


def build(pool: asyncpg.Pool) -> FastAPI:
    app = FastAPI(title="einmal", version="1", openapi_url="/openapi.json", docs_url=None, redoc_url=None,
                  responses=ERRORS)
    app.state.pool = pool
    app.add_exception_handler(StarletteHTTPException, _problem)
    app.add_exception_handler(RequestValidationError, _invalid)
    for exc in db.UNAVAILABLE:
        app.add_exception_handler(exc, _unavailable)
    app.include_router(_subscribers())
    return app


async def _problem(request: Request, exc: StarletteHTTPException) -> Response:
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # Allow: every method of the path, not only its first route's
        methods = {m for route in request.app.routes if route.matches(request.scope)[0] is Match.PARTIAL
                   for m in getattr(route, "methods", ())}
        headers["Allow"] = ", ".join(sorted(methods))
    return JSONResponse({"error": exc.detail}, exc.status_code, headers=headers)


async def _invalid(request: Request, exc: RequestValidationError) -> Response:
    """FastAPI's validation errors in the API's one shape: {"error": "where: what; …"}."""
    said = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
    return JSONResponse({"error": said[:1000]}, 422)


async def _unavailable(request: Request, exc: Exception) -> Response:
    log.warning("%s %s: the database cannot be reached: %s", request.method, request.url.path,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return JSONResponse({"error": "the database cannot be reached; try again shortly"}, 503,
                        headers={"Retry-After": "5"})


bearer = HTTPBearer(auto_error=False, description="a key from `einmal account key create`")


async def connection(request: Request):
    async with request.app.state.pool.acquire(timeout=DB_SECONDS) as conn:
        yield conn


async def key(request: Request, conn: Annotated[asyncpg.Connection, Depends(connection)],
              credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> keys.Key:
    found = await keys.find(conn, credentials.credentials) if credentials else None
    if found is None:
        client = request.client.host if request.client else "?"
        log.info("%s %s from %s: %s", request.method, request.url.path, client,
                 "no key" if credentials is None else "a key that is not valid")
        raise HTTPException(401, "a valid key is needed: Authorization: Bearer <key>",
                            headers={"WWW-Authenticate": "Bearer"})
    if request.method not in ("GET", "HEAD") and not found.writes:
        raise HTTPException(403, "this key may only read")
    return found


Conn = Annotated[asyncpg.Connection, Depends(connection)]
Key = Annotated[keys.Key, Depends(key)]


def _subscriber(row: asyncpg.Record) -> Subscriber:
    return Subscriber(**{**dict(row), "attributes": json.loads(row["attributes"]), "lists": list(row["lists"])})


def _mailbox(email: str) -> str:
    if unsafe_text(email) or address_problem(email):
        raise HTTPException(404, "no such subscriber")  # not an address: no subscriber can have it
    return email_key(email)


def _subscribers():
    from fastapi import APIRouter

    router = APIRouter(prefix="/subscribers", tags=["subscribers"])

    @router.get("", summary="the account's subscribers, oldest first")
    async def list_subscribers(conn: Conn, key: Key, status: Status | None = None,
                               cursor: Annotated[str | None, Query(max_length=20, pattern=r"^[0-9]+$")] = None,
                               limit: Annotated[int, Query(ge=1, le=500)] = 100) -> SubscriberPage:
        after = int(cursor) if cursor else 0
        rows = await conn.fetch(db.query("api_subscribers"), key.account_id, None, after, status, limit + 1,
                                timeout=DB_SECONDS)
        page = [_subscriber(r) for r in rows[:limit]]
        return SubscriberPage(subscribers=page, next=str(page[-1].id) if len(rows) > limit else None)

    @router.get("/{email}", summary="one subscriber, by any spelling of its mailbox", responses=ERRORS)
    async def get_subscriber(email: Email, conn: Conn, key: Key) -> Subscriber:
        rows = await conn.fetch(db.query("api_subscribers"), key.account_id, _mailbox(email), 0, None, 1,
                                timeout=DB_SECONDS)
        if not rows:
            raise HTTPException(404, "no such subscriber")
        return _subscriber(rows[0])

    @router.put("/{email}", summary="create the subscriber, or update its name and attributes",
                responses={**ERRORS, 201: {"model": Subscriber, "description": "created"}})
    async def put_subscriber(email: Email, fields: SubscriberFields, conn: Conn, key: Key,
                             response: Response) -> Subscriber:
        problem = unsafe_text(email) or address_problem(email)
        if problem:
            raise HTTPException(422, f"not an email address: {problem}")
        if fields.name is not None and unsafe_text(fields.name):
            raise HTTPException(422, "name: control characters")
        attributes = json.dumps(fields.attributes, ensure_ascii=False) if fields.attributes is not None else None
        try:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = '{int(LOCK_SECONDS * 1000)}ms'")
                await conn.execute(db.query("subscribers_import_lock"), key.account_id)
                row = await conn.fetchrow(db.query("api_subscriber_upsert"), key.account_id, email,
                                          email_key(email), fields.name, attributes, timeout=DB_SECONDS)
        except asyncpg.LockNotAvailableError:
            raise HTTPException(503, "an import into this account is running; try again shortly",
                                headers={"Retry-After": "5"}) from None
        response.status_code = 201 if row["created"] else 200
        [found] = await conn.fetch(db.query("api_subscribers"), key.account_id, email_key(email), row["id"] - 1,
                                   None, 1, timeout=DB_SECONDS)
        return _subscriber(found)

    @router.delete("/{email}", status_code=204, summary="erase the subscriber (GDPR art. 17); its mailbox "
                   "stays suppressed", responses={**ERRORS, 409: {"model": Problem}})
    async def delete_subscriber(email: Email, conn: Conn, key: Key) -> Response:
        account = await conn.fetchval(db.query("account_name"), key.account_id, timeout=DB_SECONDS)
        try:
            async with conn.transaction():
                await erasure.erase(conn, account, key.account_id, email)
        except erasure.Unknown:
            raise HTTPException(404, "no such subscriber") from None
        except erasure.Busy as exc:
            raise HTTPException(409, str(exc), headers={"Retry-After": "5"}) from None
        return Response(status_code=204)

    return router
