"""Console sessions in PostgreSQL: a random token in the browser's cookie, only its SHA-256 in
einmal.console_sessions, so a copy of the table signs no one in. A session ends when unused for the idle
limit, past its lifetime, at logout, and when its user's password changes or the user is removed.

A form's token (CSRF) is derived from the session's token with HMAC: each session has its own, the
database holds none of them, and nothing else needs storing."""

import hashlib
import hmac
import secrets
from dataclasses import dataclass

import asyncpg

from service import db


@dataclass(frozen=True)
class Limits:
    idle: float  # seconds unused after which a session ends
    lifetime: float  # seconds after sign-in at which it ends, however used


@dataclass(frozen=True)
class Viewer:
    """Who a signed-in request is: its session and user; `account_id` None: an operator, who sees every
    account."""

    session_id: int
    user_id: int
    name: str
    role: str
    account_id: int | None

    @property
    def operator(self) -> bool:
        return self.role == "operator"

    @property
    def actor(self) -> str:
        """How the audit log names what this viewer does."""
        return f"console:{self.name}"


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def form_token(token: str) -> str:
    """The session's CSRF token, which its forms carry in a hidden field."""
    return hmac.new(token.encode(), b"einmal console form", hashlib.sha256).hexdigest()


def same(given: str | None, expected: str) -> bool:
    """Whether a given token is the expected one, compared in constant time."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


async def open_session(conn: asyncpg.Connection, *, user_id: int, limits: Limits) -> str:
    """A new session of the user: its token (to give the browser once; only its digest is kept)."""
    token = secrets.token_urlsafe(32)
    await conn.execute(
        *db.sql(
            "console_session_open",
            user_id=user_id,
            token_hash=digest(token),
            idle=limits.idle,
            lifetime=limits.lifetime,
        )
    )
    return token


async def find(conn: asyncpg.Connection, *, token: str, limits: Limits) -> Viewer | None:
    """Who holds the token, when its session is still open (marked used now); else None."""
    row = await conn.fetchrow(
        *db.sql("console_session_find", token_hash=digest(token), idle=limits.idle, lifetime=limits.lifetime)
    )
    return Viewer(**dict(row)) if row is not None else None


async def end(conn: asyncpg.Connection, *, token: str) -> bool:
    """End the token's session (logout): whether it was open."""
    return await conn.fetchval(*db.sql("console_session_end", token_hash=digest(token))) is not None
