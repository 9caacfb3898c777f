"""The console in a real browser (Debian's chromium through Selenium, as the subscriber pages' tests): a
member signs in, sees its account's sending campaign with its progress, opens the audit log and signs out;
each page at a phone's width (375 px) and a desktop's (1280 px), without sideways scrolling, its stylesheet
and htmx loaded under the Content-Security-Policy, and no serious accessibility violation that axe-core
(vendored in tests/support/axe/) finds. Screenshots in test-output/, console-<page>-<width>.png."""

import anyio
import asyncpg
import pytest

from tests.conftest import ROOT
from tests.support.console import PASSWORD, sending_campaign, user
from tests.support.web import http_server
from tests.web.test_http_browser import ARTEFACTS, WIDTHS, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.anyio


AXE = (ROOT / "tests" / "support" / "axe" / "axe.min.js").read_text()
RUN_AXE = """const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]})
   .then(found => done(found.violations.map(v => [v.id, v.impact, v.nodes.map(n => n.target.join(" "))])))
   .catch(error => done([["axe failed", "critical", [String(error)]]]));"""


def serious(driver) -> list[list]:
    """What axe-core finds in the page as it is now, of impact serious or critical."""
    driver.execute_script(AXE)  # through the driver: the page's Content-Security-Policy does not apply
    return [v for v in driver.execute_async_script(RUN_AXE) if v[1] in ("serious", "critical")]


def look(driver, page: str) -> list[dict]:
    """The page at each width: its heading and main text, sideways scrolling, whether the stylesheet and
    htmx took effect; its screenshot kept."""
    from selenium.webdriver.common.by import By

    seen = []
    for width, size in WIDTHS.items():
        driver.set_window_size(*size)
        driver.save_screenshot(str(ARTEFACTS / f"console-{page}-{width}.png"))
        seen.append(
            {
                "width": width,
                "h1": driver.find_element(By.TAG_NAME, "h1").text,
                "text": driver.find_element(By.TAG_NAME, "main").text,
                "sideways": driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth"),
                "viewport": driver.execute_script("return window.innerWidth"),
                "styled": driver.execute_script("return getComputedStyle(document.body).marginTop === '0px'"),
                "htmx": driver.execute_script("return typeof window.htmx === 'object'"),
                "serious": serious(driver),
            }
        )
    return seen


def arrived(driver, h1: str) -> None:
    """Wait for the page whose heading is `h1` (the page before may be read while it goes: stale)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    # a page going away: its elements are stale, or gone from the document its driver looks at
    WebDriverWait(driver, 60, ignored_exceptions=[StaleElementReferenceException, WebDriverException]).until(
        lambda b: b.find_element(By.TAG_NAME, "h1").text == h1
    )


def signs_in(driver, name: str) -> None:
    """On the sign-in page: the form filled in and sent, and the dashboard waited for."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "main button").click()
    arrived(driver, "Campaigns")


def check(pages: list[dict], h1: str, *texts: str) -> None:
    for seen in pages:
        assert seen["h1"] == h1 and all(t in seen["text"] for t in texts), seen
        assert not seen["sideways"] and seen["styled"] and seen["htmx"], seen
        assert seen["serious"] == [], seen  # axe-core: no serious or critical accessibility violation
        if seen["width"] == "phone":
            assert seen["viewport"] <= 375, seen


async def test_sign_in_look_around_and_sign_out_in_a_browser_at_phone_and_desktop_width(
    conn: asyncpg.Connection, dsn: str, browser
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme'), ('other')")
    await user(conn, "ann@acme.example", "acme")
    await sending_campaign(conn, "acme", "Spring sale")
    await sending_campaign(conn, "other", "Not for ann")
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn) as base:

        def walk() -> dict[str, list[dict]]:
            pages = {}
            browser.get(f"{base}/console/")  # signed out: the sign-in page
            WebDriverWait(browser, 60).until(lambda b: b.current_url.endswith("/console/login"))
            pages["login"] = look(browser, "login")
            signs_in(browser, "ann@acme.example")
            pages["dashboard"] = look(browser, "dashboard")
            browser.find_element(By.LINK_TEXT, "Audit log").click()
            arrived(browser, "Audit log")
            pages["audit"] = look(browser, "audit")
            browser.find_element(By.CSS_SELECTOR, ".who button").click()
            arrived(browser, "Sign in")
            pages["signed-out"] = look(browser, "signed-out")
            browser.get(f"{base}/console/audit")
            WebDriverWait(browser, 60).until(lambda b: b.current_url.endswith("/console/login"))
            return pages

        pages = await anyio.to_thread.run_sync(walk)
    check(pages["login"], "Sign in", "Name or email", "Password")
    check(pages["dashboard"], "Campaigns", "Spring sale", "10 sent of 40", "4 in doubt")
    assert all("Not for ann" not in seen["text"] for seen in pages["dashboard"])
    check(pages["audit"], "Audit log", "console.login", "user.add")
    check(pages["signed-out"], "Sign in")
    actions = await conn.fetch("SELECT action FROM einmal.audit_log WHERE actor = 'console:ann@acme.example'")
    assert [r["action"] for r in actions] == ["console.login", "console.logout"]
