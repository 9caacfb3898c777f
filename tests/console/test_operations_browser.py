"""The operations pages in a real browser (Debian's chromium through Selenium, as tests/console/
test_console_browser.py): a member opens its deliverability, its webhooks, an endpoint's deliveries and replays
the parked one, then its messages and a sequence's funnel; each page at a phone's width (375 px) and a
desktop's (1280 px), without sideways scrolling, with no serious accessibility violation axe-core finds.
Screenshots in test-output/, console-<page>-<width>.png."""

import anyio
import asyncpg
import pytest

from tests.console.test_console_browser import arrived, check, look, signs_in
from tests.console.test_operations import came_back
from tests.support.console import operated, sending_campaign, user
from tests.support.web import http_server
from tests.web.test_http_browser import ARTEFACTS, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.anyio


async def test_replay_a_webhook_delivery_and_look_at_the_operations_pages_in_a_browser(
    conn: asyncpg.Connection, dsn: str, browser
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account)
    await user(conn, "ann@acme.example", "acme")
    campaign = await sending_campaign(conn, "acme", "Spring sale", rows=400)
    await conn.execute("UPDATE einmal.sends SET sent_at = now() - interval '2 days' WHERE status = 'sent'")
    await came_back(conn, campaign, "complaint", 1)
    made = await operated(conn, "acme")
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn) as base:

        def walk() -> dict[str, list[dict]]:
            pages = {}
            browser.get(f"{base}/console/login")
            signs_in(browser, "ann@acme.example")
            for path, h1, name in (
                ("deliverability", "Deliverability", "deliverability"),
                ("webhooks", "Webhook endpoints", "webhooks"),
            ):
                browser.find_element(By.CSS_SELECTOR, f"nav a[href='/console/{path}']").click()
                arrived(browser, h1)
                pages[name] = look(browser, name)
            browser.find_element(By.LINK_TEXT, "https://hooks.example.org/acme").click()
            arrived(browser, f"Webhook {made['endpoint_id']}")
            pages["webhook"] = look(browser, "webhook")
            browser.find_element(By.XPATH, "//main//button[text()='Replay']").click()
            # a live page's element read while htmx swaps it is stale: read again at the next poll
            WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda b: b.current_url.endswith("/replay") and b.find_element(By.ID, "pending").text == "1"
            )
            pages["replayed"] = look(browser, "webhook-replayed")
            browser.find_element(By.CSS_SELECTOR, "nav a[href='/console/messages']").click()
            arrived(browser, "Transactional messages")
            pages["messages"] = look(browser, "messages")
            browser.find_element(By.CSS_SELECTOR, "nav a[href='/console/sequences']").click()
            arrived(browser, "Sequences")
            browser.find_element(By.LINK_TEXT, "Welcome to acme").click()
            arrived(browser, "Welcome to acme")
            pages["sequence"] = look(browser, "sequence")
            return pages

        pages = await anyio.to_thread.run_sync(walk)
    check(pages["deliverability"], "Deliverability", "Complaint rate\n0.98 %", "102 messages delivered")
    check(pages["webhooks"], "Webhook endpoints", "https://hooks.example.org/acme")
    check(pages["webhook"], f"Webhook {made['endpoint_id']}", "Parked\n1", "message.sent", "Replay")
    check(pages["replayed"], f"Webhook {made['endpoint_id']}", "1 parked delivery pending again.", "Parked\n0")
    check(pages["messages"], "Transactional messages", "Receipt of acme", "acme-0@example.org")
    check(pages["sequence"], "Welcome to acme", "Hello from acme", "of 3 on the list")
    state = await conn.fetchval(
        "SELECT state FROM einmal.webhook_deliveries WHERE endpoint_id = $1", made["endpoint_id"]
    )
    actions = await conn.fetch("SELECT action FROM einmal.audit_log WHERE actor = 'console:ann@acme.example'")
    assert (state, [r["action"] for r in actions]) == ("pending", ["console.login", "webhook.replay"])
