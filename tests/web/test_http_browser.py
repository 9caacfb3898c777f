"""The unsubscribe page in a real browser: Debian's chromium, driven by chromedriver through
Selenium, opens each of its states — the question, the confirmation after the button, the revisit
(already unsubscribed), an invalid link and a test message's link — in English and in German, at a
phone's width (375 px) and a desktop's. A screenshot of each is kept in test-output/ (at the
repository's root), named unsubscribe-<state>-<language>-<width>.png."""

import os
import shutil
import tempfile
from pathlib import Path

import anyio
import asyncpg
import pytest

from service.mail.unsubscribe import TEST_SUBSCRIBER
from tests.conftest import ROOT
from tests.support.web import http_server, subscriber, token, written

pytestmark = pytest.mark.anyio

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTEFACTS = ROOT / "test-output"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=900,700",
]
WIDTHS = {"phone": (375, 740), "desktop": (1280, 800)}
# what each state says, in each language: (title, a piece of the main text)
SAYS = {
    "en": {
        "question": ("Unsubscribe", "Stop all mail from Acme Newsletter to j***@example.org?"),
        "done": ("Unsubscribed", "You are unsubscribed"),
        "already": ("Already unsubscribed", "You are already unsubscribed"),
        "invalid": ("Invalid link", "This unsubscribe link is not valid"),
        "test": ("Test message", "This link comes from a test message"),
    },
    "de": {
        "question": ("Abmelden", "Keine E-Mails mehr von Acme Newsletter an j***@example.org?"),
        "done": ("Abgemeldet", "Sie sind abgemeldet"),
        "already": ("Bereits abgemeldet", "Sie sind bereits abgemeldet"),
        "invalid": ("Ungültiger Link", "Dieser Abmeldelink ist ungültig"),
        "test": ("Testnachricht", "Dieser Link stammt aus einer Testnachricht"),
    },
}


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


def look(browser, state: str, language: str, width: str) -> dict:
    """The page as loaded now, at `width`: its title, lang, main text, whether it scrolls sideways;
    its screenshot kept."""
    from selenium.webdriver.common.by import By

    browser.set_window_size(*WIDTHS[width])
    browser.save_screenshot(str(ARTEFACTS / f"unsubscribe-{state}-{language}-{width}.png"))
    return {
        "title": browser.title,
        "text": browser.find_element(By.TAG_NAME, "main").text,
        "lang": browser.find_element(By.TAG_NAME, "html").get_attribute("lang"),
        "sideways": browser.execute_script("return document.documentElement.scrollWidth > window.innerWidth"),
        "viewport": browser.execute_script("return window.innerWidth"),
        "buttons": len(browser.find_elements(By.TAG_NAME, "button")),
    }


def check(seen: dict, state: str, language: str, width: str) -> None:
    title, text = SAYS[language][state]
    assert seen["title"] == title and text in seen["text"], (state, language, width, seen)
    assert seen["lang"] == language and not seen["sideways"], (state, language, width, seen)
    assert seen["buttons"] == (state == "question"), (state, language, width, seen)
    if width == "phone":
        assert seen["viewport"] <= 375, seen


@pytest.mark.parametrize("language", ["en", "de"])
async def test_every_state_of_the_page_in_a_browser_at_phone_and_desktop_width(
    conn: asyncpg.Connection, dsn: str, browser, language: str
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    ids = await subscriber(conn, email="jane.doe@example.org", account="acme")
    await conn.execute("UPDATE einmal.accounts SET display_name = 'Acme Newsletter', language = $1", language)
    await conn.execute("UPDATE einmal.campaigns SET subject = 'Spring {{ \"offers\" | upper }}'")
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn) as base:
        link = f"{base}/unsubscribe?token={token(ids)}"
        links = {
            "invalid": f"{base}/unsubscribe?token={token(ids, 'forged')}",
            "test": f"{base}/unsubscribe?token={token((ids[0], ids[1], TEST_SUBSCRIBER))}",
        }

        def question() -> list[dict]:
            browser.get(link)
            return [look(browser, "question", language, width) for width in WIDTHS]

        for seen, width in zip(await anyio.to_thread.run_sync(question), WIDTHS, strict=True):
            check(seen, "question", language, width)
            assert "Spring OFFERS" in seen["text"] and "Spring news" not in seen["text"]
        assert await written(conn) == (0, 0)  # opening the page changed nothing

        def press() -> tuple[str, list[dict]]:
            browser.find_element(By.TAG_NAME, "button").click()
            # the confirmation has loaded: wait for it, however slowly the form post is answered
            WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "h1[role=status]"))
            return browser.current_url, [look(browser, "done", language, width) for width in WIDTHS]

        url, pages = await anyio.to_thread.run_sync(press)
        assert url == link
        for seen, width in zip(pages, WIDTHS, strict=True):
            check(seen, "done", language, width)
        assert await written(conn) == (1, 1)

        def visit(state: str, address: str) -> list[dict]:
            if state == "invalid":  # a link that names no account: the browser's language decides
                browser.execute_cdp_cmd(
                    "Network.setUserAgentOverride", {"userAgent": "einmal-test", "acceptLanguage": language}
                )
            browser.get(address)
            return [look(browser, state, language, width) for width in WIDTHS]

        for state, address in (("already", link), ("invalid", links["invalid"]), ("test", links["test"])):
            for seen, width in zip(await anyio.to_thread.run_sync(visit, state, address), WIDTHS, strict=True):
                check(seen, state, language, width)
    rows = await conn.fetch("SELECT account_id, email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in rows] == [(ids[0], "jane.doe@example.org", "unsubscribe")]
    assert await written(conn) == (1, 1)
    for state in SAYS[language]:
        for width in WIDTHS:
            assert (ARTEFACTS / f"unsubscribe-{state}-{language}-{width}.png").stat().st_size > 1000


# the most height a character of the reference's text may take, on average. A line of 24 px holds some 40
# characters at 375 px and 110 at 1280 px; headings, names and cells each on their own line leave lines short,
# but at 1.5 px a character a phone's lines still hold 16 on average. A column squeezed to a character or two
# a line took 2.5 px a character (49,711 px for 19,670 characters).
TALLEST = {"phone": 1.5, "desktop": 1.2}


def read_reference(browser, width: str) -> dict:
    """The reference as laid out at `width`: its sizes, the text of its table headers, its narrowest table
    cell, its visible text; the screenshot kept."""
    from selenium.webdriver.common.by import By

    browser.set_window_size(*WIDTHS[width])
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(ARTEFACTS / f"api-docs-{width}.png"))
    measure = browser.execute_script("""
        const cells = [...document.querySelectorAll('td')].filter(c => c.textContent.trim() !== '');
        return {scroll_width: document.documentElement.scrollWidth, window_width: window.innerWidth,
                height: document.documentElement.scrollHeight, characters: document.body.innerText.length,
                narrowest: Math.min(...cells.map(c => c.getBoundingClientRect().width)),
                headers: [...document.querySelectorAll('th')].map(h => h.textContent.trim()),
                tables: document.querySelectorAll('table').length}""")
    # each operation's answers: the text of its block after "answers" (the whole block on today's page)
    operations = {
        op.find_element(By.CSS_SELECTOR, "p").text: op.text[op.text.rfind("answers") :]
        for op in browser.find_elements(By.CSS_SELECTOR, ".op")
    }
    # and an operation with parameters (put_subscriber's), and the first shape's table
    for name, selector in (("operation", "#put_subscriber"), ("shape", "#shapes + h3")):
        for element in browser.find_elements(By.CSS_SELECTOR, selector):
            browser.execute_script("arguments[0].scrollIntoView()", element)
            browser.save_screenshot(str(ARTEFACTS / f"api-docs-{name}-{width}.png"))
    return {
        **measure,
        "title": browser.title,
        "text": browser.find_element(By.TAG_NAME, "body").text,
        "operations": operations,
    }


async def test_the_api_reference_reads_at_phone_and_desktop_width(dsn: str, browser) -> None:
    ARTEFACTS.mkdir(exist_ok=True)
    async with http_server(dsn) as base:
        await anyio.to_thread.run_sync(browser.get, f"{base}/api/v1/docs")
        pages = {width: await anyio.to_thread.run_sync(read_reference, browser, width) for width in WIDTHS}
    facts = {
        width: {k: v for k, v in seen.items() if k not in ("text", "operations", "headers")}
        for width, seen in pages.items()
    }
    print(facts)  # -s shows the sizes measured
    for width, seen in pages.items():
        assert seen["title"] == "einmal API", width
        assert seen["scroll_width"] <= seen["window_width"], (width, facts[width])
        assert seen["height"] < TALLEST[width] * seen["characters"], (width, facts[width])
        assert seen["narrowest"] >= 40, (width, facts[width])  # no column squeezed to a character or two
        assert seen["tables"] and seen["headers"] and all(seen["headers"]), (width, seen["headers"])
        assert "`" not in seen["text"], (width, seen["text"][max(0, seen["text"].find("`") - 200) :][:400])
        # the answers every operation may give are said once, not once an operation
        assert seen["text"].count("Every operation may answer") == 1, width
        operations = seen["operations"]
        assert len(operations) >= 30 and any(o.startswith("PUT /api/v1/subscribers/{email} — ") for o in operations)
        for name, text in operations.items():
            assert "413" not in text and "503" not in text, (name, text)
            assert ("403" in text) == (not name.startswith("GET ")), (name, text)  # only a write needs a write key
        assert "404" not in operations["GET /api/v1/subscribers — the account's subscribers, oldest first"]
        assert (
            "404"
            in operations[
                "GET /api/v1/campaigns/{campaign_id} — counts per send state, what came back, why it is paused"
            ]
        )
    assert pages["phone"]["window_width"] <= 375
    # a backtick in a description is code: einmal's command for a key, in the answer of the key routes
    assert "einmal account key create" in pages["desktop"]["text"]
    for width in WIDTHS:
        for name in ("api-docs", "api-docs-operation", "api-docs-shape"):
            assert (ARTEFACTS / f"{name}-{width}.png").stat().st_size > 1000
