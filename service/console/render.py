"""The console's pages: Jinja2 templates (templates/, autoescaped), and the headers every answer of the
console has. The Content-Security-Policy allows the console's own files only: its stylesheet and the vendored
htmx (static/), no inline script or style; htmx is configured by a meta tag (templates/base.html)."""

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC
from pathlib import Path
from typing import Any

import asyncpg
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse

from service.users import sessions

# a connection of the console's pool, within a deadline (app.py Console.connected)
Connect = Callable[..., AbstractAsyncContextManager[asyncpg.Connection]]
PREFIX = "/console"  # where the HTTP surface mounts the console (service/web/app.py)
STATIC = Path(__file__).parent / "static"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    # not no-referrer: with it, a browser sends `Origin: null` on a form's POST, which guard.py refuses
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}

PAGES = Environment(
    loader=PackageLoader("service.console", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
PAGES.globals["prefix"] = PREFIX
PAGES.filters["utc"] = lambda when: when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def page(template: str, *, status: int = 200, headers: dict[str, str] | None = None, **values: Any) -> HTMLResponse:
    """The template rendered with `values` (`viewer`: who is signed in, None on the sign-in page)."""
    values.setdefault("viewer", None)
    values.setdefault("form_token", "")
    return HTMLResponse(PAGES.get_template(template).render(values), status, headers=headers)


def viewer_page(template: str, request: Request, viewer: sessions.Viewer, **values: Any) -> HTMLResponse:
    """A page for a signed-in viewer, its forms carrying the session's token (guard.py)."""
    return page(template, viewer=viewer, form_token=sessions.form_token(request.state.token), **values)


def problem(status: int, title: str, text: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    return page("problem.html", status=status, headers=headers, title=title, text=text)
