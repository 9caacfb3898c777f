"""The unsubscribe page in a real browser: Debian's chromium, driven by chromedriver through
Selenium, opens the link, presses the button and sees the confirmation; the suppression is in
the database. A screenshot of each page is kept in test-output/ (at the repository's root)."""

import os
import shutil
import tempfile
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.conftest import ROOT
from tests.support.web import http_server, subscriber, token, written

pytestmark = pytest.mark.anyio

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTEFACTS = ROOT / "test-output"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=900,700"]


@pytest.fixture
def browser():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromium-driver are missing: .ci/run installs them")
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for a driver online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="einmal-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


async def test_the_page_in_a_browser_unsubscribes_when_the_button_is_pressed(
        conn: asyncpg.Connection, dsn: str, browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    ids = await subscriber(conn, email="jane.doe@example.org", account="Acme News")
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn) as base:
        link = f"{base}/unsubscribe?token={token(ids)}"

        def open_page() -> tuple[str, str]:
            browser.get(link)
            browser.save_screenshot(str(ARTEFACTS / "unsubscribe-page.png"))
            return browser.title, browser.find_element(By.TAG_NAME, "main").text

        title, text = await anyio.to_thread.run_sync(open_page)
        assert title == "Unsubscribe"
        assert "j***@example.org" in text and "Acme News" in text and "Spring news" in text
        assert await written(conn) == (0, 0)  # opening the page changed nothing

        def press() -> tuple[str, str, str]:
            button = browser.find_element(By.TAG_NAME, "button")
            button.click()
            # the confirmation has loaded: wait for it, however slowly the form post is answered
            WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "h1[role=status]"))
            browser.save_screenshot(str(ARTEFACTS / "unsubscribe-confirmation.png"))
            return browser.title, browser.find_element(By.TAG_NAME, "main").text, browser.current_url

        title, text, url = await anyio.to_thread.run_sync(press)
    assert title == "Unsubscribed" and "You are unsubscribed" in text and "j***@example.org" in text
    assert url == link
    rows = await conn.fetch("SELECT account_id, email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in rows] == [(ids[0], "jane.doe@example.org", "unsubscribe")]
    assert await written(conn) == (1, 1)
    assert (ARTEFACTS / "unsubscribe-page.png").stat().st_size > 1000
