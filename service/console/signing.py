"""Signing in to the console and out (POST /login, /logout; the form at GET /login). The sign-in form
carries a random token its own cookie holds too (guard.py); a sign-in is counted before its password is
tried (service/users/throttle.py), argon2 runs holding no pooled connection, and a success opens a session,
whose token only the browser's cookie holds, and writes the audit log's line in the same transaction."""

import logging
import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from service import audit, clients
from service.console import guard
from service.console.render import PREFIX, Connect, page
from service.text import shown
from service.users import sessions, throttle, users

log = logging.getLogger("einmal.console")


class SignIn:
    def __init__(self, connected: Connect, limits: sessions.Limits) -> None:
        self.connected, self.limits = connected, limits

    async def form(self, request: Request) -> Response:
        form_token = secrets.token_urlsafe(32)
        response = page("login.html", form_token=form_token, name="", error=None)
        guard.set_cookie(response, request, guard.SIGN_IN_COOKIE, form_token)
        return response

    async def sign_in(self, request: Request) -> Response:
        expected = guard.token(request, guard.SIGN_IN_COOKIE)
        fields = await guard.check_form(request, expected)
        name, password = guard.field(fields, "name").strip(), guard.field(fields, "password")
        network = clients.network((request.client or ("?", 0))[0])
        async with self.connected() as conn:
            over = await throttle.attempt(conn, name_key=users.key(name), network=network)
            stored = await users.find(conn, name=name) if over is None else None
        if over is not None:
            log.info("console: sign-in of %s from %s refused: too many failures", shown(name), network)
            return page(
                "login.html",
                status=429,
                headers={"Retry-After": over.retry_after()},
                form_token=expected,
                name=name,
                error="Too many failed sign-ins: try again later.",
            )
        user, rehashed = await users.verified(stored, password)  # argon2, holding no connection
        async with self.connected() as conn:
            if user is None:
                log.info("console: sign-in of %s from %s failed", shown(name), network)
                return page("login.html", status=401, form_token=expected, name=name, error="Wrong name or password.")
            await throttle.succeeded(conn, name_key=users.key(name), network=network)
            async with conn.transaction():
                if rehashed is not None:
                    await users.rehash(conn, user_id=user.id, password_hash=rehashed)
                held = await sessions.open_session(conn, user_id=user.id, limits=self.limits)
                await audit.record(
                    conn, actor=f"console:{user.name}", account_id=user.account_id, action="console.login"
                )
        log.info("console: %s signed in from %s", user.name, network)
        response = RedirectResponse(f"{PREFIX}/", 303)
        guard.set_cookie(response, request, guard.SESSION_COOKIE, held)
        guard.drop_cookie(response, request, guard.SIGN_IN_COOKIE)
        return response

    async def sign_out(self, request: Request, viewer: sessions.Viewer) -> Response:
        async with self.connected() as conn, conn.transaction():
            await sessions.end(conn, token=request.state.token)
            await audit.record(conn, actor=viewer.actor, account_id=viewer.account_id, action="console.logout")
        response = RedirectResponse(f"{PREFIX}/login", 303)
        guard.drop_cookie(response, request, guard.SESSION_COOKIE)
        return response
