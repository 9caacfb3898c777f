"""`einmal campaign list|preview|test`, the pause reason and top failures in `status`, and --at."""

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from email import message_from_bytes, message_from_string
from email import policy as email_policy
from email.policy import default as default_policy
from pathlib import Path

import asyncpg
import httpx
import pytest

from service.cli.campaigns import scheduled_for
from service.errors import Invalid
from tests.cli.test_campaign_commands import one_line_error, seed_account, seed_campaign
from tests.conftest import ROOT, cells, einmal
from tests.support.pipeline import node_env, start_node, stop_node, wait_status

pytestmark = pytest.mark.anyio

UNSUBSCRIBE = {
    "EINMAL_UNSUBSCRIBE_URL": "https://news.example.org/u",
    "EINMAL_UNSUBSCRIBE_SECRET": "s3cret-of-at-least-32-characters-x",
}  # a node needs 32 at least


async def create(dsn: str, *extra: str) -> int:
    result = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "spring",
        "--subject",
        "Hi {{ name }} in {{ attributes.city | default('town') }}",
        "--from",
        "News <news@example.org>",
        "--text",
        "Dear {{ name }},\n{% if attributes.plan == 'pro' %}pro{% else %}free{% endif %}\n{{ unsubscribe_url }}\n",
        *extra,
        dsn=dsn,
        env=UNSUBSCRIBE,
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


async def seed_subscribers(conn: asyncpg.Connection) -> None:
    account = await seed_account(conn)
    list_id = await conn.fetchval("SELECT id FROM einmal.lists WHERE name = 'default'")
    for email, name, attributes in [
        ("ann@example.org", "Ann", {"city": "Köln", "plan": "pro"}),
        ("bob@example.org", "Bob", {"plan": "free"}),
    ]:
        subscriber = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, name, "
            "attributes) VALUES ($1, $2, $2, $3, $4) RETURNING id",
            account,
            email,
            name,
            json.dumps(attributes),
        )
        await conn.execute("INSERT INTO einmal.list_members VALUES ($1, $2)", list_id, subscriber)


# -- status: why paused, why failed ------------------------------------------------------


async def test_an_operator_pause_is_shown_with_its_reason_and_cleared_by_resume(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sending")
    assert einmal("campaign", "pause", str(campaign), dsn=dsn).returncode == 0
    status = einmal("campaign", "status", str(campaign), dsn=dsn)
    assert status.stdout.splitlines()[0] == f"campaign {campaign} 'spring': paused (by operator)"
    assert (
        json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)["pause_reason"]
        == "by operator"
    )
    assert einmal("campaign", "resume", str(campaign), dsn=dsn).returncode == 0
    assert await conn.fetchval("SELECT pause_reason FROM einmal.campaigns WHERE id = $1", campaign) is None


async def test_status_lists_the_most_frequent_failure_replies_with_their_counts(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("failed",) * 5 + ("sent",))
    replies = ["550 5.1.1 no such user"] * 3 + ["552 5.2.2 mailbox full"] * 2
    await conn.execute(
        "UPDATE einmal.sends SET last_reply = ($2::text[])[id - (SELECT min(id) FROM einmal.sends) + 1] "
        "WHERE campaign_id = $1 AND status = 'failed'",
        campaign,
        replies,
    )
    lines = einmal("campaign", "status", str(campaign), dsn=dsn).stdout.splitlines()
    assert lines[lines.index("top failure replies:") + 1 :] == [
        "      3  550 5.1.1 no such user",
        "      2  552 5.2.2 mailbox full",
    ]
    failures = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)["failures"]
    assert failures == [
        {"reply": "550 5.1.1 no such user", "count": 3},
        {"reply": "552 5.2.2 mailbox full", "count": 2},
    ]


# -- list -------------------------------------------------------------------------------


async def test_campaign_list_shows_every_campaign_newest_first_or_those_of_one_status(
    conn: asyncpg.Connection, dsn: str
) -> None:
    draft = await seed_campaign(conn, "draft")
    sending = await seed_campaign(conn, "sending", sends=("queued", "sent"))
    everything = einmal("campaign", "list", dsn=dsn)
    assert everything.returncode == 0, everything.stderr
    assert [cells(line)[0] for line in everything.stdout.splitlines()] == ["id", str(sending), str(draft)]
    only = einmal("campaign", "list", "--status", "sending", dsn=dsn).stdout.splitlines()
    assert cells(only[0]) == ["id", "account", "name", "status", "started", "recipients"]
    assert len(only) == 2 and cells(only[1])[:4] == [str(sending), "acme", "spring", "sending"]
    assert cells(only[1])[-1] == "2"
    bad = einmal("campaign", "list", "--status", "sendingg", dsn=dsn)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr and "Traceback" not in bad.stderr


# -- preview and test ---------------------------------------------------------------------


async def test_preview_prints_the_message_of_the_named_subscriber(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await seed_subscribers(conn)
    campaign = await create(dsn)
    first = einmal("campaign", "preview", str(campaign), dsn=dsn, env=UNSUBSCRIBE)
    assert first.returncode == 0, first.stderr
    assert "Subject: Hi Ann in Köln\n" in first.stdout  # decoded for a person to read
    assert "To: Ann <ann@example.org>\n" in first.stdout and "\npro\n" in first.stdout.replace("=\n", "")
    raw_first = einmal("campaign", "preview", str(campaign), "--raw", dsn=dsn, env=UNSUBSCRIBE)
    assert "Subject: Hi Ann in Köln" not in raw_first.stdout  # on the wire non-ASCII goes as an encoded word
    assert 'To: "Ann" <ann@example.org>' in raw_first.stdout
    bob = einmal(
        "campaign",
        "preview",
        str(campaign),
        "--subscriber",
        "BOB@example.org",
        "--out",
        str(tmp_path / "bob.eml"),
        dsn=dsn,
        env=UNSUBSCRIBE,
    )
    assert bob.returncode == 0, bob.stderr
    raw = (tmp_path / "bob.eml").read_bytes()
    assert b"Subject: Hi Bob in town\r\n" in raw and b"\r\nfree\r\n" in raw
    missing = einmal(
        "campaign", "preview", str(campaign), "--subscriber", "nobody@example.org", dsn=dsn, env=UNSUBSCRIBE
    )
    assert one_line_error(missing) == f"einmal: campaign {campaign}'s account has no subscriber 'nobody@example.org'"


async def test_preview_prints_the_body_decoded_and_raw_prints_it_as_on_the_wire(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    await seed_subscribers(conn)
    long_line = "Grüße aus Köln, " * 8  # over 76 characters and not ASCII: quoted-printable with soft breaks
    created = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "qp",
        "--subject",
        "Hi",
        "--from",
        "news@example.org",
        "--text",
        f"{long_line}\n{{{{ unsubscribe_url }}}}\n",
        "--html-file",
        str(_html(tmp_path)),
        dsn=dsn,
        env=UNSUBSCRIBE,
    )
    assert created.returncode == 0, created.stderr
    args = ("campaign", "preview", created.stdout.strip(), "--subscriber", "ann@example.org")
    decoded = einmal(*args, dsn=dsn, env=UNSUBSCRIBE)
    raw = einmal(*args, "--raw", dsn=dsn, env=UNSUBSCRIBE)
    assert decoded.returncode == 0 and raw.returncode == 0, (decoded.stderr, raw.stderr)
    assert f"--- text/plain ---\n{long_line}\n" in decoded.stdout
    assert "--- text/html ---\n<p>Ann &amp; Köln</p>\n" in decoded.stdout
    assert "=C3=BC" not in decoded.stdout and "=\n" not in decoded.stdout.split("\n\n", 1)[1]

    def dateless(text: str) -> str:  # the time of rendering aside
        return re.sub(r"(?m)^Date: .*\n", "", text)

    sent = message_from_string(raw.stdout, policy=email_policy.default)  # the header as sent, decoded
    assert dateless(decoded.stdout.split("\n\n", 1)[0]) == dateless(
        "\n".join(f"{name}: {' '.join(str(value).split())}" for name, value in sent.items())
    )
    assert long_line not in raw.stdout and "Gr=C3=BC=C3=9Fe" in raw.stdout  # the wire form, quoted-printable
    einmal(*args, "--out", str(tmp_path / "out.eml"), dsn=dsn, env=UNSUBSCRIBE)
    assert dateless((tmp_path / "out.eml").read_bytes().decode().replace("\r\n", "\n")) == dateless(raw.stdout)


async def test_campaign_test_sends_the_preview_to_another_mailbox_and_touches_no_row(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, smtp_server
) -> None:
    await seed_subscribers(conn)
    campaign = await create(dsn, "--html-file", str(_html(tmp_path)))
    env = UNSUBSCRIBE | {"EINMAL_SMTP_HOST": smtp_server.host, "EINMAL_SMTP_PORT": str(smtp_server.port)}
    einmal(
        "campaign",
        "preview",
        str(campaign),
        "--subscriber",
        "ann@example.org",
        "--out",
        str(tmp_path / "ann.eml"),
        dsn=dsn,
        env=env,
    )
    result = einmal(
        "campaign", "test", str(campaign), "--to", "qa@example.net", "--subscriber", "ann@example.org", dsn=dsn, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"test message of campaign {campaign} sent to qa@example.net: 250")
    [received] = smtp_server.wait_for(1)
    assert received.rcpt_tos == ("qa@example.net",) and received.mail_from == "news@example.org"

    def comparable(raw: bytes) -> bytes:  # the time, the recipient and the test's own marks aside, the same bytes
        raw = re.sub(rb"(?m)^(Date|To|Subject|Message-ID|List-Unsubscribe): [^\r]*\r\n( [^\r]*\r\n)*", b"", raw)
        return re.sub(rb"token=[^\s>&<]+", b"token=T", raw.replace(b"=\r\n", b""))  # QP's soft breaks aside

    assert comparable(received.data) == comparable((tmp_path / "ann.eml").read_bytes())
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends") == 0


async def test_preview_is_byte_for_byte_what_the_campaign_delivers_to_that_subscriber(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, smtp_server
) -> None:
    await seed_subscribers(conn)
    campaign = await create(dsn, "--html-file", str(_html(tmp_path)))
    env = UNSUBSCRIBE | {"EINMAL_SMTP_HOST": smtp_server.host, "EINMAL_SMTP_PORT": str(smtp_server.port)}
    previews = {}
    for email in ("ann@example.org", "bob@example.org"):
        out = tmp_path / f"{email}.eml"
        result = einmal(
            "campaign", "preview", str(campaign), "--subscriber", email, "--out", str(out), dsn=dsn, env=env
        )
        assert result.returncode == 0, result.stderr
        previews[email] = out.read_bytes()
    assert einmal("campaign", "approve", str(campaign), dsn=dsn).returncode == 0
    node = start_node(node_env(dsn, smtp_server.port, **UNSUBSCRIBE), tmp_path / "node.log")
    try:
        received = {m.rcpt_tos[0]: m.data for m in smtp_server.wait_for(2, timeout=60)}
        await wait_status(conn, campaign, "sent")
    finally:
        assert await stop_node(node) == 0

    def dateless(raw: bytes) -> bytes:  # the time of rendering aside
        return re.sub(rb"(?m)^Date: [^\r]*\r\n", b"", raw)

    assert sorted(received) == sorted(previews)
    for email, preview in previews.items():
        assert dateless(received[email]) == dateless(preview)


async def test_preview_shows_an_international_domain_as_its_a_label_in_to_and_from(
    conn: asyncpg.Connection, dsn: str
) -> None:
    from service.addresses import email_key

    account = await seed_account(conn)
    list_id = await conn.fetchval("SELECT id FROM einmal.lists WHERE name = 'default'")
    for email in ("hans@bücher.example", "jörg@bücher.example"):
        subscriber = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, name) "
            "VALUES ($1, $2, $3, 'H') RETURNING id",
            account,
            email,
            email_key(email),
        )
        await conn.execute("INSERT INTO einmal.list_members VALUES ($1, $2)", list_id, subscriber)
    result = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "idn",
        "--subject",
        "Hi",
        "--from",
        "News <news@bücher.example>",
        "--text",
        "Dear {{ name }}\n{{ unsubscribe_url }}\n",
        dsn=dsn,
        env=UNSUBSCRIBE,
    )
    assert result.returncode == 0, result.stderr
    hans = einmal(
        "campaign", "preview", result.stdout.strip(), "--subscriber", "hans@bücher.example", dsn=dsn, env=UNSUBSCRIBE
    )
    assert hans.returncode == 0, hans.stderr
    head = hans.stdout.split("\n\n", 1)[0]
    assert head.isascii() and "\nTo: H <hans@xn--bcher-kva.example>\n" in head
    assert "From: News <news@xn--bcher-kva.example>\n" in head
    jorg = einmal(
        "campaign", "preview", result.stdout.strip(), "--subscriber", "jörg@bücher.example", dsn=dsn, env=UNSUBSCRIBE
    )
    assert "\nTo: H <jörg@bücher.example>\n" in jorg.stdout


def _html(tmp_path: Path) -> Path:
    path = tmp_path / "body.html"
    path.write_text("<p>{{ name }} &amp; {{ attributes.city | default('') }}</p>\n")
    return path


async def test_a_reader_that_goes_away_is_not_reported_as_a_database_error(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_campaign(conn, "paused", sends=("sent", "failed"))
    read, write = os.pipe()
    os.close(read)  # like `einmal campaign status 1 | head -1` once head has its line
    try:
        result = subprocess.run(  # noqa: ASYNC221 -- nothing else runs
            [sys.executable, "-m", "service", "campaign", "list"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("EINMAL_")} | {"EINMAL_DATABASE_URL": dsn},
        )
    finally:
        os.close(write)
    assert result.returncode == 1 and result.stderr == ""


# -- --at ----------------------------------------------------------------------------------

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-12-01T09:00 Europe/Berlin", datetime(2026, 12, 1, 8, 0, tzinfo=UTC)),
        ("2026-07-01T09:00 Europe/Berlin", datetime(2026, 7, 1, 7, 0, tzinfo=UTC)),
        ("2026-12-01T09:00 America/New_York", datetime(2026, 12, 1, 14, 0, tzinfo=UTC)),
        ("2026-12-01T09:00+01:00", datetime(2026, 12, 1, 8, 0, tzinfo=UTC)),
        ("2026-12-01T09:00", datetime(2026, 12, 1, 9, 0, tzinfo=UTC)),
        ("now", None),
        (" NOW ", None),
    ],
)
def test_at_takes_an_offset_an_iana_zone_or_now(value, expected) -> None:
    assert scheduled_for(value, now=NOW) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-05-31T09:00 Europe/Berlin", "is in the past"),
        ("2020-01-01T00:00:00Z", "is in the past"),
        ("2026-12-01T09:00 Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        ("2026-12-01T09:00 ../../etc/passwd", "unknown time zone"),
        ("2026-12-01T09:00+01:00 Europe/Berlin", "an offset or a time zone, not both"),
    ],
)
def test_at_refuses_the_past_unknown_zones_and_both_an_offset_and_a_zone(value, message) -> None:
    with pytest.raises(Invalid, match=re.escape(message)):
        scheduled_for(value, now=NOW)


async def test_create_refuses_a_past_at_in_one_line(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    result = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "N",
        "--subject",
        "S",
        "--from",
        "a@example.org",
        "--text",
        "Hi",
        "--at",
        "2001-01-01T00:00 Europe/Berlin",
        dsn=dsn,
    )
    assert result.returncode == 2, result.stderr  # a bad argument (docs/reference/cli.md: 2 for bad arguments)
    assert result.stderr.startswith("einmal: --at '2001-01-01T00:00 Europe/Berlin' is in the past")
    assert len(result.stderr.splitlines()) == 1
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 0


async def test_a_test_message_is_marked_has_its_own_message_id_and_a_link_that_unsubscribes_nobody(
    conn: asyncpg.Connection, dsn: str, smtp_server
) -> None:
    """`campaign test --subscriber li` renders li's message, but pressing its link must not suppress li,
    and its Message-ID must not be the one li's real message carries (a receiver de-duplicating would drop
    one of them)."""
    from tests.support.web import SECRET, http_server

    await seed_subscribers(conn)
    env = UNSUBSCRIBE | {
        "EINMAL_UNSUBSCRIBE_SECRET": SECRET,
        "EINMAL_SMTP_HOST": smtp_server.host,
        "EINMAL_SMTP_PORT": str(smtp_server.port),
    }
    campaign = await create(dsn)
    ann = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'ann@example.org'")
    for extra in ((), ("--subject-prefix", "[Probe] ")):
        result = einmal(
            "campaign",
            "test",
            str(campaign),
            "--to",
            "qa@example.net",
            "--subscriber",
            "ann@example.org",
            *extra,
            dsn=dsn,
            env=env,
        )
        assert result.returncode == 0, result.stderr
    first, second = smtp_server.wait_for(2)
    message = message_from_bytes(first.data, policy=default_policy)
    assert str(message["Subject"]).startswith("[TEST] Hi Ann")
    assert str(message_from_bytes(second.data, policy=default_policy)["Subject"]).startswith("[Probe] ")
    assert message["Message-ID"] != f"<campaign.{campaign}.{ann}@example.org>"
    assert message["Message-ID"].startswith(f"<test.{campaign}.")
    assert message["Message-ID"] != message_from_bytes(second.data)["Message-ID"]
    link = re.search(r"<(https://news.example.org/u\?token=([^>]+))>", message["List-Unsubscribe"]).group(2)
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        page = await client.get(f"{base}/unsubscribe?token={link}")
        pressed = await client.post(f"{base}/unsubscribe?token={link}", data={"List-Unsubscribe": "One-Click"})
    assert "test message" in page.text and pressed.status_code == 200
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0
    assert await conn.fetchval("SELECT count(*) FROM einmal.inbound_events") == 0


async def test_a_test_messages_to_carries_the_recipients_name_as_a_real_message_does(
    conn: asyncpg.Connection, dsn: str, smtp_server
) -> None:
    """The To of a test message names its recipient as the campaign's own messages name theirs
    (service/mail/render.py mailbox): --name when given, else the name of the subscriber the address is, else
    the name of the subscriber whose message it is; quoted, or RFC 2047 words for what is not ASCII. A name with
    a line break is refused and nothing is sent."""
    await seed_subscribers(conn)
    env = UNSUBSCRIBE | {"EINMAL_SMTP_HOST": smtp_server.host, "EINMAL_SMTP_PORT": str(smtp_server.port)}
    campaign = await create(dsn)
    sent = {
        "bob, a subscriber": ("--to", "Bob@Example.org"),
        "a name given": ("--to", "qa@example.net", "--name", 'Doe, "QA" Team'),
        "a name not ASCII": ("--to", "bob@example.org", "--name", "Jörg Ünter"),
        "nobody known": ("--to", "qa@example.net"),
        "no name": ("--to", "qa@example.net", "--name", ""),
    }
    for what, options in sent.items():
        result = einmal(
            "campaign", "test", str(campaign), *options, "--subscriber", "ann@example.org", dsn=dsn, env=env
        )
        assert result.returncode == 0, (what, result.stderr)
    received = smtp_server.wait_for(len(sent))
    heads = [m.data.split(b"\r\n\r\n", 1)[0] + b"\r\n" for m in received]
    to_lines = [re.search(rb"(?m)^To: .*\r\n(?: .*\r\n)*", head)[0] for head in heads]
    assert to_lines[:2] == [b'To: "Bob" <Bob@Example.org>\r\n', b'To: "Doe, \\"QA\\" Team" <qa@example.net>\r\n']
    assert to_lines[2] == b"To: =?utf-8?b?SsO2cmcgw5xudGVy?= <bob@example.org>\r\n", to_lines[2]
    assert to_lines[3:] == [b'To: "Ann" <qa@example.net>\r\n', b"To: qa@example.net\r\n"]
    parsed = [message_from_bytes(m.data, policy=default_policy)["To"].addresses[0] for m in received]
    assert [a.display_name for a in parsed] == ["Bob", 'Doe, "QA" Team', "Jörg Ünter", "Ann", ""]
    subjects = [str(message_from_bytes(m.data, policy=default_policy)["Subject"]) for m in received]
    assert subjects == ["[TEST] Hi Ann in Köln"] * len(sent), "the message is still ann's"
    for bad in ("Eve\r\nBcc: evil@example.net", "Eve\nBcc: evil@example.net", "x" * 1001):
        refused = einmal("campaign", "test", str(campaign), "--to", "qa@example.net", "--name", bad, dsn=dsn, env=env)
        assert refused.returncode == 1 and refused.stderr.startswith("einmal: --name"), refused.stderr
        assert len(refused.stderr.splitlines()) == 1 and "Traceback" not in refused.stderr
    with pytest.raises(AssertionError):
        smtp_server.wait_for(len(sent) + 1, timeout=1)
