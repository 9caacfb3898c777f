"""The HTTP surface: one-click unsubscribe, health, readiness and metrics (a Starlette app).

    POST /unsubscribe?token=T   RFC 8058 one-click: body `List-Unsubscribe=One-Click` (form-urlencoded or
                                multipart/form-data), or empty. 200, empty body (the confirmation page when
                                the client asks for HTML). Records the inbound event `unsubscribe:<a>.<c>.<s>`
                                and the suppression in one transaction (service.inbound.events.apply): a repeat
                                changes nothing. A bad, tampered or retired token: 400, nothing written.
    GET  /unsubscribe?token=T   a page with one button that posts the form, naming the message's subject and the
                                sender, in the campaign's language (service/web/pages.py); "already unsubscribed"
                                when the address is suppressed; a GET never unsubscribes (never writes). Below
                                the button, the preference page: the account's lists the address is on, each
                                with a button that posts to the next route (service/web/preference_page.py)
    POST /unsubscribe?token=T&leave=L  leave the account's list L only (service/subscribers/preferences.py), any
                                body; the page again, saying so. A list the address is not on (or another
                                account's) changes nothing and is told as "not on that list"
    GET  /healthz               200 while the event loop answers
    GET  /readyz                200 when the database answered within the last seconds and every actor runs;
                                503 and {"ready": false, "reason": …} otherwise; "notes": […] when something
                                the operator should know does not make it unready (replication not synchronous)
    GET  /metrics               Prometheus text format; the database's figures read at most every
                                METRICS_FRESH_SECONDS, one read at a time, on a connection of their own
    GET  /c/{token}             a tracked link: 302 to the campaign's own URL, the click recorded after the answer
                                (service/web/clicks.py); HEAD answers alike
    GET  /c/o/{token}           an open-tracking pixel: a 1x1 GIF at once, the open recorded after the answer
                                (service/web/opens.py); HEAD answers alike
    /forms/{token}, /confirm   double opt-in: an open list's sign-up form and the confirmation link's page
                                (service/web/signup.py)
    /console/…                  the operator's console, server-rendered pages for people (service/console/app.py,
                                given by actors/node.py), behind its own sign-in
    /api/v1/…                   the JSON API for applications (service/api/app.py, given by actors/node.py), with
                                per-account keys; its OpenAPI document at /api/v1/openapi.json
    POST /inbound/PROVIDER[/ACCOUNT]   bounces and complaints from Amazon SES (through SNS), Postmark and
                                Mailgun (service/inbound/webhooks.py): 200 once the events are applied (or were
                                before); 404 while the provider's secret is not configured; bodies over
                                1 MiB 413, wrong signatures or credentials 401/403, unreadable ones 400

Bad input never reaches the database and never gives a traceback: bodies over 64 KiB (a one-click
unsubscribe's over 4 KiB) are 413, other content types 415, other methods 405, other paths 404. The bodies
all requests hold at once, and those of one client network, are bounded (BodyBudget): one that finds no room
soon is 503. What each path trusts before a body takes room: the API its key (401 without one), the
unsubscribe its token's signature (400), Postmark's webhook its basic auth; the one-click unsubscribe reads
its tiny body in a lane of the budget no other body takes. A database that cannot be reached is 503 with
Retry-After, and the pool's connections are renewed so that the retry gets fresh ones.
"""

import logging
import time
from collections.abc import Callable

import anyio
import asyncpg
from python_multipart.exceptions import FormParserError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp

from service import db
from service.errors import Conflict, EinmalError
from service.inbound import bounces, webhook_credentials, webhooks
from service.inbound import events as inbound
from service.inbound.mailgun import Mailgun
from service.inbound.postmark import Postmark
from service.inbound.ses import Ses
from service.mail import unsubscribe
from service.mail.mailing import Mailing
from service.mail.verp import ReturnPath
from service.metrics import CONTENT_TYPE, Metrics
from service.settings import Settings
from service.subscribers import optin, preferences, texts
from service.web import clicks, opens, pages, preference_page, signup, subject
from service.web.limits import (
    MAX_BODY,
    ONE_CLICK_BODY,
    ApiPrefix,
    BodyBudget,
    BoundedBody,
    NoTraceback,
    Refused,
    TextOnly,
    first_line,
    read_body,
)

log = logging.getLogger("einmal.http")

METRICS_FRESH_SECONDS = 5.0  # the database figures of /metrics are read at most this often
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
READY_FRESH_SECONDS = 1.0  # a database answer this recent needs no new ping
DOWN_LOG_SECONDS = 30.0  # "database unreachable" at most this often
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


async def refused(request: Request, exc: Exception) -> Response:
    """An error of einmal's no route answered itself (service/errors.py): its status, its one line, a field it
    names named as the services name it, which is as the forms name it."""
    status = exc.http_status if isinstance(exc, EinmalError) else 500
    return PlainTextResponse(str(exc), status, headers=PAGE_HEADERS)


class Web:
    """The app's state: settings, its own database pool, the metrics and what readiness asks of the node.

    `checks()` returns the reasons, other than the database, why this process is not ready (draining,
    an actor restarting, the SMTP relay refusing): an empty list when there are none; `notes()` what
    readiness reports without failing for it. `metrics_pool` (one connection is enough) reads the figures
    of /metrics; unset, they share `pool`."""

    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        metrics: Metrics,
        checks: Callable[[], list[str]] = list,
        metrics_pool: asyncpg.Pool | None = None,
        notes: Callable[[], list[str]] = list,
        api: Callable[[asyncpg.Pool, Settings, Callable[[ASGIApp, int | None], ASGIApp]], ASGIApp] | None = None,
        console: Callable[[asyncpg.Pool, Settings, Callable[[ASGIApp, int | None], ASGIApp]], ASGIApp] | None = None,
    ) -> None:
        self.settings, self.pool, self.metrics, self.checks, self.notes = settings, pool, metrics, checks, notes
        self.mailing = Mailing.of(settings)  # the unsubscribe pages' links, address and secret
        self.metrics_pool = metrics_pool or pool
        self.metrics_lock = anyio.Lock()
        self.subject_limiter = anyio.CapacityLimiter(subject.RENDERS)
        self.metrics_read_at = -METRICS_FRESH_SECONDS
        self.db_answered_at = -READY_FRESH_SECONDS
        self.down_logged_at = -DOWN_LOG_SECONDS
        routes: list[BaseRoute] = [
            Route("/unsubscribe", self.unsubscribe, methods=["GET", "POST"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/readyz", self.readyz, methods=["GET"]),
            Route("/metrics", self.metrics_text, methods=["GET"]),
            Route("/inbound/{provider}", self.webhook, methods=["POST"]),
            Route("/inbound/{provider}/{account}", self.webhook, methods=["POST"]),
        ]
        routes += signup.SignUpPages(
            optin.SignUps.of(settings), pool, read_body, Refused, self.database_down, PAGE_HEADERS
        ).routes
        self.clicks = clicks.ClickRoutes(settings, pool, metrics, PAGE_HEADERS, self.database_down)
        self.opens = opens.OpenRoutes(settings, pool, metrics, self.clicks.scanners)
        routes += self.opens.routes + self.clicks.routes
        if console is not None:  # service/console/app.py, given by actors/node.py; its bodies bounded as the API's
            routes.append(
                Mount("/console", console(pool, settings, lambda app, limit: BoundedBody(app, limit or MAX_BODY)))
            )
        self.providers = providers(settings)
        self.return_path = ReturnPath.from_settings(self.mailing)
        self.rules = bounces.Rules.of(settings)  # what the providers' events are applied with
        routed = Starlette(routes=routes, exception_handlers={EinmalError: refused})
        routed.router.redirect_slashes = False  # a redirect would name the Host header's site (and repeat a POST)
        # the API's key is found from the headers before its body takes room or its Idempotency-Key a row
        # (`api`: service/api/app.py served, given by actors/node.py; none: /api/v1 is a JSON 404)
        api_app = (
            api(pool, settings, lambda app, limit: BoundedBody(app, limit or MAX_BODY))
            if api is not None
            else JSONResponse({"error": "Not Found"}, 404)
        )
        site = TextOnly(ApiPrefix(api_app, routed))
        self.body_budget = BodyBudget(site, settings.http_body_buffer_bytes, settings.http_client_body_bytes)
        metrics.watch_bodies(lambda: self.body_budget.held)
        self.app: ASGIApp = NoTraceback(self.body_budget)

    async def database_down(self, exc: BaseException, pool: asyncpg.Pool | None = None) -> None:
        """A connection-level failure: the idle connections are stale too; renew them all. Logged once
        every DOWN_LOG_SECONDS while it lasts, not at every request (a probe asks every few seconds)."""
        if time.monotonic() - self.down_logged_at >= DOWN_LOG_SECONDS:
            self.down_logged_at = time.monotonic()
            log.warning("database unreachable: %s", first_line(exc))
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
                    async with db.acquire(self.pool) as conn:
                        await conn.fetchval("SELECT 1")
                self.db_answered_at = time.monotonic()
            except (*db.DOWN, asyncpg.PostgresError) as exc:
                await self.database_down(exc)
                reasons.insert(0, f"database unreachable: {first_line(exc)}")
        notes = {"notes": notes} if (notes := self.notes()) else {}
        if reasons:
            return JSONResponse({"ready": False, "reason": reasons[0], "reasons": reasons, **notes}, status_code=503)
        return JSONResponse({"ready": True, **notes})

    async def metrics_text(self, request: Request) -> Response:
        # one read of the database figures at a time, at most every METRICS_FRESH_SECONDS, on a connection
        # of their own: the scrapes behind it serve what it read (docs/design.md#listening-surface)
        async with self.metrics_lock:
            if time.monotonic() - self.metrics_read_at >= METRICS_FRESH_SECONDS:
                self.metrics_read_at = time.monotonic()
                await self._read_metrics()
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE)

    async def _read_metrics(self) -> None:
        try:
            with anyio.fail_after(5):
                async with db.acquire(self.metrics_pool) as conn:
                    await self.metrics.refresh(conn)
            self.metrics.database_up.set(1)
        except db.DOWN as exc:
            await self.database_down(exc, self.metrics_pool)
            self.metrics.database_up.set(0)
        except asyncpg.PostgresError as exc:  # it answered, but not as expected (e.g. not migrated)
            log.warning("metrics: %s", first_line(exc))
            self.metrics.database_up.set(1)

    # -- unsubscribe ------------------------------------------------------------------------------

    async def unsubscribe(self, request: Request) -> Response:
        # until the token names an account, the page is in the browser's language and names no account
        code, next_step = texts.negotiate(request.headers.get("accept-language")), self._next_step(None)
        try:
            ids = self._token(request)
            leaving = _leaving(request)
            if request.method == "POST":
                await (_one_click_body(request) if leaving is None else read_body(request, MAX_BODY))
            if ids[2] == unsubscribe.TEST_SUBSCRIBER and not _wants_html(request):
                return Response(status_code=200)  # a test message's link (einmal campaign test): nobody
            with anyio.fail_after(db.DB_SECONDS):
                async with db.acquire(self.pool) as conn:
                    account_id, campaign_id, subscriber_id = ids
                    row = await conn.fetchrow(
                        *db.sql(
                            "unsubscribe_recipient",
                            account_id=account_id,
                            campaign_id=campaign_id,
                            subscriber_id=subscriber_id,
                        )
                    )
                    if row is not None:  # the token is genuine: its account's language and contact
                        code, next_step = row["language"], self._next_step(row["contact"])
                    if ids[2] == unsubscribe.TEST_SUBSCRIBER:
                        return HTMLResponse(pages.problem(code, "test"), headers=PAGE_HEADERS)
                    if row is None or row["email"] is None:
                        raise Refused(
                            404,
                            "Unknown recipient",
                            "This link names a recipient that no longer exists.",
                            page="unknown",
                        )
                    applied = (
                        await self._apply(conn, ids, row["email"])
                        if request.method == "POST" and leaving is None
                        else None
                    )
                    done = await self._leave(conn, ids, leaving) if leaving is not None else None
                    lists = (
                        await preferences.lists(conn, ids[0], ids[2])
                        if applied is None and not row["suppressed"]
                        else []
                    )
            if applied is None:
                return HTMLResponse(await self._page(request, ids, row, lists, done), headers=PAGE_HEADERS)
        except Refused as refused:
            if refused.status < 500:
                self.metrics.unsubscribes.labels("refused").inc()
            return _problem(request, refused, code, next_step)
        except db.DOWN as exc:
            await self.database_down(exc)
            return _problem(
                request,
                Refused(503, "Try again later", "The service is briefly unavailable.", page="unavailable"),
                code,
            )
        self.metrics.unsubscribes.labels("applied" if applied else "repeated").inc()
        if _wants_html(request):
            return HTMLResponse(pages.confirmation(code, row["email"], sender_name(row)), headers=PAGE_HEADERS)
        return Response(status_code=200)

    async def _page(
        self,
        request: Request,
        ids: tuple[int, int, int],
        row: asyncpg.Record,
        lists: list[tuple[int, str | None]],
        done: preference_page.Notice | None,
    ) -> str:
        """What a GET shows: "already unsubscribed" when the address is suppressed, else the question with
        the address's `lists` and what a leave just `done`."""
        if row["suppressed"]:
            return pages.already(row["language"], row["email"], sender_name(row), row["contact"])
        token = request.query_params["token"]
        shown = None
        if row["subject"] is not None:
            url = unsubscribe.link(self.mailing.unsubscribe_url, token) if self.mailing.unsubscribe_url else ""
            shown = await subject.rendered(
                row["subject"],
                ids[1],
                row["campaign_name"],
                row["name"],
                row["email"],
                row["attributes"],
                url,
                self.subject_limiter,
            )
        code, sender = row["language"], sender_name(row)
        return pages.question(
            code,
            token,
            row["email"],
            sender,
            shown,
            preference_page.section(code, token, row["email"], sender, lists, done),
            preference_page.notice(code, done),
        )

    async def _leave(self, conn: asyncpg.Connection, ids: tuple[int, int, int], list_id: int) -> preference_page.Notice:
        left = await preferences.leave(conn, ids[0], ids[2], list_id)
        if left is None:
            return "not_on_list", None
        log.info(
            "subscriber %d of account %d left list %d; %d messages not sent", ids[2], ids[0], list_id, left.stopped
        )
        return ("left", left.title) if left.title else ("left_untitled", None)

    def _next_step(self, contact: str | None) -> pages.Next:
        """What a page of a link that does not work offers instead: the account's contact (only when a
        genuine token named the account), else the installation's unsubscribe address, else a sentence."""
        if contact:
            return "next_contact", contact
        if self.mailing.unsubscribe_mailto:
            return "next_mailto", self.mailing.unsubscribe_mailto
        return "next_generic", None

    def _token(self, request: Request) -> tuple[int, int, int]:
        secret = self.mailing.unsubscribe_secret
        if secret is None or not unsubscribe.keys(secret):
            raise Refused(404, "Not found", "Unsubscribe links are not served here.")
        tokens = request.query_params.getlist("token")
        ids = unsubscribe.verify_token(secret, tokens[0]) if len(tokens) == 1 else None
        if ids is None:
            raise Refused(
                400,
                "Invalid link",
                "This unsubscribe link is not valid: it is incomplete, altered or expired.",
                page="invalid",
            )
        return ids

    async def _apply(self, conn: asyncpg.Connection, ids: tuple[int, int, int], email: str) -> bool:
        account_id, campaign_id, subscriber_id = ids
        event_id = f"unsubscribe:{account_id}.{campaign_id}.{subscriber_id}"
        try:
            return await inbound.apply(
                conn,
                event_id,
                "unsubscribe",
                account_id,
                email,
                {"campaign_id": campaign_id, "subscriber_id": subscriber_id},
            )
        except Conflict as exc:  # e.g. the link was applied before for another address (it changed since)
            log.warning("unsubscribe %s not applied: %s", event_id, exc)
            raise Refused(
                409,
                "Not applied",
                "This unsubscribe could not be applied; please contact the sender.",
                page="not_applied",
            ) from exc

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
            results = (
                await self._deliver(delivery, request.path_params.get("account")) if events or delivery.token else []
            )
        except webhooks.Rejected as exc:
            log.info("webhook %.20s refused (%d): %s", name, exc.status, exc)
            self.metrics.webhooks.labels(label, "refused").inc()
            return _webhook_refusal(exc)
        except Conflict as exc:  # an event id that came before with another payload
            log.warning("webhook %s refused (409): %s", name, exc)
            self.metrics.webhooks.labels(label, "refused").inc()
            return PlainTextResponse("event id already used for another event", status_code=409)
        except db.DOWN as exc:
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
        with anyio.fail_after(db.DB_SECONDS):
            async with db.acquire(self.pool) as conn:
                account_id = await self._account(conn, delivery.account, named)
                if delivery.token is not None:
                    await webhooks.claim_token(conn, *delivery.token)
                return [
                    await webhooks.record(conn, self.rules, self.return_path, event, account_id)
                    for event in delivery.events
                ]

    async def _account(self, conn: asyncpg.Connection, vouched: str | None, named: str | None) -> int:
        """The account the request's credential vouches for (None: a global credential, a single-account
        installation's: the only account); the URL may name that account, never another."""
        if vouched is None:
            rows = await conn.fetch(*db.sql("account_only"))
            if len(rows) != 1:
                raise webhooks.Rejected(
                    403,
                    "a global webhook credential serves a single-account installation; "
                    + (
                        "the database holds no account"
                        if not rows
                        else "give each account its own in EINMAL_WEBHOOK_ACCOUNTS_FILE"
                    ),
                )
            account_id, vouched = rows[0]["id"], rows[0]["name"]
        else:
            account_id = await conn.fetchval(*db.sql("account_find", account=vouched))
            if account_id is None:
                raise webhooks.Rejected(404, f"no account named {vouched[:100]!r}, whose credential this is")
        if named is not None and named != vouched:
            raise webhooks.Rejected(403, f"the credential is account {vouched[:100]!r}'s, the URL names another")
        return account_id


async def _one_click_body(request: Request) -> None:
    """An empty body, or a form whose List-Unsubscribe field is One-Click (RFC 8058); else Refused. Read in
    the one-click lane of the body budget (at most ONE_CLICK_BODY), after the token was verified."""
    body = await read_body(request, ONE_CLICK_BODY, one_click=True)
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
    """Whom the page names as the sender (pages.sender): the account's display name, else the From name of the
    message (else its From address), else "the sender" in the page's language."""
    return pages.sender(row["language"], row["display_name"], row["from_address"])


def _leaving(request: Request) -> int | None:
    """The list a POST of the preference page leaves (`&leave=<id>`); None for the one-click POST and a GET."""
    if request.method != "POST" or "leave" not in request.query_params:
        return None
    given = request.query_params.getlist("leave")
    if len(given) != 1 or not (0 < len(given[0]) <= 18 and given[0].isascii() and given[0].isdigit()):
        raise Refused(400, "Bad form", "The list to leave is not a list's id.")
    return int(given[0])


def _wants_html(request: Request) -> bool:
    return request.method == "GET" or "text/html" in request.headers.get("accept", "")


def _webhook_refusal(exc: webhooks.Rejected) -> Response:
    if exc.status == 401:
        return PlainTextResponse("unauthorized", status_code=401, headers={"WWW-Authenticate": 'Basic realm="einmal"'})
    if exc.status == 403:
        return PlainTextResponse("forbidden", status_code=403)
    headers = {"Retry-After": "5"} if exc.status == 503 else {}
    return PlainTextResponse(str(exc), status_code=exc.status, headers=headers)


def _problem(
    request: Request, refused: Refused, code: str = texts.DEFAULT, next_step: pages.Next | None = None
) -> Response:
    headers = {"Retry-After": "5"} if refused.status == 503 else {}
    if _wants_html(request):
        page = (
            pages.problem(code, refused.page, next_step if refused.status < 500 else None)
            if refused.page
            else pages.plain(refused.title, refused.text)
        )
        return HTMLResponse(page, status_code=refused.status, headers={**PAGE_HEADERS, **headers})
    return PlainTextResponse(refused.text, status_code=refused.status, headers=headers)
