"""The console's routes, under /console (docs/guide/console.md):

    GET  /login, POST /login     the sign-in form; a session's cookie and the dashboard once signed in
    POST /logout                 the session ended
    GET  /                       the dashboard: the newest campaigns, those sending first with their progress
    GET  /campaigns/{id}/progress  one campaign's progress (a fragment the dashboard asks again every few seconds)
    GET  /audit, /audit.csv      the audit log, a page at a time, or all of it as CSV
    GET  /static/…               the stylesheet and htmx

Every route but the sign-in and the static files needs a session (guard.py). An operator sees every
account, a member its own: another account's campaign, or its audit log, is 404 as in the API. Each page
calls the service functions the API and the command line call; the console runs no SQL of its own."""

import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import asyncpg
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import audit, clients, db
from service.accounts.account import find_account
from service.campaigns import listing, status
from service.console import guard
from service.console.render import HEADERS, PREFIX, STATIC, page, problem
from service.errors import EinmalError, NotFound
from service.settings import Settings
from service.text import shown
from service.users import sessions, throttle, users

log = logging.getLogger("einmal.console")

MAX_FORM = 8 * 1024  # a console form's body: a few short fields
DASHBOARD_ROWS, AUDIT_ROWS = 20, 100
EXPORT_SECONDS = 300.0  # the most an export of the audit log takes
LIVE = ("sending", "paused")  # campaigns whose progress the dashboard shows


@dataclass(frozen=True)
class Config:
    """What the console needs of the settings, taken once when it is built."""

    limits: sessions.Limits
    node_timeout: float

    @classmethod
    def from_settings(cls, settings: Settings) -> "Config":
        limits = sessions.Limits(settings.console_session_idle_seconds, settings.console_session_lifetime_seconds)
        return cls(limits, settings.node_timeout_seconds)


@dataclass(frozen=True)
class Progress:
    id: int
    status: str
    sent: int
    failed: int
    in_doubt: int
    total: int

    @property
    def percent(self) -> int:
        done = self.total - self.waiting
        return 100 * done // self.total if self.total else 0

    @property
    def waiting(self) -> int:
        return self.total - self.sent - self.failed - self.in_doubt


def served(pool: asyncpg.Pool, settings: Settings, bounded: Callable[[ASGIApp, int | None], ASGIApp]) -> ASGIApp:
    """The console as the HTTP surface mounts it (given it by actors/node.py): its bodies read within the
    surface's bounds (`bounded`, at MAX_FORM), its answers with the console's headers."""
    return Headed(bounded(Console(pool, Config.from_settings(settings)).app, MAX_FORM))


class Console:
    OPEN = ("/login", "/static")  # the routes that need no session

    def __init__(self, pool: asyncpg.Pool, config: Config) -> None:
        self.pool, self.config = pool, config

        def signed(handler: guard.Handler) -> Callable[[Request], Awaitable[Response]]:
            return guard.signed_in(self.find, handler)

        self.routes: list[BaseRoute] = [
            Route("/login", self.sign_in_page, methods=["GET"]),
            Route("/login", self.sign_in, methods=["POST"]),
            Route("/logout", signed(self.sign_out), methods=["POST"]),
            Route("/", signed(self.dashboard), methods=["GET"]),
            Route("/campaigns/{campaign_id:int}/progress", signed(self.progress), methods=["GET"]),
            Route("/audit", signed(self.audit_page), methods=["GET"]),
            Route("/audit.csv", signed(self.audit_csv), methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC)),
        ]
        handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
            guard.Refused: refused,
            EinmalError: refused,
            **{kind: self.down for kind in db.DOWN},
            HTTPException: unrouted,
        }
        self.app = Starlette(routes=self.routes, exception_handlers=handlers)
        self.app.router.redirect_slashes = False

    @asynccontextmanager
    async def connected(self, seconds: float = db.DB_SECONDS) -> AsyncIterator[asyncpg.Connection]:
        with anyio.fail_after(seconds):
            async with db.acquire(self.pool) as conn:
                yield conn

    async def find(self, token: str) -> sessions.Viewer | None:
        async with self.connected() as conn:
            return await sessions.find(conn, token=token, limits=self.config.limits)

    async def down(self, request: Request, exc: Exception) -> Response:
        log.warning("console: the database cannot be reached: %s", type(exc).__name__)
        await self.pool.expire_connections()
        return problem(503, "Try again later", "The database cannot be reached.", {"Retry-After": "5"})

    # -- signing in and out ---------------------------------------------------------------------------

    async def sign_in_page(self, request: Request) -> Response:
        form_token = secrets.token_urlsafe(32)
        response = page("login.html", form_token=form_token, name="", error=None)
        guard.set_cookie(response, request, guard.SIGN_IN_COOKIE, form_token)
        return response

    async def sign_in(self, request: Request) -> Response:
        expected = guard.token(request, guard.SIGN_IN_COOKIE)
        fields = await guard.check_form(request, expected)
        name, password = guard.field(fields, "name").strip(), guard.field(fields, "password")
        network = clients.network((request.client or ("?", 0))[0])
        async with self.connected() as conn:
            over = await throttle.attempt(conn, name_key=users.key(name), network=network)
            stored = await users.find(conn, name=name) if over is None else None
        if over is not None:
            log.info("console: sign-in of %s from %s refused: too many failures", shown(name), network)
            return page(
                "login.html",
                status=429,
                headers={"Retry-After": over.retry_after()},
                form_token=expected,
                name=name,
                error="Too many failed sign-ins: try again later.",
            )
        user, rehashed = await users.verified(stored, password)  # argon2, holding no connection
        async with self.connected() as conn:
            if user is None:
                log.info("console: sign-in of %s from %s failed", shown(name), network)
                return page("login.html", status=401, form_token=expected, name=name, error="Wrong name or password.")
            await throttle.succeeded(conn, name_key=users.key(name), network=network)
            async with conn.transaction():
                if rehashed is not None:
                    await users.rehash(conn, user_id=user.id, password_hash=rehashed)
                held = await sessions.open_session(conn, user_id=user.id, limits=self.config.limits)
                await audit.record(
                    conn, actor=f"console:{user.name}", account_id=user.account_id, action="console.login"
                )
        log.info("console: %s signed in from %s", user.name, network)
        response = RedirectResponse(f"{PREFIX}/", 303)
        guard.set_cookie(response, request, guard.SESSION_COOKIE, held)
        guard.drop_cookie(response, request, guard.SIGN_IN_COOKIE)
        return response

    async def sign_out(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn, conn.transaction():
            await sessions.end(conn, token=request.state.token)
            await audit.record(conn, actor=viewer.actor, account_id=viewer.account_id, action="console.logout")
        response = RedirectResponse(f"{PREFIX}/login", 303)
        guard.drop_cookie(response, request, guard.SESSION_COOKIE)
        return response

    # -- pages ----------------------------------------------------------------------------------------

    def _page(self, template: str, request: Request, viewer: sessions.Viewer, **values: Any) -> Response:
        return page(template, viewer=viewer, form_token=sessions.form_token(request.state.token), **values)

    async def _progress(self, conn: asyncpg.Connection, campaign_id: int) -> Progress:
        """What `einmal campaign status` and GET /api/v1/campaigns/{id} count (service/campaigns/status.py)."""
        found = await status.snapshot(conn, campaign_id=campaign_id, node_timeout=self.config.node_timeout)
        counts = found.counts
        failed = counts.get("failed", 0) + counts.get("cancelled", 0) + counts.get("suppressed", 0)
        return Progress(
            found.id, found.status, counts.get("sent", 0), failed, counts.get("in_doubt", 0), sum(counts.values())
        )

    async def dashboard(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            found = await listing.newest(conn, account_id=viewer.account_id, limit=DASHBOARD_ROWS)
            progress = {c.id: await self._progress(conn, c.id) for c in found if c.status in LIVE}
        return self._page("dashboard.html", request, viewer, campaigns=found, progress=progress)

    async def progress(self, request: Request, viewer: sessions.Viewer) -> Response:
        campaign_id = request.path_params["campaign_id"]
        if not 0 < campaign_id < 2**63:
            raise NotFound("no such campaign")
        async with self.connected() as conn:
            if viewer.account_id is not None:
                await listing.owned(conn, account_id=viewer.account_id, campaign_id=campaign_id)
            shown_progress = await self._progress(conn, campaign_id)
        return self._page("progress.html", request, viewer, p=shown_progress)

    async def _account(self, conn: asyncpg.Connection, request: Request, viewer: sessions.Viewer) -> int | None:
        """The account whose audit log is asked for (`?account=NAME`; None: every account's, an operator's
        only); NotFound for another account than a member's own."""
        named = request.query_params.get("account") or None
        if named is None:
            return viewer.account_id
        account_id = await find_account(conn, name=named)
        if viewer.account_id is not None and account_id != viewer.account_id:
            raise NotFound(f"no account named {shown(named)}")
        return account_id

    async def audit_page(self, request: Request, viewer: sessions.Viewer) -> Response:
        before = request.query_params.get("before", "")
        cursor = int(before) if before.isascii() and before.isdigit() and len(before) <= 18 else 2**63 - 1
        async with self.connected() as conn:
            account_id = await self._account(conn, request, viewer)
            lines = await audit.page(conn, account_id=account_id, before=cursor, limit=AUDIT_ROWS + 1)
        more = lines[AUDIT_ROWS].id + 1 if len(lines) > AUDIT_ROWS else None
        named = request.query_params.get("account", "")
        return self._page("audit.html", request, viewer, lines=lines[:AUDIT_ROWS], more=more, account=named)

    async def audit_csv(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            account_id = await self._account(conn, request, viewer)

        async def chunks() -> AsyncIterator[str]:
            async with self.connected(EXPORT_SECONDS) as conn:
                async for chunk in audit.csv_chunks(conn, account_id=account_id):
                    yield chunk

        disposition = {"Content-Disposition": 'attachment; filename="einmal-audit.csv"'}
        return StreamingResponse(chunks(), media_type="text/csv; charset=utf-8", headers=disposition)


async def refused(request: Request, exc: Exception) -> Response:
    """A refusal or an error of einmal's (service/errors.py): its status and its sentence, as a page."""
    if isinstance(exc, guard.Refused):
        return problem(exc.status, exc.title, exc.text, exc.headers)
    status_code = exc.http_status if isinstance(exc, EinmalError) else 500
    title = "Not found" if status_code == 404 else "Not done"
    return problem(status_code, title, str(exc))


async def unrouted(request: Request, exc: Exception) -> Response:
    """A path the console does not have (404), or a method its route does not take (405), as a page."""
    given = exc if isinstance(exc, HTTPException) else HTTPException(500)
    title = "Not found" if given.status_code == 404 else "Not allowed"
    return problem(given.status_code, title, given.detail, dict(given.headers or {}))


class Headed:
    """Every answer of the console with its headers (render.HEADERS: the Content-Security-Policy, no caching)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def headed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, headed)
