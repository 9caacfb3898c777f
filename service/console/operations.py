"""The console's operations pages: an account's deliverability (bounce and complaint rates of 30 days against the
providers' thresholds, charted, with the doctor's kept findings), its webhook endpoints and their deliveries
(with *Replay*, as POST /api/v1/webhooks/{id}/replay), its transactional messages and a message's state (as GET
/api/v1/messages/{id}), its sequences and a sequence's funnel (as GET /api/v1/sequences/{id}).

Each page is one account's: a member's own, an operator's the one `?account=NAME` names (without it, the
accounts to choose from). Another account's endpoint, message or sequence is 404 for a member, as in the API:
the service functions are given the member's account and find none."""

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from service import audit
from service.accounts import account, deliverability, replies
from service.console.charts import rate_chart
from service.console.live import Live
from service.console.render import Connect, viewer_page
from service.console.views import account_of
from service.errors import NotFound
from service.messages import messages
from service.sequences import sequences
from service.users import sessions
from service.webhooks import endpoints

MESSAGE_ROWS, DELIVERY_ROWS = 50, 100
FIGURES_SECONDS = 60.0  # an account's deliverability is loaded again in the background once older than this


def path_id(request: Request, name: str, least: int = 1) -> int:
    found: int = request.path_params[name]
    if not least <= found < 2**63 - 1:
        raise NotFound("no such " + name.removesuffix("_id").replace("_", " "))
    return found


def before(request: Request) -> int:
    given = request.query_params.get("before", "")
    return int(given) if given.isascii() and given.isdigit() and len(given) <= 18 else 2**63 - 1


class OperationsPages:
    def __init__(self, connected: Connect) -> None:
        self.connected = connected
        self.figures: Live[deliverability.Deliverability] = Live(fresh=FIGURES_SECONDS)  # by account

    async def _page(
        self, template: str, request: Request, viewer: sessions.Viewer, load, *, code: int = 200, **values
    ) -> Response:
        """`template` with what `load(conn, account_id)` gives (a dict), for the account asked; an operator who
        named none chooses one first. `q`: the query string that keeps an operator's account on links."""
        async with self.connected() as conn:
            account_id = await account_of(conn, request, viewer)
            if account_id is None:
                chosen = await account.every(conn)
                return viewer_page("choose.html", request, viewer, accounts=chosen, here=request.url.path)
            loaded = await load(conn, account_id)
        named = request.query_params.get("account", "") if viewer.operator else ""
        q = f"?account={quote(named)}" if named else ""
        response = viewer_page(template, request, viewer, account=named, q=q, **loaded, **values)
        response.status_code = code
        return response

    async def deliverability(self, request: Request, viewer: sessions.Viewer) -> Response:
        async def load(conn, account_id: int) -> dict:
            async def again() -> deliverability.Deliverability:
                async with self.connected() as own:
                    return await deliverability.of_account(own, account_id=account_id)

            found = await self.figures.get(
                account_id, lambda: deliverability.of_account(conn, account_id=account_id), again
            )
            complaints = deliverability.trailing(found.days, "complained")
            bounces = deliverability.trailing(found.days, "bounced")
            limits = deliverability
            return {
                "d": found,
                "limits": limits,
                "complaint_chart": rate_chart(
                    "Complaint rate of the 7 days to each day, per cent of messages delivered",
                    complaints,
                    [(limits.COMPLAINTS_AIM, "aim"), (limits.COMPLAINTS_LIMIT, "limit")],
                ),
                "bounce_chart": rate_chart(
                    "Hard-bounce rate of the 7 days to each day, per cent of messages delivered",
                    bounces,
                    [(limits.BOUNCES_LIMIT, "limit")],
                ),
            }

        return await self._page("deliverability.html", request, viewer, load)

    async def webhooks(self, request: Request, viewer: sessions.Viewer) -> Response:
        async def load(conn, account_id: int) -> dict:
            return {"endpoints": await endpoints.listing(conn, account_id=account_id)}

        return await self._page("webhooks.html", request, viewer, load)

    async def webhook(self, request: Request, viewer: sessions.Viewer, *, notice: str = "") -> Response:
        endpoint_id = path_id(request, "endpoint_id")
        state = request.query_params.get("state") or None

        async def load(conn, account_id: int) -> dict:
            endpoint, found = await endpoints.with_deliveries(
                conn, account_id=account_id, id=endpoint_id, state=state, limit=DELIVERY_ROWS
            )
            return {"e": endpoint, "deliveries": found, "state": state or "", "states": endpoints.STATES}

        return await self._page("webhook.html", request, viewer, load, notice=notice)

    async def replay(self, request: Request, viewer: sessions.Viewer) -> Response:
        """As POST /api/v1/webhooks/{id}/replay: the parked deliveries pending again, with the audit log's line."""
        endpoint_id = path_id(request, "endpoint_id")
        async with self.connected() as conn:
            account_id = await account_of(conn, request, viewer)
            if account_id is None:
                raise NotFound("no such webhook endpoint")  # an operator's form names its account
            async with conn.transaction():
                done = await endpoints.replay(conn, account_id=account_id, id=endpoint_id)
                await audit.record(
                    conn,
                    actor=viewer.actor,
                    account_id=account_id,
                    action="webhook.replay",
                    subject=f"webhook {endpoint_id}",
                )
        notice = f"{done.replayed} parked deliver{'y' if done.replayed == 1 else 'ies'} pending again."
        if done.not_kept_since is not None:
            since = f"{done.not_kept_since:%Y-%m-%d %H:%M} UTC"
            notice += f" It was disabled since {since}: no event of that time was kept for it."
        return await self.webhook(request, viewer, notice=notice)

    async def messages(self, request: Request, viewer: sessions.Viewer) -> Response:
        async def load(conn, account_id: int) -> dict:
            found = await messages.listing(conn, account_id=account_id, before=before(request), limit=MESSAGE_ROWS + 1)
            more = found[MESSAGE_ROWS - 1].id if len(found) > MESSAGE_ROWS else None
            return {"messages": found[:MESSAGE_ROWS], "more": more}

        return await self._page("messages.html", request, viewer, load)

    async def message(self, request: Request, viewer: sessions.Viewer) -> Response:
        message_id = path_id(request, "message_id", messages.MESSAGE_IDS_FROM)

        async def load(conn, account_id: int) -> dict:
            found = await messages.show(conn, account_id=account_id, message_id=message_id)
            own = await replies.own_relays(conn, account_id=account_id)
            return {"m": found, "reply": replies.shown(found.last_reply, own_relays=own)}

        return await self._page("message.html", request, viewer, load)

    async def sequences(self, request: Request, viewer: sessions.Viewer) -> Response:
        async def load(conn, account_id: int) -> dict:
            return {"sequences": await sequences.listing(conn, account_id=account_id)}

        return await self._page("sequences.html", request, viewer, load)

    async def sequence(self, request: Request, viewer: sessions.Viewer) -> Response:
        sequence_id = path_id(request, "sequence_id")

        async def load(conn, account_id: int) -> dict:
            found = await sequences.status(conn, account_id=account_id, sequence_id=sequence_id)
            reached = [step.counts["sent"] for step in found.steps]
            return {"s": found, "reached": reached, "most": max([*reached, found.sequence.members, 1])}

        return await self._page("sequence.html", request, viewer, load)
