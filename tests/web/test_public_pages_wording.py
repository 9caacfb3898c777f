"""What the public pages say, over real HTTP against a real PostgreSQL: a confirmation link that does not work
speaks of confirmation (not of unsubscribing), an unknown or closed form says so, each with a next step that
trusts only a genuine token's account; "check your inbox" shows the address as it was typed, with a way back;
a list is named by its title (set from the command line or the API), else neutrally, and the sender never by
the account's internal name; the confirmation message reads as a plain sentence, a new wording version; and a
campaign's unsubscribe page keeps the language its message was sent in when the account's changes."""

import html
import re
from urllib.parse import urljoin

import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from service.mail import confirm, unsubscribe
from service.settings import Settings
from service.subscribers import optin, texts
from service.subscribers.optin import SignUps
from tests.conftest import ROOT, einmal
from tests.support.optin import FORM, SECRET, SETTINGS, TOKEN, account_with_list
from tests.support.web import http_server, subscriber, token

pytestmark = pytest.mark.anyio

MAILTO = "unsubscribe@example.net"


def main(page: httpx.Response) -> str:
    return re.search(r"<main>(.*)</main>", page.text, re.S).group(1)


def lang(page: httpx.Response) -> str:
    return re.search(r'<html lang="([^"]+)">', page.text).group(1)


def said(code: str, key: str) -> str:
    return html.escape(texts.text(code, key), quote=False)


async def signed_up(conn: asyncpg.Connection, account_id: int, list_id: int, address: str) -> tuple[int, int, int]:
    """The (account, confirmation campaign, subscriber) of a new sign-up of `address` to the list."""
    settings = Settings(unsubscribe_secret=SecretStr(SECRET), **SETTINGS)
    await optin.sign_up(
        conn, SignUps.of(settings), optin.SignUp(list_id, account_id, address, "", "form", texts.confirmation("en"))
    )
    row = await conn.fetchrow(
        "SELECT s.account_id, s.campaign_id, s.subscriber_id FROM einmal.sends s WHERE s.email = $1", address
    )
    return tuple(row)


async def test_a_confirmation_link_that_does_not_work_speaks_of_confirming_with_a_next_step(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Before: "This unsubscribe link is not valid" (German "Abmeldelink") and nothing to do instead."""
    account_id, list_id, _ = await account_with_list(conn, dsn)
    await conn.execute("UPDATE einmal.accounts SET contact = 'help@acme.example' WHERE id = $1", account_id)
    ids = await signed_up(conn, account_id, list_id, "ann@example.org")
    forged = confirm.Signer("another-key-of-32-characters-or-more").token(*ids)  # acme's ids, nobody's word
    nobody = confirm.Signer(SECRET).token(ids[0], ids[1], 999_999)  # genuine: acme's, naming no sign-up
    german = {"accept-language": "de-DE, en;q=0.5"}
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:
        invalid = await client.get(f"/confirm?token={forged}")
        invalid_de = await client.get(f"/confirm?token={forged}", headers=german)
        unknown = await client.get(f"/confirm?token={nobody}")
        await conn.execute("UPDATE einmal.list_members SET created_at = now() - interval '5 days'")
        expired = await client.post(f"/confirm?token={confirm.Signer(SECRET).token(*ids)}")
    async with http_server(dsn, SECRET, **SETTINGS, unsubscribe_mailto=MAILTO) as base, httpx.AsyncClient() as client:
        invalid_mailto = await client.get(f"{base}/confirm?token={forged}")
    assert (invalid.status_code, unknown.status_code, expired.status_code) == (400, 404, 410)
    assert said("en", "confirm_invalid") in main(invalid) and "<title>Invalid link</title>" in invalid.text
    assert said("en", "confirm_next_generic") in main(invalid)
    assert lang(invalid_de) == "de" and said("de", "confirm_invalid") in main(invalid_de)
    assert said("de", "confirm_next_generic") in main(invalid_de)
    assert said("en", "confirm_unknown") in main(unknown) and said("en", "expired") in main(expired)
    for page in (invalid, invalid_de, unknown, expired, invalid_mailto):
        assert "unsubscribe link" not in main(page) and "Abmelde" not in main(page), page.text
        assert "recipient" not in main(page) and "Empfänger" not in main(page)
    # a genuine token's account offers its contact; a forged one's never does
    assert 'href="mailto:help@acme.example"' in main(unknown) and 'href="mailto:help@acme.example"' in main(expired)
    assert f'href="mailto:{MAILTO}"' in main(invalid_mailto)
    for page in (invalid, invalid_de, invalid_mailto):
        assert "help@acme.example" not in page.text and "Acme" not in page.text


async def test_an_unknown_or_closed_form_says_so_the_same_way_with_a_next_step(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Before: "There is no sign-up form at this address", the same page for both, and no next step."""
    account_id, list_id, _ = await account_with_list(conn, dsn)
    await conn.execute("UPDATE einmal.accounts SET contact = 'help@acme.example' WHERE id = $1", account_id)
    await conn.execute("UPDATE einmal.lists SET form_open = false WHERE id = $1", list_id)
    unknown_form = f"/forms/{optin.new_token()}"
    async with (
        http_server(dsn, SECRET, **SETTINGS, unsubscribe_mailto=MAILTO) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        closed = await client.get(FORM)
        posted = await client.post(FORM, data={"email": "x@example.org"})
        unknown = await client.get(unknown_form)
        german = await client.get(unknown_form, headers={"accept-language": "de"})
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:
        generic = await client.get(unknown_form)
    assert {(r.status_code, r.text) for r in (closed, posted, unknown)} == {(404, unknown.text)}, (
        "a closed form and an unknown one are the same page"
    )
    assert "This sign-up form does not exist or is closed." in main(unknown)
    assert "Unknown recipient" not in unknown.text
    assert f'href="mailto:{MAILTO}"' in main(unknown) and said("en", "form_next_generic") in main(generic)
    assert lang(german) == "de" and "Dieses Anmeldeformular gibt es nicht, oder es ist geschlossen." in main(german)
    for page in (unknown, german, generic):
        assert "help@acme.example" not in page.text and "Acme" not in page.text and "news" not in page.text


async def test_check_your_inbox_shows_the_address_as_typed_with_a_way_back_to_the_form(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Before: "j***@exmaple.org", so a typo in the domain could not be seen, and no way back."""
    account_id, _, _ = await account_with_list(conn, dsn, members=["member@example.org"])
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower) VALUES ($1, 'gone@example.org')", account_id
    )
    typed = [
        "jane.doe@exmaple.org",
        "o'brien&co@example.org",
        "jane.doe@exmaple.org",
        "member@example.org",
        "gone@example.org",
    ]  # new, new, unconfirmed, confirmed, suppressed
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:
        answers = [await client.post(FORM, data={"email": address}) for address in typed]
        href = re.search(r'<a href="([^"]+)">Back to the form to correct it</a>', answers[0].text).group(1)
        back = await client.get(urljoin(f"{base}{FORM}", html.unescape(href)))
    assert [a.status_code for a in answers] == [200] * 5
    for answer, address in zip(answers, typed, strict=True):
        assert f"<strong>{html.escape(address)}</strong>" in main(answer), answer.text
    assert "o'brien&co" not in answers[1].text, "escaped"
    assert len({a.text.replace(html.escape(t), "X") for a, t in zip(answers, typed, strict=True)}) == 1, (
        "the same answer whatever the address's state"
    )
    assert str(back.url) == f"{base}/forms/{TOKEN}" and back.status_code == 200 and 'id="email"' in back.text


async def test_pages_name_a_list_by_its_title_and_the_sender_never_by_the_account_s_name(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Before: "Subscribe to vip-customers", "from acme-prod"."""
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme-prod') RETURNING id")
    list_id = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name, form_open, form_token) "
        "VALUES ($1, 'vip-customers', true, $2) RETURNING id",
        account_id,
        TOKEN,
    )
    ids = await signed_up(conn, account_id, list_id, "ann@example.org")
    link = f"/confirm?token={confirm.Signer(SECRET).token(*ids)}"
    gone_campaign = unsubscribe.make_token(SECRET, account_id, 999_999, ids[2])  # genuine; its campaign is gone
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:
        untitled = [
            await client.get(FORM),
            await client.post(FORM, data={"email": "bob@example.org"}),
            await client.get(link),
            await client.get(f"/unsubscribe?token={gone_campaign}"),
        ]
        set_title = einmal(
            "lists", "set", "vip-customers", "--account", "acme-prod", "--title", "VIP <news> & more", dsn=dsn
        )
        titled = [await client.get(FORM), await client.get(link)]
        await conn.execute("UPDATE einmal.list_members SET state = 'confirmed'")
        preferences = await client.get(f"/unsubscribe?token={gone_campaign}")
    for page in untitled + titled + [preferences]:
        assert page.status_code == 200, page.text
        assert "acme-prod" not in page.text and "vip-customers" not in page.text, page.text
    assert "Subscribe to the mailing list" in main(untitled[0]) and "<strong>Acme News</strong>" in main(untitled[0])
    assert "subscribed to the mailing list" in main(untitled[1])
    assert "to the mailing list from <strong>Acme News</strong>?" in main(untitled[2])
    assert "Stop all mail from <strong>the sender</strong>" in main(untitled[3])
    assert set_title.returncode == 0 and set_title.stdout == "list 'vip-customers': title 'VIP <news> & more'\n"
    assert "Subscribe to <strong>VIP &lt;news&gt; &amp; more</strong>" in main(titled[0])
    assert "to <strong>VIP &lt;news&gt; &amp; more</strong> from" in main(titled[1])
    assert "<li><span>VIP &lt;news&gt; &amp; more</span>" in main(preferences)
    for args, says in (
        (("--account", "acme-prod", "--title", "x"), "the following arguments are required: list"),
        (("nosuch", "--account", "acme-prod", "--title", "x"), "has no list named 'nosuch'"),
        (("vip-customers", "--account", "acme-prod", "--title", "a\nb"), "must not contain line"),
    ):
        refused = einmal("lists", "set", *args, dsn=dsn)
        assert refused.returncode != 0 and says in refused.stderr and "Traceback" not in refused.stderr


async def test_an_untitled_list_on_the_preference_page_is_a_mailing_list_not_its_name(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn, email="jane.doe@example.org")
    made = []
    for name, title in (("vip-customers", None), ("internal-b2b", None), ("news", "Weekly news")):
        made.append(
            await conn.fetchval(
                "INSERT INTO einmal.lists (account_id, name, title) VALUES ($1, $2, $3) RETURNING id",
                ids[0],
                name,
                title,
            )
        )
        await conn.execute("INSERT INTO einmal.list_members (list_id, subscriber_id) VALUES ($1, $2)", made[-1], ids[2])
    async with http_server(dsn, SECRET) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={unsubscribe.make_token(SECRET, *ids)}"
        page = await client.get(url)
        left = await client.post(f"{url}&leave={made[1]}")
    assert re.findall(r"<li><span>(.*?)</span>", page.text) == ["Mailing list 1", "Weekly news", "Mailing list 2"]
    assert "vip-customers" not in page.text and "internal-b2b" not in page.text
    assert texts.text("en", "left_untitled") in left.text and "internal-b2b" not in left.text


async def test_the_api_sets_a_list_s_title(conn: asyncpg.Connection, dsn: str) -> None:
    _, _, key = await account_with_list(conn, dsn)
    async with (
        http_server(dsn, SECRET, **SETTINGS) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {key}"}) as client,
    ):
        titled = await client.put("/lists/news/title", json={"title": " Weekly news "})
        form = await client.get(f"{base}{FORM}")
        kept = await client.put("/lists/news")  # found: its title kept
        listed = (await client.get("/lists")).json()
        cleared = await client.put("/lists/news/title", json={"title": ""})
        nulled = await client.put("/lists/news/title", json={"title": None})
        bad = [
            await client.put("/lists/news/title", json=body)
            for body in ({"title": "a\nb"}, {"title": "x" * 201}, {"title": "x", "other": 1}, {})
        ]
        missing = await client.put("/lists/nosuch/title", json={"title": "x"})
        untitled = await client.get(f"{base}{FORM}")
        document = (await client.get("/openapi.json")).json()
    assert (titled.status_code, titled.json()) == (200, {"title": "Weekly news"})
    assert "Subscribe to <strong>Weekly news</strong>" in form.text
    assert (kept.status_code, kept.json()["title"]) == (200, "Weekly news")
    assert [(x["name"], x["title"]) for x in listed] == [("news", "Weekly news")]
    assert [(r.status_code, r.json()) for r in (cleared, nulled)] == [(200, {"title": None})] * 2
    assert [b.status_code for b in bad] == [422] * 4 and all("error" in b.json() for b in bad)
    assert (missing.status_code, missing.json()) == (404, {"error": "no such list"})
    assert "Subscribe to the mailing list" in untitled.text
    assert document["paths"]["/lists/{name}/title"]["put"]["operationId"] == "put_list_title"


def test_the_confirmation_message_reads_as_a_plain_sentence_in_a_new_version() -> None:
    """Before: "someone, we hope you, asked to receive…" ("jemand, hoffentlich Sie, …"), version 1."""
    english, german = texts.confirmation("en"), texts.confirmation("de")
    assert "we hope you" not in english.body and "hoffentlich" not in german.body
    assert 'thank you for signing up to receive "{{ campaign.name }}" at {{ email }}.' in english.body
    assert "danke für Ihre Anmeldung" in german.body
    assert (english.version, german.version) == ("en-2", "de-2")


async def test_a_list_keeps_recording_the_wording_its_confirmations_were_made_with(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """A confirmation campaign made with version 1's text (as 0108 marks those made before) still says version
    1, so its sign-ups record en-1; a new list's confirmations are made with version 2 and record en-2."""
    account_id, news, _ = await account_with_list(conn, dsn)
    offers = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name, title, form_open) "
        "VALUES ($1, 'offers', 'Offers & deals', true) RETURNING id",
        account_id,
    )
    await conn.execute(
        """
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, kind, status,
                                      recipients_built_at, started_at, language, wording)
        VALUES ($1, 'news', 'Please confirm', 'news@example.com', 'someone, we hope you, asked {{ confirm_url }}',
                ARRAY[$2::bigint], 'confirmation', 'sending', now(), now(), 'en', 'en-1')""",
        account_id,
        news,
    )
    await signed_up(conn, account_id, news, "ann@example.org")
    await signed_up(conn, account_id, offers, "bob@example.org")
    recorded = await conn.fetch(
        "SELECT l.name, m.wording FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id ORDER BY l.name"
    )
    assert [tuple(r) for r in recorded] == [("news", "en-1"), ("offers", "en-2")]
    made = await conn.fetchrow(
        "SELECT name, body_text, wording FROM einmal.campaigns WHERE kind = 'confirmation' AND list_ids[1] = $1", offers
    )
    assert (made["name"], made["wording"]) == ("Offers & deals", "en-2"), "named by the title the mail shows"
    assert made["body_text"] == texts.confirmation("en").body


async def test_a_campaign_s_page_keeps_its_language_when_the_account_s_changes(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Before: the page of a campaign made without --language followed the account's language of the day, so
    switching the account to German turned the pages of English mail already sent German."""
    ids = await subscriber(conn)  # its campaign made with no language, as before 0108
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", ids[0])
    migration = (ROOT / "sql/migrations/0108_list_titles_campaign_languages.sql").read_text()
    [fill] = [s for s in migration.split(";") if "SET language" in s]
    await conn.execute(fill)  # what 0108 does to the campaigns made before it
    made = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "Spring",
        "--subject",
        "Spring greetings",
        "--from",
        "news@example.com",
        "--text",
        "Hello",
        dsn=dsn,
    )  # no --language
    assert made.returncode == 0, made.stderr
    sent = (ids[0], int(made.stdout), ids[2])
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        before = [await client.get(f"{base}/unsubscribe?token={token(t)}") for t in (sent, ids)]
        switched = einmal("accounts", "set", "acme", "--language", "de", dsn=dsn)
        assert switched.returncode == 0, switched.stderr
        after = [await client.get(f"{base}/unsubscribe?token={token(t)}") for t in (sent, ids)]
        later = einmal(
            "campaign",
            "create",
            "--account",
            "acme",
            "--name",
            "Herbst",
            "--subject",
            "Herbstgrüße",
            "--from",
            "news@example.com",
            "--text",
            "Hallo",
            dsn=dsn,
        )
        new = await client.get(f"{base}/unsubscribe?token={token((ids[0], int(later.stdout), ids[2]))}")
    assert [lang(p) for p in before] == ["en", "en"]
    assert [lang(p) for p in after] == ["en", "en"], "mail already sent keeps its page's language"
    assert all(">Unsubscribe<" in main(p) for p in after)
    assert lang(new) == "de", "a campaign made after the switch speaks the account's new language"
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE language IS NULL") == 0


async def test_a_campaign_made_over_the_api_records_the_account_s_language(conn: asyncpg.Connection, dsn: str) -> None:
    _, _, key = await account_with_list(conn, dsn)
    await conn.execute("UPDATE einmal.accounts SET language = 'de'")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) SELECT id, 'default' FROM einmal.accounts")
    async with (
        http_server(dsn, SECRET, **SETTINGS) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {key}"}) as client,
    ):
        made = await client.post("/campaigns", json={"name": "n", "subject": "s", "from": "a@example.com", "text": "t"})
    assert made.status_code == 201, made.text
    assert await conn.fetchval("SELECT language FROM einmal.campaigns WHERE id = $1", made.json()["id"]) == "de"
