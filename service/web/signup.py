"""The double opt-in pages of the HTTP surface (docs/design.md §16 "Double opt-in"):

    GET  /lists/{id}/subscribe   the list's sign-up form (public; no JavaScript)
    POST /lists/{id}/subscribe   a sign-up (form-urlencoded `email`, `name`): always the same answer page, whatever
                                 the address's state; 429 once this client (its network address) made
                                 EINMAL_OPTIN_CLIENT_LIMIT sign-ups within the hour, on this node
    GET  /confirm?token=T        the confirmation link: a page with one button; never writes (mail scanners follow
                                 links); "confirmed" when it already is
    POST /confirm?token=T        confirms, with the consent record (time, address, user agent); a repeat says
                                 confirmed and changes nothing; a sign-up past its window: 410

All 404 while double opt-in is not set up (service/subscribers/optin.py check_configured)."""

import ipaddress
import logging
from collections.abc import Awaitable, Callable

import anyio
import asyncpg
from python_multipart.exceptions import FormParserError
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from service import db
from service.api.optin import Rate
from service.errors import UsageError
from service.mail import confirm
from service.settings import Settings
from service.subscribers import optin
from service.web import pages, signup_pages, texts

log = logging.getLogger("einmal.signup")

MAX_FORM = 4096  # a sign-up form's body
DB_SECONDS = 10.0
DB_DOWN = (*db.UNAVAILABLE, asyncpg.InterfaceError, ConnectionError, TimeoutError)


class SignUpPages:
    """The routes above. `read_body(request, limit)` reads a body within the surface's bounds, or raises
    `refused`; `database_down(exc)` is told of a database that cannot be reached; `headers` go on every page."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool, read_body: Callable[[Request, int], Awaitable[bytes]],
                 refused: type[Exception], database_down: Callable[[BaseException], Awaitable[None]],
                 headers: dict[str, str]) -> None:
        self.settings, self.pool, self.read_body, self.database_down = settings, pool, read_body, database_down
        self.refused, self.headers, self.rate = refused, headers, Rate()
        self.routes = [Route("/lists/{list_id:int}/subscribe", self.form, methods=["GET", "POST"]),
                       Route("/confirm", self.confirm, methods=["GET", "POST"])]

    def page(self, text: str, status: int = 200) -> Response:
        return HTMLResponse(text, status_code=status, headers=self.headers)

    def problem(self, request: Request, status: int, key: str) -> Response:
        code = texts.negotiate(request.headers.get("accept-language"))
        return self.page(pages.problem(code, key), status)

    async def form(self, request: Request) -> Response:
        try:
            optin.check_configured(self.settings)
        except optin.NotConfigured:
            return self.page(pages.plain("Not found", "Sign-up forms are not served here."), 404)
        try:
            with anyio.fail_after(DB_SECONDS):
                async with self.pool.acquire() as conn:
                    found = await conn.fetchrow(db.query("optin_form"), request.path_params["list_id"])
                    if found is None:
                        return self.problem(request, 404, "unknown")
                    code, sender = found["language"], found["display_name"] or found["account_name"]
                    if request.method == "GET":
                        return self.page(signup_pages.form(code, found["list_name"], sender))
                    return await self._sign_up(request, conn, found, sender)
        except DB_DOWN as exc:
            await self.database_down(exc)
            return self.problem(request, 503, "unavailable")

    async def _sign_up(self, request: Request, conn: asyncpg.Connection, found: asyncpg.Record,
                       sender: str) -> Response:
        code = found["language"]
        fields = await self._fields(request)
        if fields is None:
            return self.page(signup_pages.form(code, found["list_name"], sender, invalid=True), 400)
        try:
            email, name = optin.checked_address(*fields)
        except UsageError:
            return self.page(signup_pages.form(code, found["list_name"], sender, invalid=True, email=fields[0]), 422)
        client = request.client.host if request.client else "?"
        if not self.rate.allow(f"ip:{client}", self.settings.optin_client_limit):
            log.info("sign-up to list %d from %s refused: over the client limit", found["id"], client)
            return self.page(signup_pages.busy(code), 429)
        queued = await optin.sign_up(conn, self.settings, optin.SignUp(found["id"], found["account_id"], email,
                                                                       name, "form",
                                                                       texts.confirmation(found["language"])))
        log.info("sign-up to list %d from %s: %s", found["id"], client,
                 "confirmation queued" if queued else "nothing sent")
        return self.page(signup_pages.sent(code, found["list_name"], email))

    async def _fields(self, request: Request) -> tuple[str, str] | None:
        """(email, name) of a form-urlencoded or multipart body within MAX_FORM; None when it is not one."""
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in ("application/x-www-form-urlencoded", "multipart/form-data"):
            return None
        try:
            body = await self.read_body(request, MAX_FORM)
        except self.refused as exc:  # too large, no room, too slow: a bad form here
            log.info("sign-up form not read: %s", exc)
            return None

        async def replay() -> dict:
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        try:
            form = await Request(request.scope, replay).form(max_files=0, max_fields=5, max_part_size=MAX_FORM)
        except (HTTPException, MultiPartException, FormParserError, ValueError):
            return None
        email, name = form.get("email"), form.get("name", "")
        return (email, name) if isinstance(email, str) and isinstance(name, str) else None

    async def confirm(self, request: Request) -> Response:
        secret = self.settings.unsubscribe_secret
        tokens = request.query_params.getlist("token")
        ids = confirm.verify_token(secret, tokens[0]) if secret and len(tokens) == 1 else None
        if ids is None:
            return self.problem(request, 400 if secret else 404, "invalid")
        try:
            with anyio.fail_after(DB_SECONDS):
                async with self.pool.acquire() as conn:
                    shown = await optin.link(conn, self.settings, ids)
                    if shown is None or shown["email"] is None:
                        return self.problem(request, 404, "unknown")
                    code, state = shown["language"], shown["state"]
                    if request.method == "POST" and state is not None:
                        state = await optin.confirm(conn, self.settings, ids, _ip(request),
                                                    request.headers.get("user-agent", ""))
        except DB_DOWN as exc:
            await self.database_down(exc)
            return self.problem(request, 503, "unavailable")
        if state in ("confirmed", "already"):
            return self.page(signup_pages.confirmed(code, shown["list_name"], shown["email"]))
        if state == "unconfirmed":
            sender = shown["display_name"] or shown["account_name"]
            return self.page(signup_pages.question(code, tokens[0], shown["list_name"], sender, shown["email"]))
        return self.page(signup_pages.expired(code), 410)


def _ip(request: Request) -> str | None:
    """The client's network address for the consent record, when it is one (not a Unix socket's)."""
    try:
        return str(ipaddress.ip_address(request.client.host)) if request.client else None
    except ValueError:
        return None
