"""A campaign's page in a real browser (Debian's chromium through Selenium, as tests/console/
test_console_browser.py): a member signs in, opens the campaigns list, opens a draft, approves it and sees its
status change; the list and the campaign's page before and after at a phone's width (375 px) and a desktop's
(1280 px), with no serious accessibility violation axe-core finds. Screenshots in test-output/,
console-<page>-<width>.png."""

import anyio
import asyncpg
import httpx
import pytest

from service.accounts import keys
from tests.console.test_console_browser import arrived, check, look, signs_in
from tests.support.console import sending_campaign, user
from tests.support.web import http_server
from tests.web.test_http_browser import ARTEFACTS, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.anyio

DRAFT = {"name": "Autumn sale", "subject": "Leaves", "from": "news@example.com", "text": "Hi", "lists": ["news"]}


async def test_open_a_draft_and_approve_it_in_a_browser_at_phone_and_desktop_width(
    conn: asyncpg.Connection, dsn: str, browser
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account)
    await user(conn, "ann@acme.example", "acme")
    key = await keys.mint_for(conn, account="acme", name="", scope="write")
    await sending_campaign(conn, "acme", "Spring sale")
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn) as base:
        async with httpx.AsyncClient(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {key}"}) as api:
            draft = (await api.post("/campaigns", json=DRAFT)).json()["id"]

        def walk() -> dict[str, list[dict]]:
            pages = {}
            browser.get(f"{base}/console/login")
            signs_in(browser, "ann@acme.example")
            browser.find_element(By.CSS_SELECTOR, "nav a[href='/console/campaigns']").click()
            arrived(browser, "All campaigns")
            pages["campaigns"] = look(browser, "campaigns")
            browser.find_element(By.LINK_TEXT, "Autumn sale").click()
            arrived(browser, "Autumn sale")
            pages["draft"] = look(browser, "campaign-draft")
            browser.find_element(By.XPATH, "//main//button[text()='Approve']").click()
            # a live page's element read while htmx swaps it is stale: read again at the next poll
            WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda b: b.current_url.endswith("/approve") and b.find_element(By.ID, "status").text == "approved"
            )
            pages["approved"] = look(browser, "campaign-approved")
            return pages

        pages = await anyio.to_thread.run_sync(walk)
    check(pages["campaigns"], "All campaigns", "Autumn sale", "Spring sale", "draft", "sending")
    check(pages["draft"], "Autumn sale", "Status\ndraft", "Approve", "Cancel")
    check(pages["approved"], "Autumn sale", "Approved.", "Status\napproved", "Cancel")
    assert all("Approve\n" not in seen["text"] for seen in pages["approved"])
    status = await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", draft)
    actions = await conn.fetch("SELECT action FROM einmal.audit_log WHERE actor = 'console:ann@acme.example'")
    assert (status, [r["action"] for r in actions]) == ("approved", ["console.login", "campaign.approve"])
