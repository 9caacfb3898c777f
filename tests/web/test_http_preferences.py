"""The preference page of the unsubscribe link, over real HTTP against a real PostgreSQL: the lists of the
link's account that the address is on (never another account's), a POST that leaves one list (its
membership gone, the others kept, nothing suppressed, the address's rows not yet sent in campaigns no other
of their lists reaches stopped), the one-click "leave all" as before, and links that must change nothing."""

import re

import asyncpg
import httpx
import pytest

from service.addresses import email_key
from service.mail.unsubscribe import TEST_SUBSCRIBER
from service.subscribers import texts
from tests.support.web import ONE_CLICK, http_server, subscriber, token, written

pytestmark = pytest.mark.anyio


async def on_lists(conn: asyncpg.Connection, account_id: int, subscriber_id: int, *names: str) -> list[int]:
    """The account's lists `names` (made when missing, titled as named), with the subscriber on each; their ids."""
    ids = []
    for name in names:
        list_id = await conn.fetchval(
            """
            INSERT INTO einmal.lists (account_id, name, title) VALUES ($1, $2, $2)
            ON CONFLICT (account_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id""",
            account_id,
            name,
        )
        await conn.execute(
            "INSERT INTO einmal.list_members (list_id, subscriber_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            list_id,
            subscriber_id,
        )
        ids.append(list_id)
    return ids


async def memberships(conn: asyncpg.Connection) -> list[tuple[str, str, str]]:
    """(account, list, address) of every membership."""
    rows = await conn.fetch("""
        SELECT a.name AS account, l.name AS list, s.email FROM einmal.list_members m
        JOIN einmal.lists l ON l.id = m.list_id JOIN einmal.accounts a ON a.id = l.account_id
        JOIN einmal.subscribers s ON s.id = m.subscriber_id ORDER BY 1, 2, 3""")
    return [tuple(r) for r in rows]


def shown_lists(page: httpx.Response) -> list[str]:
    return re.findall(r"<li><span>(.*?)</span>", page.text)


def leave_actions(page: httpx.Response) -> list[str]:
    return re.findall(r'action="(\?token=[^"]*&amp;leave=\d+)"', page.text)


async def two_accounts(conn: asyncpg.Connection) -> tuple[tuple[int, int, int], dict[str, int], int]:
    """Ann of acme on News and Offers (acme also has Staff, without her), and the same address at
    globex on its list Secret: (acme's ids, acme's list ids by name, globex's list id)."""
    ids = await subscriber(conn, email="Ann.Example@Example.org", account="acme")
    news, offers = await on_lists(conn, ids[0], ids[2], "News & <more>", "Offers")
    other = await conn.fetchval(
        "SELECT id FROM einmal.subscribers WHERE account_id = $1 AND email = 'x@example.org'", ids[0]
    )
    (staff,) = await on_lists(conn, ids[0], other, "Staff")
    globex = await subscriber(conn, email="ann.example@example.org", account="globex")
    (secret,) = await on_lists(conn, globex[0], globex[2], "Globex secret")
    return ids, {"news": news, "offers": offers, "staff": staff}, secret


async def test_the_page_lists_the_account_s_lists_the_address_is_on_and_nothing_else(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids, lists, secret = await two_accounts(conn)
    before = await memberships(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        page = await client.get(f"{base}/unsubscribe?token={token(ids)}")
    assert page.status_code == 200
    assert shown_lists(page) == ["News &amp; &lt;more&gt;", "Offers"]  # by name, escaped
    assert "Staff" not in page.text and "Globex" not in page.text and "x@example.org" not in page.text
    assert sorted(leave_actions(page)) == sorted(
        f"?token={token(ids)}&amp;leave={lists[name]}" for name in ("news", "offers")
    )
    assert 'aria-label="Leave Offers"' in page.text and '<h2 id="lists-heading">' in page.text
    assert 'name="List-Unsubscribe" value="One-Click"' in page.text  # "leave all" is still there
    assert await memberships(conn) == before and await written(conn) == (0, 0)  # a GET writes nothing
    assert secret not in lists.values()


async def test_leaving_one_list_removes_that_membership_only_and_suppresses_nothing(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids, lists, _ = await two_accounts(conn)
    # a second copy of the mailbox in acme, also on News: the mailbox leaves, whichever copy the link names
    copy = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) "
        "VALUES ($1, 'ann.example@example.org', $2) RETURNING id",
        ids[0],
        email_key("ann.example@example.org"),
    )
    await on_lists(conn, ids[0], copy, "News & <more>")
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={token(ids)}&leave={lists['news']}"
        left = await client.post(url, headers={"Accept": "text/html"})
        again = await client.post(url)
    assert left.status_code == 200 and 'role="status"' in left.text
    assert "You left “News &amp; &lt;more&gt;”" in left.text
    assert shown_lists(left) == ["Offers"]
    assert await memberships(conn) == [
        ("acme", "Offers", "Ann.Example@Example.org"),
        ("acme", "Staff", "x@example.org"),
        ("globex", "Globex secret", "ann.example@example.org"),
    ]
    assert await written(conn) == (0, 0)  # leaving a list is not an unsubscribe from the account
    assert again.status_code == 200 and texts.text("en", "not_on_list") in again.text  # a repeat: nothing left


async def test_leaving_a_list_stops_the_rows_of_campaigns_that_no_other_of_their_lists_reaches(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids, lists, _ = await two_accounts(conn)
    account, _, ann = ids

    async def campaign(status: str, targets: list[int], row: str) -> int:
        campaign_id = await conn.fetchval(
            """
            INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
            VALUES ($1, 'c', 's', 'news@example.com', 'b', $2, $3) RETURNING id""",
            account,
            targets,
            status,
        )
        await conn.execute(
            """
            INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                      claimed_by)
            SELECT $1::bigint, $2, s.id, s.email, s.email_lower, 'campaign:' || $1::bigint || ':' || s.id, $4::text,
                   CASE WHEN $4::text IN ('claimed', 'sending') THEN 'some-node/1' END
            FROM einmal.subscribers s WHERE s.account_id = $2 AND s.id = $3""",
            campaign_id,
            account,
            ann,
            row,
        )
        return campaign_id

    only_news = await campaign("sending", [lists["news"]], "queued")
    only_news_claimed = await campaign("paused", [lists["news"]], "claimed")
    on_the_wire = await campaign("sending", [lists["news"]], "sending")
    news_and_offers = await campaign("sending", [lists["news"], lists["offers"]], "queued")
    only_offers = await campaign("sending", [lists["offers"]], "queued")
    # a sign-up to Staff she has not confirmed: no build reaches her through it, so it keeps nothing
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id, state) VALUES ($1, $2, 'unconfirmed')",
        lists["staff"],
        ann,
    )
    news_and_unconfirmed = await campaign("sending", [lists["news"], lists["staff"]], "queued")
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        left = await client.post(f"{base}/unsubscribe?token={token(ids)}&leave={lists['news']}")
    assert left.status_code == 200
    rows = {
        r["campaign_id"]: (r["status"], r["claimed_by"], r["last_reply"])
        for r in await conn.fetch(
            "SELECT campaign_id, status, claimed_by, last_reply FROM einmal.sends WHERE subscriber_id = $1", ann
        )
    }
    assert rows == {
        only_news: ("suppressed", None, "left the list"),
        only_news_claimed: ("suppressed", None, "left the list"),
        on_the_wire: ("sending", "some-node/1", None),  # on the wire already: its answer decides
        news_and_offers: ("queued", None, None),  # Offers still reaches her
        only_offers: ("queued", None, None),
        news_and_unconfirmed: ("suppressed", None, "left the list"),
    }


async def test_leave_all_is_the_one_click_unsubscribe_of_the_account_as_before(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids, _, _ = await two_accounts(conn)
    before = await memberships(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={token(ids)}"
        done = await client.post(url, data=ONE_CLICK)
        revisit = await client.get(url)
    assert done.status_code == 200 and done.text == ""
    rows = await conn.fetch("SELECT account_id, email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in rows] == [(ids[0], "ann.example@example.org", "unsubscribe")]
    assert await memberships(conn) == before  # the suppression stops all mail; the lists stay as they were
    assert texts.text("en", "already_heading") in revisit.text and shown_lists(revisit) == []


async def test_a_link_of_one_account_never_leaves_another_account_s_list(conn: asyncpg.Connection, dsn: str) -> None:
    ids, lists, secret = await two_accounts(conn)
    before = await memberships(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        foreign = await client.post(f"{base}/unsubscribe?token={token(ids)}&leave={secret}")
        not_on_it = await client.post(f"{base}/unsubscribe?token={token(ids)}&leave={lists['staff']}")
        nowhere = await client.post(f"{base}/unsubscribe?token={token(ids)}&leave=999999")
    # another account's list, a list of the account she is not on, and no list: the same answer
    for page in (foreign, not_on_it, nowhere):
        assert page.status_code == 200 and texts.text("en", "not_on_list") in page.text
        assert "Globex" not in page.text and "Staff" not in page.text
        assert shown_lists(page) == ["News &amp; &lt;more&gt;", "Offers"]
    assert await memberships(conn) == before and await written(conn) == (0, 0)


async def test_a_tampered_foreign_test_or_malformed_link_changes_and_shows_nothing(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids, lists, secret = await two_accounts(conn)
    globex_ids = (await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'globex'"), ids[1], ids[2])
    before = await memberships(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        base_url = f"{base}/unsubscribe?token="
        forged = await client.get(f"{base_url}{token(ids, 'forged')}")
        forged_leave = await client.post(f"{base_url}{token(ids, 'forged')}&leave={lists['news']}")
        # a genuine token with the ids of another account: its subscriber is not that account's
        crossed = await client.post(f"{base_url}{token(globex_ids)}&leave={secret}")
        crossed_page = await client.get(f"{base_url}{token(globex_ids)}")
        test = await client.post(
            f"{base_url}{token((ids[0], ids[1], TEST_SUBSCRIBER))}&leave={lists['news']}",
            headers={"Accept": "text/html"},
        )
        bad = [await client.post(f"{base_url}{token(ids)}&leave={value}") for value in ("x", "-1", "1e3", "", "9" * 40)]
        twice = await client.post(f"{base_url}{token(ids)}&leave={lists['news']}&leave={lists['offers']}")
    assert forged.status_code == forged_leave.status_code == 400
    assert crossed.status_code == crossed_page.status_code == 404
    for page in (forged, forged_leave, crossed, crossed_page, test):
        assert shown_lists(page) == [] and "News" not in page.text and "Globex" not in page.text
    assert test.status_code == 200 and texts.text("en", "test") in test.text
    assert [page.status_code for page in (*bad, twice)] == [400] * 6
    assert all(page.text == "The list to leave is not a list's id." for page in (*bad, twice))
    assert await memberships(conn) == before and await written(conn) == (0, 0)


async def test_after_the_last_list_the_page_says_so_in_the_campaign_s_language(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn, email="jane.doe@example.org")
    (only,) = await on_lists(conn, ids[0], ids[2], "Wochenpost")
    await conn.execute("UPDATE einmal.campaigns SET language = 'de' WHERE id = $1", ids[1])
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        left = await client.post(f"{base}/unsubscribe?token={token(ids)}&leave={only}")
    assert '<html lang="de">' in left.text and "Sie haben „Wochenpost“ verlassen." in left.text
    assert "<strong>j***@example.org</strong> steht auf keiner Liste von" in left.text
    assert shown_lists(left) == [] and await memberships(conn) == []
