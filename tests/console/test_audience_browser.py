"""The audience pages in a real browser (Debian's chromium through Selenium, as tests/console/
test_console_browser.py): a member signs in, opens Subscribers, finds one by its address, opens its page, asks
to erase it, confirms, and is told it is erased; then looks at its lists, a segment and its suppressions. Each
page at a phone's width (375 px) and a desktop's (1280 px), without sideways scrolling, with no serious
accessibility violation axe-core finds. Screenshots in test-output/, console-<page>-<width>.png."""

import anyio
import asyncpg
import pytest

from service.segments import segments
from tests.console.test_console_browser import arrived, check, look, signs_in
from tests.support.console import sending_campaign, user
from tests.support.web import http_server
from tests.web.test_http_browser import ARTEFACTS, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.anyio


async def test_find_a_subscriber_and_erase_it_in_a_browser_at_phone_and_desktop_width(
    conn: asyncpg.Connection, dsn: str, browser
) -> None:
    from selenium.webdriver.common.by import By

    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name, title) VALUES ($1, 'news', 'Weekly news')", account)
    await user(conn, "ann@acme.example", "acme")
    await sending_campaign(conn, "acme", "Spring sale", rows=8)
    await conn.execute(
        'UPDATE einmal.subscribers SET name = \'Bob Example\', attributes = \'{"plan": "pro", "city": "Köln"}\' '
        "WHERE email = 'Springsale-4@example.org'"
    )
    await conn.execute("UPDATE einmal.subscribers SET attributes = '{\"plan\": \"pro\"}' WHERE email LIKE '%-5@%'")
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM einmal.lists AS l, "
        "einmal.subscribers AS s WHERE s.account_id = $1 AND l.account_id = $1",
        account,
    )
    await segments.create(conn, account_id=account, name="pros", rule={"attribute": "plan", "op": "eq", "value": "pro"})
    bob = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'Springsale-4@example.org'")
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn) as base:

        def walk() -> dict[str, list[dict]]:
            pages = {}
            browser.get(f"{base}/console/login")
            signs_in(browser, "ann@acme.example")
            browser.find_element(By.CSS_SELECTOR, "nav a[href='/console/subscribers']").click()
            arrived(browser, "Subscribers")
            browser.find_element(By.ID, "address").send_keys("SPRINGSALE-4@example.org")
            browser.find_element(By.XPATH, "//form[@aria-label='By address']//button").click()
            arrived(browser, "Subscribers")
            pages["found"] = look(browser, "subscribers-found")
            browser.find_element(By.LINK_TEXT, "Springsale-4@example.org").click()
            arrived(browser, "Springsale-4@example.org")
            pages["subscriber"] = look(browser, "subscriber")
            browser.find_element(By.LINK_TEXT, "Erase…").click()
            arrived(browser, "Erase Springsale-4@example.org?")
            pages["confirm"] = look(browser, "subscriber-erase")
            browser.find_element(By.XPATH, "//main//button[text()='Erase']").click()
            arrived(browser, "Subscribers")
            pages["erased"] = look(browser, "subscriber-erased")
            for page, heading in (("lists", "Lists"), ("segments/pros", "pros"), ("suppressions", "Suppressions")):
                browser.get(f"{base}/console/{page}")
                arrived(browser, heading)
                pages[page] = look(browser, page.replace("/", "-"))
            return pages

        pages = await anyio.to_thread.run_sync(walk)
    check(pages["found"], "Subscribers", "Springsale-4@example.org", "Bob Example", "confirmed", "news")
    check(pages["subscriber"], "Springsale-4@example.org", "Status\nconfirmed", "Köln", "Spring sale", "sent", "Erase…")
    check(pages["confirm"], "Erase Springsale-4@example.org?", "cannot be undone", "Keep it")
    check(pages["erased"], "Subscribers", f"Subscriber #{bob} is erased")
    check(pages["lists"], "Lists", "news", "Weekly news", "closed")
    check(pages["segments/pros"], "pros", "Subscribers now\n1", "Springsale-5@example.org")
    check(pages["suppressions"], "Suppressions", "springsale-4@example.org", "erased", "Remove")
    status = await conn.fetchval("SELECT status FROM einmal.subscribers WHERE id = $1", bob)
    actions = await conn.fetch("SELECT action, subject FROM einmal.audit_log WHERE actor = 'console:ann@acme.example'")
    assert (status, [tuple(r) for r in actions]) == (
        "erased",
        [("console.login", ""), ("subscriber.erase", f"subscriber {bob}")],
    )
