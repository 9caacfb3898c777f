"""`einmal subscribers list|show|export|delete` and `einmal suppressions list|remove`."""

import csv
import io
import json
from pathlib import Path

import asyncpg
import pytest

from tests.cli.test_campaign_commands import one_line_error
from tests.conftest import cells, einmal

pytestmark = pytest.mark.anyio

CSV = 'email,name,list,city,plan\nann@example.org,Ann,news|vip,Köln,pro\nbob@example.org,"Bob, Jr.",news,,free\n'


def imported(dsn: str, tmp_path: Path, content: str = CSV, account: str = "acme") -> None:
    path = tmp_path / f"{account}.csv"
    path.write_text(content)
    result = einmal("subscribers", "import", "--account", account, "--create-account", str(path), dsn=dsn)
    assert result.returncode == 0, result.stderr


async def test_list_and_show_give_lists_attributes_and_suppression(dsn: str, tmp_path: Path) -> None:
    imported(dsn, tmp_path)
    einmal("suppress", "--account", "acme", "BOB@example.org", "--reason", "complaint", dsn=dsn)
    listing = einmal("subscribers", "list", "--account", "acme", dsn=dsn)
    assert listing.stdout.splitlines() == [
        "email            name      status      lists",
        "ann@example.org  Ann       confirmed   news|vip",
        "bob@example.org  Bob, Jr.  complained  news",
    ]
    vip = einmal("subscribers", "list", "--account", "acme", "--list", "vip", dsn=dsn)
    assert vip.stdout.splitlines()[1:] == ["ann@example.org  Ann   confirmed  news|vip"]
    bob = einmal("subscribers", "show", "--account", "acme", "Bob@Example.org", dsn=dsn).stdout
    assert "email: bob@example.org\n" in bob and "suppressed: complaint\n" in bob
    assert json.loads(bob.split("attributes: ")[1].splitlines()[0]) == {"plan": "free"}  # an empty cell: no value
    nobody = einmal("subscribers", "show", "--account", "acme", "eve@example.org", dsn=dsn)
    assert one_line_error(nobody) == "einmal: account 'acme' has no subscriber 'eve@example.org'"
    typo = einmal("subscribers", "list", "--account", "acmee", dsn=dsn)
    assert one_line_error(typo) == "einmal: no account named 'acmee'"


async def test_export_is_read_back_by_import_into_the_same_subscribers(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    imported(dsn, tmp_path)
    exported = einmal("subscribers", "export", "--account", "acme", dsn=dsn)
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert rows == [
        {
            "email": "ann@example.org",
            "name": "Ann",
            "list": "news|vip",
            "unconfirmed": "",
            "suppressed": "",
            "city": "Köln",
            "plan": "pro",
        },
        {
            "email": "bob@example.org",
            "name": "Bob, Jr.",
            "list": "news",
            "unconfirmed": "",
            "suppressed": "",
            "city": "",
            "plan": "free",
        },
    ]
    imported(dsn, tmp_path, exported.stdout, account="copy")
    query = (
        "SELECT s.email, s.name, s.attributes, array_agg(l.name ORDER BY l.name) AS lists "
        "FROM einmal.subscribers s JOIN einmal.accounts a ON a.id = s.account_id "
        "JOIN einmal.list_members m ON m.subscriber_id = s.id JOIN einmal.lists l ON l.id = m.list_id "
        "WHERE a.name = $1 GROUP BY s.id ORDER BY s.email"
    )
    original = [tuple(r) for r in await conn.fetch(query, "acme")]
    copy = [tuple(r) for r in await conn.fetch(query, "copy")]
    assert original == copy and len(copy) == 2


async def test_an_export_carries_the_suppressions_into_the_account_it_is_imported_into(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    imported(dsn, tmp_path)
    suppressed = einmal("suppress", "--account", "acme", "BOB@example.org", "--reason", "unsubscribe", dsn=dsn)
    assert suppressed.returncode == 0, suppressed.stderr
    exported = einmal("subscribers", "export", "--account", "acme", dsn=dsn)
    rows = {r["email"]: r["suppressed"] for r in csv.DictReader(io.StringIO(exported.stdout))}
    assert rows == {"ann@example.org": "", "bob@example.org": "unsubscribe"}
    path = tmp_path / "copy.csv"
    path.write_text(exported.stdout)
    result = einmal("subscribers", "import", "--account", "copy", "--create-account", str(path), dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "imported 2, already present 0, rejected 0, suppressed 1\n"
    suppressed = await conn.fetch(
        "SELECT x.email_lower, x.reason FROM einmal.suppressions x "
        "JOIN einmal.accounts a ON a.id = x.account_id WHERE a.name = 'copy'"
    )
    assert [tuple(r) for r in suppressed] == [("bob@example.org", "unsubscribe")]
    attributes = await conn.fetchval(
        "SELECT s.attributes FROM einmal.subscribers s JOIN einmal.accounts a "
        "ON a.id = s.account_id WHERE a.name = 'copy' AND s.email = 'bob@example.org'"
    )
    assert "suppressed" not in json.loads(attributes)  # a column of its own, not an attribute
    listing = einmal("subscribers", "list", "--account", "copy", dsn=dsn).stdout.splitlines()
    assert listing[2] == "bob@example.org  Bob, Jr.  unsubscribed  news"


async def test_list_and_export_refuse_a_list_the_account_does_not_have(dsn: str, tmp_path: Path) -> None:
    imported(dsn, tmp_path)
    for verb in ("list", "export"):
        result = einmal("subscribers", verb, "--account", "acme", "--list", "nosuch", dsn=dsn)
        assert one_line_error(result) == "einmal: account 'acme' has no list named 'nosuch'"
        assert result.stdout == ""


async def test_delete_erases_the_data_keeps_the_suppression_and_never_mails_the_address_again(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    imported(dsn, tmp_path)
    ann = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'ann@example.org'")
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status) "
        "SELECT account_id, 'c', 'S', 'n@example.org', 'Hi', '{}', 'sending' FROM einmal.subscribers "
        "WHERE id = $1 RETURNING id",
        ann,
    )
    await conn.execute(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id,"
        " last_reply, status) SELECT $1, account_id, id, email, email_lower, "
        "'campaign:' || $1::bigint || ':' || id, '550 <ann@example.org> unknown', 'queued' "
        "FROM einmal.subscribers WHERE id = $2",
        campaign,
        ann,
    )
    result = einmal("subscribers", "delete", "--account", "acme", "ann@example.org", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "erased ann@example.org; its address stays suppressed\n"
    line = await conn.fetchrow(
        "SELECT actor, a.name, action, subject FROM einmal.audit_log JOIN einmal.accounts a ON a.id = account_id "
        "WHERE action <> 'subscriber.import'"
    )
    assert tuple(line) == ("cli", "acme", "subscriber.erase", f"subscriber {ann}")
    dump = ""
    for table in ("subscribers", "sends", "list_members"):
        dump += " ".join(str(tuple(r)) for r in await conn.fetch(f"SELECT * FROM einmal.{table}"))
    assert "ann@" not in dump and "Ann" not in dump and "Köln" not in dump
    assert await conn.fetchval("SELECT status FROM einmal.sends WHERE subscriber_id = $1", ann) == "suppressed"
    assert (
        await conn.fetchval("SELECT reason FROM einmal.suppressions WHERE email_lower = 'ann@example.org'") == "erased"
    )
    imported(dsn, tmp_path, "email\nann@example.org\n")  # imported again: still suppressed
    assert "suppressed: erased" in einmal("subscribers", "show", "--account", "acme", "ann@example.org", dsn=dsn).stdout


async def test_delete_refuses_while_a_message_to_the_subscriber_is_being_sent(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    imported(dsn, tmp_path)
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status) "
        "SELECT id, 'c', 'S', 'n@example.org', 'Hi', '{}', 'sending' FROM einmal.accounts RETURNING id"
    )
    await conn.execute(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id,"
        " status, claimed_by) SELECT $1, account_id, id, email, email_lower, "
        "'campaign:' || $1::bigint || ':' || id, 'sending', 'node-a' FROM einmal.subscribers "
        "WHERE email = 'bob@example.org'",
        campaign,
    )
    result = einmal("subscribers", "delete", "--account", "acme", "bob@example.org", dsn=dsn)
    assert one_line_error(result).startswith("einmal: a message to 'bob@example.org' is being sent right now")
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers WHERE email = 'bob@example.org'") == 1
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0


async def test_suppressions_list_and_remove(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    imported(dsn, tmp_path)
    einmal("suppress", "--account", "acme", "Ann@example.org", "bob@example.org", "--reason", "bounce", dsn=dsn)
    einmal("suppress", "--account", "acme", "BOB@example.org", dsn=dsn)  # no change: no line
    listing = einmal("suppressions", "list", "--account", "acme", dsn=dsn).stdout.splitlines()
    assert [cells(line)[:2] for line in listing] == [
        ["email", "reason"],
        ["ann@example.org", "bounce"],
        ["bob@example.org", "bounce"],
    ]
    removed = einmal("suppressions", "remove", "--account", "acme", "ANN@example.org", "eve@example.org", dsn=dsn)
    assert removed.stdout == "removed 1, not suppressed 1\n"
    assert [
        cells(line)[0] for line in einmal("suppressions", "list", "--account", "acme", dsn=dsn).stdout.splitlines()
    ] == ["email", "bob@example.org"]
    einmal("suppressions", "remove", "--account", "acme", "eve@example.org", dsn=dsn)  # no change: no line
    lines = await conn.fetch(
        "SELECT l.actor, a.name, l.action, l.subject FROM einmal.audit_log l JOIN einmal.accounts a "
        "ON a.id = l.account_id WHERE l.action <> 'subscriber.import' ORDER BY l.id"
    )
    assert [tuple(r) for r in lines] == [
        ("cli", "acme", "suppression.add", "2 of 2 mailboxes: ann@example.org, bob@example.org"),
        ("cli", "acme", "suppression.remove", "1 of 2 mailboxes: ann@example.org, eve@example.org"),
    ]


async def test_suppressions_remove_finds_every_spelling_of_the_mailbox(dsn: str, tmp_path: Path) -> None:
    """`remove` compares mailbox keys as `suppress` stores them (service/addresses.py), not
    PostgreSQL's lower(): ß folds to ss, an A-label domain is its Unicode form."""
    imported(dsn, tmp_path)
    given = ["Straße@example.org", "anna@bücher.example", "ΟΔΟΣ@example.org"]
    einmal("suppress", "--account", "acme", *given, dsn=dsn)
    removed = einmal(
        "suppressions",
        "remove",
        "--account",
        "acme",
        "STRASSE@Example.org",
        "Anna@xn--bcher-kva.example",
        "οδοσ@example.org",
        "straße@example.org",
        dsn=dsn,
    )
    assert removed.stdout == "removed 3, not suppressed 0\n", removed.stderr
    assert einmal("suppressions", "list", "--account", "acme", dsn=dsn).stdout == ""


async def test_every_lookup_by_address_compares_mailbox_keys_as_the_import_stored_them(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    """An address typed as `export` prints it (an A-label domain), or any other spelling of the
    mailbox (ß folded to ss), finds its subscriber: show, delete and preview ask the mailbox key
    (service/addresses.py), not PostgreSQL's lower()."""
    imported(dsn, tmp_path, "email,name\nanna@xn--bcher-kva.example,Anna\nStraße@example.org,Gert\n")
    assert (
        einmal("subscribers", "export", "--account", "acme", dsn=dsn).stdout.splitlines()[1]
        == "anna@xn--bcher-kva.example,Anna,default,,"
    )
    for typed in ("anna@xn--bcher-kva.example", "ANNA@Bücher.example", "anna@bücher.example"):
        shown = einmal("subscribers", "show", "--account", "acme", typed, dsn=dsn)
        assert shown.returncode == 0 and "email: anna@xn--bcher-kva.example\n" in shown.stdout, shown.stderr
    assert (
        "email: Straße@example.org\n"
        in einmal("subscribers", "show", "--account", "acme", "STRASSE@example.org", dsn=dsn).stdout
    )
    campaign = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "c",
        "--subject",
        "Hi {{ name }}",
        "--from",
        "news@example.org",
        "--text",
        "Hello {{ name }}",
        dsn=dsn,
    )
    assert campaign.returncode == 0, campaign.stderr
    preview = einmal("campaign", "preview", campaign.stdout.strip(), "--subscriber", "strasse@EXAMPLE.org", dsn=dsn)
    assert preview.returncode == 0 and "Subject: Hi Gert" in preview.stdout, preview.stderr
    erased = einmal("subscribers", "delete", "--account", "acme", "anna@xn--bcher-kva.example", dsn=dsn)
    assert erased.returncode == 0, erased.stderr
    assert (
        await conn.fetchval("SELECT reason FROM einmal.suppressions WHERE email_lower = 'anna@bücher.example'")
        == "erased"
    )


async def test_an_erased_subscriber_is_gone_from_every_view_and_its_old_links_name_nobody(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    import httpx

    from service.mail.unsubscribe import make_token
    from tests.support.web import SECRET, http_server

    imported(dsn, tmp_path)
    ann, account = await conn.fetchrow("SELECT id, account_id FROM einmal.subscribers WHERE email = 'ann@example.org'")
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status) "
        "VALUES ($1, 'c', 'S', 'n@example.org', 'Hi', '{}', 'sent') RETURNING id",
        account,
    )
    assert einmal("subscribers", "delete", "--account", "acme", "ann@example.org", dsn=dsn).returncode == 0
    listing = einmal("subscribers", "list", "--account", "acme", dsn=dsn)
    assert listing.stdout.splitlines()[1:] == ["bob@example.org  Bob, Jr.  confirmed  news"]
    assert "erased" not in einmal("subscribers", "export", "--account", "acme", dsn=dsn).stdout
    link = f"/unsubscribe?token={make_token(SECRET, account, campaign, ann)}"
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base) as client:
        page = await client.get(link)
        pressed = await client.post(link, data={"List-Unsubscribe": "One-Click"})
    assert (page.status_code, pressed.status_code) == (404, 404) and "erased" not in page.text
    suppressions = await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in suppressions] == [("ann@example.org", "erased")]


async def test_accounts_list_names_each_account_with_its_creation_and_subscriber_count(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    assert einmal("accounts", "list", dsn=dsn).stderr.startswith("no accounts")
    path = tmp_path / "two.csv"
    path.write_text(CSV)
    first = einmal("subscribers", "import", "--account", "acmee", "--create-account", str(path), dsn=dsn)
    said = "list news: 2 added\nlist vip: 1 added\n"
    assert first.stderr == "einmal: created account 'acmee'\n" + said  # a typo makes an account: never silently
    again = einmal("subscribers", "import", "--account", "acmee", "--create-account", str(path), dsn=dsn)
    # it existed: nothing created, nothing said of it
    assert (
        again.returncode == 0
        and again.stderr == "list news: 0 added, 2 already on it\nlist vip: 0 added, 1 already on it\n"
    )
    imported(dsn, tmp_path, "email\nc@example.org\n", account="acme")
    created = dict(await conn.fetch("SELECT name, created_at FROM einmal.accounts"))
    listing = einmal("accounts", "list", dsn=dsn)
    assert listing.returncode == 0, listing.stderr
    assert [cells(line) for line in listing.stdout.splitlines()] == [
        ["name", "created", "subscribers"],
        ["acme", created["acme"].isoformat(timespec="seconds"), "1"],
        ["acmee", created["acmee"].isoformat(timespec="seconds"), "2"],
    ]
