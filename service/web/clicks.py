"""GET /c/{token}: a tracked link (docs/design.md#click-tracking, service/mail/clicks.py).

    GET  /c/{token}   302 to the link's URL, taken from the campaign's own template (found again from it, kept
                      for LINKS_CACHED campaigns that are no drafts), at once; the click is recorded after the
                      answer. The hidden link answers 204. A token that does not verify or names a link the
                      campaign has not: 404, and it never leads anywhere else (no open redirect).
    HEAD /c/{token}   the same answer; recorded as a machine's click (reason `head`)

Recording never holds up an answer: a click goes into a bounded buffer (BUFFER clicks, one per event id) that a
task of its own writes in batches (sql/queries/clicks_record.sql). When the buffer is full a click is dropped
and counted (einmal_clicks{result="dropped"}), and so is one past its account's SHARE of the buffer: a scanner
clicking one account's links by the thousand leaves room for the others'. When the database is slow or down the
buffer waits, the answers do not.

Event id: ``clk_`` and a SHA-256 of (account, campaign, subscriber, link, the REPEAT_SECONDS window the click
came in): derived from the request alone, so the same request again — a retry, a double click, the same link
opened twice at once, a repeat reaching another node, a batch written again after a commit whose answer was
lost — gets the same id, and the table's primary key keeps one. A repeat that falls in the next window is
caught by the recording statement, which writes no click of a recipient's link within REPEAT_SECONDS of another.

Tagging: the request gives `head` (a HEAD), `hidden` (link 0) and `scanner` (the client's address in a network
of service/web/scanners.txt, or EINMAL_CLICK_SCANNERS_FILE; the address is that of the connection, or the one
a proxy Uvicorn trusts (FORWARDED_ALLOW_IPS) gives in X-Forwarded-For); the recording statement adds `early`
(within EARLY_SECONDS of the send row's sent_at) and `burst`, and revises earlier clicks (see the migration).
A click with a reason is `machine`, else `human`. The address and the user agent are used for nothing else and
kept nowhere: the buffer holds the reasons only.
"""

import asyncio
import hashlib
import ipaddress
import itertools
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import anyio
import asyncpg
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from service import db
from service.errors import ConfigError
from service.mail import clicks
from service.metrics import Metrics
from service.settings import Settings
from service.web import pages
from service.web.limits import first_line

log = logging.getLogger("einmal.http")

REPEAT_SECONDS = 10.0  # the same recipient's same link again within this is the same click
EARLY_SECONDS = 15.0  # a click this soon after the message was sent is a scanner's at delivery
BURST_SECONDS = 2.0  # every link of a message clicked within this is a machine's
BUFFER = 10_000  # clicks waiting to be written, at most
SHARE = 0.25  # of them at most one account's: a flood of one account's links leaves room for the others'
BATCH = 500  # clicks written in one statement, at most
GATHER_SECONDS = 0.2  # a batch waits this long for more clicks
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)  # after a failed write, the waits before the next try
LINKS_CACHED = 1024  # campaigns whose links are kept
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def scanner_networks(settings: Settings) -> list[Network]:
    """The networks of EINMAL_CLICK_SCANNERS_FILE, else of the list shipped; ConfigError for a line that is none."""
    path = settings.click_scanners_file
    where = path or "service/web/scanners.txt"
    try:
        text = Path(path).read_text() if path else (resources.files("service.web") / "scanners.txt").read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"EINMAL_CLICK_SCANNERS_FILE: cannot read {path}: {exc}") from None
    networks = []
    for number, line in enumerate(text.splitlines(), 1):
        if entry := line.partition("#")[0].strip():
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ConfigError(f"{where}: line {number}: {entry[:60]!r} is not a network") from None
    return networks


def scanner(host: str | None, networks: Iterable[Network]) -> bool:
    """Whether the client's address is in one of the scanners' networks."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    return any(address in network for network in networks)


def event_id(account_id: int, campaign_id: int, subscriber_id: int, link: int, at: float) -> str:
    """The click's id: the same for every request of the recipient's link in one REPEAT_SECONDS window."""
    window = int(at // REPEAT_SECONDS)
    digest = hashlib.sha256(f"{account_id}.{campaign_id}.{subscriber_id}.{link}.{window}".encode()).hexdigest()
    return "clk_" + digest[:32]


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


class Recorder:
    """The bounded buffer of clicks and the task that writes them (started when a click comes, ended when none
    waits)."""

    def __init__(self, pool: asyncpg.Pool, metrics: Metrics, capacity: int = BUFFER, share: float = SHARE) -> None:
        self.pool, self.metrics, self.capacity = pool, metrics, capacity
        self.pending: dict[str, Click] = {}
        self.held: Counter[int] = Counter()  # pending clicks by account: none holds more than its share
        self.share = max(1, int(capacity * share))
        self._task: asyncio.Task[None] | None = None

    async def add(self, click: Click) -> None:
        """Keep `click` to be written (a coroutine: Starlette runs a background function on a thread)."""
        if click.id in self.pending:
            self.metrics.clicks.labels("repeated").inc()
            return
        if len(self.pending) >= self.capacity or self.held[click.account_id] >= self.share:
            self.metrics.clicks.labels("dropped").inc()
            return
        self.pending[click.id] = click
        self.held[click.account_id] += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        failures = 0
        while self.pending:
            await anyio.sleep(GATHER_SECONDS if not failures else RETRY_SECONDS[min(failures, 5) - 1])
            batch = list(itertools.islice(self.pending.values(), BATCH))
            try:
                written = await self._write(batch)
            except (*db.DOWN, asyncpg.PostgresError) as exc:
                failures += 1
                if failures == 1:
                    log.warning("clicks not written yet (%d waiting): %s", len(self.pending), first_line(exc))
                continue
            failures = 0
            for click in batch:
                if self.pending.pop(click.id, None) is not None:
                    self.held[click.account_id] -= 1
            self.metrics.clicks.labels("recorded").inc(written)
            self.metrics.clicks.labels("repeated").inc(len(batch) - written)

    async def _write(self, batch: list[Click]) -> int:
        with anyio.fail_after(db.DB_SECONDS):
            async with db.acquire(self.pool) as conn:
                written: int = await conn.fetchval(
                    *db.sql(
                        "clicks_record",
                        ids=[c.id for c in batch],
                        accounts=[c.account_id for c in batch],
                        campaigns=[c.campaign_id for c in batch],
                        subscribers=[c.subscriber_id for c in batch],
                        links=[c.link for c in batch],
                        urls=[c.url for c in batch],
                        ats=[c.at for c in batch],
                        said=[",".join(c.reasons) for c in batch],
                        counts=[c.links for c in batch],
                        early_seconds=EARLY_SECONDS,
                        burst_seconds=BURST_SECONDS,
                        repeat_seconds=REPEAT_SECONDS,
                    )
                )
        return written


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
        self.networks = scanner_networks(settings)
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
                ("scanner", scanner(request.client.host if request.client else None, self.networks)),
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
