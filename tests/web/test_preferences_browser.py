"""The preference page in a real browser (Debian's chromium through Selenium, as
tests/web/test_http_browser.py): the lists the address is on, each button named for its list and reached
with the keyboard, a list left with the button and the page that says so — in English and in German, at a
phone's width (375 px) and a desktop's. Screenshots are kept in test-output/ as
unsubscribe-preferences-<state>-<language>-<width>.png."""

import anyio
import asyncpg
import pytest

from tests.support.web import http_server, subscriber, token, written
from tests.web.test_http_browser import ARTEFACTS, WIDTHS, browser, look  # noqa: F401  (browser: a fixture)

pytestmark = pytest.mark.anyio

LONG = "Announcements of the regional chapter and its quarterly meetings"
SAYS = {
    "en": {
        "heading": "Or leave one list",
        "leave": "Leave",
        "label": "Leave {}",
        "left": "You left “Weekly news”. Your other lists stay as they are.",
    },
    "de": {
        "heading": "Oder nur eine Liste verlassen",
        "leave": "Verlassen",
        "label": "{} verlassen",
        "left": "Sie haben „Weekly news“ verlassen. Ihre anderen Listen bleiben, wie sie sind.",
    },
}


def ready(seen: dict, language: str, width: str) -> None:
    assert seen["lang"] == language and not seen["sideways"], (language, width, seen)
    if width == "phone":
        assert seen["viewport"] <= 375, seen


@pytest.mark.parametrize("language", ["en", "de"])
async def test_the_lists_and_leaving_one_in_a_browser_at_phone_and_desktop_width(
    conn: asyncpg.Connection, dsn: str, browser, language: str
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.wait import WebDriverWait

    ids = await subscriber(conn, email="jane.doe@example.org", account="acme")
    await conn.execute("UPDATE einmal.accounts SET display_name = 'Acme Newsletter', language = $1", language)
    names = ["Weekly news", "Offers & events", LONG]
    for name in names:
        list_id = await conn.fetchval(
            "INSERT INTO einmal.lists (account_id, name, title) VALUES ($1, $2, $2) RETURNING id", ids[0], name
        )
        await conn.execute("INSERT INTO einmal.list_members VALUES ($1, $2)", list_id, ids[2])
    ARTEFACTS.mkdir(exist_ok=True)
    says = SAYS[language]
    async with http_server(dsn) as base:
        link = f"{base}/unsubscribe?token={token(ids)}"

        def lists() -> tuple[list[dict], list[str], list[str], dict]:
            browser.get(link)
            seen = [look(browser, "preferences-lists", language, width) for width in WIDTHS]
            heading = browser.find_element(By.CSS_SELECTOR, "section[aria-labelledby=lists-heading] h2").text
            buttons = browser.find_elements(By.CSS_SELECTOR, "button.leave")
            # the keyboard reaches the first list's button, and its focus is drawn
            browser.execute_script("document.querySelector('main form button').focus()")  # leave all
            ActionChains(browser).send_keys(Keys.TAB).perform()  # then the first list's
            focus = browser.execute_script(
                "const e = document.activeElement; const s = getComputedStyle(e);"
                "return {label: e.getAttribute('aria-label'), outline: s.outlineStyle, width: s.outlineWidth}"
            )
            return seen, [heading, *(b.text for b in buttons)], [b.accessible_name for b in buttons], focus

        seen, shown, labels, focus = await anyio.to_thread.run_sync(lists)
        for page, width in zip(seen, WIDTHS, strict=True):
            ready(page, language, width)
            assert page["buttons"] == 1 + len(names), page  # leave all, and one for each list
            assert all(name in page["text"] for name in names), page
        assert shown == [says["heading"], *[says["leave"]] * len(names)]
        assert sorted(labels) == sorted(says["label"].format(name) for name in names)
        assert focus == {"label": says["label"].format(LONG), "outline": "solid", "width": "3px"}  # first by name
        assert await written(conn) == (0, 0)

        def leave() -> tuple[str, list[dict], str]:
            browser.find_element(By.CSS_SELECTOR, f"button[aria-label='{says['label'].format('Weekly news')}']").click()
            WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "p[role=status]"))
            notice = browser.find_element(By.CSS_SELECTOR, "p[role=status]").text
            return notice, [look(browser, "preferences-left", language, width) for width in WIDTHS], browser.current_url

        notice, seen, url = await anyio.to_thread.run_sync(leave)
        assert notice == says["left"] and url.startswith(link + "&leave=")
        for page, width in zip(seen, WIDTHS, strict=True):
            ready(page, language, width)
            assert page["buttons"] == len(names) and "Offers & events" in page["text"] and LONG in page["text"]
    left = await conn.fetch(
        "SELECT l.name FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id ORDER BY l.name"
    )
    assert [r["name"] for r in left] == sorted(names[1:])
    assert await written(conn) == (0, 0)  # leaving a list is not an unsubscribe
    for state in ("lists", "left"):
        for width in WIDTHS:
            assert (ARTEFACTS / f"unsubscribe-preferences-{state}-{language}-{width}.png").stat().st_size > 1000
