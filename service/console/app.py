"""The console's routes, under /console (docs/guide/console.md):

    GET  /login, POST /login     the sign-in form; a session's cookie and the dashboard once signed in
    POST /logout                 the session ended
    GET  /                       the dashboard: the newest campaigns, those sending first with their progress
    GET  /campaigns              the campaigns, newest first, a page at a time (campaigns.py)
    GET  /campaigns/new, POST    the form that creates a draft; the draft's page once made (drafts.py)
    GET  /campaigns/{id}         a campaign: its status, progress, chart and clicks, with its buttons
    POST /campaigns/{id}/approve, …/pause, …/resume, …/cancel   the transition, and the campaign's page again
    POST /campaigns/{id}/retry, …/reconcile   its failed rows queued again, its in-doubt rows decided
    GET  /campaigns/{id}/preview   the message one subscriber would get; POST …/test sends it to an address
    GET  /campaigns/{id}/progress  one campaign's progress (a fragment the dashboard asks again every few seconds)
    GET  /audit, /audit.csv      the audit log, a page at a time, or all of it as CSV
    GET  /subscribers            a search of an account's subscribers by address or attribute (subscribers.py)
    GET  /subscribers/{email}    a subscriber: its lists, attributes and history; …/erase GET asks, POST erases
    GET  /lists, /segments, /segments/{name}   lists with their sign-ups' state; segments, one counted (audience.py)
    GET  /suppressions, POST /suppressions, POST /suppressions/{mailbox}/remove   listed, found, added, removed
    GET  /deliverability         an account's bounce and complaint rates of 30 days, the doctor's kept findings
    GET  /webhooks, /webhooks/{id}  its webhook endpoints; one's deliveries (operations.py)
    POST /webhooks/{id}/replay   its parked deliveries pending again, and its page again
    GET  /messages, /messages/{id}  its transactional messages, newest first; a message's state
    GET  /sequences, /sequences/{id}  its sequences; one's funnel: the members each step reached
    GET  /static/…               the stylesheet and htmx

Every route but the sign-in and the static files needs a session (guard.py). Signing in and out is
signing.py's, the pages views.py's: an operator sees every account, a member its own (another account's
campaign, subscriber, segment, or its audit log, is 404 as in the API; an operator names the account of an
audience page with ?account=NAME). Each page calls the service functions the API and the
command line call; the console runs no SQL of its own."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import anyio
import asyncpg
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import db
from service.accounts import doctor
from service.console import guard
from service.console.audience import AudiencePages
from service.console.campaigns import VERBS, CampaignPages
from service.console.drafts import Drafting
from service.console.operations import OperationsPages
from service.console.render import HEADERS, STATIC, problem
from service.console.signing import SignIn
from service.console.subscribers import SubscriberPages
from service.console.views import Pages
from service.errors import Busy, EinmalError
from service.mail.mailing import Mailing
from service.relays import Relaying
from service.settings import Settings
from service.users import sessions

log = logging.getLogger("einmal.console")

MAX_FORM = 8 * 1024  # a console form's body: a few short fields
DRAFT_FORM = "/campaigns/new"  # but a draft's, with its templates: the surface's bound, as the API's create


@dataclass(frozen=True)
class Config:
    """What the console needs of the settings, taken once when it is built."""

    limits: sessions.Limits
    node_timeout: float
    checkup: doctor.Checkup  # approve's checks: the one-click unsubscribe, the trial render, the doctor's
    relaying: Relaying  # a test message's relays

    @classmethod
    def from_settings(cls, settings: Settings) -> "Config":
        limits = sessions.Limits(settings.console_session_idle_seconds, settings.console_session_lifetime_seconds)
        checkup = replace(doctor.Checkup.of(settings), mailing=Mailing.of(settings))
        return cls(limits, settings.node_timeout_seconds, checkup, Relaying.of(settings))


def served(pool: asyncpg.Pool, settings: Settings, bounded: Callable[[ASGIApp, int | None], ASGIApp]) -> ASGIApp:
    """The console as the HTTP surface mounts it (given it by actors/node.py): its bodies read within the
    surface's bounds (`bounded`, at MAX_FORM; a draft's at the surface's own), its answers with the console's
    headers."""
    app = Console(pool, Config.from_settings(settings)).app
    small, large = bounded(app, MAX_FORM), bounded(app, None)

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        await (large if scope.get("path", "").endswith(DRAFT_FORM) else small)(scope, receive, send)

    return Headed(routed)


class Console:
    OPEN = ("/login", "/static")  # the routes that need no session

    def __init__(self, pool: asyncpg.Pool, config: Config) -> None:
        self.pool, self.config = pool, config

        signing, pages = SignIn(self.connected, config.limits), Pages(self.connected, config.node_timeout)
        campaigns = CampaignPages(self.connected, config.node_timeout, config.checkup)
        making = Drafting(self.connected, campaigns, config.relaying)
        people, audience = SubscriberPages(self.connected), AudiencePages(self.connected, config.checkup.mailing)
        ops = OperationsPages(self.connected)

        def signed(handler: guard.Handler) -> Callable[[Request], Awaitable[Response]]:
            return guard.signed_in(self.find, handler)

        self.routes: list[BaseRoute] = [
            Route("/login", signing.form, methods=["GET"]),
            Route("/login", signing.sign_in, methods=["POST"]),
            Route("/logout", signed(signing.sign_out), methods=["POST"]),
            Route("/", signed(pages.dashboard), methods=["GET"]),
            Route("/campaigns", signed(campaigns.listed), methods=["GET"]),
            Route(DRAFT_FORM, signed(making.form), methods=["GET"]),
            Route(DRAFT_FORM, signed(making.create), methods=["POST"]),
            Route("/campaigns/{campaign_id:int}", signed(campaigns.one), methods=["GET"]),
            Route("/campaigns/{campaign_id:int}/preview", signed(making.preview), methods=["GET"]),
            Route("/campaigns/{campaign_id:int}/test", signed(making.test), methods=["POST"]),
            Route("/campaigns/{campaign_id:int}/progress", signed(pages.progress), methods=["GET"]),
            *(
                Route(f"/campaigns/{{campaign_id:int}}/{verb}", signed(campaigns.action(verb)), methods=["POST"])
                for verb in VERBS
            ),
            Route("/audit", signed(pages.audit_page), methods=["GET"]),
            Route("/audit.csv", signed(pages.audit_csv), methods=["GET"]),
            Route("/subscribers", signed(people.search), methods=["GET"]),
            Route("/subscribers/{email}", signed(people.one), methods=["GET"]),
            Route("/subscribers/{email}/erase", signed(people.confirm_erase), methods=["GET"]),
            Route("/subscribers/{email}/erase", signed(people.erase), methods=["POST"]),
            Route("/lists", signed(audience.lists), methods=["GET"]),
            Route("/segments", signed(audience.segments), methods=["GET"]),
            Route("/segments/{segment_name}", signed(audience.segment), methods=["GET"]),
            Route("/suppressions", signed(audience.suppressions), methods=["GET"]),
            Route("/suppressions", signed(audience.suppress), methods=["POST"]),
            Route("/suppressions/{mailbox}/remove", signed(audience.unsuppress), methods=["POST"]),
            Route("/deliverability", signed(ops.deliverability), methods=["GET"]),
            Route("/webhooks", signed(ops.webhooks), methods=["GET"]),
            Route("/webhooks/{endpoint_id:int}", signed(ops.webhook), methods=["GET"]),
            Route("/webhooks/{endpoint_id:int}/replay", signed(ops.replay), methods=["POST"]),
            Route("/messages", signed(ops.messages), methods=["GET"]),
            Route("/messages/{message_id:int}", signed(ops.message), methods=["GET"]),
            Route("/sequences", signed(ops.sequences), methods=["GET"]),
            Route("/sequences/{sequence_id:int}", signed(ops.sequence), methods=["GET"]),
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
    async def connected(self, seconds: float | None = None) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for the block, which the database has `seconds` (db.DB_SECONDS) to answer:
        the pool's wait and the statements. What is not the database's, a render, runs outside such a block."""
        with anyio.fail_after(seconds or db.DB_SECONDS):
            async with db.acquire(self.pool) as conn:
                yield conn

    async def find(self, token: str) -> sessions.Viewer | None:
        async with self.connected() as conn:
            return await sessions.find(conn, token=token, limits=self.config.limits)

    async def down(self, request: Request, exc: Exception) -> Response:
        log.warning("console: the database cannot be reached: %s", type(exc).__name__)
        await self.pool.expire_connections()
        return problem(503, "Try again later", "The database cannot be reached.", {"Retry-After": "5"})


async def refused(request: Request, exc: Exception) -> Response:
    """A refusal or an error of einmal's (service/errors.py): its status and its sentence, as a page."""
    if isinstance(exc, guard.Refused):
        return problem(exc.status, exc.title, exc.text, exc.headers)
    status_code = exc.http_status if isinstance(exc, EinmalError) else 500
    title = "Not found" if status_code == 404 else "Not done"
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Busy) else None
    return problem(status_code, title, str(exc), headers)


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
