"""A campaign made and sent from the console in a real browser (Debian's chromium through Selenium, as
tests/console/test_console_browser.py), with a real node sending to a real SMTP server (aiosmtpd): a member
signs in, fills in the new campaign's form, previews the message (its HTML in a sandboxed frame), sends a test,
approves it and watches its progress until it is sent, its chart drawn. Each page at a phone's width (375 px)
and a desktop's (1280 px), with no serious accessibility violation axe-core finds; screenshots in
test-output/, console-<page>-<width>.png."""

import anyio
import asyncpg
import pytest

from tests.console.test_console_browser import arrived, check, look, signs_in
from tests.support.console import user
from tests.support.pipeline import Received, node_settings, recording_server, running_node, seed
from tests.support.web import http_server
from tests.web.test_http_browser import ARTEFACTS, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.anyio

PEOPLE = [f"reader{i:02d}@example.org" for i in range(30)]
FIELDS = {
    "name": "Spring news",
    "subject": "Spring, {{ name }}",
    "from": "news@example.com",
    "lists": "default",
    "text": "Hello {{ name }}. Leave: {{ unsubscribe_url }}",
    "html": "<h1>Hello {{ name }}</h1><p><a href='{{ unsubscribe_url }}'>Leave</a></p>",
}


async def test_create_preview_test_approve_and_watch_a_campaign_go_out_in_a_browser(
    conn: asyncpg.Connection, dsn: str, browser
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    await seed(conn, PEOPLE)  # the account acme, its list `default` of 30, and a draft made elsewhere
    await user(conn, "ann@acme.example", "acme")
    received = Received(delay=0.2)  # slow enough to be seen sending
    ARTEFACTS.mkdir(exist_ok=True)
    async with recording_server(received) as port, running_node(node_settings(dsn, port, smtp_connections=1)):
        async with http_server(dsn, smtp_host="127.0.0.1", smtp_port=port) as base:

            def walk() -> tuple[dict[str, list[dict]], dict[str, str]]:
                pages, seen = {}, {}
                browser.get(f"{base}/console/login")
                signs_in(browser, "ann@acme.example")
                browser.find_element(By.CSS_SELECTOR, "nav a[href='/console/campaigns']").click()
                arrived(browser, "All campaigns")
                browser.find_element(By.LINK_TEXT, "New campaign").click()
                arrived(browser, "New campaign")
                pages["new"] = look(browser, "campaign-new")
                for name, value in FIELDS.items():
                    field = browser.find_element(By.ID, name)
                    field.clear()
                    field.send_keys(value)
                browser.find_element(By.XPATH, "//main//button[text()='Create the draft']").click()
                arrived(browser, "Spring news")
                pages["created"] = look(browser, "campaign-created")

                browser.find_element(By.LINK_TEXT, "Preview and test").click()
                arrived(browser, "Preview of Spring news")
                frame = browser.find_element(By.CSS_SELECTOR, "iframe.html")
                seen["sandbox"] = frame.get_attribute("sandbox")
                browser.switch_to.frame(frame)
                seen["frame"] = browser.find_element(By.TAG_NAME, "h1").text
                browser.switch_to.default_content()
                browser.find_element(By.ID, "to").send_keys("qa@example.net")
                browser.find_element(By.XPATH, "//main//button[text()='Send a test']").click()
                WebDriverWait(browser, 60).until(lambda b: b.current_url.endswith("/test"))
                arrived(browser, "Preview of Spring news")
                pages["preview"] = look(browser, "campaign-preview")

                browser.find_element(By.XPATH, "//main//button[text()='Approve']").click()
                WebDriverWait(browser, 60).until(lambda b: b.current_url.endswith("/approve"))
                arrived(browser, "Spring news")
                seen["approved"] = browser.find_element(By.ID, "status").text
                link = browser.current_url.removesuffix("/approve")
                # the campaign's page while it sends: its progress asked again by htmx, no reload; an element read
                # while htmx swaps its fragment is stale, and read again at the next poll
                stale = [StaleElementReferenceException]
                with_status = WebDriverWait(browser, 60, poll_frequency=0.5, ignored_exceptions=stale)
                with_status.until(lambda b: b.get(link) or b.find_element(By.ID, "status").text != "approved")
                seen["then"] = with_status.until(lambda b: b.find_element(By.ID, "status").text)
                seen["progress"] = WebDriverWait(browser, 90, ignored_exceptions=stale).until(
                    lambda b: (
                        (text := b.find_element(By.CSS_SELECTOR, ".progress span").text).endswith("· sent") and text
                    )
                )
                browser.get(link)
                arrived(browser, "Spring news")
                pages["sent"] = look(browser, "campaign-sent")
                return pages, seen

            pages, seen = await anyio.to_thread.run_sync(walk)
    check(pages["new"], "New campaign", "Name", "Subject", "From", "Lists", "Text body", "HTML body")
    check(pages["created"], "Spring news", "Created", "Status\ndraft", "Approve", "Preview and test")
    check(pages["preview"], "Preview of Spring news", "Test message sent to qa@example.net", "Hello Name 1.")
    assert (seen["sandbox"], seen["frame"], seen["approved"]) == ("", "Hello Name 1", "approved"), seen
    assert seen["then"] in ("sending", "sent") and seen["progress"] == "30 sent of 30 · sent", seen
    check(pages["sent"], "Spring news", "Status\nsent", "sent: 30", "Over time")
    assert sorted(rcpt for _, rcpt, _ in received.messages) == sorted([*PEOPLE, "qa@example.net"])
    actions = await conn.fetch("SELECT action FROM einmal.audit_log WHERE actor = 'console:ann@acme.example'")
    assert [r["action"] for r in actions] == ["console.login", "campaign.create", "campaign.approve"]
