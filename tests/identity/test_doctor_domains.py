"""The doctor's organisational domain from the Public Suffix List (RFC 7489 3.2), DMARC's `sp=` for a subdomain
sender, and a name server that never answers said as such ("could not check"), not as failing checks."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import einmal
from tests.identity.test_doctor import RELAY, _draft, _key, env, findings
from tests.support.dns_counter import counting
from tests.support.dns_server import dns_server, txt


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """example.co.uk: mail.example.co.uk sends, its DMARC record at the organisational domain with sp=none;
    other.co.uk: a return path under the same public suffix, another organisation; shop.co.uk: news.shop.co.uk
    sends, its organisational domain's record p=reject alone."""
    folder = tmp_path_factory.mktemp("dns")
    key, record = _key(folder, "einmal")
    served = {
        "example.co.uk": [
            txt("s1._domainkey.mail", record),
            txt("s1._domainkey", record),
            txt("mail", f"v=spf1 ip4:{RELAY} -all"),
            txt("@", f"v=spf1 ip4:{RELAY} -all"),
            txt("_dmarc", "v=DMARC1; p=reject; sp=none"),
            "mail MX 10 mx",
            "@ MX 10 mx",
            "mx A 192.0.2.20",
            f"relay.mail A {RELAY}",
            f"relay A {RELAY}",
        ],
        "other.co.uk": [txt("@", f"v=spf1 ip4:{RELAY} -all"), "@ MX 10 mx", "mx A 192.0.2.21"],
        "shop.co.uk": [
            txt("s1._domainkey.news", record),
            txt("news", f"v=spf1 ip4:{RELAY} -all"),
            txt("_dmarc", "v=DMARC1; p=reject"),
            "news MX 10 mx",
            "mx A 192.0.2.22",
            f"relay.news A {RELAY}",
        ],
    }
    with dns_server(folder, served) as servers:
        yield {"servers": servers, "key": key}


def _said(out: str) -> dict[str, str]:
    """title -> severity of `einmal doctor`'s lines."""
    return {title: severity for severity, title in findings(out).values()}


def test_a_subdomain_sender_takes_the_organisational_domains_sp(zones: dict[str, str]) -> None:
    done = einmal("doctor", "--domain", "mail.example.co.uk", env=env(zones, "mail.example.co.uk"))
    said = _said(done.stdout)
    assert said.get("DMARC of mail.example.co.uk: sp=none at _dmarc.example.co.uk, monitoring only") == "warn", (
        done.stdout + done.stderr
    )
    assert said.get("From mail.example.co.uk aligns with DKIM d= mail.example.co.uk (relaxed)") == "ok"
    apex = einmal("doctor", "--domain", "example.co.uk", env=env(zones, "example.co.uk"))
    assert _said(apex.stdout).get("DMARC of example.co.uk: p=reject at _dmarc.example.co.uk") == "ok", apex.stdout


def test_two_organisations_under_one_public_suffix_do_not_align(zones: dict[str, str]) -> None:
    more = {"EINMAL_RETURN_PATH": "bounces@other.co.uk", "EINMAL_RETURN_PATH_SECRET": "a-return-path-secret-of-enough"}
    done = einmal("doctor", "--domain", "mail.example.co.uk", env=env(zones, "mail.example.co.uk", **more))
    said = _said(done.stdout)
    title = "From mail.example.co.uk does not align with return path other.co.uk (aspf=r): DMARC cannot pass through it"
    assert said.get(title) == "fail", done.stdout + done.stderr
    assert "or a name under example.co.uk" in done.stdout  # the expected: the organisational domain, not co.uk


@pytest.mark.anyio
async def test_a_subdomain_sender_under_a_two_label_suffix_finds_its_record_and_is_approved(
    zones: dict[str, str], conn: asyncpg.Connection, dsn: str
) -> None:
    # with the last two labels as the organisational domain, _dmarc.co.uk was asked: "no valid record", refused
    done = einmal("doctor", "--domain", "news.shop.co.uk", env=env(zones, "news.shop.co.uk"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert _said(done.stdout).get("DMARC of news.shop.co.uk: p=reject at _dmarc.shop.co.uk") == "ok", done.stdout
    campaign, _ = await _draft(conn, dsn, "News <news@news.shop.co.uk>")
    approved = einmal("campaign", "approve", str(campaign), dsn=dsn, env=env(zones, "news.shop.co.uk"))
    assert approved.returncode == 0 and "doctor" not in approved.stderr, approved.stderr


@pytest.mark.anyio
async def test_approve_with_a_silent_dns_server_says_it_could_not_check_and_whom_it_asked(
    tmp_path: Path, conn: asyncpg.Connection, dsn: str
) -> None:
    key, _ = _key(tmp_path, "einmal")
    campaign, _ = await _draft(conn, dsn, "news@good.test")
    with counting() as silent:
        done = einmal(
            "campaign", "approve", str(campaign), dsn=dsn, env=env({"servers": silent.address, "key": key}, "good.test")
        )
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stderr.strip()
    assert said.startswith(
        f"einmal: campaign {campaign} not approved: `einmal doctor --account acme --domain good.test"
    )
    assert "could not check 1, " in said and "is not known to pass (--force approves it anyway)" in said, said
    assert f"no answer from DNS server {silent.address} within 5 s" in said, said
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "draft"


@pytest.mark.serial
def test_a_silent_dns_server_is_could_not_check_not_failing(tmp_path: Path) -> None:
    key, _ = _key(tmp_path, "einmal")
    with counting() as silent:
        started = time.monotonic()
        done = einmal(
            "doctor", "--domain", "good.test", "--json", env=env({"servers": silent.address, "key": key}, "good.test")
        )
        took = time.monotonic() - started
        asked = set(silent.asked())
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["ok"] is False, done.stdout + done.stderr
    dns = [f for f in report["findings"] if f["check"] in ("dkim", "spf", "dmarc", "bounces", "dns")]
    assert dns and {f["severity"] for f in dns} == {"unchecked"}, dns
    said = f"could not check: no answer from DNS server {silent.address} within 5 s"
    assert all(said in f["title"] for f in dns), dns
    assert len(asked) == 1 and took < 15, (asked, took)  # one name asked, then none: the server is silent
