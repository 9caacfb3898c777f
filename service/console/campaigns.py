"""The console's campaigns: the list (an account's, or every account's for an operator, newest first, a page
at a time), a campaign's page (its status and progress as GET /api/v1/campaigns/{id} shows them, its clicks
when it tracks them) and its transitions approve, pause, resume and cancel. A transition calls the function
the API calls, with its line of the audit log in the same transaction; so do its rows' buttons: retry failed
(POST …/retry, `einmal campaign retry`) and reconcile in doubt (POST …/reconcile, `einmal reconcile`, all its
in-doubt rows resent or marked sent). A refusal is the campaign's page with the service's sentence (409),
another account's campaign is 404 for a member. The page draws the campaign over time (chart.py).

What a page counts (its status snapshot, clicks and chart) is read afresh, except a view of a campaign of
KEPT_FROM messages or more that is still what it was (same status): that is shared as live.py shares the
dashboard's progress, loaded again in the background once FRESH_SECONDS old (so counts of a campaign
watched are at most about that old, and of one not looked at for OLDEST_SECONDS read afresh), so no view
waits for a count of a large campaign's rows; the page says when it was counted. A transition's answer is
read afresh, and kept."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from service import audit
from service.accounts import doctor
from service.campaigns import approval, clicks, listing, rows, status, timeline, transitions
from service.console import chart, guard
from service.console.live import POLL_SECONDS, Live
from service.console.render import Connect, viewer_page
from service.console.views import counted
from service.errors import EinmalError, Invalid, NotFound
from service.mail.slots import RenderSlots
from service.users import sessions

ROWS = 50  # campaigns a page
RENDERS, RENDER_SHARE = 4, 2  # the console's trial renders at a time, and for one account (as the API's)
# which transition each status offers (the rest the service refuses)
OFFERED = {
    "draft": ("approve", "cancel"),
    "approved": ("cancel",),
    "sending": ("pause", "cancel"),
    "paused": ("resume", "cancel"),
}
KEPT_FROM = 10_000  # messages of a campaign whose page's counts are shared (fewer: counted at each view)
OLDEST_SECONDS = POLL_SECONDS  # a shared answer older than this is read again before it is shown
VERBS = ("approve", "pause", "resume", "cancel", "retry", "reconcile")
DONE = {"approve": "Approved.", "pause": "Paused.", "resume": "Resumed.", "cancel": "Cancelled."}
MOVED = {  # what the rows' buttons did, per decision
    "retry": "{n} failed message(s) queued again.",
    "resend": "{n} message(s) in doubt queued again.",
    "mark_sent": "{n} message(s) in doubt counted as sent.",
}


def cursor(request: Request) -> int:
    before = request.query_params.get("before", "")
    return int(before) if before.isascii() and before.isdigit() and len(before) <= 18 else 2**63 - 1


def campaign_id(request: Request) -> int:
    found: int = request.path_params["campaign_id"]
    if not 0 < found < 2**63 - 1:
        raise NotFound("no such campaign")
    return found


@dataclass(frozen=True)
class Counted:
    """What a campaign's page counts."""

    status: status.Snapshot
    clicks: clicks.Clicks
    timeline: timeline.Timeline


class CampaignPages:
    def __init__(self, connected: Connect, node_timeout: float, checkup: doctor.Checkup) -> None:
        self.connected, self.node_timeout, self.checkup = connected, node_timeout, checkup
        self.slots = RenderSlots(RENDERS, RENDER_SHARE)
        self.kept: Live[Counted] = Live(oldest=OLDEST_SECONDS)

    async def _counted(self, campaign: listing.Newest, *, viewed: bool) -> Counted:
        """The page's counts: shared (`kept`) for a view of a large campaign whose status is as when counted,
        else read now (and kept)."""

        async def load() -> Counted:
            async with self.connected() as conn:
                found = await status.snapshot(conn, campaign_id=campaign.id, node_timeout=self.node_timeout)
                clicked = await clicks.of_campaign(conn, campaign_id=campaign.id)
                return Counted(found, clicked, await timeline.of_campaign(conn, campaign_id=campaign.id))

        kept = self.kept.kept(campaign.id)
        if viewed and kept is not None and kept.status.total >= KEPT_FROM and kept.status.status == campaign.status:
            return await self.kept.get(campaign.id, load)
        found = await load()
        self.kept.keep(campaign.id, found)
        return found

    async def listed(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            found = await listing.page(conn, account_id=viewer.account_id, before=cursor(request), limit=ROWS + 1)
        more = found[ROWS - 1].id if len(found) > ROWS else None
        return viewer_page("campaigns.html", request, viewer, campaigns=found[:ROWS], more=more)

    async def one(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            campaign = await listing.shown(conn, account_id=viewer.account_id, campaign_id=campaign_id(request))
        return await self.page(request, viewer, campaign)

    async def page(
        self,
        request: Request,
        viewer: sessions.Viewer,
        campaign: listing.Newest,
        *,
        code: int = 200,
        error: str = "",
        notice: str = "",
        warnings: tuple[str, ...] = (),
    ) -> Response:
        counted_now = await self._counted(campaign, viewed=code == 200 and not (error or notice or warnings))
        found, clicked = counted_now.status, counted_now.clicks
        drawn = chart.drawn(counted_now.timeline, tracked=clicked.tracked)
        response = viewer_page(
            "campaign.html",
            request,
            viewer,
            c=campaign,
            s=found,
            p=counted(found),
            clicks=clicked if clicked.tracked else None,
            chart=drawn,
            offered=OFFERED.get(found.status, ()),
            error=error,
            notice=notice,
            warnings=warnings,
        )
        response.status_code = code
        return response

    def action(self, verb: str) -> Callable[[Request, sessions.Viewer], Awaitable[Response]]:
        """The POST of a transition: the campaign's page again, saying it was done, or why not."""

        async def act(request: Request, viewer: sessions.Viewer) -> Response:
            async with self.connected() as conn:
                campaign = await listing.shown(conn, account_id=viewer.account_id, campaign_id=campaign_id(request))
            warnings: tuple[str, ...] = ()
            try:
                if verb in ("retry", "reconcile"):
                    notice = await self._rows(request, viewer, campaign, verb)
                else:
                    notice, warnings = DONE[verb], await self._transition(viewer, campaign, verb)
            except EinmalError as exc:
                return await self.page(request, viewer, campaign, code=exc.http_status, error=str(exc))
            return await self.page(request, viewer, campaign, notice=notice, warnings=warnings)

        act.__name__ = f"{verb}_campaign"
        return act

    async def _transition(self, viewer: sessions.Viewer, campaign: listing.Newest, verb: str) -> tuple[str, ...]:
        if verb == "approve":
            return await self._approve(viewer, campaign)
        async with self.connected() as conn, conn.transaction():
            await transitions.transition(conn, verb=verb, campaign_id=campaign.id, reason="by the console")
            await audited(conn, viewer, verb, campaign.account_id, campaign.id)
        return ()

    async def _rows(self, request: Request, viewer: sessions.Viewer, campaign: listing.Newest, verb: str) -> str:
        """Retry its failed rows, or decide its in-doubt rows (the form's `decision`: resend or mark_sent), as
        POST /api/v1/campaigns/{id}/retry and …/reconcile do, with the audit log's line."""
        decision = "retry" if verb == "retry" else guard.field(await guard.form(request), "decision")
        if decision not in MOVED:
            raise Invalid("decision: resend or mark_sent")
        async with self.connected() as conn, conn.transaction():
            if decision == "retry":
                moved = await rows.retry_failed(conn, campaign_id=campaign.id)
            else:
                moved = await rows.decide(conn, campaign_id=campaign.id, resend=decision == "resend")
            action = verb if decision == "retry" else f"{verb}.{decision}"
            await audited(conn, viewer, action, campaign.account_id, campaign.id)
        return MOVED[decision].format(n=moved.moved) + (" It is sending again." if moved.reopened else "")

    async def _approve(self, viewer: sessions.Viewer, campaign: listing.Newest) -> tuple[str, ...]:
        """As POST /api/v1/campaigns/{id}/approve: the doctor asked and the trial rendered (in the account's share
        of threads) with no connection held, then the approval and its line of the audit log in one
        transaction."""
        report = await approval.asked(self.connected, self.checkup, campaign_id=campaign.id, bounded=True)
        mailing = self.checkup.mailing
        async with self.slots.turn(campaign.account_id) as threads:  # outside the database's deadline
            tried = await approval.tried_first(
                self.connected, mailing=mailing, campaign_id=campaign.id, limiter=threads
            )
        async with self.connected() as conn, conn.transaction():
            trial = await approval.approve(
                conn, mailing=mailing, campaign_id=campaign.id, forcing="force", report=report, tried=tried
            )
            await audited(conn, viewer, "approve", campaign.account_id, campaign.id)
        return trial.warnings


async def audited(conn, viewer: sessions.Viewer, verb: str, account_id: int, campaign_id: int) -> None:
    """The audit log's line of a change to a campaign made in the console, in the campaign's account."""
    await audit.record(
        conn, actor=viewer.actor, account_id=account_id, action=f"campaign.{verb}", subject=f"campaign {campaign_id}"
    )
