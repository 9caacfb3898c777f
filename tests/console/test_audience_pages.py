"""The console's audience pages through real HTTP, signed in as a browser is: a subscriber found by any
spelling of its address or by an attribute (a page at a time), its page (lists, attributes, what was sent to
it) and its erasure after a confirmation; lists with their sign-ups' state; a segment's count and sample;
suppressions listed, found, added and removed. Each change writes its line of the audit log; a POST without the
form's token changes nothing; another account's member finds none of it (404); an operator names the account."""

import asyncpg
import pytest

from service.console.subscribers import ROWS
from service.segments import segments
from tests.support.console import accounts, page_token, sending_campaign, signed_in
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def audited(conn: asyncpg.Connection) -> list[tuple]:
    rows = await conn.fetch(
        "SELECT actor, account_id, action, subject FROM einmal.audit_log "
        "WHERE action LIKE 'subscriber.%' OR action LIKE 'suppression.%' ORDER BY id"
    )
    return [tuple(r) for r in rows]


async def test_find_a_subscriber_see_its_page_and_erase_it_audited_and_hidden_from_others(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await accounts(conn, "acme", "other")
    await sending_campaign(conn, "acme", "Spring", rows=8)
    await conn.execute(
        'UPDATE einmal.subscribers SET name = \'Ann\', attributes = \'{"plan": "pro", "city": "Köln"}\' '
        "WHERE email = 'Spring-4@example.org'"
    )
    ann = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'Spring-4@example.org'")
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id) "
        "SELECT id, $1 FROM einmal.lists WHERE account_id = $2",
        ann,
        ids["acme"],
    )
    await conn.execute(  # more pros than a page holds, in both accounts
        "INSERT INTO einmal.subscribers (account_id, email, email_lower, attributes) "
        "SELECT a, 'pro' || i || '-' || a || '@example.org', 'pro' || i || '-' || a || '@example.org', "
        '\'{"plan": "pro"}\' FROM generate_series(1, $1) AS i, unnest($2::bigint[]) AS a',
        ROWS,
        [ids["acme"], ids["other"]],
    )
    async with http_server(dsn) as base:
        async with signed_in(base, "acme-member") as acme, signed_in(base, "other-member") as other:
            token = await page_token(acme)
            found = await acme.get("/console/subscribers", params={"address": "SPRING-4@Example.org"})
            assert found.status_code == 200 and 'href="/console/subscribers/Spring-4%40example.org"' in found.text
            assert (
                "No subscriber found." in (await acme.get("/console/subscribers", params={"address": "x@y.org"})).text
            )
            pros = (await acme.get("/console/subscribers", params={"attribute": "plan", "value": "pro"})).text
            assert pros.count("@example.org</a>") == ROWS and "Spring-4@example.org" in pros and "-other" not in pros
            more = pros.split('href="/console/subscribers?')[1].split('"')[0].replace("&amp;", "&")
            rest = (await acme.get(f"/console/subscribers?{more}")).text
            assert rest.count("@example.org</a>") == 1 and "Next" not in rest  # ann and 50: 51

            page = await acme.get("/console/subscribers/spring-4@EXAMPLE.org")
            assert page.status_code == 200, page.text
            for seen in ("Spring-4@example.org", "Ann", 'id="status">confirmed<', "news", "Köln", "Spring</a>", "sent"):
                assert seen in page.text, seen
            assert (await other.get("/console/subscribers/Spring-4@example.org")).status_code == 404
            searched = await other.get("/console/subscribers", params={"address": "Spring-4@example.org"})
            assert "No subscriber found." in searched.text and "/console/subscribers/Spring" not in searched.text

            confirm = await acme.get("/console/subscribers/Spring-4@example.org/erase")
            assert confirm.status_code == 200 and "cannot be undone" in confirm.text
            assert (await acme.post("/console/subscribers/Spring-4@example.org/erase", data={})).status_code == 403
            theirs = await page_token(other)
            answer = await other.post("/console/subscribers/Spring-4@example.org/erase", data={"form_token": theirs})
            assert answer.status_code == 404 and "Spring-4" not in answer.text.replace("Spring-4@example.org", "")
            assert await audited(conn) == []

            erased = await acme.post("/console/subscribers/Spring-4@example.org/erase", data={"form_token": token})
            assert erased.status_code == 200 and f"Subscriber #{ann} is erased" in erased.text
            row = await conn.fetchrow("SELECT email, status, attributes FROM einmal.subscribers WHERE id = $1", ann)
            assert tuple(row) == (f"erased-{ann}@erased.invalid", "erased", "{}")
            assert await audited(conn) == [
                ("console:acme-member", ids["acme"], "subscriber.erase", f"subscriber {ann}")
            ]
            assert (await acme.get("/console/subscribers/Spring-4@example.org")).status_code == 404
            again = await acme.post("/console/subscribers/Spring-4@example.org/erase", data={"form_token": token})
            assert again.status_code == 404 and len(await audited(conn)) == 1

        async with signed_in(base, "root") as operator:
            chooser = (await operator.get("/console/subscribers")).text
            assert "Name the account to show." in chooser and 'name="address"' not in chooser
            theirs = await operator.get(
                "/console/subscribers", params={"account": "other", "attribute": "plan", "value": "pro"}
            )
            assert (
                "pro1-" in theirs.text
                and 'href="/console/subscribers/pro1-' in theirs.text
                and "?account=other" in theirs.text
            )
            email = f"pro1-{ids['other']}@example.org"
            assert (await operator.get(f"/console/subscribers/{email}", params={"account": "other"})).status_code == 200
            assert (await operator.get(f"/console/subscribers/{email}", params={"account": "acme"})).status_code == 404


async def test_lists_segments_and_suppressions_of_an_account(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await accounts(conn, "acme", "other")
    await sending_campaign(conn, "acme", "Spring", rows=8)
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM einmal.lists AS l, "
        "einmal.subscribers AS s WHERE l.account_id = $1 AND s.account_id = $1",
        ids["acme"],
    )
    await conn.execute("UPDATE einmal.subscribers SET attributes = '{\"plan\": \"pro\"}' WHERE email LIKE 'Spring-_@%'")
    await conn.execute("UPDATE einmal.subscribers SET attributes = '{}' WHERE email IN ('Spring-1@example.org')")
    await conn.execute(
        "INSERT INTO einmal.lists (account_id, name, form_open, form_token) VALUES ($1, 'open', true, $2)",
        ids["acme"],
        "A" * 22,
    )
    await segments.create(
        conn, account_id=ids["acme"], name="pros", rule={"attribute": "plan", "op": "eq", "value": "pro"}
    )
    await segments.create(conn, account_id=ids["other"], name="theirs", rule={"member": "news"})
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower, reason) "
        "VALUES ($1, 'spring-2@example.org', 'bounced')",
        ids["acme"],
    )
    async with http_server(dsn) as base:
        async with signed_in(base, "acme-member") as acme, signed_in(base, "other-member") as other:
            token = await page_token(acme)
            lists = (await acme.get("/console/lists")).text
            assert '<td data-label="List">news</td>' in lists and '<td data-label="Members">8</td>' in lists
            assert ">closed<" in lists and "open: <a href=" in lists and "/AAAAAAAAAAAAAAAAAAAAAA" in lists

            listed = (await acme.get("/console/segments")).text
            assert 'href="/console/segments/pros"' in listed and "theirs" not in listed
            pros = (await acme.get("/console/segments/pros")).text
            assert (
                'id="count">7<' in pros and "Of them suppressed</dt><dd>1<" in pros and "Spring-2@example.org" in pros
            )
            assert "Spring-1@example.org" not in pros
            assert (await acme.get("/console/segments/theirs")).status_code == 404
            assert (await other.get("/console/segments/pros")).status_code == 404

            shown = (await acme.get("/console/suppressions")).text
            assert "spring-2@example.org" in shown and "bounced" in shown
            assert "is not suppressed" in (await acme.get("/console/suppressions", params={"address": "x@y.org"})).text
            assert (
                await acme.post("/console/suppressions", data={"email": "Bob@Example.org", "reason": "asked"})
            ).status_code == 403
            bad = await acme.post(
                "/console/suppressions", data={"form_token": token, "email": "no address", "reason": "x"}
            )
            assert bad.status_code == 422 and "invalid address" in bad.text
            added = await acme.post(
                "/console/suppressions", data={"form_token": token, "email": "Bob@Example.org", "reason": "asked"}
            )
            assert added.status_code == 200 and "Suppressed bob@example.org." in added.text
            again = await acme.post(
                "/console/suppressions", data={"form_token": token, "email": "bob@example.org", "reason": "x"}
            )
            assert "bob@example.org was suppressed already." in again.text
            found = (await acme.get("/console/suppressions", params={"address": "BOB@example.org"})).text
            assert "asked" in found and "spring-2" not in found
            theirs = await page_token(other)
            assert "bob@example.org" not in (await other.get("/console/suppressions")).text
            refused = await other.post("/console/suppressions/bob@example.org/remove", data={"form_token": theirs})
            assert refused.status_code == 404
            removed = await acme.post("/console/suppressions/bob@example.org/remove", data={"form_token": token})
            assert removed.status_code == 200 and "bob@example.org may be mailed again." in removed.text
            assert (
                await acme.post("/console/suppressions/bob@example.org/remove", data={"form_token": token})
            ).status_code == 404
            member = ("console:acme-member", ids["acme"])
            assert await audited(conn) == [
                (*member, "suppression.add", "bob@example.org"),
                (*member, "suppression.remove", "bob@example.org"),
            ]
            assert (
                await conn.fetchval("SELECT count(*) FROM einmal.suppressions WHERE account_id = $1", ids["acme"]) == 1
            )
        async with signed_in(base, "root") as operator:
            assert "Name the account to show." in (await operator.get("/console/suppressions")).text
            seen = (await operator.get("/console/segments", params={"account": "other"})).text
            assert 'href="/console/segments/theirs?account=other"' in seen
