"""Every console route, taken from the app itself so that a route added later is covered too, refuses a
client that is not signed in (a GET is sent to the sign-in page, anything else is 401) and shows a member
nothing of another account: a route naming another account's object is 404, as in the API, and a page
without one shows none of it. Each route answers the member for its own account's objects."""

import re

import asyncpg
import httpx
import pytest
from starlette.routing import Route

from service.console.app import Config, Console
from service.settings import Settings
from tests.support.console import accounts, operated, page_token, sending_campaign, signed_in
from tests.support.web import http_server

pytestmark = pytest.mark.anyio
# what the other account's objects show: its campaign, addresses, webhook, message and sequence
OTHERS = ("Other autumn", "other-", "hooks.example.org/other", "Receipt of other", "Welcome to other")


def console_routes(pool: asyncpg.Pool) -> list[tuple[str, str]]:
    """(method, path pattern) of every route of the console but those open to all (the sign-in, static files)."""
    console = Console(pool, Config.from_settings(Settings()))
    found = [
        (method, route.path)
        for route in console.routes
        if isinstance(route, Route) and not route.path.startswith(Console.OPEN)
        for method in sorted(route.methods or ())
        if method != "HEAD"
    ]
    assert len(found) >= 5 and all(isinstance(r, Route) or r.path in Console.OPEN for r in console.routes)
    return found


def filled(pattern: str, values: dict[str, int]) -> str:
    """The path with each {name} or {name:type} given its value; a parameter the test does not know fails it,
    so a route with a new kind of object is given one."""
    return "/console" + re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: str(values[m.group(1)]), pattern)


async def test_every_route_refuses_a_signed_out_client_and_another_accounts_member(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await accounts(conn, "acme", "other")
    mine = {"campaign_id": await sending_campaign(conn, "acme", "Acme spring"), **await operated(conn, "acme")}
    theirs = {"campaign_id": await sending_campaign(conn, "other", "Other autumn"), **await operated(conn, "other")}
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=1)
    try:
        routes = console_routes(pool)
    finally:
        await pool.close()
    async with http_server(dsn) as base:
        async with httpx.AsyncClient(base_url=base) as stranger:
            for method, pattern in routes:
                answer = await stranger.request(method, filled(pattern, mine))
                if method == "GET":
                    assert (answer.status_code, answer.headers.get("location")) == (303, "/console/login"), pattern
                else:
                    assert answer.status_code == 401, (method, pattern, answer.status_code)
        async with signed_in(base, "acme-member") as member:
            token = await page_token(member)
            dashboard = (await member.get("/console/")).text  # before the routes' POSTs pause and cancel it
            assert "Acme spring" in dashboard and "10 sent of 40" in dashboard and "4 in doubt" in dashboard
            for method, pattern in routes:
                if pattern == "/logout":
                    continue  # ends the member's session: below
                data = {"form_token": token} if method == "POST" else None
                for params in ({}, {"account": "other"}):
                    answer = await member.request(method, filled(pattern, theirs), params=params, data=data)
                    if "{" in pattern or params:
                        assert answer.status_code == 404 or "Other autumn" not in answer.text, (pattern, params)
                    if "{" in pattern:
                        assert answer.status_code == 404, (pattern, answer.status_code)
                    assert not any(seen in answer.text for seen in OTHERS), (pattern, params)
                    if answer.status_code == 404 and params:  # as for an account that does not exist
                        nosuch = await member.request(
                            method, filled(pattern, theirs), params={"account": "nosuch"}, data=data
                        )
                        assert (nosuch.status_code, nosuch.text.replace("nosuch", "other")) == (404, answer.text)
                    own = await member.request(method, filled(pattern, mine), data=data)
                    # a transition its campaign's state forbids: refused with the service's sentence (409)
                    assert own.status_code == 200 or (method, own.status_code) == ("POST", 409), (pattern, own)
            assert (await member.post("/console/logout", data={"form_token": token})).status_code == 303
            assert (await member.get("/console/")).status_code == 303
        async with signed_in(base, "root") as operator:  # sees every account
            dashboard = (await operator.get("/console/")).text
            assert "Acme spring" in dashboard and "Other autumn" in dashboard
            assert (await operator.get(f"/console/campaigns/{theirs['campaign_id']}/progress")).status_code == 200
            assert (await operator.get(f"/console/campaigns/{theirs['campaign_id'] + 100}/progress")).status_code == 404
