"""The console's making of a campaign: the form that creates a draft (as POST /api/v1/campaigns and `einmal
campaign create`: the fields checked and the templates compiled in the sandbox, the From rule, the trial render),
a campaign's preview (the message one subscriber would get, GET …/preview) and a test message of it to an address
(POST …/test). The preview's HTML is shown in a sandboxed frame (no script, no origin) whose document the page
carries (srcdoc), under the console's Content-Security-Policy: no remote image is fetched, no inline style applied.
Renders run in the console's render threads, in the account's share; a test message waits for one of TESTS
places (TEST_SHARE an account) and holds no database connection while the relay answers."""

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from service.accounts import replies
from service.accounts.account import find_account
from service.addresses import address_problem
from service.campaigns import drafts, fields, listing
from service.campaigns import preview as previews
from service.console import guard
from service.console.campaigns import CampaignPages, audited, campaign_id
from service.console.render import Connect, viewer_page
from service.errors import EinmalError, Invalid
from service.mail.slots import RenderSlots
from service.relays import Relaying
from service.smtp.connection import Outcome, SmtpUnavailable
from service.text import shown
from service.users import sessions

TESTS, TEST_SHARE = 4, 2  # test messages going out at a time, and for one account
FIELDS = ("account", "name", "subject", "from", "lists", "segment", "text", "html")
TEST_PREFIX = "[TEST] "


class Drafting:
    def __init__(self, connected: Connect, campaigns: CampaignPages, relaying: Relaying) -> None:
        self.connected, self.campaigns, self.relaying = connected, campaigns, relaying
        self.mailing, self.slots = campaigns.checkup.mailing, campaigns.slots
        self.tests = RenderSlots(TESTS, TEST_SHARE)

    async def form(self, request: Request, viewer: sessions.Viewer) -> Response:
        given = dict.fromkeys(FIELDS, "") | {"lists": "default"}
        return viewer_page("campaign_new.html", request, viewer, given=given, error="")

    async def create(self, request: Request, viewer: sessions.Viewer) -> Response:
        """The draft made of the form's fields: its page, with what its trial render warned of; else the form
        again with the service's sentence and the fields as given."""
        sent = await guard.form(request)
        given = {name: guard.field(sent, name).strip() for name in FIELDS} | {  # a browser sends CRLF lines
            name: guard.field(sent, name).replace("\r\n", "\n") for name in ("text", "html")
        }
        try:
            made = await self._create(viewer, given)
        except EinmalError as exc:
            page = viewer_page("campaign_new.html", request, viewer, given=given, error=str(exc))
            page.status_code = exc.http_status
            return page
        async with self.connected() as conn:
            campaign = await listing.shown(conn, account_id=viewer.account_id, campaign_id=made.id)
        return await self.campaigns.page(
            request,
            viewer,
            campaign,
            notice="Created: a draft. Preview it, send a test, then approve it.",
            warnings=made.trial.warnings,
        )

    async def _create(self, viewer: sessions.Viewer, given: dict[str, str]) -> drafts.Created:
        asked: dict[str, str | list[str] | None] = {
            "name": given["name"],
            "subject": given["subject"],
            "from_address": given["from"],
            "text": given["text"],
            "html": given["html"] or None,
            "lists": [n.strip() for n in given["lists"].split(",") if n.strip()],
        }
        segment = given["segment"] or None
        if segment is not None and not asked["lists"]:
            del asked["lists"]  # a segment alone: through any of the account's lists, as the API's
        async with self.connected() as conn:
            if viewer.account_id is None and not given["account"]:
                raise Invalid("account: name the account the campaign is for")
            account_id = viewer.account_id or await find_account(conn, name=given["account"])
        async with self.slots.turn(account_id) as threads:
            checked = await fields.checked(asked, limiter=threads)  # no connection held meanwhile
            async with self.connected() as conn:
                campaign_id = await drafts.draft(
                    conn,
                    mailing=self.mailing,
                    account_id=account_id,
                    lists=checked.pop("lists", []),
                    segment=segment,
                    **checked,
                )
                # its line after the draft's transaction, not around it: the partition the insert attaches locks
                # every account's writes until it commits, and the trial render follows it (as the API's create)
                await audited(conn, viewer, "create", account_id, campaign_id)
                sample = await previews.sample(conn, campaign_id=campaign_id)
            # the render outside the database's deadline: it is not the database's time
            return drafts.Created(campaign_id, await previews.tried(sample, mailing=self.mailing, limiter=threads))

    async def preview(self, request: Request, viewer: sessions.Viewer) -> Response:
        return await self._preview(request, viewer, request.query_params.get("subscriber", ""))

    async def _preview(
        self, request: Request, viewer: sessions.Viewer, subscriber: str, notice: str = "", error: str = ""
    ) -> Response:
        """The preview page: the message for `subscriber` (""; the first of the campaign's lists), or why not."""
        async with self.connected() as conn:
            campaign = await listing.shown(conn, account_id=viewer.account_id, campaign_id=campaign_id(request))
        message, code = None, 200
        try:
            made = await self._render(campaign, subscriber[:320] or None)
            if len(made.message) > previews.MAX_PREVIEW:
                raise Invalid(
                    f"the message is {len(made.message):,} bytes, more than a preview's; "
                    "`einmal campaign preview --out` writes it"
                )
            async with self.slots.turn(campaign.account_id) as threads:
                message = await anyio.to_thread.run_sync(previews.readable, made.message, limiter=threads)
        except EinmalError as exc:
            code, error = exc.http_status, error or str(exc)
        page = viewer_page(
            "preview.html", request, viewer, c=campaign, m=message, subscriber=subscriber, notice=notice, error=error
        )
        page.status_code = 200 if notice else code
        return page

    async def _render(
        self, campaign: listing.Newest, subscriber: str | None, test: previews.Test | None = None
    ) -> previews.Rendered:
        if subscriber is not None and (problem := address_problem(subscriber)):
            raise Invalid(f"{shown(subscriber)} is not a valid address: {problem}")
        async with self.slots.turn(campaign.account_id) as threads:
            async with self.connected() as conn:
                found = await previews.gather(
                    conn, mailing=self.mailing, campaign_id=campaign.id, subscriber=subscriber, test=test
                )
            return await previews.made(found, mailing=self.mailing, limiter=threads)  # outside the deadline

    async def test(self, request: Request, viewer: sessions.Viewer) -> Response:
        """A test message to the form's address, as POST …/test sends it: the preview again, saying what the
        relay answered, or why it was not sent."""
        async with self.connected() as conn:
            campaign = await listing.shown(conn, account_id=viewer.account_id, campaign_id=campaign_id(request))
        sent = await guard.form(request)
        to, subscriber = guard.field(sent, "to").strip(), guard.field(sent, "subscriber").strip()[:320]
        try:
            said = await self._send_test(campaign, to, subscriber or None)
        except EinmalError as exc:
            page = await self._preview(request, viewer, subscriber, error=f"Test message not sent: {exc}")
            page.status_code = exc.http_status
            return page
        return await self._preview(request, viewer, subscriber, notice=f"Test message sent to {to}: {said}")

    async def _send_test(self, campaign: listing.Newest, to: str, subscriber: str | None) -> str:
        if problem := address_problem(to):
            raise Invalid(f"{shown(to) or 'no address'} is not a valid address: {problem}")
        made = await self._render(campaign, subscriber, test=previews.Test(to, TEST_PREFIX))
        async with self.connected() as conn:
            mine = await replies.own_relays(conn, account_id=campaign.account_id)
        async with self.tests.turn(campaign.account_id) as places, places:  # no connection held
            try:
                result = await previews.send_test(relaying=self.relaying, made=made, to=to)
            except SmtpUnavailable as exc:
                raise Unsent(f"no relay answered: {replies.shown(str(exc), own_relays=mine)}") from None
        reply = replies.shown(result.reply, own_relays=mine) or ""
        if result.outcome is not Outcome.SENT:
            raise Invalid(f"the relay refused it: {reply}")
        return reply


class Unsent(EinmalError):
    http_status = 503
