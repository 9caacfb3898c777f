"""Every console route, taken from the app itself so that a route added later is covered too, refuses a
client that is not signed in (a GET is sent to the sign-in page, anything else is 401), refuses a POST without
the form's token (403) and shows a member nothing of another account: a route naming another account's object
is 404, as in the API, and a page without one shows none of it. Each route answers the member for its own
account's objects."""

import re

import asyncpg
import httpx
import pytest
from starlette.routing import Route

from service.console.app import Config, Console
from service.segments import segments
from service.settings import Settings
from service.subscribers import suppressions
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


# what a POST's form holds besides its token, by route
FIELDS = {"/suppressions": {"email": "new@example.org", "reason": "test"}}


def filled(pattern: str, values: dict[str, object]) -> str:
    """The path with each {name} or {name:type} given its value; a parameter the test does not know fails it,
    so a route with a new kind of object is given one."""
    return "/console" + re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: str(values[m.group(1)]), pattern)


async def test_every_route_refuses_a_signed_out_client_and_another_accounts_member(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await accounts(conn, "acme", "other")
    mine = await sending_campaign(conn, "acme", "Acme spring")
    theirs = await sending_campaign(conn, "other", "Other autumn")
    mine_ops, theirs_ops = await operated(conn, "acme"), await operated(conn, "other")
    await segments.create(
        conn, account_id=ids["acme"], name="pros", rule={"attribute": "plan", "op": "eq", "value": "pro"}
    )
    await segments.create(conn, account_id=ids["other"], name="theirs", rule={"member": "news"})
    for account, mailbox in (
        ("acme", "gone-0@example.org"),
        ("acme", "gone-1@example.org"),
        ("other", "gone-x@example.org"),
    ):
        await suppressions.suppress(conn, ids[account], [mailbox], "test")
    # each route's objects: another account's, and the member's own (one per round: a POST may erase or remove it)
    their_values = {
        "campaign_id": theirs,
        "email": "Otherautumn-1@example.org",
        "segment_name": "theirs",
        "mailbox": "gone-x@example.org",
        **theirs_ops,
    }
    my_values = [
        {
            "campaign_id": mine,
            "email": f"Acmespring-{n + 1}@example.org",
            "segment_name": "pros",
            "mailbox": f"gone-{n}@example.org",
            **mine_ops,
        }
        for n in range(2)
    ]
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=1)
    try:
        routes = console_routes(pool)
    finally:
        await pool.close()
    async with http_server(dsn) as base:
        async with httpx.AsyncClient(base_url=base) as stranger:
            for method, pattern in routes:
                answer = await stranger.request(method, filled(pattern, my_values[0]))
                if method == "GET":
                    assert (answer.status_code, answer.headers.get("location")) == (303, "/console/login"), pattern
                else:
                    assert answer.status_code == 401, (method, pattern, answer.status_code)
        async with signed_in(base, "acme-member") as member:
            token = await page_token(member)
            dashboard = (await member.get("/console/")).text  # before the routes' POSTs pause and cancel it
            assert "Acme spring" in dashboard and "10 sent of 40" in dashboard and "4 in doubt" in dashboard
            for pattern in (p for m, p in routes if m == "POST"):  # without the form's token: refused, nothing done
                for data in (FIELDS.get(pattern, {}), {**FIELDS.get(pattern, {}), "form_token": "forged"}):
                    answer = await member.post(filled(pattern, my_values[0]), data=data)
                    assert answer.status_code == 403, (pattern, answer.status_code)
            assert "Acme spring" in (await member.get("/console/")).text  # still signed in
            for method, pattern in routes:
                if pattern == "/logout":
                    continue  # ends the member's session: below
                for n, params in enumerate(({}, {"account": "other"})):
                    data = {"form_token": token, **FIELDS.get(pattern, {})} if method == "POST" else None
                    answer = await member.request(method, filled(pattern, their_values), params=params, data=data)
                    if "{" in pattern or params:
                        assert answer.status_code == 404 or "Other autumn" not in answer.text, (pattern, params)
                    if "{" in pattern:
                        assert answer.status_code == 404, (pattern, answer.status_code)
                    assert not any(seen in answer.text for seen in OTHERS), (pattern, params)
                    if answer.status_code == 404 and params:  # as for an account that does not exist
                        nosuch = await member.request(
                            method, filled(pattern, their_values), params={"account": "nosuch"}, data=data
                        )
                        assert (nosuch.status_code, nosuch.text.replace("nosuch", "other")) == (404, answer.text)
                    own = await member.request(method, filled(pattern, my_values[n]), data=data)
                    # a transition its campaign's state forbids (409), a form sent without its fields or a preview
                    # of a campaign whose lists have nobody (422): refused with the service's sentence on the page
                    refused = own.status_code in (409, 422) and 'class="error" role="alert"' in own.text
                    assert own.status_code == 200 or refused, (pattern, own, own.text)
            # the member's own objects were changed, the other account's not
            erased = "SELECT a.name, count(*) FROM einmal.subscribers JOIN einmal.accounts AS a ON a.id = account_id"
            assert [tuple(r) for r in await conn.fetch(erased + " WHERE status = 'erased' GROUP BY 1")] == [("acme", 2)]
            left = "SELECT a.name, email_lower FROM einmal.suppressions JOIN einmal.accounts AS a ON a.id = account_id"
            assert sorted(tuple(r) for r in await conn.fetch(left + " WHERE reason <> 'erased'")) == [
                ("acme", "new@example.org"),
                ("other", "gone-x@example.org"),
            ]
            assert (await member.post("/console/logout", data={"form_token": token})).status_code == 303
            assert (await member.get("/console/")).status_code == 303
        async with signed_in(base, "root") as operator:  # sees every account
            dashboard = (await operator.get("/console/")).text
            assert "Acme spring" in dashboard and "Other autumn" in dashboard
            assert (await operator.get(f"/console/campaigns/{theirs}/progress")).status_code == 200
            assert (await operator.get(f"/console/campaigns/{theirs + 100}/progress")).status_code == 404
