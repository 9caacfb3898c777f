"""The HTTP surface: one-click unsubscribe, health, readiness and metrics (a Starlette app).

    POST /unsubscribe?token=T   RFC 8058 one-click: body `List-Unsubscribe=One-Click` (form-urlencoded or
                                multipart/form-data), or empty. 200, empty body (the confirmation page when
                                the client asks for HTML). Records the inbound event `unsubscribe:<a>.<c>.<s>`
                                and the suppression in one transaction (service.inbound.events.apply): a repeat
                                changes nothing. A bad, tampered or retired token: 400, nothing written.
    GET  /unsubscribe?token=T   a page with one button that posts the form, naming the message's subject and the
                                sender, in the campaign's language (service/web/pages.py); "already unsubscribed"
                                when the address is suppressed; a GET never unsubscribes (never writes)
    GET  /healthz               200 while the event loop answers
    GET  /readyz                200 when the database answered within the last seconds and every actor runs;
                                503 and {"ready": false, "reason": …} otherwise; "notes": […] when something
                                the operator should know does not make it unready (replication not synchronous)
    GET  /metrics               Prometheus text format; the database's figures read at most every
                                METRICS_FRESH_SECONDS, one read at a time, on a connection of their own
    /api/v1/…                   the JSON API for applications (service/api/app.py), with per-account keys;
                                its OpenAPI document at /api/v1/openapi.json
    POST /inbound/PROVIDER[/ACCOUNT]   bounces and complaints from Amazon SES (through SNS), Postmark and
                                Mailgun (service/inbound/webhooks.py): 200 once the events are applied (or were
                                before); 404 while the provider's secret is not configured; bodies over
                                1 MiB 413, wrong signatures or credentials 401/403, unreadable ones 400

Bad input never reaches the database and never gives a traceback: bodies over 64 KiB are 413, other
content types 415, other methods 405, other paths 404. The bodies all requests hold at once are bounded
(BodyBudget): one that finds no room soon is 503. A database that cannot be reached is 503 with
Retry-After, and the pool's connections are renewed so that the retry gets fresh ones.
"""

import json
import logging
import time
from collections.abc import Callable
from email.utils import parseaddr

import anyio
import asyncpg
from python_multipart.exceptions import FormParserError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from service import db
from service.api import app as api
from service.api import idempotency
from service.errors import UsageError
from service.inbound import events as inbound
from service.inbound import webhook_credentials, webhooks
from service.inbound.mailgun import Mailgun
from service.inbound.postmark import Postmark
from service.inbound.ses import Ses
from service.mail import unsubscribe
from service.mail.verp import ReturnPath
from service.metrics import CONTENT_TYPE, Metrics
from service.settings import Settings
from service.web import pages, subject, texts

log = logging.getLogger("einmal.http")

MAX_BODY = 64 * 1024
BUDGET_WAIT_SECONDS = 1.0  # how long a body waits for room in the budget before it is refused (503)
METRICS_FRESH_SECONDS = 5.0  # the database figures of /metrics are read at most this often
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
DB_SECONDS = 10.0  # the most a request waits for the database (pool and statements)
READY_FRESH_SECONDS = 1.0  # a database answer this recent needs no new ping
DOWN_LOG_SECONDS = 30.0  # "database unreachable" at most this often
DB_DOWN = (*db.UNAVAILABLE, asyncpg.InterfaceError, asyncpg.OperatorInterventionError, ConnectionError)
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


class Refused(Exception):
    """A request answered with a 4xx or 503 before anything was written. `page`: the texts of the page a
    browser gets, in its language (service/web/texts.py); without it, an English one of title and text."""

    def __init__(self, status: int, title: str, text: str, page: str | None = None) -> None:
        super().__init__(text)
        self.status, self.title, self.text, self.page = status, title, text, page


class Web:
    """The app's state: settings, its own database pool, the metrics and what readiness asks of the node.

    `checks()` returns the reasons, other than the database, why this process is not ready (draining,
    an actor restarting, the SMTP relay refusing): an empty list when there are none; `notes()` what
    readiness reports without failing for it. `metrics_pool` (one connection is enough) reads the figures
    of /metrics; unset, they share `pool`."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool, metrics: Metrics,
                 checks: Callable[[], list[str]] = list, metrics_pool: asyncpg.Pool | None = None,
                 notes: Callable[[], list[str]] = list) -> None:
        self.settings, self.pool, self.metrics, self.checks, self.notes = settings, pool, metrics, checks, notes
        self.metrics_pool = metrics_pool or pool
        self.metrics_lock = anyio.Lock()
        self.subject_limiter = anyio.CapacityLimiter(subject.RENDERS)
        self.metrics_read_at = -METRICS_FRESH_SECONDS
        self.db_answered_at = -READY_FRESH_SECONDS
        self.down_logged_at = -DOWN_LOG_SECONDS
        routes = [
            Route("/unsubscribe", self.unsubscribe, methods=["GET", "POST"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/readyz", self.readyz, methods=["GET"]),
            Route("/metrics", self.metrics_text, methods=["GET"]),
            Route("/inbound/{provider}", self.webhook, methods=["POST"]),
            Route("/inbound/{provider}/{account}", self.webhook, methods=["POST"]),
        ]
        self.providers = providers(settings)
        self.return_path = ReturnPath.from_settings(settings)
        site = ApiPrefix(BoundedBody(api.build(pool, settings), MAX_BODY), Starlette(routes=routes))
        self.body_budget = BodyBudget(site, settings.http_body_buffer_bytes)
        metrics.watch_bodies(lambda: self.body_budget.held)
        self.app: ASGIApp = NoTraceback(self.body_budget)

    async def database_down(self, exc: BaseException, pool: asyncpg.Pool | None = None) -> None:
        """A connection-level failure: the idle connections are stale too; renew them all. Logged once
        every DOWN_LOG_SECONDS while it lasts, not at every request (a probe asks every few seconds)."""
        if time.monotonic() - self.down_logged_at >= DOWN_LOG_SECONDS:
            self.down_logged_at = time.monotonic()
            log.warning("database unreachable: %s", _first_line(exc))
        self.db_answered_at = -READY_FRESH_SECONDS  # readiness asks again
        await (pool or self.pool).expire_connections()

    # -- health ----------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        reasons = self.checks()
        if time.monotonic() - self.db_answered_at > READY_FRESH_SECONDS:
            try:
                with anyio.fail_after(2):
                    async with self.pool.acquire() as conn:
                        await conn.fetchval("SELECT 1")
                self.db_answered_at = time.monotonic()
            except (*DB_DOWN, asyncpg.PostgresError) as exc:
                await self.database_down(exc)
                reasons.insert(0, f"database unreachable: {_first_line(exc)}")
        notes = {"notes": notes} if (notes := self.notes()) else {}
        if reasons:
            return JSONResponse({"ready": False, "reason": reasons[0], "reasons": reasons, **notes}, status_code=503)
        return JSONResponse({"ready": True, **notes})

    async def metrics_text(self, request: Request) -> Response:
        # one read of the database figures at a time, at most every METRICS_FRESH_SECONDS, on a connection
        # of their own: the scrapes behind it serve what it read (docs/design.md §10)
        async with self.metrics_lock:
            if time.monotonic() - self.metrics_read_at >= METRICS_FRESH_SECONDS:
                self.metrics_read_at = time.monotonic()
                await self._read_metrics()
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE)

    async def _read_metrics(self) -> None:
        try:
            with anyio.fail_after(5):
                async with self.metrics_pool.acquire() as conn:
                    await self.metrics.refresh(conn)
            self.metrics.database_up.set(1)
        except DB_DOWN as exc:
            await self.database_down(exc, self.metrics_pool)
            self.metrics.database_up.set(0)
        except asyncpg.PostgresError as exc:  # it answered, but not as expected (e.g. not migrated)
            log.warning("metrics: %s", _first_line(exc))
            self.metrics.database_up.set(1)

    # -- unsubscribe ------------------------------------------------------------------------------

    async def unsubscribe(self, request: Request) -> Response:
        # until the token names an account, the page is in the browser's language and names no account
        code, next_step = texts.negotiate(request.headers.get("accept-language")), self._next_step(None)
        try:
            ids = self._token(request)
            if request.method == "POST":
                await _one_click_body(request)
            if ids[2] == unsubscribe.TEST_SUBSCRIBER and not _wants_html(request):
                return Response(status_code=200)  # a test message's link (einmal campaign test): nobody
            with anyio.fail_after(DB_SECONDS):
                async with self.pool.acquire() as conn:
                    row = await conn.fetchrow(db.query("unsubscribe_recipient"), *ids)
                    if row is not None:  # the token is genuine: its account's language and contact
                        code, next_step = row["language"], self._next_step(row["contact"])
                    if ids[2] == unsubscribe.TEST_SUBSCRIBER:
                        return HTMLResponse(pages.problem(code, "test"), headers=PAGE_HEADERS)
                    if row is None or row["email"] is None:
                        raise Refused(404, "Unknown recipient", "This link names a recipient that no longer "
                                                                "exists.", page="unknown")
                    applied = await self._apply(conn, ids, row["email"]) if request.method == "POST" else None
            if applied is None:
                return HTMLResponse(await self._page(request, ids, row), headers=PAGE_HEADERS)
        except Refused as refused:
            if refused.status < 500:
                self.metrics.unsubscribes.labels("refused").inc()
            return _problem(request, refused, code, next_step)
        except (*DB_DOWN, TimeoutError) as exc:
            await self.database_down(exc)
            return _problem(request, Refused(503, "Try again later", "The service is briefly unavailable.",
                                             page="unavailable"), code)
        self.metrics.unsubscribes.labels("applied" if applied else "repeated").inc()
        if _wants_html(request):
            return HTMLResponse(pages.confirmation(code, row["email"], sender_name(row)), headers=PAGE_HEADERS)
        return Response(status_code=200)

    async def _page(self, request: Request, ids: tuple[int, int, int], row: asyncpg.Record) -> str:
        """What a GET shows: "already unsubscribed" when the address is suppressed, else the question."""
        if row["suppressed"]:
            return pages.already(row["language"], row["email"], sender_name(row), row["contact"])
        token = request.query_params["token"]
        shown = None
        if row["subject"] is not None:
            url = unsubscribe.link(self.settings.unsubscribe_url, token) if self.settings.unsubscribe_url else ""
            shown = await subject.rendered(row["subject"], ids[1], row["campaign_name"], row["name"], row["email"],
                                           row["attributes"], url, self.subject_limiter)
        return pages.question(row["language"], token, row["email"], sender_name(row), shown)

    def _next_step(self, contact: str | None) -> pages.Next:
        """What a page of a link that does not work offers instead: the account's contact (only when a
        genuine token named the account), else the installation's unsubscribe address, else a sentence."""
        if contact:
            return "next_contact", contact
        if self.settings.unsubscribe_mailto:
            return "next_mailto", self.settings.unsubscribe_mailto
        return "next_generic", None

    def _token(self, request: Request) -> tuple[int, int, int]:
        secret = self.settings.unsubscribe_secret
        if secret is None or not unsubscribe.keys(secret):
            raise Refused(404, "Not found", "Unsubscribe links are not served here.")
        tokens = request.query_params.getlist("token")
        ids = unsubscribe.verify_token(secret, tokens[0]) if len(tokens) == 1 else None
        if ids is None:
            raise Refused(400, "Invalid link", "This unsubscribe link is not valid: it is incomplete, "
                                               "altered or expired.", page="invalid")
        return ids

    async def _apply(self, conn: asyncpg.Connection, ids: tuple[int, int, int], email: str) -> bool:
        account_id, campaign_id, subscriber_id = ids
        event_id = f"unsubscribe:{account_id}.{campaign_id}.{subscriber_id}"
        try:
            return await inbound.apply(conn, event_id, "unsubscribe", account_id, email,
                                       {"campaign_id": campaign_id, "subscriber_id": subscriber_id})
        except UsageError as exc:  # e.g. the link was applied before for another address (it changed since)
            log.warning("unsubscribe %s not applied: %s", event_id, exc)
            raise Refused(409, "Not applied", "This unsubscribe could not be applied; please contact the "
                                              "sender.", page="not_applied") from exc

    # -- provider webhooks (service/inbound/webhooks.py) -------------------------------------------------

    async def webhook(self, request: Request) -> Response:
        name = request.path_params["provider"]
        provider = self.providers.get(name)
        label = name if provider is not None else "unknown"
        try:
            if provider is None:
                raise webhooks.Rejected(404, "not served: no such provider, or its secret is not configured")
            provider.check_headers(request.headers)  # Postmark's credentials, before the body is read
            try:
                body = await read_body(request, webhooks.MAX_BODY)
            except Refused as refused:
                raise webhooks.Rejected(refused.status, refused.text) from None
            delivery = provider.read(request.headers, body)
            events = delivery.events
            # a request with nothing to apply or claim (an SNS subscription confirmation) writes nothing
            results = await self._deliver(delivery, request.path_params.get("account")) \
                if events or delivery.token else []
        except webhooks.Rejected as exc:
            log.info("webhook %.20s refused (%d): %s", name, exc.status, exc)
            self.metrics.webhooks.labels(label, "refused").inc()
            return _webhook_refusal(exc)
        except UsageError as exc:  # an event id that came before with another payload
            log.warning("webhook %s refused (409): %s", name, exc)
            self.metrics.webhooks.labels(label, "refused").inc()
            return PlainTextResponse("event id already used for another event", status_code=409)
        except (*DB_DOWN, TimeoutError) as exc:
            await self.database_down(exc)
            return PlainTextResponse("try again later", status_code=503, headers={"Retry-After": "5"})
        for event, result in zip(events, results, strict=True):
            log.info("webhook %s: %s %s (%s): %s", name, event.kind, event.event_id[:250], event.status, result)
            self.metrics.webhooks.labels(name, result.partition(":")[0]).inc()
        if not events:
            self.metrics.webhooks.labels(name, "ignored").inc()
        tally = {word: sum(r.startswith(word) for r in results) for word in ("applied", "repeated", "dropped")}
        return JSONResponse(tally)

    async def _deliver(self, delivery: webhooks.Delivery, named: str | None) -> list[str]:
        """Apply the events to the account the request's credential vouches for: a word for each."""
        with anyio.fail_after(DB_SECONDS):
            async with self.pool.acquire() as conn:
                account_id = await self._account(conn, delivery.account, named)
                if delivery.token is not None:
                    await webhooks.claim_token(conn, *delivery.token)
                return [await webhooks.record(conn, self.settings, self.return_path, event, account_id)
                        for event in delivery.events]

    async def _account(self, conn: asyncpg.Connection, vouched: str | None, named: str | None) -> int:
        """The account the request's credential vouches for (None: a global credential, a single-account
        installation's: the only account); the URL may name that account, never another."""
        if vouched is None:
            rows = await conn.fetch(db.query("account_only"))
            if len(rows) != 1:
                raise webhooks.Rejected(403, "a global webhook credential serves a single-account installation; "
                                             + ("the database holds no account" if not rows else
                                                "give each account its own in EINMAL_WEBHOOK_ACCOUNTS_FILE"))
            account_id, vouched = rows[0]["id"], rows[0]["name"]
        else:
            account_id = await conn.fetchval(db.query("account_find"), vouched)
            if account_id is None:
                raise webhooks.Rejected(404, f"no account named {vouched[:100]!r}, whose credential this is")
        if named is not None and named != vouched:
            raise webhooks.Rejected(403, f"the credential is account {vouched[:100]!r}'s, the URL names another")
        return account_id


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, read no further than `limit` bytes: Refused 413 past it (400: a bad Content-Length),
    503 when the bodies of all requests leave no room for it soon (BodyBudget), 408 when it stopped arriving
    (its connection was closed at the body's deadline, actors/http.py)."""
    length = request.headers.get("content-length")
    if length is not None and (not (length.isascii() and length.isdigit()) or int(length) > limit):
        raise Refused(413 if length.isdigit() else 400, "Too large", "The request body is too large.")
    await request.scope[BodyBudget.KEY].take(limit if length is None else int(length))
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise Refused(413, "Too large", "The request body is too large.")
    except ClientDisconnect:
        raise Refused(408, "Too slow", "The request did not arrive in time.") from None
    return bytes(body)


class _Room:
    """The room one request holds in the budget: taken at once, before its body is read."""

    def __init__(self, budget: "BodyBudget") -> None:
        self.budget, self.held = budget, 0

    async def take(self, n: int) -> None:
        budget = self.budget
        with anyio.move_on_after(BUDGET_WAIT_SECONDS):
            while budget.held + n > budget.limit:
                await budget.freed.wait()
            budget.held += n
            self.held += n
            return
        raise Refused(503, "Try again later", "The service is busy; please try again shortly.")


class BodyBudget:
    """The request bodies of all requests together take at most `limit` bytes (EINMAL_HTTP_BODY_BUFFER_BYTES).
    read_body takes room for the whole body first (its Content-Length, else the route's limit), waiting up to
    BUDGET_WAIT_SECONDS for it; the request gives it back once it is answered (docs/design.md §10)."""

    KEY = "einmal.body_room"

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit, self.held = app, limit, 0
        self.freed = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        room = scope[self.KEY] = _Room(self)
        try:
            await self.app(scope, receive, send)
        finally:
            if room.held:
                self.held -= room.held
                self.freed.set()
                self.freed = anyio.Event()


async def _one_click_body(request: Request) -> None:
    """An empty body, or a form whose List-Unsubscribe field is One-Click (RFC 8058); else Refused."""
    body = await read_body(request, MAX_BODY)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not body and media in ("", *FORM_TYPES):
        return
    if media not in FORM_TYPES:
        raise Refused(415, "Unsupported", "Send List-Unsubscribe=One-Click as a form.")

    async def replay() -> dict:
        return {"type": "http.request", "body": bytes(body), "more_body": False}

    try:
        form = await Request(request.scope, replay).form(max_files=0, max_fields=20, max_part_size=MAX_BODY)
    except (HTTPException, MultiPartException, FormParserError, ValueError) as exc:
        raise Refused(400, "Bad form", "The form could not be read.") from exc
    if form.get("List-Unsubscribe") != "One-Click":
        raise Refused(400, "Bad form", "Expected List-Unsubscribe=One-Click.")


def providers(settings: Settings) -> dict[str, webhooks.Provider]:
    """The webhook providers with a credential (the others are not served); ConfigError when one is unusable."""
    vouch = webhook_credentials.credentials(settings)
    found: list[webhooks.Provider] = []
    if settings.ses_certificate_file:
        found.append(Ses(settings, vouch["ses_topic_arn"]))
    if vouch["postmark_webhook_secret"]:
        found.append(Postmark(vouch["postmark_webhook_secret"]))
    if vouch["mailgun_webhook_signing_key"]:
        found.append(Mailgun(vouch["mailgun_webhook_signing_key"]))
    return {provider.name: provider for provider in found}


def sender_name(row: asyncpg.Record) -> str:
    """Whom the page names as the sender: the account's display name, else the From name of the message
    (else its From address), else the account's name."""
    if row["display_name"]:
        return row["display_name"]
    if row["from_address"]:
        name, address = parseaddr(row["from_address"])
        return name or address or row["account_name"]
    return row["account_name"]


def _wants_html(request: Request) -> bool:
    return request.method == "GET" or "text/html" in request.headers.get("accept", "")


def _webhook_refusal(exc: webhooks.Rejected) -> Response:
    if exc.status == 401:
        return PlainTextResponse("unauthorized", status_code=401, headers={"WWW-Authenticate": 'Basic realm="einmal"'})
    if exc.status == 403:
        return PlainTextResponse("forbidden", status_code=403)
    headers = {"Retry-After": "5"} if exc.status == 503 else {}
    return PlainTextResponse(str(exc), status_code=exc.status, headers=headers)


def _problem(request: Request, refused: Refused, code: str = texts.DEFAULT,
             next_step: pages.Next | None = None) -> Response:
    headers = {"Retry-After": "5"} if refused.status == 503 else {}
    if _wants_html(request):
        page = pages.problem(code, refused.page, next_step if refused.status < 500 else None) if refused.page \
            else pages.plain(refused.title, refused.text)
        return HTMLResponse(page, status_code=refused.status, headers={**PAGE_HEADERS, **headers})
    return PlainTextResponse(refused.text, status_code=refused.status, headers=headers)


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ApiPrefix:
    """Every path under /api/v1 to the API, whatever characters it holds (a Mount's pattern stops at a line
    break, and the site's plain-text 404 would answer): the API answers in JSON, its 404s too."""

    PREFIX = "/api/v1"

    def __init__(self, api_app: ASGIApp, site: ASGIApp) -> None:
        self.api, self.site = api_app, site

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == self.PREFIX or path.startswith(self.PREFIX + "/")):
            scope = {**scope, "root_path": scope.get("root_path", "") + self.PREFIX}
            return await self.api(scope, receive, send)
        await self.site(scope, receive, send)


class BoundedBody:
    """The API's request bodies, read through read_body (bounded, within the BodyBudget) before the API
    sees them; a body refused is a JSON problem, as the API's own are."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        try:
            body = await read_body(Request(scope, receive), self.limit)
        except Refused as refused:
            headers = {"Retry-After": "5"} if refused.status == 503 else {}
            return await JSONResponse({"error": refused.text}, refused.status, headers)(scope, receive, send)
        await self.app(scope, idempotency.replay(body, receive), send)


class NoTraceback:
    """Outermost: an error no handler expected is one log line and a 500, never a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # the boundary: anything unexpected becomes one line
            log.error("%s %s failed: %s", scope.get("method", ""), scope.get("path", ""), _first_line(exc))
            if scope["type"] == "http" and not started:
                body = json.dumps({"error": "internal error"}).encode()
                await send({"type": "http.response.start", "status": 500,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
