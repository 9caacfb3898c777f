"""Two accounts on one node (or two), each sending as itself (docs/design.md#sending-identity): its own From
domain and DKIM key, its own relay, its own return path and secret. Relays are aiosmtpd servers on loopback,
nodes are `einmal run` processes; the environment's relay must see nothing."""

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import asyncpg
import dkim as dkimpy
import dns.exception
import dns.nameserver
import dns.resolver
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from service import db
from service.addresses import email_key
from service.inbound.bounces import ReturnPaths
from service.mail import dkim, verp
from service.settings import Settings
from tests.sending.test_budget import worst_window
from tests.support.claims import claim_args
from tests.support.dns_server import dns_server, txt
from tests.support.pipeline import approve, counts, node_env, start_node, stop_node, wait_status
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio

ENV_SECRET = "the-environment-return-path-secret"


@dataclass
class Account:
    id: int
    campaign: int
    domain: str
    selector: str
    key: object
    return_path: str
    secret: str
    relay: FaultServer
    recipients: list[str]

    def path(self) -> verp.ReturnPath:
        return verp.ReturnPath(self.return_path, self.secret)


def pem(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


async def relay_row(conn: asyncpg.Connection, name: str, server: FaultServer, rate: float | None = None) -> int:
    return await conn.fetchval(
        "INSERT INTO einmal.relays (name, url, rate) VALUES ($1, $2, $3) RETURNING id",
        name,
        f"smtp://{server.host}:{server.port}",
        rate,
    )


async def account(
    conn: asyncpg.Connection, name: str, key, relay_id: int, server: FaultServer, recipients: int, status: str = "draft"
) -> Account:
    """An account with its own domain, DKIM key, relay, return path and mailto, and a campaign to `recipients`."""
    domain, selector, secret = f"{name}.example", f"{name}2026", f"{name}-return-path-secret-long-enough"
    return_path = f"bounces@mail.{domain}"
    account_id = await conn.fetchval(
        "INSERT INTO einmal.accounts (name, return_path, return_path_secret, unsubscribe_mailto)"
        " VALUES ($1, $2, $3, $4) RETURNING id",
        name,
        return_path,
        secret,
        f"unsubscribe@{domain}",
    )
    await conn.execute(
        "INSERT INTO einmal.account_domains (account_id, domain, selectors, keys) VALUES ($1, $2, $3, $4)",
        account_id,
        domain,
        [selector],
        [pem(key)],
    )
    await conn.execute("INSERT INTO einmal.account_relays (account_id, relay_id) VALUES ($1, $2)", account_id, relay_id)
    emails = [f"{name}{i}@rcpt-{name}.example" for i in range(recipients)]
    list_id = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default') RETURNING id", account_id
    )
    await conn.execute(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower, name)"
        " SELECT $1, e, k, 'Name' FROM unnest($2::text[], $3::text[]) AS m (e, k)",
        account_id,
        emails,
        [email_key(e) for e in emails],
    )
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT $1, id FROM einmal.subscribers"
        " WHERE account_id = $2",
        list_id,
        account_id,
    )
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)"
        " VALUES ($1, 'news', 'Hi {{ name }}', $2, 'Hello {{ name }}, for {{ email }}.', $3) RETURNING id",
        account_id,
        f"News <news@{domain}>",
        [list_id],
    )
    return Account(account_id, campaign, domain, selector, key, return_path, secret, server, emails)


def dns_of(*accounts: Account):
    """The TXT records of every account's key, as the DNS would serve them."""
    records = {f"{a.selector}._domainkey.{a.domain}": dkim.public_record(a.key) for a in accounts}

    def dnsfunc(name, timeout=5):
        return records.get((name.decode() if isinstance(name, bytes) else name).rstrip("."))

    return dnsfunc


@contextmanager
def dns_served(folder: Path, *accounts: Account) -> Iterator:
    """Each account's zone, its key's TXT record at SELECTOR._domainkey, served by a real DNS server on loopback
    (tests/support/dns_server.py); a dnsfunc for dkimpy that asks it over DNS."""
    zones = {a.domain: [txt(f"{a.selector}._domainkey", dkim.public_record(a.key).decode())] for a in accounts}
    with dns_server(folder, zones) as at:
        host, port = at.rsplit(":", 1)
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [dns.nameserver.Do53Nameserver(host, int(port))]
        resolver.lifetime = 5.0

        def dnsfunc(name, timeout=5):
            try:
                answer = resolver.resolve(name.decode() if isinstance(name, bytes) else name, "TXT")
            except dns.exception.DNSException:
                return None
            return b"".join(b"".join(r.strings) for r in answer)

        yield dnsfunc


def signed_by(data: bytes) -> tuple[str, str]:
    """(d=, s=) of the message's DKIM-Signature."""
    head = data.split(b"\r\n\r\n", 1)[0].replace(b"\r\n ", b" ").replace(b"\r\n\t", b" ")
    field = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"dkim-signature:"))
    d = re.search(rb"\bd=([^;\s]+)", field)
    s = re.search(rb"\bs=([^;\s]+)", field)
    assert d and s
    return d.group(1).decode(), s.group(1).decode()


def assert_sent_as_itself(a: Account, other: Account, dnsfunc) -> None:
    """Every message at a's relay is a's: its recipients, its key (dkimpy verifies), its return path with a
    token its secret signed (and the other's does not)."""
    messages = a.relay.messages
    assert messages, "nothing reached the relay"
    for m in messages:
        assert m.rcpt_tos[0] in a.recipients, m.rcpt_tos
        assert signed_by(m.data) == (a.domain, a.selector)
        assert dkimpy.verify(m.data, dnsfunc=dnsfunc, minkey=1024), m.rcpt_tos
        ours, token = a.path().ours(m.mail_from)
        assert ours and token and a.path().verify(token) is not None, m.mail_from
        assert a.secret not in m.mail_from
        assert other.path().ours(m.mail_from) == (False, None)
        assert f"mailto:unsubscribe@{a.domain}".encode() in m.data
        assert other.domain.encode() not in m.data


def two_keys():
    return ed25519.Ed25519PrivateKey.generate(), rsa.generate_private_key(public_exponent=65537, key_size=2048)


def env_for(dsn: str, env_relay: FaultServer, **extra: str) -> dict[str, str]:
    return node_env(
        dsn,
        env_relay.port,
        EINMAL_RETURN_PATH="bounces@env.example",
        EINMAL_RETURN_PATH_SECRET=ENV_SECRET,
        EINMAL_UNSUBSCRIBE_MAILTO="unsubscribe@env.example",
        **extra,
    )


async def test_each_account_signs_relays_and_bounces_as_itself(
    conn: asyncpg.Connection, dsn: str, make_smtp_server, tmp_path: Path
) -> None:
    relay_1, relay_2, env_relay = make_smtp_server(), make_smtp_server(), make_smtp_server()
    key_1, key_2 = two_keys()
    one = await account(conn, "alpha", key_1, await relay_row(conn, "relay-1", relay_1), relay_1, 30)
    two = await account(conn, "beta", key_2, await relay_row(conn, "relay-2", relay_2), relay_2, 30)
    node = start_node(env_for(dsn, env_relay), tmp_path / "node.log")
    try:
        await approve(conn, one.campaign)
        await approve(conn, two.campaign)
        await wait_status(conn, one.campaign, "sent")
        await wait_status(conn, two.campaign, "sent")
    finally:
        assert await stop_node(node) == 0, (tmp_path / "node.log").read_text()

    with dns_served(tmp_path, one, two) as dnsfunc:  # dkimpy asks a real DNS server for each account's key
        assert_sent_as_itself(one, two, dnsfunc)
        assert_sent_as_itself(two, one, dnsfunc)
    assert sorted(m.rcpt_tos[0] for m in relay_1.messages) == sorted(one.recipients)
    assert sorted(m.rcpt_tos[0] for m in relay_2.messages) == sorted(two.recipients)
    assert env_relay.messages == []
    log = (tmp_path / "node.log").read_text()
    assert one.secret not in log and two.secret not in log and "PRIVATE KEY" not in log

    # a bounce to an account's return path verifies with that account's secret, for its own campaign only
    settings = Settings(database_url=dsn, return_path="bounces@env.example", return_path_secret=ENV_SECRET)
    env_path = verp.ReturnPath.from_settings(settings)
    assert env_path is not None
    pool = await db.create_pool(dsn, size=2)
    try:
        paths = ReturnPaths(settings, env_path, pool)
        await paths.load()
        mail_from = relay_1.messages[0].mail_from
        found, token = paths.find(mail_from)
        assert token is not None and [a for a, _ in found] == [one.id]
        assert await paths.verify(found, token) == one.path().verify(token)
        # the same token at the other account's return path, or signed by the other's secret, is refused
        elsewhere, _ = paths.find(mail_from.replace(f"mail.{one.domain}", f"mail.{two.domain}"))
        assert [a for a, _ in elsewhere] == [two.id] and await paths.verify(elsewhere, token) is None
        forged = two.path().token(one.campaign, 1)
        assert await paths.verify(found, forged) is None
    finally:
        await pool.close()


async def test_a_relay_refusing_connections_for_one_account_does_not_stop_the_other(
    conn: asyncpg.Connection, dsn: str, make_smtp_server, tmp_path: Path
) -> None:
    relay_1, relay_2, env_relay = make_smtp_server(start=False), make_smtp_server(), make_smtp_server()
    key_1, key_2 = two_keys()
    one = await account(conn, "alpha", key_1, await relay_row(conn, "relay-1", relay_1), relay_1, 40)
    two = await account(conn, "beta", key_2, await relay_row(conn, "relay-2", relay_2), relay_2, 40)
    node = start_node(env_for(dsn, env_relay, EINMAL_BATCH_SIZE="10"), tmp_path / "node.log")
    try:
        await approve(conn, one.campaign)
        await approve(conn, two.campaign)
        await wait_status(conn, two.campaign, "sent", timeout=60)
        held = await counts(conn, one.campaign)
        # `sending`: a connection trying the relay again after its pause, the row started and not yet given back
        # (actors/sender.py attempt); none sent, none charged an attempt
        assert held.get("sent", 0) == 0 and set(held) <= {"queued", "claimed", "sending"}, held
        assert await conn.fetchval("SELECT max(attempts) FROM einmal.sends WHERE campaign_id = $1", one.campaign) == 0
        relay_1.start()  # the relay is back: account 1's mail goes out, through its own relay only
        await wait_status(conn, one.campaign, "sent", timeout=90)
    finally:
        assert await stop_node(node) == 0, (tmp_path / "node.log").read_text()
    dnsfunc = dns_of(one, two)
    assert_sent_as_itself(one, two, dnsfunc)
    assert_sent_as_itself(two, one, dnsfunc)
    assert len(relay_1.messages) == 40 and len(relay_2.messages) == 40 and env_relay.messages == []
    log = (tmp_path / "node.log").read_text()
    assert "relay-1" in log and "smtp://" not in log  # the relay by its name, never its URL


@pytest.mark.serial
async def test_a_relay_rate_shared_by_two_accounts_holds_across_two_nodes(
    conn: asyncpg.Connection, dsn: str, make_smtp_server, tmp_path: Path
) -> None:
    rate = 20.0
    shared, env_relay = make_smtp_server(), make_smtp_server()
    key_1, key_2 = two_keys()
    relay_id = await relay_row(conn, "shared", shared, rate=rate)
    one = await account(conn, "alpha", key_1, relay_id, shared, 60)
    two = await account(conn, "beta", key_2, relay_id, shared, 60)
    nodes = [start_node(env_for(dsn, env_relay, EINMAL_NODE_ID=f"n{i}"), tmp_path / f"node{i}.log") for i in range(2)]
    try:
        await approve(conn, one.campaign)
        await approve(conn, two.campaign)
        await wait_status(conn, one.campaign, "sent", timeout=120)
        await wait_status(conn, two.campaign, "sent", timeout=120)
    finally:
        for i, node in enumerate(nodes):
            assert await stop_node(node) == 0, (tmp_path / f"node{i}.log").read_text()
    assert len(shared.messages) == 120
    # the budget paces starts: counted at the RCPT, which follows the grant at once, not at the end of the data,
    # which a loaded machine delivers in bunches (as tests/sending/test_policy.py counts a domain's rate)
    began = [t for t, _ in shared.rcpts]
    print(f"\nrelay at {rate:g}/s shared by two accounts on two nodes: worst second {worst_window(began)}")
    assert worst_window(began) <= rate + 2, worst_window(began)
    assert max(began) - min(began) >= (120 - rate - 2) / rate
    dnsfunc = dns_of(one, two)
    for m in shared.messages:
        mine = one if m.rcpt_tos[0] in one.recipients else two
        assert signed_by(m.data) == (mine.domain, mine.selector) and dkimpy.verify(m.data, dnsfunc=dnsfunc)
        assert mine.path().ours(m.mail_from)[0]


@pytest.mark.serial
async def test_a_node_killed_mid_send_mixes_no_account_and_sends_each_message_once(
    conn: asyncpg.Connection, dsn: str, make_smtp_server, tmp_path: Path
) -> None:
    relay_1, relay_2, env_relay = make_smtp_server(), make_smtp_server(), make_smtp_server()
    key_1, key_2 = two_keys()
    one = await account(conn, "alpha", key_1, await relay_row(conn, "relay-1", relay_1, rate=40), relay_1, 120)
    two = await account(conn, "beta", key_2, await relay_row(conn, "relay-2", relay_2, rate=40), relay_2, 120)
    env = env_for(dsn, env_relay, EINMAL_NODE_TIMEOUT_SECONDS="3", EINMAL_BATCH_SIZE="20")
    first = start_node({**env, "EINMAL_NODE_ID": "first"}, tmp_path / "first.log")
    try:
        await approve(conn, one.campaign)
        await approve(conn, two.campaign)
        with anyio.fail_after(60):
            while len(relay_1.messages) < 20 or len(relay_2.messages) < 20:
                await anyio.sleep(0.02)
        first.kill()  # SIGKILL mid-send: rows claimed and on the wire
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    at_kill = len(relay_1.messages) + len(relay_2.messages)
    second = start_node({**env, "EINMAL_NODE_ID": "second"}, tmp_path / "second.log")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            left = await conn.fetchval(
                "SELECT count(*) FROM einmal.sends WHERE campaign_id = ANY ($1::bigint[])"
                " AND status NOT IN ('sent', 'in_doubt')",
                [one.campaign, two.campaign],
            )
            if not left:
                break
            await anyio.sleep(0.1)
        assert not left, (await counts(conn, one.campaign), await counts(conn, two.campaign))
    finally:
        assert await stop_node(second) == 0, (tmp_path / "second.log").read_text()
    assert at_kill < 240, "the node finished before it was killed"
    dnsfunc = dns_of(one, two)
    assert_sent_as_itself(one, two, dnsfunc)
    assert_sent_as_itself(two, one, dnsfunc)
    for a in (one, two):
        ids = [m.message_id for m in a.relay.messages if m.answered]
        assert len(ids) == len(set(ids)), "a message went out twice"
        final = await counts(conn, a.campaign)
        in_doubt = final.get("in_doubt", 0)
        assert final.get("sent", 0) + in_doubt == 120, final
        assert len(set(ids)) >= final.get("sent", 0), (len(set(ids)), final)
    assert env_relay.messages == []
    finals = [await counts(conn, a.campaign) for a in (one, two)]
    print(f"\nat the kill {at_kill} of 240 delivered; final {finals}")


async def test_a_relay_quota_is_spent_once_by_the_accounts_sharing_it(
    conn: asyncpg.Connection, make_smtp_server
) -> None:
    relay = make_smtp_server(start=False)
    relay_id = await relay_row(conn, "quota", relay)
    await conn.execute("UPDATE einmal.relays SET quota_hour = 7 WHERE id = $1", relay_id)
    key_1, key_2 = two_keys()
    accounts = [
        await account(conn, name, key, relay_id, relay, 10) for name, key in (("alpha", key_1), ("beta", key_2))
    ]
    for a in accounts:
        await conn.execute(
            "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)"
            " SELECT $1::bigint, s.account_id, s.id, s.email, s.email_lower, 'campaign:' || $1::bigint || ':' || s.id"
            " FROM einmal.subscribers s WHERE s.account_id = $2",
            a.campaign,
            a.id,
        )
        await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", a.campaign)
    claimed = 0
    for _ in range(3):
        for a in accounts:
            rows = await conn.fetch(
                *db.sql("send_claim_batch", **claim_args(a.campaign, "node", batch_size=4, relays=["quota"]))
            )
            claimed += len(rows)
    assert claimed == 7  # both accounts' claims counted against the relay's hour
    # a claim not through that relay is not held by it
    queued = await conn.fetchval(
        "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status = 'queued'", accounts[0].campaign
    )
    free = await conn.fetch(
        "SELECT * FROM einmal.send_claim($1, 'node', 50, 0, 0, 0, 3600, 86400, '{}', '{}', 1, 60, 3600)",
        accounts[0].campaign,
    )
    assert queued > 0 and len(free) == queued


async def test_a_bounce_to_an_accounts_return_path_verifies_with_its_secret_only(
    conn: asyncpg.Connection, dsn: str, make_smtp_server
) -> None:
    from tests.inbound.test_bounce_inbound import hand_over, listener
    from tests.support import reports

    relay = make_smtp_server(start=False)
    key_1, key_2 = two_keys()
    relay_id = await relay_row(conn, "relay", relay)
    one, two = [await account(conn, n, k, relay_id, relay, 1) for n, k in (("alpha", key_1), ("beta", key_2))]
    subscriber = {}
    for a in (one, two):
        subscriber[a.id] = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE account_id = $1", a.id)
        await conn.execute(
            "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status)"
            " VALUES ($1, $2, $3, $4, $4, 'campaign:' || $1::bigint || ':' || $3::bigint, 'sent')",
            a.campaign,
            a.id,
            subscriber[a.id],
            a.recipients[0],
        )
    token = one.path().token(one.campaign, subscriber[one.id])
    at_one, at_two = f"bounces+{token}@mail.{one.domain}", f"bounces+{token}@mail.{two.domain}"
    forged = "bounces+" + two.path().token(one.campaign, subscriber[one.id]) + f"@mail.{two.domain}"
    async with listener(dsn) as port:
        assert (await hand_over(port, at_two, reports.dsn(one.recipients[0]))).startswith("550 5.7.1")
        assert (await hand_over(port, forged, reports.dsn(one.recipients[0]))).startswith("550 5.7.1")
        assert (await hand_over(port, f"bounces@mail.{two.domain}.other", b"x")).startswith("550 5.1.1")
        assert (await hand_over(port, at_one, reports.dsn(one.recipients[0]))).startswith("250")
    bounced = await conn.fetch("SELECT account_id, campaign_id FROM einmal.bounces")
    assert [tuple(r) for r in bounced] == [(one.id, one.campaign)]
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions WHERE account_id = $1", one.id) == 1


def test_rows_waiting_for_their_relays_slot_do_not_hold_another_accounts_rows() -> None:
    from opentelemetry import trace

    from actors.batch import Batch, Row
    from actors.feed import Feed

    def batch(account_id: int, not_before: float, n: int) -> Batch:
        rows = [
            Row(account_id * 100 + i, account_id, i, f"r{i}@x.example", f"r{i}@x.example", 0, "", "{}", not_before)
            for i in range(n)
        ]
        return Batch(account_id, account_id, "node", rows, trace.INVALID_SPAN, time.monotonic(), None)

    feed = Feed(low_water=10)
    later = time.monotonic() + 30  # account 1's relay gives its rows slots a while ahead
    feed.put(batch(1, later, 3))
    feed.put(batch(2, 0.0, 2))  # account 2's relay has no limit
    assert feed.next_slot() == 0.0
    taken = [feed.take(), feed.take()]
    assert [item[1].account_id for item in taken if item] == [2, 2]
    assert feed.next_slot() == later  # account 1's rows wait for their slot, alone
