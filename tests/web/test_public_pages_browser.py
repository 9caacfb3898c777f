"""What the public pages say, in a real browser (Debian's chromium through Selenium, as the unsubscribe page's
test), in English and German, at a phone's width and a desktop's: "check your inbox" after a typo, showing the
address as typed with the link back to the form; a confirmation link that does not work; an unknown form; and a
campaign's unsubscribe page after its account switched language. Screenshots in test-output/, named
pages-<state>-<language>-<width>.png."""

import anyio
import asyncpg
import pytest

from service.mail import confirm
from service.subscribers import optin
from tests.conftest import einmal
from tests.support.optin import FORM, SECRET, SETTINGS, account_with_list
from tests.support.web import http_server, subscriber, token
from tests.web.test_http_browser import ARTEFACTS, WIDTHS, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.anyio

TYPO = "jane.doe@exmaple.org"
SAYS = {
    "en": {
        "sent": ("Check your inbox", f"If {TYPO} can be subscribed to Weekly news"),
        "back": ("Subscribe", "Subscribe to Weekly news"),
        "bad-confirmation": ("Invalid link", "This confirmation link is not valid"),
        "no-form": ("No such form", "This sign-up form does not exist or is closed."),
        "unsubscribe-after-switch": ("Unsubscribe", "Stop all mail from Acme to j***@example.org?"),
    },
    "de": {
        "sent": ("Sehen Sie in Ihr Postfach", f"Wenn {TYPO} für Weekly news angemeldet werden kann"),
        "back": ("Anmelden", "Anmeldung für Weekly news"),
        "bad-confirmation": ("Ungültiger Link", "Dieser Bestätigungslink ist ungültig"),
        "no-form": ("Kein solches Formular", "Dieses Anmeldeformular gibt es nicht, oder es ist geschlossen."),
        "unsubscribe-after-switch": ("Abmelden", "Keine E-Mails mehr von Acme an j***@example.org?"),
    },
}


def look(driver, state: str, language: str) -> list[dict]:
    """The page as loaded now, at each width: title, lang, main text, sideways scrolling, links; a screenshot."""
    from selenium.webdriver.common.by import By

    seen = []
    for width, size in WIDTHS.items():
        driver.set_window_size(*size)
        driver.save_screenshot(str(ARTEFACTS / f"pages-{state}-{language}-{width}.png"))
        seen.append(
            {
                "width": width,
                "title": driver.title,
                "text": driver.find_element(By.TAG_NAME, "main").text,
                "lang": driver.find_element(By.TAG_NAME, "html").get_attribute("lang"),
                "sideways": driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth"),
                "viewport": driver.execute_script("return window.innerWidth"),
            }
        )
    return seen


def check(pages: list[dict], state: str, language: str) -> None:
    title, text = SAYS[language][state]
    for seen in pages:
        assert seen["title"] == title and text in seen["text"], (state, language, seen)
        assert not seen["sideways"], (state, language, seen)
        if seen["width"] == "phone":
            assert seen["viewport"] <= 375, seen


@pytest.mark.parametrize("language", ["en", "de"])
async def test_the_pages_that_said_the_wrong_thing_in_a_browser(
    conn: asyncpg.Connection, dsn: str, browser, language: str
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    _, list_id, _ = await account_with_list(conn, dsn)
    await conn.execute("UPDATE einmal.accounts SET language = $1, contact = 'help@acme.example'", language)
    await conn.execute("UPDATE einmal.lists SET title = 'Weekly news' WHERE id = $1", list_id)
    ARTEFACTS.mkdir(exist_ok=True)
    browser.execute_cdp_cmd("Network.setUserAgentOverride", {"userAgent": "einmal-test", "acceptLanguage": language})
    async with http_server(dsn, SECRET, **SETTINGS, unsubscribe_mailto="unsubscribe@example.net") as base:

        def sign_up() -> tuple[list[dict], str, list[dict]]:
            browser.get(f"{base}{FORM}")
            browser.find_element(By.ID, "email").send_keys(TYPO)
            browser.find_element(By.TAG_NAME, "button").click()
            WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "h1[role=status]"))
            sent = look(browser, "sent", language)
            browser.find_element(By.CSS_SELECTOR, "main a").click()  # back to the form, to correct it
            WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.ID, "email"))
            return sent, browser.current_url, look(browser, "back", language)

        sent, back_url, back = await anyio.to_thread.run_sync(sign_up)
        check(sent, "sent", language)
        check(back, "back", language)
        assert back_url == f"{base}{FORM}"
        ids = tuple(await conn.fetchrow("SELECT account_id, campaign_id, subscriber_id FROM einmal.sends"))
        forged = confirm.Signer("another-key-of-32-characters-or-more").token(*ids)

        def visit(state: str, address: str) -> list[dict]:
            browser.get(address)
            return look(browser, state, language)

        bad = await anyio.to_thread.run_sync(visit, "bad-confirmation", f"{base}/confirm?token={forged}")
        check(bad, "bad-confirmation", language)
        assert all(
            "unsubscribe@example.net" in seen["text"] and "help@acme.example" not in seen["text"] for seen in bad
        ), "a forged token's account is nobody's word: the installation's address"
        unknown = await anyio.to_thread.run_sync(visit, "no-form", f"{base}/forms/{optin.new_token()}")
        check(unknown, "no-form", language)
    # an English campaign's page after the account switched to German (and back): it stays in its language
    ids = await subscriber(conn, email="jane.doe@example.org", account="globex")
    await conn.execute(
        "UPDATE einmal.accounts SET display_name = 'Acme', language = $1 WHERE id = $2", language, ids[0]
    )
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", ids[0])
    made = einmal(
        "campaign",
        "create",
        "--account",
        "globex",
        "--name",
        "n",
        "--subject",
        "Spring",
        "--from",
        "news@example.com",
        "--text",
        "Hello",
        dsn=dsn,
    )
    assert made.returncode == 0, made.stderr
    switched = einmal("accounts", "set", "globex", "--language", "de" if language == "en" else "en", dsn=dsn)
    assert switched.returncode == 0, switched.stderr
    async with http_server(dsn) as base:
        page = await anyio.to_thread.run_sync(
            visit, "unsubscribe-after-switch", f"{base}/unsubscribe?token={token((ids[0], int(made.stdout), ids[2]))}"
        )
    check(page, "unsubscribe-after-switch", language)
    assert all(seen["lang"] == language for seen in page)
    for state in SAYS[language]:
        for width in WIDTHS:
            assert (ARTEFACTS / f"pages-{state}-{language}-{width}.png").stat().st_size > 1000
