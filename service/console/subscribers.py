"""The console's subscribers: a search of the account's by address (any spelling of the mailbox, as GET
/api/v1/subscribers/{email}) or by an attribute's value (through indexes, 50 a page by id), a subscriber's page
(its lists, attributes, suppression, and what einmal sent it: service/subscribers/history.py) and its erasure
(GDPR art. 17, as DELETE /api/v1/subscribers/{email}) after a page asking to confirm it. The erasure and its
line of the audit log (`subscriber.erase`, naming the subscriber's id, never its address) are one transaction,
as in the API."""

from starlette.requests import Request
from starlette.responses import Response

from service.console.audience import Of, account, bounded
from service.console.render import Connect, viewer_page
from service.errors import EinmalError, NotFound
from service.subscribers import history, subscriber
from service.text import MAX_ATTRIBUTE, MAX_EMAIL
from service.users import sessions

ROWS = 50  # subscribers a page of an attribute's search
MAX_KEY = 200  # an attribute's name (as the API's)


class SubscriberPages:
    def __init__(self, connected: Connect) -> None:
        self.connected = connected

    async def search(self, request: Request, viewer: sessions.Viewer) -> Response:
        return await self._search(request, viewer)

    async def _search(self, request: Request, viewer: sessions.Viewer, notice: str = "") -> Response:
        address = bounded(request, "address", MAX_EMAIL)
        attribute, value = bounded(request, "attribute", MAX_KEY), bounded(request, "value", MAX_ATTRIBUTE)
        after = bounded(request, "after", 18)
        found: list[subscriber.Subscriber] = []
        async with self.connected() as conn:
            of = await account(conn, request, viewer)
            if of.id is not None and address:
                try:
                    found = [await subscriber.find(conn, account_id=of.id, email=address)]
                except NotFound:
                    pass
            elif of.id is not None and attribute:
                found = await subscriber.with_attribute(
                    conn,
                    account_id=of.id,
                    attribute=attribute,
                    value=value,
                    after_id=int(after) if after.isdigit() else 0,
                    limit=ROWS + 1,
                )
        more = found[ROWS - 1].id if len(found) > ROWS else None
        return viewer_page(
            "subscribers.html",
            request,
            viewer,
            of=of,
            subscribers=found[:ROWS],
            more=more,
            address=address,
            attribute=attribute,
            value=value,
            searched=bool(address or attribute),
            notice=notice,
        )

    async def _found(self, request: Request, viewer: sessions.Viewer) -> tuple[Of, subscriber.Subscriber]:
        async with self.connected() as conn:
            of = await account(conn, request, viewer)
            email = request.path_params["email"][:MAX_EMAIL]
            return of, await subscriber.find(conn, account_id=of.needed(), email=email)

    async def one(self, request: Request, viewer: sessions.Viewer) -> Response:
        of, found = await self._found(request, viewer)
        async with self.connected() as conn:
            sent = await history.of_subscriber(conn, account_id=of.needed(), subscriber_id=found.id)
        return viewer_page("subscriber.html", request, viewer, of=of, s=found, sent=sent)

    async def confirm_erase(self, request: Request, viewer: sessions.Viewer) -> Response:
        of, found = await self._found(request, viewer)
        return viewer_page("erase.html", request, viewer, of=of, s=found, error="")

    async def erase(self, request: Request, viewer: sessions.Viewer) -> Response:
        of, found = await self._found(request, viewer)
        try:
            async with self.connected() as conn:
                await subscriber.erase(conn, account_id=of.needed(), email=found.email, actor=viewer.actor)
        except EinmalError as exc:  # a message to it is on its way (409), or it was erased meanwhile (404)
            response = viewer_page("erase.html", request, viewer, of=of, s=found, error=str(exc))
            response.status_code = exc.http_status
            return response
        return await self._search(
            request, viewer, notice=f"Subscriber #{found.id} is erased; its address stays suppressed."
        )
