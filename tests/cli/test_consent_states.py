"""A sign-up awaiting confirmation stays one through every path out and back in (export, import, the API),
and the state einmal shows of a subscriber is what is true of it: unconfirmed, unsubscribed, bounced."""

import csv
import io
import json
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import einmal
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

CSV = "email,name,list,city\nann@example.org,Ann,news,Köln\nbob@example.org,Bob,news,\n"


async def signed_up(conn: asyncpg.Connection, account: str, email: str, list_name: str) -> None:
    """What a sign-up of the form leaves: a subscriber, its membership unconfirmed."""
    await conn.execute(
        """WITH s AS (INSERT INTO einmal.subscribers (account_id, email, email_lower)
                      SELECT id, $2, lower($2) FROM einmal.accounts WHERE name = $1 RETURNING id, account_id)
           INSERT INTO einmal.list_members (list_id, subscriber_id, state)
           SELECT l.id, s.id, 'unconfirmed' FROM s JOIN einmal.lists l ON l.account_id = s.account_id
           WHERE l.name = $3""",
        account,
        email,
        list_name,
    )


def imported(dsn: str, tmp_path: Path, content: str, account: str) -> str:
    path = tmp_path / f"{account}.csv"
    path.write_text(content)
    result = einmal("subscribers", "import", "--account", account, "--create-account", str(path), dsn=dsn)
    assert result.returncode == 0, result.stderr
    return result.stdout


async def memberships(conn: asyncpg.Connection, account: str) -> set[tuple[str, str, str]]:
    rows = await conn.fetch(
        """SELECT s.email, l.name, m.state FROM einmal.list_members m
                               JOIN einmal.subscribers s ON s.id = m.subscriber_id
                               JOIN einmal.lists l ON l.id = m.list_id
                               JOIN einmal.accounts a ON a.id = l.account_id WHERE a.name = $1""",
        account,
    )
    return {tuple(r) for r in rows}


async def test_an_unconfirmed_sign_up_stays_unconfirmed_through_export_and_import(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    imported(dsn, tmp_path, CSV, "acme")
    await signed_up(conn, "acme", "pat@example.org", "news")
    shown = einmal("subscribers", "show", "--account", "acme", "pat@example.org", dsn=dsn).stdout
    assert "status: unconfirmed\n" in shown and "lists: -\n" in shown and "awaiting confirmation: news\n" in shown
    listing = einmal("subscribers", "list", "--account", "acme", dsn=dsn).stdout
    assert [line.split()[:3] for line in listing.splitlines()[1:]] == [
        ["ann@example.org", "Ann", "confirmed"],
        ["bob@example.org", "Bob", "confirmed"],
        ["pat@example.org", "-", "unconfirmed"],
    ]
    news = einmal("subscribers", "list", "--account", "acme", "--list", "news", dsn=dsn).stdout
    assert "pat@example.org" not in news  # a member of a list is a confirmed one
    exported = einmal("subscribers", "export", "--account", "acme", dsn=dsn).stdout
    rows = {r["email"]: r for r in csv.DictReader(io.StringIO(exported))}
    assert (rows["pat@example.org"]["list"], rows["pat@example.org"]["unconfirmed"]) == ("", "news")
    assert rows["ann@example.org"]["list"] == "news"
    for account in ("copy", "acme"):  # into another account, and back into the same one
        summary = imported(dsn, tmp_path, exported, account)
        assert "1 awaiting confirmation, put on no list" in summary, summary
        found = await memberships(conn, account)
        assert ("pat@example.org", "news", "confirmed") not in found
        assert ("pat@example.org", "default", "confirmed") not in found
        assert ("ann@example.org", "news", "confirmed") in found
    copy = await conn.fetchrow(
        "SELECT s.attributes FROM einmal.subscribers s JOIN einmal.accounts a "
        "ON a.id = s.account_id WHERE a.name = 'copy' AND s.email = 'bob@example.org'"
    )
    assert json.loads(copy["attributes"]) == {}  # an empty cell is no value, not ""


async def test_the_status_shown_is_what_is_true_of_the_subscriber(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    imported(dsn, tmp_path, CSV + "cy@example.org,Cy,news,\ndee@example.org,Dee,news,\n", "acme")
    await signed_up(conn, "acme", "pat@example.org", "news")
    for email, reason in (
        ("bob@example.org", "unsubscribe"),
        ("cy@example.org", "bounce"),
        ("dee@example.org", "complaint"),
    ):
        assert einmal("suppress", "--account", "acme", email, "--reason", reason, dsn=dsn).returncode == 0
    key = make_key(dsn, "acme", "--scope", "read")
    expected = {
        "confirmed": ["ann@example.org"],
        "unconfirmed": ["pat@example.org"],
        "unsubscribed": ["bob@example.org"],
        "bounced": ["cy@example.org"],
        "complained": ["dee@example.org"],
    }
    async with http_server(dsn) as url, httpx.AsyncClient(base_url=f"{url}/api/v1") as client:
        for status, emails in expected.items():
            answer = await client.get("/subscribers", params={"status": status}, headers=auth(key))
            assert answer.status_code == 200, answer.text
            assert [s["email"] for s in answer.json()["subscribers"]] == emails, status
            assert {s["status"] for s in answer.json()["subscribers"]} == {status}
    for status, emails in expected.items():
        for email in emails:
            shown = einmal("subscribers", "show", "--account", "acme", email, dsn=dsn).stdout
            assert f"status: {status}\n" in shown, (email, shown)
