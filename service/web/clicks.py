"""GET /c/{token}: a tracked link (docs/design.md#click-tracking, service/mail/clicks.py).

    GET  /c/{token}   302 to the link's URL, taken from the campaign's own template (found again from it, kept
                      for LINKS_CACHED campaigns that are no drafts), at once; the click is recorded after the
                      answer. The hidden link answers 204. A token that does not verify or names a link the
                      campaign has not: 404, and it never leads anywhere else (no open redirect).
    HEAD /c/{token}   the same answer; recorded as a machine's click (reason `head`)

Recording never holds up an answer: a click goes into the bounded buffer of service/web/recording.py (BUFFER
clicks, an account's SHARE of it at most), counted in einmal_clicks, which a task of its own writes in batches
(sql/queries/clicks_record.sql).

Event id: ``clk_`` and a SHA-256 of (account, campaign, subscriber, link, the REPEAT_SECONDS window the click
came in) (recording.event_id): the same request again — a retry, a double click, the same link opened twice at
once — gets the same id. A repeat that falls in the next window is caught by the recording statement, which
writes no click of a recipient's link within REPEAT_SECONDS of another.

Tagging: the request gives `head` (a HEAD), `hidden` (link 0) and `scanner` (the client's address in a network
of service/web/scanners.txt, or EINMAL_CLICK_SCANNERS_FILE: service/web/networks.py; the address is that of the
connection, or the one a proxy Uvicorn trusts (FORWARDED_ALLOW_IPS) gives in X-Forwarded-For); the recording
statement adds `early` (within EARLY_SECONDS of the send row's sent_at) and `burst`, and revises earlier clicks
(see the migration).
A click with a reason is `machine`, else `human`. The address and the user agent are used for nothing else and
kept nowhere: the buffer holds the reasons only.
"""

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import anyio
import asyncpg
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from service import db
from service.mail import clicks
from service.metrics import Metrics
from service.settings import Settings
from service.web import pages, recording
from service.web.networks import Networks
from service.web.recording import BUFFER, SHARE

REPEAT_SECONDS = 10.0  # the same recipient's same link again within this is the same click
EARLY_SECONDS = 15.0  # a click this soon after the message was sent is a scanner's at delivery
BURST_SECONDS = 2.0  # every link of a message clicked within this is a machine's
LINKS_CACHED = 1024  # campaigns whose links are kept
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~"


def scanners(settings: Settings) -> Networks:
    """The networks of EINMAL_CLICK_SCANNERS_FILE, else of the list shipped; ConfigError for a line that is none."""
    return Networks.read(settings.click_scanners_file, "scanners.txt", "EINMAL_CLICK_SCANNERS_FILE")


def event_id(account_id: int, campaign_id: int, subscriber_id: int, link: int, at: float) -> str:
    """The click's id: the same for every request of the recipient's link in one REPEAT_SECONDS window."""
    return recording.event_id("clk_", REPEAT_SECONDS, at, account_id, campaign_id, subscriber_id, link)


@dataclass(frozen=True, slots=True)
class Click:
    id: str
    account_id: int
    campaign_id: int
    subscriber_id: int
    link: int
    url: str
    at: datetime
    reasons: tuple[str, ...]
    links: int  # how many links the message has


class Recorder(recording.Buffer[Click]):
    """The clicks waiting to be written."""

    what = "clicks"

    def __init__(self, pool: asyncpg.Pool, metrics: Metrics, capacity: int = BUFFER, share: float = SHARE) -> None:
        super().__init__(pool, metrics.clicks, capacity, share)

    def statement(self, batch: list[Click]) -> tuple[Any, ...]:
        return db.sql(
            "clicks_record",
            **self.arrays(batch),
            links=[c.link for c in batch],
            urls=[c.url for c in batch],
            counts=[c.links for c in batch],
            early_seconds=EARLY_SECONDS,
            burst_seconds=BURST_SECONDS,
            repeat_seconds=REPEAT_SECONDS,
        )


class ClickRoutes:
    """GET and HEAD /c/{token}: `routes` for the app (service/web/app.py)."""

    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        metrics: Metrics,
        headers: dict[str, str],
        database_down: Callable,
    ) -> None:
        self.settings, self.pool, self.metrics, self.headers = settings, pool, metrics, headers
        self.database_down = database_down
        self.scanners = scanners(settings)
        self.recorder = Recorder(pool, metrics)
        self.links: OrderedDict[int, tuple[int, clicks.Links] | None] = OrderedDict()
        self.routes = [Route("/c/{token}", self.click, methods=["GET"])]  # Starlette answers HEAD as GET

    async def click(self, request: Request) -> Response:
        secret = self.settings.unsubscribe_secret
        ids = clicks.verify_token(secret, request.path_params["token"]) if secret is not None else None
        if ids is None:
            return self._unknown()
        account_id, campaign_id, subscriber_id, link = ids
        try:
            found = await self._links(campaign_id)
        except db.DOWN as exc:
            await self.database_down(exc)
            page = pages.plain("Try again later", "The service is briefly unavailable.")
            return HTMLResponse(page, 503, headers={**self.headers, "Retry-After": "5"})
        if found is None or found[0] != account_id:
            return self._unknown()
        links = found[1]
        url = links.url(link)
        if url is None and link != clicks.HIDDEN:
            return self._unknown()
        reasons = tuple(
            reason
            for reason, given in (
                ("head", request.method == "HEAD"),
                ("hidden", link == clicks.HIDDEN),
                ("scanner", (request.client.host if request.client else None) in self.scanners),
            )
            if given
        )
        now = time.time()
        click = Click(
            event_id(account_id, campaign_id, subscriber_id, link, now),
            account_id,
            campaign_id,
            subscriber_id,
            link,
            url or "",
            datetime.fromtimestamp(now, UTC),
            reasons,
            len(links.urls),
        )
        recorded = BackgroundTask(self.recorder.add, click)  # after the answer is sent
        if url is None:
            return Response(status_code=204, headers={"Cache-Control": "no-store"}, background=recorded)
        location = quote(url, safe=_URL_SAFE)
        headers = {"Location": location, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        return Response(status_code=302, headers=headers, background=recorded)

    def _unknown(self) -> Response:
        self.metrics.clicks.labels("refused").inc()
        page = pages.plain("Link not found", "This link is not valid: it is incomplete or altered.")
        return HTMLResponse(page, 404, headers=self.headers)

    async def _links(self, campaign_id: int) -> tuple[int, clicks.Links] | None:
        """(account_id, links) of the campaign, None when there is none; kept for the LINKS_CACHED campaigns
        clicked last (not for a draft, whose templates may change)."""
        if campaign_id in self.links:
            self.links.move_to_end(campaign_id)
            return self.links[campaign_id]
        with anyio.fail_after(db.DB_SECONDS):
            async with db.acquire(self.pool) as conn:
                row = await conn.fetchrow(*db.sql("campaign_links", campaign_id=campaign_id))
        if row is None:
            return None
        links = await anyio.to_thread.run_sync(clicks.Links.of, row["body_text"], row["body_html"])
        found = (row["account_id"], links)
        if row["draft"]:  # a test message's link: the draft may change before it is sent
            return found
        self.links[campaign_id] = found
        while len(self.links) > LINKS_CACHED:
            self.links.popitem(last=False)
        return found
