"""One mailbox, however its address is spelled, is one recipient and one suppression.

NFC and NFD, upper and lower case (non-ASCII too, whatever the database's
locale), and the U-label and A-label (xn--) forms of an internationalised
domain name one mailbox: real imports, real nodes, a real SMTP server."""

import unicodedata
import uuid
from pathlib import Path

import anyio
import asyncpg
import pytest

from service import db
from service.addresses import email_key
from service.db.migrate import BOOTSTRAP, migrate
from service.inbound import events as inbound
from service.smtp.capture import capture_server
from tests.conftest import _admin, einmal, with_database
from tests.support.claims import claim_args
from tests.support.pipeline import (
    Received,
    approve,
    node_env,
    recording_server,
    seed,
    start_node,
    stop_node,
    wait_status,
)

pytestmark = pytest.mark.anyio

ANNA = "anna@bücher.example"
ANNA_SPELLINGS = [ANNA, unicodedata.normalize("NFD", ANNA), "ANNA@BÜCHER.EXAMPLE", "anna@xn--bcher-kva.example"]


def test_the_four_spellings_of_one_mailbox_have_one_key() -> None:
    assert len(set(ANNA_SPELLINGS)) == 4
    assert {email_key(a) for a in ANNA_SPELLINGS} == {"anna@bücher.example"}


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Anna@XN--BCHER-KVA.Example", "anna@bücher.example"),  # an A-label in upper case
        ("anna@ｂücher。example", "anna@bücher.example"),  # full-width letter, ideographic full stop (UTS #46)
        ("ΟΔΟΣ@example.gr", "οδος@example.gr"),  # final sigma
        ("ΟΔΟΣ@example.gr", "οδοσ@example.gr"),  # ς and σ are one letter: case folding, not lower()
        ("STRASSE@example.de", "straße@example.de"),  # full case folding: ß is ss in a local part
        ("ÅSA@example.se", "a\u030asa@example.se"),
    ],
)
def test_spellings_of_one_mailbox_share_a_key(a: str, b: str) -> None:
    assert email_key(a) == email_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("anna@straße.example", "anna@strasse.example"),  # IDNA 2008: two domains
        ("anna@xn--bcher-kva.example", "anna@bcher-kva.example"),
        ("anna@example.com", "anne@example.com"),
    ],
)
def test_different_mailboxes_keep_different_keys(a: str, b: str) -> None:
    assert email_key(a) != email_key(b)


@pytest.mark.parametrize(
    "address",
    [*ANNA_SPELLINGS, "x@xn--zz.example", "no-domain", "a@b@c", "Straße@İ.example", "ǅ\u0345\u0390@ΣΑΣ.example", ""],
)
def test_the_key_of_a_key_is_itself(address: str) -> None:
    assert email_key(email_key(address)) == email_key(address)


def check(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def delivered_to(folder: Path) -> list[str]:
    """The envelope recipient of every captured message (UTF-8 with SMTPUTF8)."""
    return [
        line.split(b": ", 1)[1].decode("utf-8")
        for path in sorted(folder.glob("*.eml"))
        for line in path.read_bytes().split(b"\r\n")
        if line.startswith(b"Delivered-To: ")
    ]


async def send_campaign(dsn: str, tmp_path: Path, addresses: list[str], suppress: list[str] = ()) -> int:
    """Import `addresses`, suppress `suppress`, then send a campaign to them with a real node; its id."""
    csv_file = tmp_path / "subscribers.csv"
    csv_file.write_text("email\n" + "\n".join(addresses) + "\n", encoding="utf-8")
    check(einmal("subscribers", "import", "--account", "acme", "--create-account", str(csv_file), dsn=dsn))
    if suppress:
        check(einmal("suppress", "--account", "acme", *suppress, dsn=dsn))
    campaign = int(
        check(
            einmal(
                "campaign",
                "create",
                "--account",
                "acme",
                "--name",
                "n",
                "--subject",
                "Hi",
                "--from",
                "news@example.com",
                "--text",
                "Hello {{ email }}",
                dsn=dsn,
            )
        )
    )
    check(einmal("campaign", "approve", str(campaign), dsn=dsn))
    conn = await asyncpg.connect(dsn)
    try:
        async with capture_server(tmp_path / "mail") as (_, port):
            node = start_node(node_env(dsn, port), tmp_path / "node.log")
            try:
                await wait_status(conn, campaign, "sent", timeout=120)
            finally:
                assert await stop_node(node) == 0, (tmp_path / "node.log").read_text()
    finally:
        await conn.close()
    return campaign


async def sends(conn: asyncpg.Connection, campaign: int) -> dict[str, str]:
    rows = await conn.fetch("SELECT email, status FROM einmal.sends WHERE campaign_id = $1", campaign)
    return {r["email"]: r["status"] for r in rows}


async def test_four_spellings_of_one_mailbox_get_one_send_row_and_one_message(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    campaign = await send_campaign(dsn, tmp_path, [*ANNA_SPELLINGS, "carl@example.com"])

    assert [r["email"] for r in await conn.fetch("SELECT email FROM einmal.subscribers ORDER BY id")] == [
        ANNA,
        "carl@example.com",
    ], "one subscriber per mailbox, in the spelling first imported"
    assert await sends(conn, campaign) == {ANNA: "sent", "carl@example.com": "sent"}, "the first imported wins"
    assert sorted(delivered_to(tmp_path / "mail")) == sorted([ANNA, "carl@example.com"])


async def test_suppressing_the_a_label_form_stops_the_u_label_address(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    campaign = await send_campaign(
        dsn, tmp_path, ["bob@bücher.example", "carl@example.com"], suppress=["bob@xn--bcher-kva.example"]
    )

    assert await sends(conn, campaign) == {"bob@bücher.example": "suppressed", "carl@example.com": "sent"}
    assert delivered_to(tmp_path / "mail") == ["carl@example.com"]
    assert await conn.fetchval("SELECT email_lower FROM einmal.suppressions") == "bob@bücher.example"


async def test_an_inbound_event_with_the_a_label_form_suppresses_every_spelling(conn: asyncpg.Connection) -> None:
    acme = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    assert await inbound.apply(conn, "esp:1", "bounce", acme, "BOB@xn--bcher-kva.example")
    assert not await inbound.apply(conn, "esp:1", "bounce", acme, "bob@bücher.example"), "the same payload"
    assert [tuple(r) for r in await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")] == [
        ("bob@bücher.example", "bounce")
    ]


@pytest.fixture
async def c_locale_dsn(server_url: str):
    """A migrated database whose LC_CTYPE and LC_COLLATE are C: lower('Ü') there is 'Ü'."""
    name = f"einmal_c_{uuid.uuid4().hex[:12]}"
    await _admin(server_url, f"CREATE DATABASE {name} ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    dsn = with_database(server_url, name)
    try:
        yield dsn
    finally:
        await _admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_case_variants_of_a_non_ascii_address_are_one_recipient_in_a_c_locale_database(
    c_locale_dsn: str, tmp_path: Path
) -> None:
    check(einmal("migrate", dsn=c_locale_dsn))
    conn = await asyncpg.connect(c_locale_dsn)
    try:
        assert await conn.fetchval("SELECT lower('Ü')") == "Ü", "the database's lower() ignores non-ASCII letters"
        campaign = await send_campaign(
            c_locale_dsn, tmp_path, ["ÜLLA@BÜCHER.EXAMPLE", "ülla@bücher.example", "Ülla@Bücher.Example"]
        )
        assert await sends(conn, campaign) == {"ÜLLA@BÜCHER.EXAMPLE": "sent"}
    finally:
        await conn.close()
    assert delivered_to(tmp_path / "mail") == ["ÜLLA@BÜCHER.EXAMPLE"]


async def apply_first_migration(conn: asyncpg.Connection) -> None:
    """The schema as einmal 0001 left it."""
    version, name, sql = db.migrations()[0]
    assert version == 1
    await conn.execute(BOOTSTRAP)
    await conn.execute(sql)
    await conn.execute("INSERT INTO einmal.migrations (version, name) VALUES ($1, $2)", version, name)


async def test_the_migration_rekeys_existing_rows_and_merges_what_became_one_mailbox(c_locale_dsn: str) -> None:
    nfd = unicodedata.normalize("NFD", ANNA)
    conn = await asyncpg.connect(c_locale_dsn)
    try:
        await apply_first_migration(conn)
        acme = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
        subscriber = {}
        for email in [*ANNA_SPELLINGS, "carl@example.com"]:
            subscriber[email] = await conn.fetchval(
                "INSERT INTO einmal.subscribers (account_id, email) VALUES ($1, $2) RETURNING id", acme, email
            )
        assert await conn.fetchval("SELECT count(DISTINCT email_lower) FROM einmal.subscribers") == 5

        async def campaign_with(statuses: dict[str, str]) -> int:
            campaign = await conn.fetchval(
                "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, "
                "status) VALUES ($1, 'c', 's', 'news@example.com', 'b', '{}', 'sending') RETURNING id",
                acme,
            )
            for email, status in statuses.items():
                await conn.execute(
                    "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, "
                    "status, claimed_by) SELECT $1, $2, $3::bigint, $4, lower($4), "
                    "'campaign:' || $1::bigint || ':' || $3::bigint, $5::text, "
                    "CASE WHEN $5::text IN ('claimed', 'sending') THEN 'node-a' END",
                    campaign,
                    acme,
                    subscriber[email],
                    email,
                    status,
                )
            return campaign

        # today's schema lets every spelling have its own row in one campaign
        first = await campaign_with(
            {
                ANNA: "queued",
                nfd: "sent",
                "ANNA@BÜCHER.EXAMPLE": "in_doubt",
                "anna@xn--bcher-kva.example": "failed",
                "carl@example.com": "queued",
            }
        )
        second = await campaign_with({ANNA: "queued", "anna@xn--bcher-kva.example": "suppressed"})
        third = await campaign_with({"ANNA@BÜCHER.EXAMPLE": "queued", "anna@xn--bcher-kva.example": "claimed"})
        await conn.execute(
            """
            INSERT INTO einmal.suppressions (account_id, email_lower, reason, created_at) VALUES
                ($1, 'bob@xn--bcher-kva.example', 'complaint', now() - interval '2 days'),
                ($1, 'bob@bücher.example', 'bounce', now() - interval '1 day'),
                ($1, $2, 'manual', now()),
                ($1, 'dora@example.com', 'manual', now())""",
            acme,
            unicodedata.normalize("NFD", "eve@bücher.example"),
        )

        assert (await migrate(conn))[0] == "0002_address_key"  # and any later ones

        keys = await conn.fetch("SELECT email, email_lower FROM einmal.subscribers")
        assert {r["email"]: r["email_lower"] for r in keys} == {
            **{spelling: ANNA for spelling in ANNA_SPELLINGS},
            "carl@example.com": "carl@example.com",
        }
        assert await sends(conn, first) == {nfd: "sent", "carl@example.com": "queued"}, "a 'sent' is never lost"
        assert await sends(conn, second) == {"anna@xn--bcher-kva.example": "suppressed"}
        assert await sends(conn, third) == {"anna@xn--bcher-kva.example": "claimed"}
        assert set(await conn.fetch("SELECT email_lower FROM einmal.sends WHERE email <> 'carl@example.com'")) == {
            (ANNA,)
        }
        rows = await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions ORDER BY email_lower")
        assert [tuple(r) for r in rows] == [
            ("bob@bücher.example", "complaint"),
            ("dora@example.com", "manual"),
            ("eve@bücher.example", "manual"),
        ]
        with pytest.raises(asyncpg.UniqueViolationError):  # the constraint holds the keys from now on
            await conn.execute(
                "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id) "
                "VALUES ($1, $2, $3, $4, $4, 'campaign:' || $1::bigint || ':' || $3::bigint)",
                second,
                acme,
                subscriber[ANNA],
                ANNA,
            )
        assert await migrate(conn) == []
    finally:
        await conn.close()


async def test_an_opt_out_by_the_a_label_form_after_the_build_is_honoured_at_claim(
    dsn: str, conn: asyncpg.Connection
) -> None:
    campaign = await seed(conn, ["Bob@Bücher.example", "carl@example.com"])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    await conn.fetchrow(*db.sql("recipients_build_chunk", campaign_id=campaign, after="", size=100))
    assert set((await sends(conn, campaign)).values()) == {"queued"}

    result = await anyio.to_thread.run_sync(
        lambda: einmal("suppress", "--account", "acme", "bob@xn--bcher-kva.example", dsn=dsn)
    )
    assert result.returncode == 0, result.stderr
    claimed = await conn.fetch(*db.sql("send_claim_batch", **claim_args(campaign, "node-a/1")))  # no limits
    assert {r["email"]: r["status"] for r in claimed} == {
        "Bob@Bücher.example": "suppressed",
        "carl@example.com": "claimed",
    }


async def test_a_no_such_user_bounce_suppresses_the_mailbox_not_only_its_spelling(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    campaign = await seed(conn, ["BOB@XN--BCHER-KVA.EXAMPLE", "carl@example.com"])
    received = Received(decide=lambda rcpt: "550 5.1.1 no such user" if rcpt.startswith("BOB") else None)
    async with recording_server(received) as port:
        node = start_node(node_env(dsn, port), tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=120)
        finally:
            assert await stop_node(node) == 0, (tmp_path / "node.log").read_text()
    assert await sends(conn, campaign) == {"BOB@XN--BCHER-KVA.EXAMPLE": "failed", "carl@example.com": "sent"}
    rows = await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in rows] == [("bob@bücher.example", "bounce")], "the key of every spelling of bob"
