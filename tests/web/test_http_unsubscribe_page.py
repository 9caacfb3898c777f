"""The unsubscribe page as a subscriber reads it, over real HTTP against a real PostgreSQL: the message's
subject and the sender's display name (never the operator's campaign name or the account's short name),
in the campaign's language, "already unsubscribed" on a revisit, and a next step on a link that does not
work. Everything shown is escaped, and no GET writes anything."""

import re

import asyncpg
import httpx
import pytest

from service.mail.unsubscribe import TEST_SUBSCRIBER
from service.subscribers import texts
from tests.conftest import einmal
from tests.support.web import ONE_CLICK, http_server, subscriber, token, written

pytestmark = pytest.mark.anyio


async def snapshot(conn: asyncpg.Connection) -> list:
    """Everything a visit could write: the events, the suppressions with their times, the subscribers."""
    return [
        await conn.fetch("SELECT * FROM einmal.inbound_events ORDER BY event_id"),
        await conn.fetch("SELECT * FROM einmal.suppressions ORDER BY email_lower"),
        await conn.fetch("SELECT id, email, status FROM einmal.subscribers ORDER BY id"),
    ]


def lang(page: httpx.Response) -> str:
    return re.search(r'<html lang="([^"]+)">', page.text).group(1)


def main(page: httpx.Response) -> str:
    return re.search(r"<main>(.*)</main>", page.text, re.S).group(1)


async def test_the_page_names_the_message_s_subject_and_the_display_name_not_internal_names(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn, email="Ann.Example@Example.org")
    await conn.execute("UPDATE einmal.subscribers SET name = 'Ann <Admin>' WHERE id = $1", ids[2])
    await conn.execute("UPDATE einmal.campaigns SET subject = 'News for {{ name }} & friends' WHERE id = $1", ids[1])
    result = einmal("accounts", "set", "acme", "--display-name", "Acme & <Co> Newsletter", dsn=dsn)
    assert result.returncode == 0, result.stderr
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        page = await client.get(f"{base}/unsubscribe?token={token(ids)}")
    shown = main(page)
    assert page.status_code == 200
    assert "News for Ann &lt;Admin&gt; &amp; friends" in shown  # rendered for this subscriber, escaped
    assert "Acme &amp; &lt;Co&gt; Newsletter" in shown
    assert "Spring news" not in page.text and "acme" not in shown  # the operator's own names
    assert "<Admin>" not in page.text and "<Co>" not in page.text
    assert "A***@Example.org" in shown and '<form method="post"' in shown


async def test_without_a_display_name_the_page_names_the_sender_of_the_message(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    await conn.execute(
        "UPDATE einmal.campaigns SET from_address = 'Acme Weekly <news@example.com>', "
        "subject = '{% for i in range(1000000) %}x{% endfor %}' WHERE id = $1",
        ids[1],
    )
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        page = await client.get(f"{base}/unsubscribe?token={token(ids)}")
    assert page.status_code == 200
    assert "Acme Weekly" in main(page) and "acme" not in main(page)
    assert "xxxxxxxxxx" not in page.text  # a subject past the sandbox's budget is left out, not shown in part


async def test_the_page_follows_the_campaign_s_language_else_the_account_s(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await subscriber(conn)
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", ids[0])
    made = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "Intern",
        "--subject",
        "Frühlingsgrüße",
        "--from",
        "news@example.com",
        "--text",
        "Hallo",
        "--language",
        "de",
        dsn=dsn,
    )
    assert made.returncode == 0, made.stderr
    german = (ids[0], int(made.stdout), ids[2])
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        de = await client.get(f"{base}/unsubscribe?token={token(german)}")
        en = await client.get(f"{base}/unsubscribe?token={token(ids)}")  # no language: the account's (en)
        assert einmal("accounts", "set", "acme", "--language", "de", dsn=dsn).returncode == 0
        account_de = await client.get(f"{base}/unsubscribe?token={token(ids)}")
        await conn.execute("UPDATE einmal.campaigns SET language = 'en' WHERE id = $1", ids[1])
        campaign_en = await client.get(f"{base}/unsubscribe?token={token(ids)}")
    assert (lang(de), lang(en), lang(account_de), lang(campaign_en)) == ("de", "en", "de", "en")
    assert "Abmelden" in main(de) and "Frühlingsgrüße" in main(de) and ">Unsubscribe<" not in main(de)
    assert "<title>Abmelden</title>" in de.text
    assert "Abmelden" in main(account_de) and ">Unsubscribe<" in main(campaign_en)
    assert await written(conn) == (0, 0)


async def test_a_revisit_after_unsubscribing_says_already_unsubscribed_and_asks_nothing(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={token(ids)}"
        assert "<form" in (await client.get(url)).text
        assert (await client.post(url, data=ONE_CLICK)).status_code == 200
        before = await snapshot(conn)
        again = await client.get(url)
        assert await snapshot(conn) == before  # the revisit wrote nothing
        assert again.status_code == 200 and "already unsubscribed" in main(again)
        assert "<form" not in again.text and "<button" not in again.text
        await conn.execute("UPDATE einmal.campaigns SET language = 'de' WHERE id = $1", ids[1])
        german = await client.get(url)
        repeat = await client.post(url, data=ONE_CLICK)  # RFC 8058: a repeat is still a 200, nothing new
    assert "A***@Example.org" in main(again)
    assert lang(german) == "de" and "bereits abgemeldet" in main(german) and "<form" not in german.text
    assert repeat.status_code == 200 and await written(conn) == (1, 1)


async def test_the_confirmation_after_the_button_follows_the_language(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await subscriber(conn)
    await conn.execute("UPDATE einmal.campaigns SET language = 'de' WHERE id = $1", ids[1])
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        done = await client.post(
            f"{base}/unsubscribe?token={token(ids)}", data=ONE_CLICK, headers={"accept": "text/html"}
        )
    assert done.status_code == 200 and lang(done) == "de" and "abgemeldet" in main(done)


async def test_an_invalid_link_offers_a_next_step_without_naming_an_account(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await subscriber(conn)
    assert einmal("accounts", "set", "acme", "--contact", "help@acme.example", dsn=dsn).returncode == 0
    forged = token(ids, "not-the-key")  # names acme's ids, but nobody can vouch for them
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        generic = await client.get(f"{base}/unsubscribe?token={forged}")
        german = await client.get(f"{base}/unsubscribe?token={forged}", headers={"accept-language": "de-CH, en;q=0.5"})
    async with http_server(dsn, unsubscribe_mailto="unsubscribe@example.net") as base, httpx.AsyncClient() as client:
        mailto = await client.get(f"{base}/unsubscribe?token={forged}")
    assert generic.status_code == 400 and lang(generic) == "en"
    assert "not valid" in main(generic) and texts.text("en", "next_generic") in main(generic)
    assert lang(german) == "de" and texts.text("de", "next_generic") in main(german)
    assert 'href="mailto:unsubscribe@example.net"' in main(mailto)
    for page in (generic, german, mailto):
        assert "help@acme.example" not in page.text and "acme" not in page.text.lower().replace("acme.example", "")
    assert await written(conn) == (0, 0)


async def test_a_genuine_link_of_a_recipient_gone_offers_the_account_s_contact(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    result = einmal("accounts", "set", "acme", "--contact", "help@acme.example", "--language", "de", dsn=dsn)
    assert result.returncode == 0, result.stderr
    await conn.execute(
        "UPDATE einmal.subscribers SET status = 'erased', email = 'erased-' || id || '@erased.invalid' WHERE id = $1",
        ids[2],
    )
    async with http_server(dsn, unsubscribe_mailto="unsubscribe@example.net") as base, httpx.AsyncClient() as client:
        gone = await client.get(f"{base}/unsubscribe?token={token(ids)}")
    assert gone.status_code == 404 and lang(gone) == "de"
    assert 'href="mailto:help@acme.example"' in main(gone) and "unsubscribe@example.net" not in gone.text
    assert "erased" not in gone.text
    assert await written(conn) == (0, 0)


async def test_a_test_message_s_link_speaks_the_campaign_s_language(conn: asyncpg.Connection, dsn: str) -> None:
    ids = await subscriber(conn)
    await conn.execute("UPDATE einmal.campaigns SET language = 'de' WHERE id = $1", ids[1])
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        page = await client.get(f"{base}/unsubscribe?token={token((ids[0], ids[1], TEST_SUBSCRIBER))}")
    assert page.status_code == 200 and lang(page) == "de"
    assert texts.text("de", "test") in main(page) and "<form" not in page.text
    assert await written(conn) == (0, 0)


def test_every_language_has_every_text_with_the_same_placeholders() -> None:
    assert {"en", "de"} <= set(texts.LANGUAGES)
    english = texts.LANGUAGES["en"]
    for code, table in texts.LANGUAGES.items():
        assert set(table) == set(english), code
        for key, value in table.items():
            for placeholder in (r"{(\w+)}", r"{{\s*([\w.]+)\s*}}"):  # a page's; the confirmation message's
                assert set(re.findall(placeholder, value)) == set(re.findall(placeholder, english[key])), (code, key)


def test_accept_language_picks_an_available_language_else_english() -> None:
    assert texts.negotiate("de-DE,de;q=0.9,en;q=0.8") == "de"
    assert texts.negotiate("fr, de;q=0.1") == "de"
    assert texts.negotiate("fr, en;q=0.9, de;q=0.2") == "en"
    assert texts.negotiate("de;q=0, fr") == "en"
    assert texts.negotiate("") == "en" and texts.negotiate(None) == "en"
    assert texts.negotiate("x" * 10_000) == "en"
