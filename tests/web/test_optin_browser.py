"""Double opt-in in a real browser (Debian's chromium through Selenium, as the unsubscribe page's test): a
list's sign-up form is filled in and sent, the confirmation link opens a page with one button that changes
nothing until it is pressed, and pressing it confirms, recording the browser's user agent. Each page at a
phone's width (375 px) and a desktop's, without sideways scrolling; screenshots in test-output/, named
optin-<state>-<width>.png."""

import anyio
import asyncpg
import pytest

from service.mail import confirm
from tests.support.optin import FORM, SECRET, SETTINGS, account_with_list, memberships
from tests.support.web import http_server
from tests.web.test_http_browser import ARTEFACTS, WIDTHS, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.anyio

SAYS = {
    "form": ("Subscribe", "Subscribe to the mailing list"),  # a list without a title: never its name
    "sent": ("Check your inbox", "jane.doe@example.org"),  # the address as typed
    "question": ("Confirm your subscription", "Subscribe j***@example.org to the mailing list from Acme?"),
    "confirmed": ("Subscription confirmed", "j***@example.org is subscribed to the mailing list"),
    "revisit": ("Subscription confirmed", "j***@example.org is subscribed to the mailing list"),
}


def look(driver, state: str) -> list[dict]:
    """The page as loaded now, at each width: title, main text, sideways scrolling, buttons, labelled fields;
    its screenshot kept."""
    from selenium.webdriver.common.by import By

    seen = []
    for width, size in WIDTHS.items():
        driver.set_window_size(*size)
        driver.save_screenshot(str(ARTEFACTS / f"optin-{state}-{width}.png"))
        fields = driver.find_elements(By.TAG_NAME, "input")
        labelled = all(driver.find_elements(By.CSS_SELECTOR, f"label[for='{f.get_attribute('id')}']") for f in fields)
        seen.append(
            {
                "width": width,
                "title": driver.title,
                "text": driver.find_element(By.TAG_NAME, "main").text,
                "sideways": driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth"),
                "viewport": driver.execute_script("return window.innerWidth"),
                "buttons": len(driver.find_elements(By.TAG_NAME, "button")),
                "fields": len(fields),
                "labelled": labelled,
                "scripts": len(driver.find_elements(By.TAG_NAME, "script")),
            }
        )
    return seen


def check(pages: list[dict], state: str, buttons: int, fields: int) -> None:
    title, text = SAYS[state]
    for seen in pages:
        assert seen["title"] == title and text in seen["text"], (state, seen)
        assert not seen["sideways"] and seen["labelled"] and seen["scripts"] == 0, (state, seen)
        assert (seen["buttons"], seen["fields"]) == (buttons, fields), (state, seen)
        if seen["width"] == "phone":
            assert seen["viewport"] <= 375, seen


async def test_sign_up_and_confirm_in_a_browser_at_phone_and_desktop_width(
    conn: asyncpg.Connection, dsn: str, browser
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    _, list_id, _ = await account_with_list(conn, dsn)
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn, SECRET, **SETTINGS) as base:

        def sign_up() -> tuple[list[dict], list[dict]]:
            browser.get(f"{base}{FORM}")
            form = look(browser, "form")
            browser.find_element(By.ID, "email").send_keys("jane.doe@example.org")
            browser.find_element(By.ID, "name").send_keys("Jane")
            browser.find_element(By.TAG_NAME, "button").click()
            WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "h1[role=status]"))
            return form, look(browser, "sent")

        form, sent = await anyio.to_thread.run_sync(sign_up)
        check(form, "form", 1, 2)
        check(sent, "sent", 0, 0)
        row = await conn.fetchrow("SELECT account_id, campaign_id, subscriber_id FROM einmal.sends")
        link = f"{base}/confirm?token={confirm.Signer(SECRET).token(*row)}"

        def visit(state: str) -> list[dict]:
            browser.get(link)
            return look(browser, state)

        check(await anyio.to_thread.run_sync(visit, "question"), "question", 1, 0)
        assert await memberships(conn, list_id) == {"jane.doe@example.org": "unconfirmed"}, "opening it changes nothing"

        def press() -> list[dict]:
            browser.find_element(By.TAG_NAME, "button").click()
            WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "h1[role=status]"))
            return look(browser, "confirmed")

        check(await anyio.to_thread.run_sync(press), "confirmed", 0, 0)
        record = await conn.fetchrow("SELECT state, source, confirmed_agent, confirmed_at FROM einmal.list_members")
        assert (record["state"], record["source"]) == ("confirmed", "form") and "Chrome" in record["confirmed_agent"]
        # a revisit: confirmed, nothing to press
        check(await anyio.to_thread.run_sync(visit, "revisit"), "revisit", 0, 0)
    for state in SAYS:
        for width in WIDTHS:
            assert (ARTEFACTS / f"optin-{state}-{width}.png").stat().st_size > 1000
