"""Double opt-in over real HTTP against a real PostgreSQL, with a real node sending to a real SMTP capture
server: one confirmation per (list, mailbox) whatever is submitted, the link's GET never confirms and its
POST does (twice harmlessly), the same answer for every state of an address, flood bounds, campaigns to
confirmed members only, and the pruning of sign-ups never confirmed."""

import email
from email import policy

import anyio
import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from service import db
from service.errors import ConfigError
from service.mail import confirm, unsubscribe
from service.mail.mailing import Mailing
from service.settings import Settings
from service.subscribers import optin, texts
from service.subscribers.optin import SignUps
from tests.conftest import einmal
from tests.support.optin import (
    FORM,
    SECRET,
    SETTINGS,
    account_with_list,
    confirm_link,
    confirmation_rows,
    memberships,
    one_window,
)
from tests.support.pipeline import node_settings, running_node
from tests.support.smtp_servers import FaultServer, free_port
from tests.support.web import http_server
from tests.support.wiring import wiring
from tests.web.test_http_node import wait_ready

pytestmark = pytest.mark.anyio

SETTLE = 2.0  # seconds a second message would have had to arrive (ticks are 0.5 s)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def wait_rows(conn: asyncpg.Connection, status: str, count: int) -> None:
    with anyio.fail_after(30):
        while sum(r["status"] == status for r in await confirmation_rows(conn)) < count:
            await anyio.sleep(0.1)


async def test_an_api_sign_up_sends_one_confirmation_whose_link_confirms_on_post_only(
    conn: asyncpg.Connection, dsn: str, smtp_server: FaultServer
) -> None:
    _, list_id, key = await account_with_list(conn, dsn)
    port = free_port()
    settings = node_settings(
        dsn,
        smtp_server.port,
        unsubscribe_secret=SecretStr(SECRET),
        http_address=f"127.0.0.1:{port}",
        **{**SETTINGS, "confirm_url": f"http://127.0.0.1:{port}/confirm"},
    )
    body = {"list": "news", "email": "Ann@Example.org", "name": "Ann"}
    async with running_node(settings), httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        await wait_ready(client, "/readyz")
        answers = [await client.post("/api/v1/subscribe", json=body, headers=auth(key)) for _ in range(3)]
        answers.append(
            await client.post(
                "/api/v1/subscribe",
                json={**body, "email": "ann@example.org"},
                headers={**auth(key), "Idempotency-Key": "k1"},
            )
        )
        with anyio.fail_after(30):
            [message] = await smtp_server.arrived(1)
        await anyio.sleep(SETTLE)
        assert len(smtp_server.messages) == 1, "one confirmation, whatever was submitted"
        assert {(a.status_code, a.text) for a in answers} == {(202, answers[0].text)}
        assert message.rcpt_tos == ("Ann@Example.org",) and b"Please confirm your subscription to news" in message.data
        link = confirm_link(message.data)
        page = await client.get(link)
        assert page.status_code == 200 and '<form method="post"' in page.text and "A***@Example.org" in page.text
        assert await memberships(conn, list_id) == {"Ann@Example.org": "unconfirmed"}, "a GET never confirms"
        unsubscribe_token = unsubscribe.make_token(SECRET, *confirm.verify_token(SECRET, link.split("token=")[1]))
        forged = await client.post(f"/confirm?token={unsubscribe_token}")
        assert forged.status_code == 400 and await memberships(conn, list_id) == {"Ann@Example.org": "unconfirmed"}
        done = await client.post(link, headers={"User-Agent": "test-browser/1"})
        assert done.status_code == 200 and "is subscribed to" in done.text
        record = await conn.fetchrow("SELECT * FROM einmal.list_members WHERE list_id = $1", list_id)
        assert (record["state"], record["source"], record["wording"]) == ("confirmed", "api:1", "en-2")
        assert str(record["confirmed_ip"]) == "127.0.0.1" and record["confirmed_agent"] == "test-browser/1"
        again = await client.post(link, headers={"User-Agent": "someone-else"})
        assert again.status_code == 200 and again.text == done.text, "confirming twice says confirmed"
        assert await conn.fetchrow("SELECT * FROM einmal.list_members WHERE list_id = $1", list_id) == record
        resubmitted = await client.post("/api/v1/subscribe", json=body, headers=auth(key))
        assert (resubmitted.status_code, resubmitted.text) == (202, answers[0].text)
        assert await memberships(conn, list_id) == {"Ann@Example.org": "confirmed"}, "never back to unconfirmed"
        await anyio.sleep(SETTLE)
        assert len(smtp_server.messages) == 1
        # the confirmation campaign never finishes and is not among the operator's campaigns
        assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE kind = 'confirmation'") == "sending"
        assert (await client.get("/api/v1/campaigns", headers=auth(key))).json() == {"campaigns": [], "next": None}


async def test_every_state_of_an_address_gets_the_same_answer_and_only_a_new_one_a_message(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account_id, list_id, key = await account_with_list(conn, dsn, members=["member@example.org"])
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower) VALUES ($1, 'gone@example.org')", account_id
    )
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:
        api = [
            await client.post("/api/v1/subscribe", json={"list": "news", "email": address}, headers=auth(key))
            for address in ("member@example.org", "gone@example.org", "new@example.org", "new@example.org")
        ]
        form = [
            await client.post(FORM, data={"email": address})
            for address in ("member@example.org", "gone@example.org", "new@example.org", "other@example.org")
        ]
        keyed = [
            await client.post(
                "/api/v1/subscribe",
                json={"list": "news", "email": address},
                headers={**auth(key), "Idempotency-Key": "same"},
            )
            for address in ("new@example.org", "new@example.org", "other@example.org")
        ]
        missing = await client.post(
            "/api/v1/subscribe", json={"list": "nosuch", "email": "x@example.org"}, headers=auth(key)
        )
        bad = await client.post(
            "/api/v1/subscribe", json={"list": "news", "email": "not an address"}, headers=auth(key)
        )
    assert {(a.status_code, a.text) for a in api} == {(202, api[0].text)}
    assert {f.status_code for f in form} == {200}
    typed = ("member@example.org", "gone@example.org", "new@example.org", "other@example.org")
    # each page shows the address typed in it (the person's own words back), and else the same
    assert all(f"<strong>{t}</strong>" in f.text for f, t in zip(form, typed, strict=True))
    assert len({f.text.replace(t, "X") for f, t in zip(form, typed, strict=True)}) == 1
    assert (missing.status_code, bad.status_code) == (404, 422)
    assert [(k.status_code, k.headers.get("idempotent-replayed")) for k in keyed] == [
        (202, None),
        (202, "true"),
        (422, None),
    ], "Idempotency-Key: replayed, and refused for another body"
    assert await memberships(conn, list_id) == {
        "member@example.org": "confirmed",
        "gone@example.org": "unconfirmed",
        "new@example.org": "unconfirmed",
        "other@example.org": "unconfirmed",
    }
    rows = [(r["email"], r["status"]) for r in await confirmation_rows(conn)]
    assert rows == [("new@example.org", "queued"), ("other@example.org", "queued")], (
        "no message to a confirmed member, none to a suppressed address, one to each new one"
    )


async def test_a_form_submitted_twice_at_once_queues_one_confirmation(conn: asyncpg.Connection, dsn: str) -> None:
    await account_with_list(conn, dsn)
    answers = []
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:

        async def submit() -> None:
            answers.append(await client.post(FORM, data={"email": "twice@example.org", "name": "T"}))

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(submit)
    assert [a.status_code for a in answers] == [200] * 10
    assert [r["email"] for r in await confirmation_rows(conn)] == ["twice@example.org"]
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE kind = 'confirmation'") == 1


async def test_the_confirmation_is_in_the_accounts_language_and_each_sign_up_keeps_which_wording(
    conn: asyncpg.Connection, dsn: str, smtp_server: FaultServer
) -> None:
    """A German account's form sends a German confirmation; its list keeps that wording once made, and
    every sign-up records the wording it was sent (consent: which words were agreed to)."""
    account_id, list_id, key = await account_with_list(conn, dsn)
    await conn.execute("UPDATE einmal.accounts SET language = 'de' WHERE id = $1", account_id)
    port = free_port()
    settings = node_settings(
        dsn,
        smtp_server.port,
        unsubscribe_secret=SecretStr(SECRET),
        http_address=f"127.0.0.1:{port}",
        **{**SETTINGS, "confirm_url": f"http://127.0.0.1:{port}/confirm"},
    )
    async with running_node(settings), httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        await wait_ready(client, "/readyz")
        sent = await client.post(FORM, data={"email": "jan@example.org"})
        assert sent.status_code == 200 and "Sehen Sie in Ihr Postfach" in sent.text
        with anyio.fail_after(30):
            [message] = await smtp_server.arrived(1)
        parsed = email.message_from_bytes(message.data, policy=policy.default)
        assert parsed["subject"] == "Bitte bestätigen Sie Ihre Anmeldung für news"
        text = parsed.get_body(("plain",)).get_content()
        assert "„news“ an jan@example.org" in text and confirm_link(message.data) in text
        await conn.execute("UPDATE einmal.accounts SET language = 'en' WHERE id = $1", account_id)
        later = await client.post(
            "/api/v1/subscribe", json={"list": "news", "email": "kim@example.org"}, headers=auth(key)
        )
        assert later.status_code == 202
    assert dict(
        await conn.fetch(
            "SELECT s.email, m.wording FROM einmal.list_members m JOIN einmal.subscribers s "
            "ON s.id = m.subscriber_id WHERE m.list_id = $1",
            list_id,
        )
    ) == {"jan@example.org": "de-2", "kim@example.org": "de-2"}
    assert await conn.fetchval("SELECT language FROM einmal.campaigns WHERE kind = 'confirmation'") == "de"


def test_a_confirmation_message_that_is_no_template_stops_the_start_naming_its_language() -> None:
    settings = Settings(unsubscribe_secret=SecretStr(SECRET), **SETTINGS)
    optin.check_message(Mailing.of(settings), [texts.confirmation(code) for code in texts.LANGUAGES])
    broken = optin.Wording("xx", "Bitte {{ campaign.name", "{{ confirm_url }}")
    with pytest.raises(ConfigError, match=r"^the xx confirmation message: "):
        optin.check_message(Mailing.of(settings), [texts.confirmation("en"), broken])


async def test_sign_up_floods_are_bounded_per_address_and_per_client(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, _, key = await account_with_list(conn, dsn)
    other_lists = [
        await conn.fetchval(
            "INSERT INTO einmal.lists (account_id, name, form_open) VALUES ($1, $2, true) RETURNING id",
            account_id,
            f"l{i}",
        )
        for i in range(3)
    ]
    await one_window(conn, seconds=20)
    async with (
        http_server(dsn, SECRET, **SETTINGS, optin_address_limit=2, optin_client_limit=4) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        # one address signed up to four lists: two messages within the day
        answers = [
            await client.post(
                "/api/v1/subscribe", json={"list": name, "email": "victim@example.org"}, headers=auth(key)
            )
            for name in ("news", "l0", "l1", "l2")
        ]
        over = await client.post(
            "/api/v1/subscribe", json={"list": "news", "email": "x@example.org"}, headers=auth(key)
        )
        forms = [await client.post(FORM, data={"email": f"f{i}@example.org"}) for i in range(5)]
    assert [a.status_code for a in answers] == [202] * 4 and len({a.text for a in answers}) == 1
    assert over.status_code == 429 and 1 <= int(over.headers["retry-after"]) <= 3600, "the rest of the hour"
    assert [f.status_code for f in forms] == [200] * 4 + [429] and 1 <= int(forms[-1].headers["retry-after"]) <= 3600
    sent_to = [r["email"] for r in await confirmation_rows(conn)]
    assert sent_to.count("victim@example.org") == 2 and len(sent_to) == 2 + 4
    assert len(other_lists) == 3


async def test_campaigns_go_to_confirmed_members_only(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, list_id, key = await account_with_list(conn, dsn, members=["old@example.org"])
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:
        for address in ("new@example.org", "old@example.org"):
            answer = await client.post("/api/v1/subscribe", json={"list": "news", "email": address}, headers=auth(key))
            assert answer.status_code == 202
    campaign = await conn.fetchval(
        """
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
        VALUES ($1, 'spring', 's', 'news@example.com', 'b', $2, 'sending') RETURNING id""",
        account_id,
        [list_id],
    )
    await conn.fetchrow(*db.sql("recipients_build_chunk", campaign_id=campaign, after="", size=100))
    assert [
        r["email"] for r in await conn.fetch("SELECT email FROM einmal.sends WHERE campaign_id = $1", campaign)
    ] == ["old@example.org"]


async def test_sign_ups_unconfirmed_past_the_window_are_pruned_and_may_sign_up_anew(
    conn: asyncpg.Connection, dsn: str
) -> None:
    _, list_id, key = await account_with_list(conn, dsn, members=["old@example.org"])
    settings = Settings(database_url=dsn, unsubscribe_secret=SecretStr(SECRET), **SETTINGS)
    async with http_server(dsn, SECRET, **SETTINGS) as base, httpx.AsyncClient(base_url=base) as client:
        for address in ("late@example.org", "recent@example.org"):
            await client.post("/api/v1/subscribe", json={"list": "news", "email": address}, headers=auth(key))
        await conn.execute("UPDATE einmal.sends SET status = 'sent'")
        await conn.execute(
            "UPDATE einmal.list_members SET created_at = now() - interval '73 hours' "
            "WHERE state = 'unconfirmed' AND subscriber_id = "
            "(SELECT id FROM einmal.subscribers WHERE email = 'late@example.org')"
        )
        late = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'late@example.org'")
        campaign = await conn.fetchval("SELECT id FROM einmal.campaigns WHERE kind = 'confirmation'")
        token = confirm.Signer(SECRET).token(await conn.fetchval("SELECT id FROM einmal.accounts"), campaign, late)
        expired = await client.post(f"/confirm?token={token}")
        assert expired.status_code == 410, "a link past the window confirms nothing"
        assert await optin.prune(conn, settings) == (1, 1)
        assert await memberships(conn, list_id) == {"old@example.org": "confirmed", "recent@example.org": "unconfirmed"}
        assert [r["email"] for r in await confirmation_rows(conn)] == ["recent@example.org"]
        await client.post("/api/v1/subscribe", json={"list": "news", "email": "late@example.org"}, headers=auth(key))
    assert [(r["email"], r["status"]) for r in await confirmation_rows(conn)] == [
        ("recent@example.org", "sent"),
        ("late@example.org", "queued"),
    ]
    assert await optin.prune(conn, settings) == (0, 0)


async def test_a_node_without_retention_prunes_sign_ups_past_the_window_at_start(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account_id, list_id, _ = await account_with_list(conn, dsn, members=["kept@example.org"])
    settings = Settings(database_url=dsn, unsubscribe_secret=SecretStr(SECRET), **SETTINGS)
    for address in ("old@example.org", "new@example.org"):
        await optin.sign_up(
            conn, SignUps.of(settings), optin.SignUp(list_id, account_id, address, "", "form", texts.confirmation("en"))
        )
    await conn.execute(
        "UPDATE einmal.list_members SET created_at = now() - interval '4 days' "
        "WHERE subscriber_id = (SELECT id FROM einmal.subscribers WHERE email = 'old@example.org')"
    )
    # its confirmation is not yet due, so the node's claim cannot take it before its pruner deletes it (a row
    # claimed or on the wire is kept, rightly)
    await conn.execute(
        "UPDATE einmal.sends SET next_attempt_at = now() + interval '1 hour' WHERE email_lower = 'old@example.org'"
    )
    with FaultServer() as server:
        async with running_node(
            node_settings(dsn, server.port, unsubscribe_secret=SecretStr(SECRET), optin_window_hours=72, **SETTINGS)
        ):
            with anyio.fail_after(30):
                while "old@example.org" in await memberships(conn, list_id):
                    await anyio.sleep(0.1)
    assert await memberships(conn, list_id) == {"kept@example.org": "confirmed", "new@example.org": "unconfirmed"}
    assert [r["email"] for r in await confirmation_rows(conn)] == ["new@example.org"]


def test_double_opt_in_settings_are_checked() -> None:
    for bad, says in (
        ({"confirm_url": "http://example.org/confirm"}, "https"),
        ({"confirm_url": "https://example.org/confirm\r\nX: y"}, "line breaks"),
        ({"optin_window_hours": 0}, "greater than 0"),
    ):
        with pytest.raises(ValueError, match=says):
            Settings(unsubscribe_secret=SecretStr(SECRET), **bad)
    with pytest.raises(ValueError, match="EINMAL_UNSUBSCRIBE_SECRET must be set when EINMAL_CONFIRM_URL"):
        Settings(**SETTINGS)
    with pytest.raises(optin.NotConfigured):
        optin.check_configured(Mailing.of(Settings(unsubscribe_secret=SecretStr(SECRET))))


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_node_refuses_a_confirmation_from_that_is_not_an_address(command: str) -> None:
    result = einmal(
        command,
        dsn="postgresql://nobody@127.0.0.1:1/none",
        env={
            "EINMAL_UNSUBSCRIBE_SECRET": SECRET,
            "EINMAL_HTTP_ADDRESS": "127.0.0.1:0",
            "EINMAL_OPTIN_FROM": "News <not an address>",
            "EINMAL_CONFIRM_URL": SETTINGS["confirm_url"],
        },
    )
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.startswith("einmal: EINMAL_OPTIN_FROM: from address: ") and result.stderr.count("\n") == 1


async def test_the_api_tells_a_sign_up_awaiting_confirmation_from_a_member(conn: asyncpg.Connection, dsn: str) -> None:
    _, list_id, key = await account_with_list(conn, dsn, members=["bob@example.org"])
    async with (
        http_server(dsn, SECRET, **SETTINGS) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        signed = await client.post("/subscribe", json={"list": "news", "email": "ann@example.org"})
        assert signed.status_code == 202
        ann = (await client.get("/subscribers/ann@example.org")).json()
        assert (ann["lists"], ann["unconfirmed_lists"]) == ([], ["news"]), "no campaign reaches her yet"
        assert [(x["name"], x["members"], x["unconfirmed"]) for x in (await client.get("/lists")).json()] == [
            ("news", 1, 1)
        ]
        members = (await client.get("/subscribers", params={"list": "news"})).json()["subscribers"]
        assert [s["email"] for s in members] == ["bob@example.org"], "a list's members are its confirmed ones"
        put = (await client.put("/lists/news/members/ann@example.org")).json()
        assert (put["added"], put["state"]) == (False, "unconfirmed"), "only the link confirms a sign-up"
        await conn.execute("UPDATE einmal.list_members SET state = 'confirmed' WHERE list_id = $1", list_id)
        ann = (await client.get("/subscribers/ann@example.org")).json()
        assert (ann["lists"], ann["unconfirmed_lists"]) == (["news"], [])


async def test_a_sign_up_wakes_the_claimers_and_the_scheduler_never_waits_on_its_campaign(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """A list's confirmations are a campaign always sending, never finished: a sign-up wakes the claimers
    (einmal_queued), not the scheduler, whose every tick on a new connection it was; and a tick does not lock
    that campaign to ask whether it is done."""
    account_id, list_id, _ = await account_with_list(conn, dsn)
    settings = Settings(database_url=dsn, unsubscribe_secret=SecretStr(SECRET), **SETTINGS)
    pool = await db.create_pool(dsn, size=2)
    node = wiring(node_settings(dsn, free_port(), unsubscribe_secret=SecretStr(SECRET), **SETTINGS), pool, dsn)
    node.fencing.new_token()
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(node.listener().run)
            await node.wakeups.scheduler.wait(0)  # the listener's start nudges both
            await node.wakeups.claimer.wait(0)
            request = optin.SignUp(list_id, account_id, "new@example.org", "", "form", texts.confirmation("en"))
            assert await optin.sign_up(conn, SignUps.of(settings), request)
            assert await node.wakeups.claimer.wait(5), "the claimers heard of the row"
            assert not await node.wakeups.scheduler.wait(0.5), "the scheduler did not"
            tg.cancel_scope.cancel()
        blocker = await asyncpg.connect(dsn)
        try:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM einmal.campaigns WHERE kind = 'confirmation' FOR UPDATE")
                to_builder, from_scheduler = anyio.create_memory_object_stream[int](16)
                async with to_builder, from_scheduler:
                    with anyio.fail_after(5):
                        await node.scheduler().tick(to_builder)
        finally:
            await blocker.close()
    finally:
        await pool.close()
