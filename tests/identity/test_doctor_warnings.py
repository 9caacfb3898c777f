"""The doctor's warnings that fail nothing (exit 0): a domain signed only with Ed25519, which the large receivers
do not verify yet; an unsubscribe URL subscribers cannot reach (loopback, private, link-local, unique-local, by
its literal address, `localhost`, or a name that resolves there). It names the DNS servers it asked, in its
output, its JSON, its --help and the API's answer; and the API checks the account's From domain, not its return
path's, when none is named."""

import json
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import dns.resolver
import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from service.accounts import dns_checks, doctor, keys
from service.accounts.doctor import Checkup
from service.accounts.identity import Identity
from service.mail import dkim
from service.settings import Settings
from tests.conftest import einmal
from tests.identity.test_doctor import PUBLIC_UNSUBSCRIBE, _key, _sender, env, findings
from tests.support.dns_server import dns_server, txt
from tests.support.web import http_server

PUBLIC = "1.2.3.4"  # a global address, only judged, never connected to
PRIVATE = "192.168.7.8"


def _ed25519(folder: Path) -> tuple[str, str]:
    key = ed25519.Ed25519PrivateKey.generate()
    path = folder / "ed.pem"
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_bytes(pem)
    return str(path), dkim.public_record(key).decode()


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """ed.test publishes an Ed25519 key only (selector s1), both.test an RSA key (s1) and an Ed25519 one (s2);
    good.test's www is public, its intranet private."""
    folder = tmp_path_factory.mktemp("dns")
    rsa_key, rsa_record = _key(folder, "einmal")
    ed_key, ed_record = _ed25519(folder)
    served = {
        "ed.test": _sender(ed_record),
        "both.test": [*_sender(rsa_record), txt("s2._domainkey", ed_record)],
        "good.test": [*_sender(rsa_record), f"www A {PUBLIC}", f"intranet A {PRIVATE}", "intranet AAAA fd00::8"],
    }
    with dns_server(folder, served) as servers:
        yield {"servers": servers, "key": rsa_key, "ed": ed_key, "rsa": rsa_key}


def _said(out: str) -> dict[str, str]:
    return {title: severity for severity, title in findings(out).values()}


ONLY_ED25519 = "signed only with Ed25519"


def test_a_domain_signed_only_with_ed25519_is_a_warning_not_a_failure(zones: dict[str, str]) -> None:
    done = einmal("doctor", env=env(zones, "ed.test", EINMAL_DKIM_PRIVATE_KEY_FILE=zones["ed"]))
    assert done.returncode == 0, done.stdout + done.stderr
    said = _said(done.stdout)
    assert said.get("DKIM s1._domainkey.ed.test: the published key is einmal's") == "ok", done.stdout
    (warned,) = [title for title, severity in said.items() if ONLY_ED25519 in title]
    assert said[warned] == "warn" and "ed.test" in warned, done.stdout
    assert "RSA" in done.stdout.split(warned)[1] and "2048" in done.stdout.split(warned)[1], done.stdout


def test_an_ed25519_key_beside_an_rsa_one_is_no_warning(zones: dict[str, str]) -> None:
    both = {"EINMAL_DKIM_SELECTOR": "s1,s2", "EINMAL_DKIM_PRIVATE_KEY_FILE": f"{zones['rsa']},{zones['ed']}"}
    done = einmal("doctor", env=env(zones, "both.test", **both))
    assert done.returncode == 0, done.stdout + done.stderr
    said = _said(done.stdout)
    assert said.get("DKIM s2._domainkey.both.test: the published key is einmal's") == "ok", done.stdout
    assert set(said.values()) == {"ok"} and ONLY_ED25519 not in done.stdout, done.stdout


UNREACHABLE = "subscribers cannot reach it"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/unsubscribe",  # what the demo and a first try set
        "https://localhost/unsubscribe",
        "https://news.localhost/unsubscribe",
        "https://[::1]/unsubscribe",
        "https://10.1.2.3/unsubscribe",
        "https://100.64.0.9/unsubscribe",  # shared address space (carrier-grade NAT)
        "https://169.254.1.1/unsubscribe",
        "https://[fe80::1]/unsubscribe",
        "https://[fd12:3456::1]/unsubscribe",
        "https://[::ffff:192.168.1.1]/unsubscribe",  # IPv4-mapped: judged by the address it carries
        "https://intranet.good.test/unsubscribe",  # a name, asked of the doctor's DNS server
        "https://nowhere.good.test/unsubscribe",  # a name that does not resolve
    ],
)
def test_an_unsubscribe_url_subscribers_cannot_reach_is_a_warning(zones: dict[str, str], url: str) -> None:
    done = einmal("doctor", env=env(zones, "good.test", EINMAL_UNSUBSCRIBE_URL=url))
    assert done.returncode == 0, done.stdout + done.stderr
    said = _said(done.stdout)
    (warned,) = [title for title, severity in said.items() if severity != "ok"]
    assert said[warned] == "warn" and UNREACHABLE in warned and url in warned, done.stdout
    assert "fix:" in done.stdout.split(warned)[1] and "EINMAL_UNSUBSCRIBE_URL" in done.stdout.split(warned)[1]
    if "intranet" in url:
        assert PRIVATE in warned and "fd00::8" in warned, warned
    numbers = {title: n for n, (_, title) in findings(done.stdout).items()}
    assert numbers[warned] == numbers[f"one-click unsubscribe (RFC 8058) at {url}"] + 1, done.stdout


@pytest.mark.parametrize("url", [PUBLIC_UNSUBSCRIBE, "https://www.good.test/unsubscribe"])
def test_a_public_unsubscribe_url_is_no_warning(zones: dict[str, str], url: str) -> None:
    done = einmal("doctor", "--json", env=env(zones, "good.test", EINMAL_UNSUBSCRIBE_URL=url))
    assert done.returncode == 0, done.stdout + done.stderr
    assert {f["severity"] for f in json.loads(done.stdout)["findings"]} == {"ok"}, done.stdout


def test_the_output_names_the_dns_servers_asked(zones: dict[str, str]) -> None:
    text = einmal("doctor", env=env(zones, "good.test"))
    assert f"DNS servers asked: {zones['servers']} (EINMAL_DNS_SERVERS)" in text.stdout.splitlines(), text.stdout
    printed = json.loads(einmal("doctor", "--json", env=env(zones, "good.test")).stdout)
    assert printed["dns_servers"] == [zones["servers"]], printed
    helped = einmal("doctor", "--help")
    assert helped.returncode == 0 and "EINMAL_DNS_SERVERS" in helped.stdout, helped.stdout


def test_without_dns_servers_the_systems_resolvers_are_named() -> None:
    """Planned, not asked: the names of the resolvers /etc/resolv.conf gives dnspython."""
    system = dns_checks.servers(dns.resolver.Resolver()).split(", ")
    planned = doctor.plan(Identity(account_id=0), Checkup.of(Settings()), "good.test")
    assert list(planned.servers) == system and system != ["none"], planned.servers


async def _acme(conn: asyncpg.Connection) -> tuple[int, str]:
    """Account acme, its return path at nomx.test, and a key of it."""
    account_id = await conn.fetchval(
        "INSERT INTO einmal.accounts (name, return_path) VALUES ('acme', 'bounces@nomx.test') RETURNING id"
    )
    _, key = await keys.mint(conn, account_id=account_id, name="k", scope="write")
    return account_id, key


@pytest.mark.anyio
@pytest.mark.parametrize("given", ["own domain", "EINMAL_FROM_DOMAINS", "its campaign's From"])
async def test_the_api_checks_the_accounts_from_domain_not_its_return_paths(
    zones: dict[str, str], conn: asyncpg.Connection, dsn: str, given: str
) -> None:
    account_id, key = await _acme(conn)
    settings = {"dns_servers": zones["servers"], "return_path_secret": "a-return-path-secret-of-enough-length"}
    if given == "own domain":
        await conn.execute(
            "INSERT INTO einmal.account_domains (account_id, domain) VALUES ($1, 'good.test')", account_id
        )
    elif given == "EINMAL_FROM_DOMAINS":
        settings["from_domains"] = "good.test"
    else:
        await conn.execute(
            "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids) "
            "VALUES ($1, 'n', 's', 'News <news@good.test>', 'b', '{}')",
            account_id,
        )
    async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        answer = await client.get("/doctor", headers={"Authorization": f"Bearer {key}"}, timeout=60)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["domain"] == "good.test", report
    assert report["dns_servers"] == [zones["servers"]], report
    assert any("nomx.test" in f["title"] for f in report["findings"]), report  # the return path, as the envelope
