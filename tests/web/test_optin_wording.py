"""Double opt-in for an installation of several clients, its words: each list may have its own confirmation
subject and text (`einmal lists form open LIST --subject S --text-file F`, `"subject"` and `"text"` in PUT
/api/v1/lists/{name}/form), templates checked in the sandbox when set, the text refused unless it shows the
confirmation link ({{ confirm_url }}); einmal's own words in the account's language are the default."""

import email
import threading
from email import policy
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from service.mail import templates
from service.subscribers import texts
from tests.conftest import einmal
from tests.support.optin import SECRET, confirm_link, memberships
from tests.support.pipeline import node_settings, running_node
from tests.support.smtp_servers import FaultServer, free_port
from tests.support.web import http_server
from tests.web.test_api import auth
from tests.web.test_http_node import wait_ready
from tests.web.test_optin_from import ENV, one_line_error, two_clients

pytestmark = pytest.mark.anyio

BETA_FROM = "Beta <hello@mail.beta.example>"
SUBJECT = "Beta: one click to {{ campaign.name }}"
TEXT = "Hi from Beta!\n\nYou asked for {{ campaign.name }} at {{ email }}. Click:\n{{ confirm_url }}\n\nBeta Inc.\n"


def form_open(dsn: str, account: str, *more: str):
    return einmal("lists", "form", "open", "weekly", "--account", account, *more, dsn=dsn, env=ENV)


async def own_words(conn: asyncpg.Connection, account: str) -> tuple:
    return tuple(
        await conn.fetchrow(
            "SELECT l.optin_subject, l.optin_text FROM einmal.lists l JOIN einmal.accounts a ON a.id = l.account_id "
            "WHERE a.name = $1 AND l.name = 'weekly'",
            account,
        )
    )


async def test_the_cli_gives_a_list_its_own_subject_and_text_and_refuses_what_cannot_be_sent(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await two_clients(conn, dsn)
    text_file = tmp_path / "text.txt"
    text_file.write_text(TEXT, encoding="utf-8")
    opened = form_open(dsn, "beta", "--from", BETA_FROM, "--subject", SUBJECT, "--text-file", str(text_file))
    assert opened.returncode == 0, opened.stderr
    assert SUBJECT in opened.stderr and "its own text" in opened.stderr, opened.stderr
    assert await own_words(conn, "beta") == (SUBJECT, TEXT)
    assert await own_words(conn, "alpha") == (None, None), "another account's list is untouched"

    for args, says in (
        (("--subject", "Hi\r\nBcc: victim@example.org"), "subject must not contain line breaks"),
        (("--subject", "Hi\nthere"), "subject must not contain line breaks"),
        (("--subject", "x" * 201), "subject is longer than 200 characters"),
        (("--subject", "Hi {{ nosuch }}"), "unknown variable 'nosuch'"),
        (("--text", "Welcome, no link here."), "{{ confirm_url }}"),
        (("--text", "{% if false %}{{ confirm_url }}{% endif %}"), "{{ confirm_url }}"),
        (("--text", "{{ confirm_url }} " + "x" * 10_000), "text is longer than 10,000 characters"),
        (("--text", "{{ confirm_url }} {{ ''.__class__ }}"), "names starting with '_' are not allowed"),
        (
            (
                "--text",
                "{{ confirm_url }}{% for i in range(10**6) %}{% for j in range(10**6) %}.{% endfor %}{% endfor %}",
            ),
            "text",
        ),
        (("--text", "{{ confirm_url }} {{ attributes.city }}"), "cannot be rendered for a new sign-up"),
        (("--text", "{{ confirm_url }}", "--text-file", str(text_file)), "not allowed with argument"),
        (("--text-file", str(tmp_path / "missing.txt")), "no such file"),
    ):
        said = one_line_error(form_open(dsn, "beta", *args))
        assert says in said, (args, said)
    assert await own_words(conn, "beta") == (SUBJECT, TEXT), "a refusal changes nothing"

    # another account's name for the list: not found, nothing told of beta's
    await conn.execute(
        "DELETE FROM einmal.lists l USING einmal.accounts a WHERE a.id = l.account_id AND a.name = 'alpha'"
    )
    other = form_open(dsn, "alpha", "--subject", "Mine now {{ campaign.name }}")
    assert other.returncode == 1 and "has no list named 'weekly'" in other.stderr, other.stderr
    assert await own_words(conn, "beta") == (SUBJECT, TEXT)

    kept = form_open(dsn, "beta")
    assert kept.returncode == 0 and await own_words(conn, "beta") == (SUBJECT, TEXT), "without them they stay"
    cleared = form_open(dsn, "beta", "--subject", "", "--text", "")
    assert cleared.returncode == 0, cleared.stderr
    assert await own_words(conn, "beta") == (None, None)
    assert texts.confirmation("en").subject in cleared.stderr and "einmal's text" in cleared.stderr


async def test_the_api_sets_shows_and_clears_a_lists_subject_and_text_for_its_own_account_only(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await two_clients(conn, dsn)
    keys = {}
    for account in ("alpha", "beta"):
        made = einmal("account", "key", "create", "--account", account, dsn=dsn)
        keys[account] = made.stdout.strip()
    checked_in: list[bool] = []
    check = templates.check

    def spy(*args, **kwargs):
        checked_in.append(threading.current_thread() is threading.main_thread())
        return check(*args, **kwargs)

    monkeypatch.setattr(templates, "check", spy)
    default = texts.confirmation("en")
    settings = {"optin_from": "Alpha <news@news.alpha.example>", "confirm_url": "http://127.0.0.1/confirm"}
    async with http_server(dsn, SECRET, **settings) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as api:
        beta, alpha = auth(keys["beta"]), auth(keys["alpha"])
        shown = (await api.get("/lists/weekly/form", headers=beta)).json()
        assert (shown["subject"], shown["text"]) == (None, None)
        assert (shown["default_subject"], shown["default_text"]) == (default.subject, default.body)
        body = {"open": True, "from": BETA_FROM, "subject": SUBJECT, "text": TEXT}
        put = await api.put("/lists/weekly/form", headers=beta, json=body)
        assert put.status_code == 200, put.text
        assert (put.json()["subject"], put.json()["text"]) == (SUBJECT, TEXT)
        assert checked_in and not any(checked_in), (
            checked_in,
            "the templates are checked in a worker thread, not the loop",
        )
        assert (await api.get("/lists/weekly/form", headers=beta)).json() == put.json()
        # alpha's own list 'weekly' is its own: beta's words are not shown there, nor changed from there
        theirs = (await api.get("/lists/weekly/form", headers=alpha)).json()
        assert (theirs["subject"], theirs["text"]) == (None, None)
        await conn.execute(
            "DELETE FROM einmal.lists l USING einmal.accounts a WHERE a.id = l.account_id AND a.name = 'alpha'"
        )
        assert (await api.get("/lists/weekly/form", headers=alpha)).status_code == 404
        stolen = await api.put("/lists/weekly/form", headers=alpha, json={"open": True, "subject": "Mine"})
        assert stolen.status_code == 404, stolen.text
        for bad, says in (
            ({"subject": "Hi\r\nBcc: victim@example.org"}, "subject must not contain line breaks"),
            ({"subject": "x" * 201}, "200"),
            ({"text": "no link at all"}, "{{ confirm_url }}"),
            ({"text": "{{ confirm_url }}" + "x" * 10_000}, "10,000"),
            ({"text": "{{ confirm_url }} {% import 'os' as os %}"}, "import is not allowed"),
            ({"subject": "{{ campaign.name"}, "subject"),
        ):
            refused = await api.put("/lists/weekly/form", headers=beta, json={"open": True, **bad})
            assert refused.status_code == 422, (bad, refused.text)
            error = refused.json()["error"]
            assert says in error and "\n" not in error and "Traceback" not in error, (bad, error)
        assert (await api.get("/lists/weekly/form", headers=beta)).json() == put.json(), "refusals change nothing"
        only_text = await api.put("/lists/weekly/form", headers=beta, json={"open": True, "subject": ""})
        assert (only_text.json()["subject"], only_text.json()["text"]) == (None, TEXT), "'' clears, absent stays"
    assert await own_words(conn, "beta") == (None, TEXT)


async def test_the_confirmation_sent_has_the_lists_own_words_and_einmals_once_they_are_cleared(
    conn: asyncpg.Connection, dsn: str, smtp_server: FaultServer
) -> None:
    await two_clients(conn, dsn)
    key = einmal("account", "key", "create", "--account", "beta", dsn=dsn).stdout.strip()
    list_id = await conn.fetchval(
        "SELECT l.id FROM einmal.lists l JOIN einmal.accounts a ON a.id = l.account_id WHERE a.name = 'beta'"
    )
    await conn.execute("UPDATE einmal.lists SET title = 'Beta Weekly' WHERE id = $1", list_id)
    port = free_port()
    settings = node_settings(
        dsn,
        smtp_server.port,
        unsubscribe_secret=SecretStr(SECRET),
        http_address=f"127.0.0.1:{port}",
        confirm_url=f"http://127.0.0.1:{port}/confirm",
    )
    async with running_node(settings), httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        await wait_ready(client, "/readyz")
        body = {"open": True, "from": BETA_FROM, "subject": SUBJECT, "text": TEXT}
        put = await client.put("/api/v1/lists/weekly/form", headers=auth(key), json=body)
        assert put.status_code == 200, put.text
        signed = await client.post(
            "/api/v1/subscribe", headers=auth(key), json={"list": "weekly", "email": "ann@example.org"}
        )
        assert signed.status_code == 202, signed.text
        with anyio.fail_after(30):
            [message] = await smtp_server.arrived(1)
        parsed = email.message_from_bytes(message.data, policy=policy.default)
        assert parsed["subject"] == "Beta: one click to Beta Weekly"
        assert parsed["from"] == BETA_FROM
        text = parsed.get_body(("plain",)).get_content()
        link = confirm_link(message.data)
        assert text.replace("\r\n", "\n").startswith(
            f"Hi from Beta!\n\nYou asked for Beta Weekly at ann@example.org. Click:\n{link}\n\nBeta Inc."
        ), text
        done = await client.post(link)
        assert done.status_code == 200 and await memberships(conn, list_id) == {"ann@example.org": "confirmed"}
        wording = await conn.fetchval("SELECT wording FROM einmal.list_members WHERE list_id = $1", list_id)
        assert wording.startswith("list-") and len(wording) == len("list-") + 12, wording
        # the hosted form's sign-ups get the list's words too
        form = put.json()["url"].removeprefix(f"http://127.0.0.1:{port}")
        posted = await client.post(form, data={"email": "cid@example.org"})
        assert posted.status_code == 200, posted.text
        with anyio.fail_after(30):
            [_, by_form] = await smtp_server.arrived(2)
        parsed = email.message_from_bytes(by_form.data, policy=policy.default)
        assert parsed["subject"] == "Beta: one click to Beta Weekly"
        assert "You asked for Beta Weekly at cid@example.org." in parsed.get_body(("plain",)).get_content()

        # cleared: the next confirmation is einmal's, in the account's language, the campaign rewritten
        cleared = await client.put(
            "/api/v1/lists/weekly/form", headers=auth(key), json={"open": True, "subject": "", "text": ""}
        )
        assert cleared.status_code == 200, cleared.text
        signed = await client.post(
            "/api/v1/subscribe", headers=auth(key), json={"list": "weekly", "email": "bob@example.org"}
        )
        assert signed.status_code == 202, signed.text
        with anyio.fail_after(30):
            [*_, second] = await smtp_server.arrived(3)
        parsed = email.message_from_bytes(second.data, policy=policy.default)
        assert parsed["subject"] == "Please confirm your subscription to Beta Weekly"
        assert "thank you for signing up" in parsed.get_body(("plain",)).get_content()
    assert dict(
        await conn.fetch(
            "SELECT s.email, m.wording FROM einmal.list_members m JOIN einmal.subscribers s "
            "ON s.id = m.subscriber_id WHERE m.list_id = $1",
            list_id,
        )
    ) == {"ann@example.org": wording, "cid@example.org": wording, "bob@example.org": "en-2"}
