"""What every /api/v1 route shares: its connection, its key (the request's account), the problem shape."""

import logging
from typing import Annotated

import asyncpg
from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from service.api import keys

log = logging.getLogger("einmal.api")

DB_SECONDS = 10.0  # the most a request waits for the database


class Problem(BaseModel):
    error: str


ERRORS = {status: {"model": Problem} for status in (400, 401, 403, 404, 422, 503)}
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


def not_found(what: str) -> HTTPException:
    """Also the answer for another account's: a key learns nothing of what is not its account's."""
    return HTTPException(404, f"no such {what}")
