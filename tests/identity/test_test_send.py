"""A test message and a preview are made as the node makes the campaign's messages, as its account's sender
(docs/design.md#sending-identity): signed by the account's key for its From domain (else the environment's),
through the account's relay (else the environment's), with its return path and unsubscribe mailto. Relays are
aiosmtpd servers on loopback; `einmal campaign test` runs as a child process, the API as `einmal serve`."""

import re
from pathlib import Path

import asyncpg
import dkim as dkimpy
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from service.mail import dkim
from tests.conftest import einmal
from tests.identity.test_two_accounts import ENV_SECRET, Account, account, dns_of, pem, relay_row, signed_by, two_keys
from tests.support.smtp_servers import FaultServer
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

QA = "qa@example.net"
ENV_DOMAIN, ENV_SELECTOR = "env.example", "envsel"


def env_key(tmp_path: Path) -> tuple[ed25519.Ed25519PrivateKey, Path]:
    key = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "env.pem").write_text(pem(key))
    return key, tmp_path / "env.pem"


def identity_env(env_relay: FaultServer, key_file: Path) -> dict[str, str]:
    """The environment's identity: relay, DKIM key, return path and mailto, which an account's own replace."""
    return {
        "EINMAL_SMTP_HOST": env_relay.host,
        "EINMAL_SMTP_PORT": str(env_relay.port),
        "EINMAL_SMTP_TIMEOUT_SECONDS": "5",
        "EINMAL_DKIM_DOMAIN": ENV_DOMAIN,
        "EINMAL_DKIM_SELECTOR": ENV_SELECTOR,
        "EINMAL_DKIM_PRIVATE_KEY_FILE": str(key_file),
        "EINMAL_RETURN_PATH": "bounces@env.example",
        "EINMAL_RETURN_PATH_SECRET": ENV_SECRET,
        "EINMAL_UNSUBSCRIBE_MAILTO": "unsubscribe@env.example",
    }


def dns_with_env(env: ed25519.Ed25519PrivateKey, *accounts: Account):
    records = dns_of(*accounts)

    def dnsfunc(name, timeout=5):
        if (name.decode() if isinstance(name, bytes) else name).rstrip(
            "."
        ) == f"{ENV_SELECTOR}._domainkey.{ENV_DOMAIN}":
            return dkim.public_record(env)
        return records(name, timeout)

    return dnsfunc


def signatures(data: bytes) -> int:
    return len(re.findall(rb"(?im)^dkim-signature:", data.split(b"\r\n\r\n", 1)[0]))


def assert_tested_as(a: Account, data: bytes, mail_from: str, dnsfunc, signer: tuple[str, str]) -> None:
    """A test message of a's campaign: signed once, by `signer` (d=, s=), and dkimpy verifies it; MAIL FROM a's
    return path with a token its secret signed that names nobody (subscriber 0); a's unsubscribe mailto."""
    assert signatures(data) == 1 and signed_by(data) == signer
    assert dkimpy.verify(data, dnsfunc=dnsfunc, minkey=1024)
    ours, token = a.path().ours(mail_from)
    assert ours and token and a.path().verify(token) == (a.campaign, 0), mail_from
    assert f"mailto:unsubscribe@{a.domain}".encode() in data and b"unsubscribe@env.example" not in data
    assert b"[TEST] Hi Name" in data


async def two_accounts(conn: asyncpg.Connection, relay_1: FaultServer, relay_2: FaultServer) -> tuple[Account, Account]:
    key_1, key_2 = two_keys()
    one = await account(conn, "alpha", key_1, await relay_row(conn, "relay-1", relay_1), relay_1, 1)
    two = await account(conn, "beta", key_2, await relay_row(conn, "relay-2", relay_2), relay_2, 1)
    return one, two


def cli_test(campaign: int, env: dict[str, str], dsn: str):
    return einmal("campaign", "test", str(campaign), "--to", QA, dsn=dsn, env=env)


async def test_campaign_test_goes_as_its_accounts_sender_through_its_relay_only(
    conn: asyncpg.Connection, dsn: str, make_smtp_server, tmp_path: Path
) -> None:
    relay_1, relay_2, env_relay = make_smtp_server(), make_smtp_server(), make_smtp_server()
    one, two = await two_accounts(conn, relay_1, relay_2)
    env_dkim, key_file = env_key(tmp_path)
    env = identity_env(env_relay, key_file)
    dnsfunc = dns_with_env(env_dkim, one, two)
    for a, other in ((one, two), (two, one)):
        done = cli_test(a.campaign, env, dsn)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"test message of campaign {a.campaign} sent to {QA}: 250"), done.stdout
        [m] = a.relay.wait_for(1)
        assert m.rcpt_tos == (QA,)
        assert_tested_as(a, m.data, m.mail_from, dnsfunc, (a.domain, a.selector))
        assert not dkimpy.verify(m.data, dnsfunc=dns_of(other))  # the other account's key does not verify it
        assert other.domain.encode() not in m.data and other.path().ours(m.mail_from) == (False, None)
        assert a.secret not in done.stdout + done.stderr and "PRIVATE KEY" not in done.stdout + done.stderr
    assert len(relay_1.messages) == len(relay_2.messages) == 1 and env_relay.messages == []

    # the preview is the same account's message: its key signs it, its mailto unsubscribes
    out = tmp_path / "preview.eml"
    done = einmal("campaign", "preview", str(one.campaign), "--out", str(out), dsn=dsn, env=env)
    assert done.returncode == 0, done.stderr
    previewed = out.read_bytes()
    assert signatures(previewed) == 1 and signed_by(previewed) == (one.domain, one.selector)
    assert dkimpy.verify(previewed, dnsfunc=dnsfunc) and f"mailto:unsubscribe@{one.domain}".encode() in previewed

    # an account with neither relays nor keys of its own for its From domain: the environment's relay and key,
    # its own return path and mailto still
    await conn.execute("DELETE FROM einmal.account_relays WHERE account_id = $1", two.id)
    await conn.execute("UPDATE einmal.account_domains SET selectors = '{}', keys = '{}' WHERE account_id = $1", two.id)
    done = cli_test(two.campaign, env, dsn)
    assert done.returncode == 0, done.stderr
    [m] = env_relay.wait_for(1)
    assert_tested_as(two, m.data, m.mail_from, dnsfunc, (ENV_DOMAIN, ENV_SELECTOR))
    assert len(relay_2.messages) == 1 and len(relay_1.messages) == 1


async def test_a_test_message_takes_the_accounts_next_relay_when_the_first_by_weight_is_down(
    conn: asyncpg.Connection, dsn: str, make_smtp_server, tmp_path: Path
) -> None:
    heavy, light, env_relay = make_smtp_server(start=False), make_smtp_server(), make_smtp_server()
    key, _ = two_keys()
    one = await account(conn, "alpha", key, await relay_row(conn, "heavy", heavy), heavy, 1)
    light_id = await relay_row(conn, "light", light)
    await conn.execute("UPDATE einmal.account_relays SET weight = 3 WHERE account_id = $1", one.id)
    await conn.execute("INSERT INTO einmal.account_relays (account_id, relay_id) VALUES ($1, $2)", one.id, light_id)
    env = identity_env(env_relay, env_key(tmp_path)[1])
    done = cli_test(one.campaign, env, dsn)
    assert done.returncode == 0, done.stderr
    assert len(light.wait_for(1)) == 1  # the heavy one refuses connections: the light one takes it
    heavy.start()
    done = cli_test(one.campaign, env, dsn)
    assert done.returncode == 0, done.stderr
    assert len(heavy.wait_for(1)) == 1 and len(light.messages) == 1 and env_relay.messages == []

    # both down: not sent, exit 1, each relay by its name
    heavy.stop()
    light.stop()
    done = cli_test(one.campaign, env, dsn)
    assert done.returncode == 1 and "test message not sent" in done.stderr, done.stderr
    assert "SMTP heavy" in done.stderr and "SMTP light" in done.stderr and "Traceback" not in done.stderr

    # a relay of the account's that cannot be used: refused, naming the relay, never its URL or password
    await conn.execute(
        "UPDATE einmal.relays SET url = 'smtp://user:hunter2-secret@127.0.0.1:25?bogus=1' WHERE name = 'light'"
    )
    done = cli_test(one.campaign, env, dsn)
    assert done.returncode == 1 and "sender identity: relay light: " in done.stderr, done.stderr
    assert "hunter2" not in done.stdout + done.stderr and "smtp://" not in done.stderr
    assert env_relay.messages == []


async def test_the_apis_test_message_and_preview_are_its_accounts(
    conn: asyncpg.Connection, dsn: str, make_smtp_server, tmp_path: Path
) -> None:
    relay_1, relay_2, env_relay = make_smtp_server(), make_smtp_server(), make_smtp_server()
    one, two = await two_accounts(conn, relay_1, relay_2)
    env_dkim, key_file = env_key(tmp_path)
    dnsfunc = dns_with_env(env_dkim, one, two)
    settings = {
        name.removeprefix("EINMAL_").lower(): value for name, value in identity_env(env_relay, key_file).items()
    }
    keys = {a.id: auth(make_key(dsn, name)) for a, name in ((one, "alpha"), (two, "beta"))}
    async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        for a, other in ((one, two), (two, one)):
            sent = await client.post(f"/campaigns/{a.campaign}/test", headers=keys[a.id], json={"to": QA})
            assert sent.status_code == 200 and sent.json()["reply"].startswith("250"), sent.text
            [m] = a.relay.wait_for(1)
            assert m.rcpt_tos == (QA,)
            assert_tested_as(a, m.data, m.mail_from, dnsfunc, (a.domain, a.selector))
            assert not dkimpy.verify(m.data, dnsfunc=dns_of(other))
            assert a.secret not in sent.text
            previewed = await client.get(f"/campaigns/{a.campaign}/preview", headers=keys[a.id])
            assert previewed.status_code == 200, previewed.text
            fields = {h["name"].lower(): h["value"] for h in previewed.json()["headers"]}
            assert f"d={a.domain};" in fields["dkim-signature"] and f"s={a.selector};" in fields["dkim-signature"]
            assert f"mailto:unsubscribe@{a.domain}" in fields["list-unsubscribe"]
            assert "PRIVATE KEY" not in previewed.text and a.secret not in previewed.text
            # another account's key cannot send this account's campaign
            refused = await client.post(f"/campaigns/{a.campaign}/test", headers=keys[other.id], json={"to": QA})
            assert refused.status_code == 404, refused.text
    assert len(relay_1.messages) == len(relay_2.messages) == 1 and env_relay.messages == []
