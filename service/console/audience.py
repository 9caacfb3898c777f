"""The console's pages of an account's audience: its lists with their sign-up forms' state, its segments (a
segment's count and sample), and its suppressions (a page at a time by mailbox, one found by its address, one
added or removed). Each calls the function the API's route calls (service/api/lists.py, segments.py,
suppressions.py); a change writes its line of the audit log in the same transaction. A member's pages are its
account's; an operator names the account (`?account=NAME`) and is asked for one until it does."""

from dataclasses import dataclass
from urllib.parse import urlencode

import asyncpg
from starlette.requests import Request
from starlette.responses import Response

from service.console import guard
from service.console.render import Connect, viewer_page
from service.console.views import account_of
from service.db import DB_SECONDS
from service.errors import EinmalError, NotFound
from service.mail.mailing import Mailing
from service.segments import segments
from service.subscribers import lists, optin, suppressions
from service.text import MAX_EMAIL, MAX_REASON
from service.users import sessions

ROWS = 50  # suppressions a page
SAMPLE = 20  # a segment's sample


@dataclass(frozen=True)
class Of:
    """The account a page is of: its id (None: an operator has named none yet) and its name as links give it."""

    id: int | None
    name: str

    @property
    def at(self) -> str:
        """The query string naming the account in the page's links and forms ('' for a member's own)."""
        return "?" + urlencode({"account": self.name}) if self.name else ""

    def needed(self) -> int:
        if self.id is None:
            raise NotFound("name the account: ?account=NAME")
        return self.id


async def account(conn: asyncpg.Connection, request: Request, viewer: sessions.Viewer) -> Of:
    return Of(await account_of(conn, request, viewer), request.query_params.get("account", ""))


def bounded(request: Request, name: str, limit: int) -> str:
    return request.query_params.get(name, "").strip()[:limit]


class AudiencePages:
    def __init__(self, connected: Connect, mailing: Mailing) -> None:
        self.connected, self.mailing = connected, mailing

    async def lists(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            of = await account(conn, request, viewer)
            found = await lists.lists(conn, account_id=of.id) if of.id is not None else []
        forms = {m.id: optin.form_url(self.mailing, m.form_token) for m in found}
        return viewer_page("lists.html", request, viewer, of=of, lists=found, forms=forms)

    async def segments(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn:
            of = await account(conn, request, viewer)
            found = await segments.listing(conn, account_id=of.id) if of.id is not None else []
        return viewer_page("segments.html", request, viewer, of=of, segments=found)

    async def segment(self, request: Request, viewer: sessions.Viewer) -> Response:
        name = request.path_params["segment_name"]
        async with self.connected() as conn:
            of = await account(conn, request, viewer)
            found = await segments.get(conn, account_id=of.needed(), name=name)
            counted = await segments.count(conn, account_id=of.needed(), name=name, timeout=DB_SECONDS)
            sample = await segments.sample(conn, account_id=of.needed(), name=name, limit=SAMPLE, timeout=DB_SECONDS)
        return viewer_page("segment.html", request, viewer, of=of, s=found, count=counted, sample=sample)

    async def suppressions(self, request: Request, viewer: sessions.Viewer) -> Response:
        return await self._suppressions(request, viewer)

    async def _suppressions(
        self, request: Request, viewer: sessions.Viewer, *, code: int = 200, error: str = "", notice: str = ""
    ) -> Response:
        address, after = bounded(request, "address", MAX_EMAIL), bounded(request, "after", MAX_EMAIL)
        async with self.connected() as conn:
            of = await account(conn, request, viewer)
            if of.id is None:
                found = []
            elif address:
                one = await suppressions.get(conn, account_id=of.id, email=address)
                found = [one] if one is not None else []
            else:
                found = await suppressions.page(conn, account_id=of.id, after=after, limit=ROWS + 1)
        more = found[ROWS - 1].email_lower if len(found) > ROWS else None
        response = viewer_page(
            "suppressions.html",
            request,
            viewer,
            of=of,
            suppressions=found[:ROWS],
            more=more,
            address=address,
            error=error,
            notice=notice,
        )
        response.status_code = code
        return response

    async def suppress(self, request: Request, viewer: sessions.Viewer) -> Response:
        """As PUT /api/v1/suppressions/{email}: the mailbox suppressed (or left as it was), and audited."""
        fields = await guard.form(request)
        email, reason = guard.field(fields, "email")[:MAX_EMAIL], guard.field(fields, "reason")[:MAX_REASON]
        refused: EinmalError | None = None
        async with self.connected() as conn:
            account_id = (await account(conn, request, viewer)).needed()
            try:
                found, added = await suppressions.add(
                    conn, account_id=account_id, email=email, reason=reason, actor=viewer.actor
                )
            except EinmalError as exc:
                refused = exc
        if refused is not None:  # the page again, with the service's sentence
            return await self._suppressions(request, viewer, code=refused.http_status, error=str(refused))
        said = f"Suppressed {found.email_lower}." if added else f"{found.email_lower} was suppressed already."
        return await self._suppressions(request, viewer, notice=said)

    async def unsuppress(self, request: Request, viewer: sessions.Viewer) -> Response:
        """As DELETE /api/v1/suppressions/{email}: the mailbox mailed again, and audited; 404 without its
        suppression."""
        mailbox = request.path_params["mailbox"][:MAX_EMAIL]
        async with self.connected() as conn:
            of = await account(conn, request, viewer)
            await suppressions.remove(conn, account_id=of.needed(), email=mailbox, actor=viewer.actor)
        return await self._suppressions(request, viewer, notice=f"{mailbox} may be mailed again.")
