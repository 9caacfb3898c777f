"""What every /api/v1 route shares: its key (the request's account), looked up from the headers before the
body is read (KeyFirst), its connection, the problem shape; and the bound on guessing keys (Guesses)."""

import email.message
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Annotated, Any, TypeVar, cast

import anyio
import asyncpg
from fastapi import Depends, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import BaseModel, Field, ValidationError
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from service import clients, db
from service.accounts import doctor, keys
from service.db import DB_SECONDS
from service.mail.mailing import Mailing
from service.mail.slots import RenderSlots
from service.messages import messages
from service.relays import Relaying
from service.settings import Settings
from service.subscribers import optin
from service.webhooks import policy

log = logging.getLogger("einmal.api")

RENDERS = 4  # renders of campaigns in worker threads at a time per process (previews, trial renders, checks)
RENDER_SHARE = 2  # of them at most for one account


M = TypeVar("M", bound=BaseModel)

# a page's cursor: a row id, below 2**63 (a bigint)
Cursor = Annotated[str | None, Query(max_length=18, pattern=r"^[0-9]{1,18}$", description="`next` of the page before")]


# How a request puts right what an error's field says (service/errors.py), where the field's name alone does
# not say it; every other field is named as its JSON spells it.
FIXES = {"unsubscribe": '"unsubscribe": false', "force": "?force=true"}


class Problem(BaseModel):
    error: str
    code: str | None = Field(None, description="what is wrong, where one field is: `from.not_an_address`")
    field: str | None = Field(None, description="the field it concerns, as the request names it: `from`")


def problem(description: str) -> dict:
    """An answer of the problem shape, as `responses=` declares it."""
    return {"model": Problem, "description": description}


# what every operation may answer, declared once for the whole API (service/api/app.py); app.py adds 403 to
# the operations that write and 400 to the POSTs (their Idempotency-Key)
# the default of a field a change may leave out but may not give as null: its type (and the document) says a
# value, not a value or null
LEFT_OUT: Any = None
GENERIC: dict[int | str, dict[str, Any]] = {
    401: problem("no valid key: `Authorization: Bearer <key>`"),
    413: problem("the body is over its bound, refused before it is read"),
    422: problem('the request is not valid: `{"error": "where: what"}`, with `code` and `field` where one field is'),
    503: problem("the database cannot be reached, or the work is busy: try again after `Retry-After`"),
}
ERRORS: dict[int | str, dict[str, Any]] = {
    404: problem("no such thing in the key's account (another account's is not found either)")
}
CONFLICT: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    409: {"model": Problem},
}  # a route whose state may forbid what is asked
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=200,
        description=(
            "the same key with the same request (the same path, query and JSON, whatever the order of its fields "
            "and its whitespace) returns the first answer, without a second effect, for EINMAL_MESSAGE_KEY_HOURS "
            "(72 by default) from the first; another request with the key within them is 422"
        ),
    ),
]
bearer = HTTPBearer(auto_error=False, description="a key from `einmal account key create`")


class Refusal(Exception):
    """A request refused before its body is read: status, the problem's text, headers."""

    def __init__(self, status: int, error: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(error)
        self.status, self.error, self.headers = status, error, headers or {}


UNAUTHENTICATED = "a valid key is needed: Authorization: Bearer <key>"


class Guesses:
    """Failed key authentications per client network (service/clients.py: an IPv4 /24, an IPv6 /64), counted
    in PostgreSQL in fixed windows of WINDOW_SECONDS, so that every node sees the same count and a restart
    forgets nothing. Past FREE failures in a window the network's keys that are not valid are refused 429 with
    Retry-After (the window's end) and counted no more. A valid key is never refused for its network's
    failures: an office behind one NAT, or a cloud neighbour, would otherwise lock out every key of the
    network. That its answer (200, not 429) tells a valid key from a guess gives a guesser nothing: a key
    carries 256 random bits (service/accounts/keys.py), so no number of guesses finds one; the bound is on
    what the failures cost, a count written at most FREE + 1 times a window per network and node. A request
    with no key at all guesses nothing: 401 at no cost, not counted. `refused` spares the database the count
    of a network already known to be over: until when, per network, for at most CLIENTS networks."""

    KIND, WINDOW_SECONDS, FREE, CLIENTS = "key-failure", 900.0, 20, 10_000

    def __init__(self) -> None:
        self.refused: OrderedDict[str, float] = OrderedDict()

    def over(self, network: str) -> float:
        """Seconds this node knows `network` is still refused for; 0: not known to be."""
        until = self.refused.get(network, 0.0)
        if until and until <= time.monotonic():
            del self.refused[network]
        return max(0.0, until - time.monotonic())

    def refuse(self, network: str, count: clients.Count) -> Refusal:
        self.refused[network] = time.monotonic() + count.rest
        self.refused.move_to_end(network)
        while len(self.refused) > self.CLIENTS:
            self.refused.popitem(last=False)
        return Refusal(
            429,
            "too many keys that are not valid from this network; try again later",
            {"Retry-After": count.retry_after()},
        )


async def authenticate(pool: asyncpg.Pool, guesses: Guesses, scope: Scope) -> keys.Key:
    """The request's key from its headers alone (its body not read yet): one SHA-256 and one lookup; for a key
    that is not valid, the network's failure counted in the same checkout (unless this node knows the network
    is over already). Refusal: 401 without a valid key, 429 for a key that is not valid from a network over
    its failures, 503 without the database."""
    client = (scope.get("client") or ("?",))[0]
    scheme, value = get_authorization_scheme_param(Headers(scope=scope).get("authorization"))
    if scheme.lower() != "bearer" or not value:
        raise _unauthenticated(scope, client, "no key")  # no key guesses nothing: no cost, not counted
    network = clients.network(client)
    try:
        with anyio.fail_after(DB_SECONDS):
            async with pool.acquire() as proxy:
                conn = cast(asyncpg.Connection, proxy)  # a pooled connection answers as one
                if (found := await keys.find(conn, value)) is not None:
                    return found  # whatever its neighbours guessed
                if rest := guesses.over(network):
                    raise guesses.refuse(network, clients.Count(0, rest))
                count = await clients.hit(conn, guesses.KIND, network, guesses.WINDOW_SECONDS)
    except db.UNAVAILABLE as exc:
        log.warning(
            "%s %s: the database cannot be reached: %s",
            scope.get("method"),
            scope.get("path"),
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        raise Refusal(503, "the database cannot be reached; try again shortly", {"Retry-After": "5"}) from None
    if count.hits > guesses.FREE:
        log.info(
            "%s %s from %s: refused, %d keys that are not valid from %s",
            scope.get("method"),
            scope.get("path"),
            client,
            count.hits,
            network,
        )
        raise guesses.refuse(network, count)
    raise _unauthenticated(scope, client, "a key that is not valid")


def _unauthenticated(scope: Scope, client: str, why: str) -> Refusal:
    log.info("%s %s from %s: %s", scope.get("method"), scope.get("path"), client, why)
    return Refusal(401, UNAUTHENTICATED, {"WWW-Authenticate": "Bearer"})


class KeyFirst:
    """The API's key looked up from the request's headers before anything else (docs/design.md#listening-surface, #api):
    a request without a valid key is answered before its body takes room in the body budget or its Idempotency-Key is
    claimed. Only the OpenAPI document and its page are served without a key."""

    SCOPE_KEY = "einmal.api_key"
    PUBLIC = ("/openapi.json", "/docs")

    def __init__(self, app: ASGIApp, pool: asyncpg.Pool) -> None:
        self.app, self.pool, self.guesses = app, pool, Guesses()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (
            scope["method"] in ("GET", "HEAD") and scope["path"].removeprefix(scope.get("root_path", "")) in self.PUBLIC
        ):
            return await self.app(scope, receive, send)
        try:
            found = await authenticate(self.pool, self.guesses, scope)
        except Refusal as refused:
            body = json.dumps({"error": refused.error}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *((k.lower().encode(), v.encode()) for k, v in refused.headers.items()),
            ]
            await send({"type": "http.response.start", "status": refused.status, "headers": headers})
            return await send({"type": "http.response.body", "body": body})
        await self.app({**scope, self.SCOPE_KEY: found}, receive, send)


async def key_alone(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> keys.Key:
    """The request's key, found by KeyFirst before the body was read; no connection taken."""
    found: keys.Key | None = request.scope.get(KeyFirst.SCOPE_KEY)
    if found is None:  # the API served without KeyFirst before it: nothing vouches for the request
        raise HTTPException(401, UNAUTHENTICATED, headers={"WWW-Authenticate": "Bearer"})
    if request.method not in ("GET", "HEAD") and not found.writes:
        raise HTTPException(403, "this key may only read")
    return found


async def key(request: Request, found: Annotated[keys.Key, Depends(key_alone)]):
    """The request's key (`key_alone`) and the request's one connection (`connection`), taken here and given
    back when the request ends."""
    async with request.app.state.pool.acquire(timeout=DB_SECONDS) as conn:
        request.state.conn = conn
        yield found


Key = Annotated[keys.Key, Depends(key)]


@dataclass(frozen=True)
class Sections:
    """The settings the API was made with and each subject's section of them, built once when the app is made
    (app.api); a route takes the one it needs as a typed parameter."""

    relaying: Relaying  # a test message's relays
    webhook_rotation_hours: float  # how long a rotated webhook secret still signs
    mailing: Mailing
    checkup: doctor.Checkup
    queueing: messages.Queueing
    signups: optin.SignUps
    reach: policy.Reach

    @classmethod
    def of(cls, settings: Settings) -> "Sections":
        mailing = Mailing.of(settings)  # one for all: sources tried with it are found tried by every route
        return cls(
            Relaying.of(settings),
            settings.webhook_rotation_hours,
            mailing,
            replace(doctor.Checkup.of(settings), mailing=mailing),
            replace(messages.Queueing.of(settings), mailing=mailing),
            replace(optin.SignUps.of(settings), mailing=mailing),
            policy.Reach.of(settings),
        )


def _sections(request: Request) -> Sections:
    made = request.app.state.sections
    assert isinstance(made, Sections)
    return made


# the dependencies are coroutines: FastAPI runs a plain function's in a worker thread, a hop for each request
async def sections(request: Request) -> Sections:
    return _sections(request)


async def mailing(request: Request) -> Mailing:
    return _sections(request).mailing


async def checkup(request: Request) -> doctor.Checkup:
    return _sections(request).checkup


async def queueing(request: Request) -> messages.Queueing:
    return _sections(request).queueing


async def signups(request: Request) -> optin.SignUps:
    return _sections(request).signups


async def reach(request: Request) -> policy.Reach:
    return _sections(request).reach


ConfigSections = Annotated[Sections, Depends(sections)]
MailingConfig = Annotated[Mailing, Depends(mailing)]
CheckupConfig = Annotated[doctor.Checkup, Depends(checkup)]
QueueingConfig = Annotated[messages.Queueing, Depends(queueing)]
SignUpsConfig = Annotated[optin.SignUps, Depends(signups)]
ReachConfig = Annotated[policy.Reach, Depends(reach)]
# A route that waits on something slow takes its key alone and a connection only around its reads and writes,
# with `connected(request)` (or `checkout(request)`, a function that opens one): a trial render
# (docs/design.md#templates), DNS (the doctor, approve, a webhook's URL), a relay (a test message). A
# connection held across a name server that never answers, or a costly render, is one the other accounts
# wait for.
KeyAlone = Annotated[keys.Key, Depends(key_alone)]


def connected(request: Request) -> AbstractAsyncContextManager[asyncpg.Connection]:
    """`async with connected(request) as conn:` a connection of the API's pool, for a route with KeyAlone."""
    return request.app.state.pool.acquire(timeout=DB_SECONDS)


def checkout(request: Request) -> Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]:
    """A function that opens `connected(request)`: one pooled connection a step of a KeyAlone route."""
    return lambda: connected(request)


async def connection(request: Request, _: Key) -> asyncpg.Connection:
    """The request's one connection: the one its key was looked up on."""
    return request.state.conn


Conn = Annotated[asyncpg.Connection, Depends(connection)]


def limiter(request: Request, name: str, tokens: int) -> anyio.CapacityLimiter:
    """The process's limiter `name`, made at its first use (in the event loop that serves the requests)."""
    state = request.app.state
    if getattr(state, name, None) is None:
        setattr(state, name, anyio.CapacityLimiter(tokens))
    return getattr(state, name)


def renders(request: Request, account_id: int) -> AbstractAsyncContextManager[anyio.CapacityLimiter]:
    """``async with renders(request, account_id) as threads``: the account's turn among the process's RENDERS
    threads for previews, trial renders and the templates' checks, RENDER_SHARE of them at most for one account
    (service/mail/slots.py); ``threads`` is the limiter to run them with."""
    state = request.app.state
    if getattr(state, "trial_slots", None) is None:
        state.trial_slots = RenderSlots(RENDERS, RENDER_SHARE)
    return state.trial_slots.turn(account_id)


def render_slots(request: Request) -> RenderSlots:
    """The process's render threads for trial renders, a share for each account (service/mail/slots.py)."""
    state = request.app.state
    if getattr(state, "render_slots", None) is None:
        state.render_slots = RenderSlots()
    return state.render_slots


def not_found(what: str) -> HTTPException:
    """Also the answer for another account's: a key learns nothing of what is not its account's."""
    return HTTPException(404, f"no such {what}")


def body_as(body: bytes, content_type: str | None, model: type[M]) -> M:
    """A body of up to a MiB read as FastAPI reads a route's JSON body of type `model` (fastapi/routing.py), with
    its errors word for word: JSON only with a JSON content type, 422 where the body is not a `model`, 400
    where it is no text. For a route that reads its body itself, in a worker thread: parsing and checking a
    thousand items is milliseconds the event loop does not wait for."""
    value: Any = body
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    if content_type:
        said = email.message.Message()
        said["content-type"] = content_type
        subtype = said.get_content_subtype()
        if said.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json")):
            try:
                value = json.loads(body)
            except json.JSONDecodeError as exc:
                raise RequestValidationError(
                    [{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {}}]
                ) from None
            except (ValueError, RecursionError):  # not UTF-8, or nested past what the parser takes
                raise HTTPException(400, "There was an error parsing the body") from None
    try:
        # as FastAPI, from attributes; but JSON's objects are dicts, where that changes no answer and costs a
        # batch's thousand rows tenfold
        return model.model_validate(value, from_attributes=not isinstance(value, dict))
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def read_itself(model: type[BaseModel]) -> dict:
    """A route's `openapi_extra` when it reads a body of type `model` itself (`body_as`): the request body
    FastAPI would document. service/api/app.py puts the model in the document (its READ_ITSELF)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"content": {"application/json": {"schema": ref}}, "required": True}}
