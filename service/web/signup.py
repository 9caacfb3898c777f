"""The double opt-in pages of the HTTP surface (docs/design.md#api "Double opt-in"):

    GET  /forms/{token}      a list's sign-up form (public; no JavaScript), while its account has it open. The
                             token is random (service/subscribers/optin.py set_form): an unknown token, a wrong
                             one and a closed form are the same 404 ("does not exist or is closed"), naming no
                             list and no account, with the installation's next step only
    POST /forms/{token}      a sign-up (form-urlencoded `email`, `name`): always the same answer page, whatever
                             the address's state (the address as typed, a link back to the form), sent
                             FLOOR_SECONDS after the request began; 403 when the
                             POST says (Origin, else Referer) it came from a site that is neither this one nor
                             one the account allowed; 429 once this client's network (service/clients.py) made
                             EINMAL_OPTIN_CLIENT_LIMIT sign-ups within the hour, on all nodes together
    GET  /confirm?token=T    the confirmation link: a page with one button; never writes (mail scanners follow
                             links); "confirmed" when it already is
    POST /confirm?token=T    confirms, with the consent record (time, address, user agent); a repeat says
                             confirmed and changes nothing; a sign-up past its window: 410
A confirmation link that does not work has its own pages (invalid 400, unknown 404, expired 410) with a next
step: the account's contact only when the token is genuine (a forged one's account ids are nobody's word),
else EINMAL_UNSUBSCRIBE_MAILTO, else a sentence. A list is named by its title, the sender by the account's
display name, else the From name of the list's confirmations: never by the operator's names.

All 404 while double opt-in is not set up (service/subscribers/optin.py check_configured)."""

import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable

import anyio
import asyncpg
from python_multipart.exceptions import FormParserError
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from service import clients, db
from service.errors import Invalid
from service.mail import confirm
from service.subscribers import optin, subscriber, texts
from service.web import pages, signup_pages

log = logging.getLogger("einmal.signup")

MAX_FORM = 4096  # a sign-up form's body


class SignUpPages:
    """The routes above. `read_body(request, limit)` reads a body within the surface's bounds, or raises
    `refused`; `database_down(exc)` is told of a database that cannot be reached; `headers` go on every page."""

    def __init__(
        self,
        signups: optin.SignUps,
        pool: asyncpg.Pool,
        read_body: Callable[[Request, int], Awaitable[bytes]],
        refused: type[Exception],
        database_down: Callable[[BaseException], Awaitable[None]],
        headers: dict[str, str],
    ) -> None:
        self.signups, self.mailing = signups, signups.mailing
        self.pool, self.read_body, self.database_down = pool, read_body, database_down
        self.refused, self.headers = refused, headers
        self.routes = [
            Route("/forms/{token}", self.form, methods=["GET", "POST"]),
            Route("/confirm", self.confirm, methods=["GET", "POST"]),
        ]

    def page(self, text: str, status: int = 200) -> Response:
        return HTMLResponse(text, status_code=status, headers=self.headers)

    def problem(
        self,
        request: Request,
        status: int,
        key: str,
        generic: str | None = None,
        contact: str | None = None,
        code: str | None = None,
    ) -> Response:
        """The page of `key` in `code` (None: the browser's language), with a next step unless `generic` is None:
        `contact` (a genuine token's account's), else the installation's address, else the text `generic`."""
        code = code or texts.negotiate(request.headers.get("accept-language"))
        return self.page(pages.problem(code, key, self._next_step(contact, generic) if generic else None), status)

    def _next_step(self, contact: str | None, generic: str) -> pages.Next:
        address = contact or self.mailing.unsubscribe_mailto
        return ("signup_next_contact", address) if address else (generic, None)

    async def form(self, request: Request) -> Response:
        answer = await self._form(request)
        # the surface's no-referrer would make a browser post the form with `Origin: null` (Fetch: a request's
        # origin is serialised as null under no-referrer); same-origin keeps it, and tells other sites nothing
        answer.headers["Referrer-Policy"] = "same-origin"
        return answer

    async def _form(self, request: Request) -> Response:
        started = time.monotonic()
        try:
            optin.check_configured(self.mailing)  # a list's own From is judged once its row is read
        except optin.NotConfigured:
            return self.page(pages.plain("Not found", "Sign-up forms are not served here."), 404)
        token = request.path_params["token"]
        try:
            with anyio.fail_after(db.DB_SECONDS):
                async with db.acquire(self.pool) as conn:
                    found = (
                        await conn.fetchrow(*db.sql("optin_form", token=token))
                        if optin.TOKEN.fullmatch(token)
                        else None
                    )
                    if found is None or not (found["optin_from"] or self.mailing.optin_from):
                        # no such token, a wrong one, a closed form, no From: the same page, naming nobody
                        return self.problem(request, 404, "no_form", "form_next_generic")
                    code = found["language"]
                    sender = pages.sender(code, found["display_name"], found["from_address"] or self.mailing.optin_from)
                    if request.method == "GET":
                        return self.page(signup_pages.form(code, found["list_title"], sender))
                    answer = await self._sign_up(request, conn, found, sender)
        except db.DOWN as exc:
            await self.database_down(exc)
            return self.problem(request, 503, "unavailable")
        except subscriber.Busy:  # an import into the account holds its subscribers past the sign-up's wait
            answer = self.problem(request, 503, "unavailable")
            answer.headers["Retry-After"] = "5"
            return answer
        if answer.status_code == 200:  # the one answer whatever the address's state, in the same time too
            await optin.pad(started)
        return answer

    def _elsewhere(self, request: Request, found: asyncpg.Record) -> str | None:
        """The origin a cross-site POST came from, when neither this site nor the list's origins allow it.
        A POST naming no origin at all (no Origin, no Referer: not a browser's cross-site form) passes."""
        came = optin.posted_from(request.headers.get("origin"), request.headers.get("referer"))
        if came is None:
            return None
        own = {
            optin.posted_from(None, self.mailing.confirm_url or ""),
            optin.posted_from(f"{request.url.scheme}://{request.headers.get('host', '')}", None),
        }
        return None if came in own or came in found["form_origins"] else came

    async def _sign_up(
        self, request: Request, conn: asyncpg.Connection, found: asyncpg.Record, sender: str
    ) -> Response:
        code = found["language"]
        client = clients.network(request.client.host if request.client else None)
        if came := self._elsewhere(request, found):
            log.info("sign-up to list %d from %s refused: posted from %s", found["id"], client, came[:100])
            return self.problem(request, 403, "elsewhere")
        fields = await self._fields(request)
        if fields is None:
            return self.page(signup_pages.form(code, found["list_title"], sender, invalid=True), 400)
        try:
            email, name = optin.checked_address(*fields)
        except Invalid:
            return self.page(signup_pages.form(code, found["list_title"], sender, invalid=True, email=fields[0]), 422)
        counted = await clients.hit(conn, optin.CLIENT_KIND, client, optin.HOUR)
        if counted.hits > self.signups.client_limit:
            log.info("sign-up to list %d from %s refused: over the client limit", found["id"], client)
            return self._busy(code, counted)
        queued = await optin.sign_up(
            conn,
            self.signups,
            optin.SignUp(
                found["id"],
                found["account_id"],
                email,
                name,
                "form",
                optin.own_wording(texts.confirmation(found["language"]), found["optin_subject"], found["optin_text"]),
                found["optin_from"],
            ),
        )
        log.info(
            "sign-up to list %d from %s: %s", found["id"], client, "confirmation queued" if queued else "nothing sent"
        )
        # the form's own address, relative to this page's (which is it): right behind a proxy's path prefix too
        return self.page(signup_pages.sent(code, found["list_title"], email, request.path_params["token"]))

    def _busy(self, code: str, counted: clients.Count) -> Response:
        answer = self.page(signup_pages.busy(code), 429)
        answer.headers["Retry-After"] = counted.retry_after()
        return answer

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
        secret = self.mailing.unsubscribe_secret
        tokens = request.query_params.getlist("token")
        ids = confirm.verify_token(secret, tokens[0]) if secret and len(tokens) == 1 else None
        if ids is None:  # a forged token's account ids are nobody's word: no account's contact
            return (
                self.problem(request, 400, "confirm_invalid", "confirm_next_generic")
                if secret
                else self.problem(request, 404, "confirm_invalid")
            )
        try:
            with anyio.fail_after(db.DB_SECONDS):
                async with db.acquire(self.pool) as conn:
                    shown = await optin.link(conn, self.signups.window_seconds, ids)
                    if shown is None:  # the account is gone
                        return self.problem(request, 404, "confirm_unknown", "confirm_next_generic")
                    code, contact, state = shown["language"], shown["contact"], shown["state"]
                    if shown["campaign_id"] is None or shown["email"] is None:
                        return self.problem(request, 404, "confirm_unknown", "confirm_next_generic", contact, code)
                    if request.method == "POST" and state is not None:
                        state = await optin.confirm(
                            conn, self.signups.window_seconds, ids, _ip(request), request.headers.get("user-agent", "")
                        )
        except db.DOWN as exc:
            await self.database_down(exc)
            return self.problem(request, 503, "unavailable")
        if state in ("confirmed", "already"):
            return self.page(signup_pages.confirmed(code, shown["list_title"], shown["email"]))
        if state == "unconfirmed":
            sender = pages.sender(code, shown["display_name"], shown["from_address"])
            return self.page(signup_pages.question(code, tokens[0], shown["list_title"], sender, shown["email"]))
        return self.problem(request, 410, "expired", "confirm_next_generic", contact, code)


def _ip(request: Request) -> str | None:
    """The client's network address for the consent record, when it is one (not a Unix socket's)."""
    try:
        return str(ipaddress.ip_address(request.client.host)) if request.client else None
    except ValueError:
        return None
