"""GET /c/o/{token}: an open-tracking pixel (docs/design.md#click-tracking, service/mail/opens.py).

    GET  /c/o/{token}   a 1x1 transparent GIF at once, never cached; the open recorded after the answer when the
                        token verifies. Any other token gets the same pixel and records nothing: the answer tells
                        nobody whether a token is genuine, and no mail client shows a broken image.
    HEAD /c/o/{token}   the same answer; recorded as a machine's open (reason `head`)

No database on the way to an answer: the token names the account, campaign and subscriber, and the recording
statement (sql/migrations/0142_opens.sql) checks them, writing no open of an erased subscriber or a pruned
campaign. The open goes into the bounded buffer of service/web/recording.py (BUFFER opens, an account's SHARE of
it at most), counted in einmal_opens.

Event id: ``opn_`` and a SHA-256 of (account, campaign, subscriber, the REPEAT_SECONDS window it came in): an
image loaded again at once (a client's retry, the message shown twice) is one open; the statement also writes no
open of a recipient within REPEAT_SECONDS of another.

Tagging: the request gives `head` (a HEAD), `apple` (Apple Mail Privacy Protection's proxy: the client's address
in service/web/proxies.txt or EINMAL_OPEN_PROXIES_FILE, or the user agent exactly ``Mozilla/5.0``, which is all
Apple's proxy sends) and `scanner` (click tracking's scanner networks); the statement adds `early` (within
EARLY_SECONDS of the send row's sent_at). An open with a reason is `machine`, else `human`. The address and the
user agent are looked at here and kept nowhere: the buffer holds the reasons only.
"""

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service import db
from service.mail import opens
from service.metrics import Metrics
from service.settings import Settings
from service.web import recording
from service.web.clicks import EARLY_SECONDS, REPEAT_SECONDS
from service.web.networks import Networks
from service.web.recording import BUFFER, SHARE

APPLE_AGENT = "Mozilla/5.0"  # the whole user agent of Apple's proxy: a browser's says more
# 1x1, one transparent colour: the smallest GIF89a mail clients show as nothing
PIXEL = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")
HEADERS = {
    "Cache-Control": "no-store, no-cache, must-revalidate, max-age=0",
    "Pragma": "no-cache",
    "Expires": "Thu, 01 Jan 1970 00:00:00 GMT",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def proxies(settings: Settings) -> Networks:
    """The networks of EINMAL_OPEN_PROXIES_FILE, else of the list shipped; ConfigError for a line that is none."""
    return Networks.read(settings.open_proxies_file, "proxies.txt", "EINMAL_OPEN_PROXIES_FILE")


def event_id(account_id: int, campaign_id: int, subscriber_id: int, at: float) -> str:
    """The open's id: the same for every request of the recipient's pixel in one REPEAT_SECONDS window."""
    return recording.event_id("opn_", REPEAT_SECONDS, at, account_id, campaign_id, subscriber_id)


@dataclass(frozen=True, slots=True)
class Open:
    id: str
    account_id: int
    campaign_id: int
    subscriber_id: int
    at: datetime
    reasons: tuple[str, ...]


class Recorder(recording.Buffer[Open]):
    """The opens waiting to be written."""

    what = "opens"

    def __init__(self, pool: asyncpg.Pool, metrics: Metrics, capacity: int = BUFFER, share: float = SHARE) -> None:
        super().__init__(pool, metrics.opens, capacity, share)

    def statement(self, batch: list[Open]) -> tuple[Any, ...]:
        return db.sql("opens_record", **self.arrays(batch), early_seconds=EARLY_SECONDS, repeat_seconds=REPEAT_SECONDS)


class OpenRoutes:
    """GET and HEAD /c/o/{token}: `routes` for the app (service/web/app.py)."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool, metrics: Metrics, scanned: Networks) -> None:
        self.settings, self.metrics, self.scanners = settings, metrics, scanned
        self.proxies = proxies(settings)
        self.recorder = Recorder(pool, metrics)
        self.routes = [Route("/c/o/{token}", self.pixel, methods=["GET"])]  # Starlette answers HEAD as GET

    async def pixel(self, request: Request) -> Response:
        secret = self.settings.unsubscribe_secret
        ids = opens.verify_token(secret, request.path_params["token"]) if secret is not None else None
        if ids is None:
            self.metrics.opens.labels("refused").inc()
            return Response(PIXEL, media_type="image/gif", headers=HEADERS)
        host = request.client.host if request.client else None
        reasons = tuple(
            reason
            for reason, given in (
                ("apple", host in self.proxies or request.headers.get("user-agent") == APPLE_AGENT),
                ("head", request.method == "HEAD"),
                ("scanner", host in self.scanners),
            )
            if given
        )
        now = time.time()
        opened = Open(event_id(*ids, now), *ids, datetime.fromtimestamp(now, UTC), reasons)
        recorded = BackgroundTask(self.recorder.add, opened)  # after the answer is sent
        return Response(PIXEL, media_type="image/gif", headers=HEADERS, background=recorded)
