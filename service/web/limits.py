"""The limits and middleware around the HTTP surface's routes (service/web/app.py), outermost first: NoTraceback (an
unexpected error is one log line and a 500), BodyBudget (the bodies of all requests together, and of each
client network, are bounded; one-click unsubscribes have a lane of their own), TextOnly (a path or query that
is not UTF-8, or holds a NUL, is 422), ApiPrefix (/api/v1/… to the API), then for the API deps.KeyFirst (its
key found before its body is read) and BoundedBody (its bodies read within the bounds before it sees them);
and read_body, through which every route reads a body (docs/design.md#listening-surface)."""

import json
import logging
from collections import Counter
from urllib.parse import unquote_to_bytes

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import clients
from service.asgi import NUL, replay

log = logging.getLogger("einmal.http")

MAX_BODY = 64 * 1024
BUDGET_WAIT_SECONDS = 1.0  # how long a body waits for room in the budget before it is refused (503)
ONE_CLICK_BODY = 4096  # the most a one-click unsubscribe's body may be: List-Unsubscribe=One-Click, as a form
# room for one-click bodies besides EINMAL_HTTP_BODY_BUFFER_BYTES, so that no other body can take it: 64 of
# them at once, 16 from one client network
ONE_CLICK_LANE, ONE_CLICK_LANE_PER_CLIENT = 64 * ONE_CLICK_BODY, 16 * ONE_CLICK_BODY


class Refused(Exception):
    """A request answered with a 4xx or 503 before anything was written. `page`: the texts of the page a
    browser gets, in its language (service/subscribers/texts.py); without it, an English one of title and text."""

    def __init__(self, status: int, title: str, text: str, page: str | None = None) -> None:
        super().__init__(text)
        self.status, self.title, self.text, self.page = status, title, text, page


async def read_body(request: Request, limit: int, one_click: bool = False) -> bytes:
    """The request's body, read no further than `limit` bytes: Refused 413 past it (400: a bad Content-Length),
    503 when the bodies of all requests, or of its client network, leave no room for it soon (BodyBudget;
    `one_click`: in the one-click unsubscribes' lane), 408 when it stopped arriving (its connection was
    closed at the body's deadline, actors/http.py)."""
    length = request.headers.get("content-length")
    if length is not None and (not (length.isascii() and length.isdigit()) or int(length) > limit):
        raise Refused(413 if length.isdigit() else 400, "Too large", "The request body is too large.")
    await request.scope[BodyBudget.KEY].take(limit if length is None else int(length), one_click)
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise Refused(413, "Too large", "The request body is too large.")
    except ClientDisconnect:
        raise Refused(408, "Too slow", "The request did not arrive in time.") from None
    return bytes(body)


class _Room:
    """The room one request holds in the budget: taken at once, before its body is read."""

    def __init__(self, budget: "BodyBudget", network: str) -> None:
        self.budget, self.network, self.held, self.one_click = budget, network, 0, False

    async def take(self, n: int, one_click: bool = False) -> None:
        budget = self.budget
        with anyio.move_on_after(BUDGET_WAIT_SECONDS):
            while not budget.fits(self.network, n, one_click):
                await budget.freed.wait()
            budget.hold(self.network, n, one_click)
            self.held += n
            self.one_click = one_click
            return
        raise Refused(503, "Try again later", "The service is busy; please try again shortly.")


class BodyBudget:
    """The request bodies of all requests together take at most `limit` bytes (EINMAL_HTTP_BODY_BUFFER_BYTES),
    those of one client network (service/clients.py: an IPv4 /24, an IPv6 /64) at most `per_client`
    (EINMAL_HTTP_CLIENT_BODY_BYTES), so that one network's slow bodies leave the rest to the others. The
    one-click unsubscribes' bodies (at most ONE_CLICK_BODY each) have ONE_CLICK_LANE besides, of which one
    network holds at most ONE_CLICK_LANE_PER_CLIENT: no other body takes it. read_body takes room for the whole
    body first (its Content-Length, else the route's limit), waiting up to BUDGET_WAIT_SECONDS for it; the
    request gives it back once it is answered (docs/design.md#listening-surface). `held`: the bytes held now, lane
    included."""

    KEY = "einmal.body_room"

    def __init__(self, app: ASGIApp, limit: int, per_client: int | None = None) -> None:
        self.app, self.limit, self.per_client = app, limit, min(per_client or limit, limit)
        self.general, self.lane = 0, 0
        self.by_network: Counter[str] = Counter()
        self.lane_by_network: Counter[str] = Counter()
        self.freed = anyio.Event()

    @property
    def held(self) -> int:
        return self.general + self.lane

    def fits(self, network: str, n: int, one_click: bool) -> bool:
        if one_click:
            return self.lane + n <= ONE_CLICK_LANE and self.lane_by_network[network] + n <= ONE_CLICK_LANE_PER_CLIENT
        return self.general + n <= self.limit and self.by_network[network] + n <= self.per_client

    def hold(self, network: str, n: int, one_click: bool) -> None:
        if one_click:
            self.lane += n
            self.lane_by_network[network] += n
        else:
            self.general += n
            self.by_network[network] += n

    def release(self, room: _Room) -> None:
        self.hold(room.network, -room.held, room.one_click)
        for counts in (self.by_network, self.lane_by_network):
            if counts[room.network] <= 0:
                del counts[room.network]
        self.freed.set()
        self.freed = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        room = scope[self.KEY] = _Room(self, clients.network((scope.get("client") or ("?",))[0]))
        try:
            await self.app(scope, receive, send)
        finally:
            if room.held:
                self.release(room)


def first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ApiPrefix:
    """Every path under /api/v1 to the API, whatever characters it holds (a Mount's pattern stops at a line
    break, and the site's plain-text 404 would answer): the API answers in JSON, its 404s too."""

    PREFIX = "/api/v1"

    def __init__(self, api_app: ASGIApp, site: ASGIApp) -> None:
        self.api, self.site = api_app, site

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == self.PREFIX or path.startswith(self.PREFIX + "/")):
            scope = {**scope, "root_path": scope.get("root_path", "") + self.PREFIX}
            return await self.api(scope, receive, send)
        await self.site(scope, receive, send)


class TextOnly:
    """Before any routing: a path or query whose percent-encoded bytes are not UTF-8, or hold a NUL, is 422
    (JSON under /api/v1, plain text on the site). The server decodes such bytes as U+FFFD, so a route would
    otherwise store a name the client never sent; PostgreSQL holds no NUL in text."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (why := self.problem(scope)):
            api = scope["path"] == ApiPrefix.PREFIX or scope["path"].startswith(ApiPrefix.PREFIX + "/")
            answer = JSONResponse({"error": why}, 422) if api else PlainTextResponse(why, 422)
            return await answer(scope, receive, send)
        await self.app(scope, receive, send)

    @classmethod
    def problem(cls, scope: Scope) -> str | None:
        raw = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
        for what, given in (("path", raw), ("query", scope.get("query_string", b"").replace(b"+", b" "))):
            try:
                text = unquote_to_bytes(given).decode("utf-8")
            except UnicodeDecodeError:
                return f"the {what} is not UTF-8 text (percent-encode the UTF-8 bytes of each character)"
            if "\x00" in text:
                return NUL
        return None


class BoundedBody:
    """The API's request bodies, read through read_body (bounded, within the BodyBudget) before the API
    sees them; a body refused is a JSON problem, as the API's own are."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        try:
            body = await read_body(Request(scope, receive), self.limit)
        except Refused as refused:
            headers = {"Retry-After": "5"} if refused.status == 503 else {}
            return await JSONResponse({"error": refused.text}, refused.status, headers)(scope, receive, send)
        await self.app(scope, replay(body, receive), send)


class NoTraceback:
    """Outermost: an error no handler expected is one log line and a 500, never a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # the boundary: anything unexpected becomes one line
            log.error("%s %s failed: %s", scope.get("method", ""), scope.get("path", ""), first_line(exc))
            if scope["type"] == "http" and not started:
                body = json.dumps({"error": "internal error"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
