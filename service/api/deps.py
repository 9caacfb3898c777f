"""What every /api/v1 route shares: its connection, its key (the request's account), the problem shape."""

import logging
import time
from collections import OrderedDict, deque
from typing import Annotated

import anyio
import asyncpg
from fastapi import Depends, Header, HTTPException, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from service.api import keys

log = logging.getLogger("einmal.api")

DB_SECONDS = 10.0  # the most a request waits for the database
RENDERS = 4  # renders of campaigns in worker threads at a time per process (previews, trial renders)


# a page's cursor: a row id, below 2**63 (a bigint)
Cursor = Annotated[str | None, Query(max_length=18, pattern=r"^[0-9]{1,18}$", description="`next` of the page before")]


class Problem(BaseModel):
    error: str


ERRORS = {status: {"model": Problem} for status in (400, 401, 403, 404, 413, 422, 503)}  # 413: a body over its bound
CONFLICT = {**ERRORS, 409: {"model": Problem}}  # a route whose state may forbid what is asked
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200, description=(
    "the same key with the same request returns the first answer, without a second effect (24 h)"))]
bearer = HTTPBearer(auto_error=False, description="a key from `einmal account key create`")


class Failures:
    """Failed authentications (a key that is not valid; a request with no key at all is refused at no cost
    and guesses nothing, so it is not counted) per client address over the last WINDOW seconds, for at most
    CLIENTS clients (the oldest forgotten first). Once a client has failed FREE times, each of its requests waits STEP
    seconds more than the last before its key is looked up, up to MAX_DELAY, holding no database
    connection; valid keys from that address too (a shared address is slowed as a whole)."""

    WINDOW, CLIENTS, FREE, STEP, MAX_DELAY = 60.0, 10_000, 5, 0.25, 2.0
    KEEP = 100  # the times kept per client: a count past it is not told apart (EINMAL_OPTIN_CLIENT_LIMIT's bound)

    def __init__(self) -> None:
        self.seen: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, client: str) -> deque[float]:
        times = self.seen.get(client, deque())
        while times and times[0] < time.monotonic() - self.WINDOW:
            times.popleft()
        return times

    def delay(self, client: str) -> float:
        over = len(self._recent(client)) - self.FREE + 1
        return min(self.MAX_DELAY, self.STEP * over) if over > 0 else 0.0

    def failed(self, client: str) -> None:
        times = self._recent(client)
        times.append(time.monotonic())
        if len(times) > self.KEEP:
            times.popleft()
        self.seen[client] = times
        self.seen.move_to_end(client)
        while len(self.seen) > self.CLIENTS:
            self.seen.popitem(last=False)


async def key(request: Request,
              credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]):
    """The request's key, looked up on the request's one connection (`connection`), taken here and given
    back when the request ends. A request with no key at all is refused before any is taken."""
    client = request.client.host if request.client else "?"
    failures: Failures = request.app.state.failures
    if delay := failures.delay(client):
        await anyio.sleep(delay)
    if credentials is None:
        raise _unauthenticated(request, client, "no key")
    async with request.app.state.pool.acquire(timeout=DB_SECONDS) as conn:
        found = await keys.find(conn, credentials.credentials)
        if found is None:  # a key that is not one may be a guess; no key at all guesses nothing
            failures.failed(client)
            raise _unauthenticated(request, client, "a key that is not valid")
        if request.method not in ("GET", "HEAD") and not found.writes:
            raise HTTPException(403, "this key may only read")
        request.state.conn = conn
        yield found


def _unauthenticated(request: Request, client: str, why: str) -> HTTPException:
    log.info("%s %s from %s: %s", request.method, request.url.path, client, why)
    return HTTPException(401, "a valid key is needed: Authorization: Bearer <key>",
                         headers={"WWW-Authenticate": "Bearer"})


Key = Annotated[keys.Key, Depends(key)]


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


def not_found(what: str) -> HTTPException:
    """Also the answer for another account's: a key learns nothing of what is not its account's."""
    return HTTPException(404, f"no such {what}")
