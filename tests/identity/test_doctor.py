"""`einmal doctor` against a real authoritative DNS server (knotd on loopback, tests/support/dns_server.py):
a good zone passes; a wrong DKIM key, a missing DMARC record, a return path that neither aligns nor takes
bounces, and an SPF record past ten lookups are each reported by number, exit 1; the API answers the same;
and `campaign approve` refuses a campaign from a broken domain unless forced."""

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import asyncpg
import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.accounts import dns_checks
from service.mail import dkim
from service.settings import dns_servers
from tests.conftest import einmal
from tests.support.dns_server import dns_server, txt
from tests.support.web import http_server

RELAY = "192.0.2.10"  # TEST-NET-1: named in DNS and SPF, never connected to (the doctor only reads DNS)
PUBLIC_UNSUBSCRIBE = "https://1.2.3.4/unsubscribe"  # a public address: the doctor judges it, no one connects


def _key(folder: Path, name: str) -> tuple[str, str]:
    """A 2048-bit RSA key in a file: (its path, its DNS record)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = folder / f"{name}.pem"
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_bytes(pem)
    return str(path), dkim.public_record(key).decode()


def _sender(record: str, dmarc: bool = True, spf: str = f"v=spf1 ip4:{RELAY} -all") -> list[str]:
    return [
        txt("s1._domainkey", record),
        txt("@", spf),
        *([txt("_dmarc", "v=DMARC1; p=reject; adkim=r; aspf=r")] if dmarc else []),
        "@ MX 10 mx",
        "mx A 192.0.2.20",
        f"relay A {RELAY}",
    ]


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The DNS server and the key einmal holds: {"servers": "127.0.0.1:port", "key": its file, "pem": the key,
    "record": its TXT}."""
    folder = tmp_path_factory.mktemp("dns")
    key, record = _key(folder, "einmal")
    _, other = _key(folder, "other")
    chain = [txt(f"l{i}", f"v=spf1 include:l{i + 1}.spf10.test -all") for i in range(1, 11)]
    served = {
        "good.test": _sender(record),
        "badkey.test": _sender(other),
        "nodmarc.test": _sender(record, dmarc=False),
        "nomx.test": [txt("@", f"v=spf1 ip4:{RELAY} -all")],  # no MX, no address
        # eleven includes, one within the next: each a lookup, one past the limit of ten
        # a, mx with prefix lengths, redirect, include, exists: walked and judged as receivers do
        "spfx.test": [
            txt("@", "v=spf1 a/24 mx:spfx.test//64 ~all"),
            "@ A 192.0.2.5",
            "@ MX 10 m",
            "m A 198.51.100.7",
            txt("r", "v=spf1 redirect=spfx.test"),
            txt("i", "v=spf1 include:spfx.test -all"),
            txt("e", "v=spf1 exists:%{i}.spfx.test -all"),
        ],
        # three names that do not exist: three void lookups, one past the limit of two
        "spfvoid.test": _sender(
            record, spf=f"v=spf1 {' '.join(f'a:nx{i}.spfvoid.test' for i in (1, 2, 3))} ip4:{RELAY} -all"
        ),
        "spf10.test": [
            *_sender(record, spf="v=spf1 include:l1.spf10.test -all"),
            *chain,
            txt("l11", f"v=spf1 ip4:{RELAY} -all"),
        ],
    }
    with dns_server(folder, served) as servers:
        yield {"servers": servers, "key": key, "pem": Path(key).read_text(), "record": record}


def env(zones: dict[str, str], domain: str, **more: str) -> dict[str, str]:
    return {
        "EINMAL_DNS_SERVERS": zones["servers"],
        "EINMAL_DKIM_DOMAIN": domain,
        "EINMAL_DKIM_SELECTOR": "s1",
        "EINMAL_DKIM_PRIVATE_KEY_FILE": zones["key"],
        "EINMAL_SMTP_URLS": f"smtp://relay.{domain}:587?tls=starttls",
        "EINMAL_UNSUBSCRIBE_URL": PUBLIC_UNSUBSCRIBE,
        **more,
    }


def findings(out: str) -> dict[int, tuple[str, str]]:
    """The numbered lines of `einmal doctor`: number -> (severity, title)."""
    found = {}
    for line in out.splitlines():
        number, _, rest = line.strip().partition("  ")
        if number.isdigit():
            severity, _, title = rest.strip().partition("  ")
            found[int(number)] = (severity, title.strip())
    return found


def failing(out: str) -> dict[int, str]:
    return {n: title for n, (severity, title) in findings(out).items() if severity == "fail"}


def test_the_good_zone_passes_every_check_and_exits_0(zones: dict[str, str]) -> None:
    done = einmal("doctor", env=env(zones, "good.test", EINMAL_RETURN_PATH="bounces@good.test"))
    assert done.returncode == 0, done.stdout + done.stderr
    seen = findings(done.stdout)
    assert {severity for severity, _ in seen.values()} == {"ok"}, done.stdout
    titles = " | ".join(title for _, title in seen.values())
    for said in (
        "DKIM s1._domainkey.good.test: the published key is einmal's",
        "SPF of good.test: 0 DNS lookups of 10, 0 void",
        f"SPF of good.test for relay relay.good.test:587 ({RELAY}): pass",
        "DMARC of good.test: p=reject",
        "From good.test aligns with DKIM d= good.test",
        "bounces to good.test reach MX 10 mx.good.test",
    ):
        assert said in titles, (said, done.stdout)
    assert done.stdout.rstrip().endswith("no check fails")


@pytest.mark.parametrize(
    ("domain", "more", "expected"),
    [
        ("badkey.test", {}, ["DKIM s1._domainkey.badkey.test: the published key is not einmal's"]),
        ("nodmarc.test", {}, ["DMARC of nodmarc.test: no valid record at _dmarc.nodmarc.test"]),
        (
            "good.test",
            {"EINMAL_RETURN_PATH": "bounces@nomx.test"},
            [
                "From good.test does not align with return path nomx.test (aspf=r)",
                "bounces to nomx.test: no MX and no address",
            ],
        ),
        ("spf10.test", {}, ["SPF of spf10.test: receivers answer permerror: 11 DNS lookups, over 10"]),
        ("spfvoid.test", {}, ["SPF of spfvoid.test: receivers answer permerror: 3 void lookups, over 2"]),
        (
            "good.test",
            {"EINMAL_SMTP_URLS": "smtp://192.0.2.99:587?tls=starttls"},
            ["SPF of good.test for relay 192.0.2.99:587 (192.0.2.99): fail"],
        ),
    ],
)
def test_each_broken_record_is_reported_by_number_and_exits_1(
    zones: dict[str, str], domain: str, more: dict[str, str], expected: list[str]
) -> None:
    if "EINMAL_RETURN_PATH" in more:
        more = {**more, "EINMAL_RETURN_PATH_SECRET": "a-return-path-secret-of-enough-length"}
    done = einmal("doctor", "--domain", domain, env=env(zones, domain, **more))
    assert done.returncode == 1, done.stdout + done.stderr
    failed = failing(done.stdout)
    assert len(failed) == len(expected), done.stdout
    for title in expected:
        number = next(n for n, t in failed.items() if t.startswith(title))
        assert f"check{'s' * (len(failed) > 1)} fail" in done.stdout and str(number) in done.stdout.splitlines()[-1]
    assert "fix:" in done.stdout and "expected:" in done.stdout
    if domain == "badkey.test":  # the key einmal holds, to publish
        assert "p=MII" in done.stdout.split("expected:")[1].splitlines()[0]


def test_json_parses_and_says_the_same(zones: dict[str, str]) -> None:
    text = einmal("doctor", "--domain", "nodmarc.test", env=env(zones, "nodmarc.test"))
    done = einmal("doctor", "--domain", "nodmarc.test", "--json", env=env(zones, "nodmarc.test"))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["domain"] == "nodmarc.test" and report["ok"] is False
    assert {f["number"]: f["severity"] for f in report["findings"]} == {
        n: s for n, (s, _) in findings(text.stdout).items()
    }
    (missing,) = [f for f in report["findings"] if f["severity"] == "fail"]
    assert (missing["check"], missing["found"]) == ("dmarc", "no record")
    assert missing["expected"].startswith("v=DMARC1; p=") and missing["fix"].startswith(
        "publish TXT _dmarc.nodmarc.test"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--domain", "not a domain!"], "is not a domain name"),
        (["--account", "nosuch"], "no account named"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(zones: dict[str, str], dsn: str, args: list[str], says: str) -> None:
    done = einmal("doctor", *args, dsn=dsn, env=env(zones, "good.test"))
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def test_a_bad_dns_servers_setting_is_one_line_and_exit_2() -> None:
    done = einmal("doctor", env={"EINMAL_DNS_SERVERS": "dns.example:53", "EINMAL_DKIM_DOMAIN": "good.test"})
    assert done.returncode == 2 and "EINMAL_DNS_SERVERS" in done.stderr, done.stderr


async def _draft(conn: asyncpg.Connection, dsn: str, sender: str) -> tuple[int, str]:
    """Account acme with list news, a draft from `sender`, and a key of acme."""
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account_id)
    made = einmal(
        "campaign", "create", "--account", "acme", "--name", "n", "--subject", "Hi", "--from", sender,
        "--text", "Hello", "--list", "news", "--at", "2099-01-01T00:00:00+00:00", dsn=dsn,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    key = einmal("account", "key", "create", "--account", "acme", dsn=dsn)
    return int(made.stdout.strip()), key.stdout.strip()


@pytest.mark.anyio
async def test_approve_refuses_a_campaign_from_a_broken_domain_unless_forced(
    zones: dict[str, str], conn: asyncpg.Connection, dsn: str
) -> None:
    campaign, _ = await _draft(conn, dsn, "News <news@nodmarc.test>")
    refused = einmal("campaign", "approve", str(campaign), dsn=dsn, env=env(zones, "nodmarc.test"))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    number = next(iter(failing(einmal("doctor", "--domain", "nodmarc.test", env=env(zones, "nodmarc.test")).stdout)))
    assert refused.stderr.strip() == (
        f"einmal: campaign {campaign} not approved: `einmal doctor --account acme --domain nodmarc.test` finds check "
        f"{number} failing: mail from nodmarc.test may be rejected (--force approves it anyway)"
    )
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "draft"
    forced = einmal("campaign", "approve", str(campaign), "--force", dsn=dsn, env=env(zones, "nodmarc.test"))
    assert forced.returncode == 0, forced.stderr
    assert "warning: approved with --force although `einmal doctor" in forced.stderr
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "approved"


@pytest.mark.anyio
async def test_approve_passes_a_campaign_from_the_good_domain(
    zones: dict[str, str], conn: asyncpg.Connection, dsn: str
) -> None:
    campaign, _ = await _draft(conn, dsn, "news@good.test")
    done = einmal("campaign", "approve", str(campaign), dsn=dsn, env=env(zones, "good.test"))
    assert done.returncode == 0 and "doctor" not in done.stderr, done.stderr


@pytest.mark.anyio
async def test_the_api_answers_the_findings_and_approve_refuses_then_passes_with_force(
    zones: dict[str, str], conn: asyncpg.Connection, dsn: str
) -> None:
    campaign, key = await _draft(conn, dsn, "news@nodmarc.test")
    settings = {k.removeprefix("EINMAL_").lower(): v for k, v in env(zones, "nodmarc.test").items()}
    auth = {"Authorization": f"Bearer {key}"}
    printed = json.loads(einmal("doctor", "--json", env=env(zones, "nodmarc.test")).stdout)
    async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        answer = await client.get("/doctor", headers=auth)
        assert answer.status_code == 200 and answer.json() == printed
        assert (await client.get("/doctor", headers=auth, params={"domain": "x y"})).status_code == 422
        refused = await client.post(f"/campaigns/{campaign}/approve", headers=auth)
        assert refused.status_code == 409 and "(?force=true approves it anyway)" in refused.json()["error"]
        forced = await client.post(f"/campaigns/{campaign}/approve", headers=auth, params={"force": "true"})
        assert forced.status_code == 200 and forced.json()["status"] == "approved", forced.text
        assert any("approved with ?force=true although" in w for w in forced.json()["warnings"])


@pytest.mark.anyio
async def test_a_nodes_approve_keeps_the_findings_for_the_cache_seconds(
    zones: dict[str, str], conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    """The first approve asks DNS; the next, within EINMAL_DOCTOR_CACHE_SECONDS, does not: it passes with the
    DNS server gone, where asking would find no answer and refuse."""
    first, key = await _draft(conn, dsn, "news@good.test")
    made = einmal(
        "campaign", "create", "--account", "acme", "--name", "m", "--subject", "Hi", "--from", "news@good.test",
        "--text", "Hello", "--list", "news", "--at", "2099-01-01T00:00:00+00:00", dsn=dsn,
    )  # fmt: skip
    second, auth = int(made.stdout), {"Authorization": f"Bearer {key}"}
    with ExitStack() as dns:
        servers = dns.enter_context(dns_server(tmp_path, {"good.test": _sender(zones["record"])}))
        settings = {k.removeprefix("EINMAL_").lower(): v for k, v in env(zones, "good.test").items()}
        settings.update(dns_servers=servers, doctor_cache_seconds=300)
        async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
            assert (await client.post(f"/campaigns/{first}/approve", headers=auth)).status_code == 200
            dns.close()  # knotd stopped
            answer = await client.post(f"/campaigns/{second}/approve", headers=auth, timeout=60)
            assert answer.status_code == 200 and not any("doctor" in w for w in answer.json()["warnings"]), answer.text


@pytest.mark.anyio
async def test_an_accounts_own_domain_keys_and_relay_are_what_it_checks(
    zones: dict[str, str], conn: asyncpg.Connection, dsn: str
) -> None:
    """No DKIM in the environment: the account's own domain, key and relay (identity.of_account) are checked,
    and approve asks the doctor because the account signs; its relay's password is never printed."""
    account_id = await conn.fetchval(
        "INSERT INTO einmal.accounts (name, return_path) VALUES ('acme', 'bounces@nomx.test') RETURNING id"
    )
    await conn.execute(
        "INSERT INTO einmal.account_domains (account_id, domain, selectors, keys) VALUES ($1, 'good.test', '{s1}', $2)",
        account_id,
        [zones["pem"]],
    )
    relay = await conn.fetchval(
        "INSERT INTO einmal.relays (name, url) VALUES ('own', 'smtp://u:relay-password@192.0.2.77:587') RETURNING id"
    )
    await conn.execute("INSERT INTO einmal.account_relays (account_id, relay_id) VALUES ($1, $2)", account_id, relay)
    plain = {"EINMAL_DNS_SERVERS": zones["servers"], "EINMAL_RETURN_PATH_SECRET": "a-return-path-secret-of-enough"}
    done = einmal("doctor", "--account", "acme", dsn=dsn, env=plain)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "relay-password" not in done.stdout + done.stderr
    failed = set(failing(done.stdout).values())
    assert failed == {
        "SPF of nomx.test for relay 192.0.2.77:587 (192.0.2.77): fail",
        "From good.test does not align with return path nomx.test (aspf=r): DMARC cannot pass through it",
        "bounces to nomx.test: no MX and no address",
        "relay 192.0.2.77:587: no TLS, and its password goes in clear",
    }, done.stdout
    assert "DKIM s1._domainkey.good.test: the published key is einmal's" in done.stdout
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account_id)
    made = einmal(
        "campaign", "create", "--account", "acme", "--name", "n", "--subject", "Hi", "--from", "news@good.test",
        "--text", "Hello", "--list", "news", "--at", "2099-01-01T00:00:00+00:00", dsn=dsn, env=plain,
    )  # fmt: skip
    refused = einmal("campaign", "approve", made.stdout.strip(), dsn=dsn, env=plain)
    assert refused.returncode == 1 and "finds checks" in refused.stderr, refused.stderr
    assert "relay-password" not in refused.stderr


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("domain", "lookups", "judged"),
    [
        ("spfx.test", 2, ["pass", "pass", "softfail"]),  # a/24 takes 192.0.2.77; mx//64 the exchange's address
        ("r.spfx.test", 3, ["pass", "pass", "softfail"]),  # redirect: the other record's answer, and its lookups
        ("i.spfx.test", 3, ["pass", "pass", "fail"]),  # include: only its pass matches; then -all
        ("e.spfx.test", 1, ["unknown", "unknown", "unknown"]),  # exists with a macro: the sender decides
    ],
)
async def test_spf_is_walked_and_judged_as_receivers_do(
    zones: dict[str, str], domain: str, lookups: int, judged: list[str]
) -> None:
    lookup = dns_checks.Lookup(dns_checks.resolver(dns_servers(zones["servers"])))
    (record,) = await dns_checks.spf_records(lookup, domain)
    spf = await dns_checks.walk(lookup, domain, record)
    assert (spf.lookups, spf.void, spf.problems) == (lookups, 0, [])
    assert [dns_checks.judge(spf, a) for a in ("192.0.2.77", "198.51.100.7", "203.0.113.1")] == judged
