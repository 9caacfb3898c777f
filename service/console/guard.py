"""Who may use a console route, and how its forms are trusted.

A signed-in request carries the session's cookie (HttpOnly, SameSite=Lax, Secure unless the console is
reached over plain HTTP at a loopback address, where a browser keeps no Secure cookie); without an open
session a GET is sent to the sign-in page (303) and anything else is 401 (htmx's requests too, told where
to go by HX-Redirect). Every POST must come from a page
of the console: its Origin, when the browser sends one, names this host, and its form carries the session's
token (service/users/sessions.py form_token) in a hidden field; else 403. The sign-in form, before there is
a session, carries a random token that its own cookie holds too."""

import ipaddress
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from python_multipart.exceptions import FormParserError
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from service.console.render import PREFIX
from service.users import sessions

SESSION_COOKIE, SIGN_IN_COOKIE = "einmal_console", "einmal_console_sign_in"
MAX_TOKEN = 100  # a cookie's token longer than this is no token of the console's
MAX_FIELDS = 20

Handler = Callable[[Request, sessions.Viewer], Awaitable[Response]]
Find = Callable[[str], Awaitable[sessions.Viewer | None]]


class Refused(Exception):
    """An answer other than the page asked for: its status, a title and a sentence."""

    def __init__(self, status: int, title: str, text: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(text)
        self.status, self.title, self.text, self.headers = status, title, text, headers or {}


def secure(request: Request) -> bool:
    """Whether cookies are Secure: always, but over plain HTTP at a loopback address (a developer's machine)."""
    if request.url.scheme == "https":
        return True
    host = (request.url.hostname or "").strip("[]")
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(name, value, path=PREFIX, secure=secure(request), httponly=True, samesite="lax")


def drop_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(name, path=PREFIX, secure=secure(request), httponly=True, samesite="lax")


def token(request: Request, name: str) -> str | None:
    value = request.cookies.get(name)
    return value if value and len(value) <= MAX_TOKEN else None


def check_origin(request: Request) -> None:
    """Refused 403 unless the request's Origin, when it has one, is this host (a browser sends it with every
    POST; its absence leaves the form's token to decide)."""
    origin = request.headers.get("origin")
    if origin is not None and (
        origin == "null" or urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()
    ):
        raise Refused(403, "Refused", "This form was sent from another site.")


async def form(request: Request) -> FormData:
    """The request's form (its body already read within the surface's bounds); Refused 400 when unreadable."""
    try:
        return await request.form(max_files=0, max_fields=MAX_FIELDS)
    except (HTTPException, MultiPartException, FormParserError, ValueError) as exc:
        raise Refused(400, "Bad form", "The form could not be read.") from exc


def field(fields: FormData, name: str) -> str:
    value = fields.get(name)
    return value if isinstance(value, str) else ""


async def check_form(request: Request, expected: str | None) -> FormData:
    """The POST's form, once its Origin and its token (the same as `expected`) are checked: else Refused 403."""
    check_origin(request)
    fields = await form(request)
    if expected is None:  # its cookie did not come back: blocked, or Secure over plain HTTP
        raise Refused(
            403,
            "No cookie",
            "The browser sent back no cookie of this form: allow cookies, and reach the console over HTTPS (plain "
            "HTTP only at a loopback address), then reload the page.",
        )
    if not sessions.same(field(fields, "form_token"), expected):
        raise Refused(403, "Form expired", "This form is not valid any more: reload the page and send it again.")
    return fields


def signed_in(find: Find, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The route `handler` for a signed-in viewer only (`find`: the session of a cookie's token, or None).
    A POST's form is checked before the handler sees it; `request.state.token` is the session's token."""

    async def endpoint(request: Request) -> Response:
        held = token(request, SESSION_COOKIE)
        viewer = await find(held) if held is not None else None
        if viewer is None or held is None:
            if request.method in ("GET", "HEAD") and "hx-request" not in request.headers:
                return RedirectResponse(f"{PREFIX}/login", 303)
            # htmx (a fragment asked again) swaps no 401 into the page; it goes to the sign-in page instead
            raise Refused(
                401, "Signed out", "Your session has ended: sign in again.", {"HX-Redirect": f"{PREFIX}/login"}
            )
        if request.method == "POST":
            await check_form(request, sessions.form_token(held))
        request.state.token = held
        return await handler(request, viewer)

    endpoint.__name__ = handler.__name__
    return endpoint
