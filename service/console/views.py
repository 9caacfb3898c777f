"""The console's pages for a signed-in viewer: the dashboard (the newest campaigns, those sending first with
their progress), a campaign's progress (the fragment the dashboard asks again while it sends) and the audit
log, paged or exported as CSV. A member's are its account's alone: another account's campaign or log is 404."""

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import asyncpg
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from service import audit
from service.accounts.account import find_account
from service.campaigns import listing, status
from service.console.guard import Refused
from service.console.live import POLL_SECONDS, Live
from service.console.render import Connect, viewer_page
from service.errors import NotFound
from service.text import shown
from service.users import sessions

DASHBOARD_ROWS, AUDIT_ROWS = 20, 100
EXPORT_SECONDS = 300.0  # the most an export of the audit log takes
LIVE = ("sending", "paused")  # campaigns whose progress the dashboard shows


@dataclass(frozen=True)
class Progress:
    id: int
    status: str
    sent: int
    failed: int
    in_doubt: int
    total: int
    at: float = 0.0  # when it was counted (time.monotonic)
    per_minute: int | None = None  # its messages done a minute between its last two counts (paced)

    @property
    def done(self) -> int:
        return self.sent + self.failed + self.in_doubt

    @property
    def percent(self) -> int:
        done = self.total - self.waiting
        return 100 * done // self.total if self.total else 0

    @property
    def waiting(self) -> int:
        return self.total - self.sent - self.failed - self.in_doubt


def counted(found: status.Snapshot) -> Progress:
    """A campaign's progress from its snapshot (service/campaigns/status.py): what `einmal campaign status` and
    GET /api/v1/campaigns/{id} count."""
    counts = found.counts
    failed = counts.get("failed", 0) + counts.get("cancelled", 0) + counts.get("suppressed", 0)
    return Progress(
        found.id,
        found.status,
        counts.get("sent", 0),
        failed,
        counts.get("in_doubt", 0),
        sum(counts.values()),
        at=time.monotonic(),
    )


def paced(before: Progress | None, now: Progress) -> Progress:
    """`now` with its pace: the messages done a minute since `before`, the campaign's count before it (None: no
    pace, as for a first count or another campaign's)."""
    if before is None or before.id != now.id or now.at <= before.at:
        return now
    return replace(now, per_minute=int(max(0, now.done - before.done) * 60 // (now.at - before.at)))


async def account_of(conn: asyncpg.Connection, request: Request, viewer: sessions.Viewer) -> int | None:
    """The account a page is asked for (`?account=NAME`; None: every account, an operator's only); NotFound for
    another account than a member's own, as for an account that does not exist."""
    named = request.query_params.get("account") or None
    if named is None:
        return viewer.account_id
    account_id = await find_account(conn, name=named)
    if viewer.account_id is not None and account_id != viewer.account_id:
        raise NotFound(f"no account named {shown(named)}")
    return account_id


class Pages:
    def __init__(self, connected: Connect, node_timeout: float) -> None:
        self.connected, self.node_timeout = connected, node_timeout
        self.live: Live[Progress] = Live()

    async def _progress(self, conn: asyncpg.Connection, campaign_id: int) -> Progress:
        """The campaign's progress as live.py shares it: loaded at most once per FRESH_SECONDS; the first time on
        the request's connection, again in the background on a connection of its own."""

        async def load(on: asyncpg.Connection = conn) -> Progress:
            found = counted(await status.snapshot(on, campaign_id=campaign_id, node_timeout=self.node_timeout))
            return paced(self.live.kept(campaign_id), found)

        async def again() -> Progress:
            async with self.connected() as own:
                return await load(own)

        return await self.live.get(campaign_id, load, again)

    async def dashboard(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            found = await listing.newest(conn, account_id=viewer.account_id, limit=DASHBOARD_ROWS)
            progress = {c.id: await self._progress(conn, c.id) for c in found if c.status in LIVE}
        return viewer_page("dashboard.html", request, viewer, campaigns=found, progress=progress)

    async def progress(self, request: Request, viewer: sessions.Viewer) -> Response:
        campaign_id = request.path_params["campaign_id"]
        if not 0 < campaign_id < 2**63:
            raise NotFound("no such campaign")
        if not self.live.allowed(viewer.session_id):
            wait = str(int(POLL_SECONDS))
            raise Refused(429, "Too many", "This session asks for progress too often.", {"Retry-After": wait})
        async with self.connected() as conn:
            if viewer.account_id is not None:
                await listing.owned(conn, account_id=viewer.account_id, campaign_id=campaign_id)
            shown_progress = await self._progress(conn, campaign_id)
        return viewer_page("progress.html", request, viewer, p=shown_progress)

    async def audit_page(self, request: Request, viewer: sessions.Viewer) -> Response:
        before = request.query_params.get("before", "")
        cursor = int(before) if before.isascii() and before.isdigit() and len(before) <= 18 else 2**63 - 1
        async with self.connected() as conn:
            account_id = await account_of(conn, request, viewer)
            lines = await audit.page(conn, account_id=account_id, before=cursor, limit=AUDIT_ROWS + 1)
        more = lines[AUDIT_ROWS].id + 1 if len(lines) > AUDIT_ROWS else None
        named = request.query_params.get("account", "")
        return viewer_page("audit.html", request, viewer, lines=lines[:AUDIT_ROWS], more=more, account=named)

    async def audit_csv(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            account_id = await account_of(conn, request, viewer)

        async def chunks() -> AsyncIterator[str]:
            async with self.connected(EXPORT_SECONDS) as conn:
                async for chunk in audit.csv_chunks(conn, account_id=account_id):
                    yield chunk

        disposition = {"Content-Disposition": 'attachment; filename="einmal-audit.csv"'}
        return StreamingResponse(chunks(), media_type="text/csv; charset=utf-8", headers=disposition)
