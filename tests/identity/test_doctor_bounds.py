"""The doctor cannot hurt another account (docs/design.md#doctor): a route holds no database connection while it
waits on DNS (GET /doctor, approve, POST /webhooks), so calls against a name server that never answers leave
another account's API and the one-click unsubscribe answered; `?domain=` is one of the account's own domains;
findings are kept in PostgreSQL, so a second call within EINMAL_DOCTOR_CACHE_SECONDS, on this node, another or
in another process, asks DNS nothing; runs per account are bounded (429); and the SPF walk stops at RFC 7208's
limits, its queries counted at a relay in front of knotd (tests/support/dns_counter.py)."""

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.abc
import asyncpg
import httpx
import pytest

from actors import node
from service.accounts import dns_checks, doctor, keys
from service.webhooks import policy
from tests.conftest import einmal
from tests.identity.test_doctor import _key, _sender, env, failing
from tests.support.dns_counter import counting
from tests.support.dns_server import dns_server
from tests.support.web import ONE_CLICK, http_server, subscriber, token


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _account(conn: asyncpg.Connection, name: str, *domains: str) -> tuple[int, str]:
    """A new account with From domains `domains` (no keys of its own) and a write key: (its id, the key)."""
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
    for domain in domains:
        await conn.execute(
            "INSERT INTO einmal.account_domains (account_id, domain) VALUES ($1, $2)", account_id, domain
        )
    _, key = await keys.mint(conn, account_id=account_id, name="k", scope="write")
    return account_id, key


def _small_pool(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """The HTTP actor's pool of requests at most `limit` connections (its /metrics one stays at one)."""
    made = node.http_pool

    async def small(dsn: str, size: int = node.HTTP_POOL_SIZE) -> asyncpg.Pool:
        return await made(dsn, size=min(limit, size))

    monkeypatch.setattr(node, "http_pool", small)


async def _others_answer(client: httpx.AsyncClient, key: str, ids: tuple[int, int, int]) -> tuple[int, int, float]:
    """Another account's API read and a subscriber's one-click unsubscribe: (their statuses, seconds taken)."""
    started = time.monotonic()
    read = await client.get("/api/v1/lists", headers=auth(key))
    unsubscribed = await client.post(f"/unsubscribe?token={token(ids)}", data=ONE_CLICK)
    return read.status_code, unsubscribed.status_code, time.monotonic() - started


async def _asked(relay, at_least: int, within: float = 8.0, distinct: bool = False) -> None:
    """Until the silent server has been asked `at_least` questions (of as many names: `distinct`): the calls
    are waiting on it."""
    with anyio.move_on_after(within):
        while len(set(relay.asked()) if distinct else relay.asked()) < at_least:
            await anyio.sleep(0.05)
    await anyio.sleep(0.3)


@pytest.mark.serial
@pytest.mark.anyio
async def test_doctor_calls_waiting_on_silent_dns_leave_other_accounts_answered(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_pool(monkeypatch, 3)
    monkeypatch.setattr(dns_checks, "QUERY_SECONDS", 2.0)
    ids = await subscriber(conn, account="other")
    _, other = await keys.mint(conn, account_id=ids[0], name="k", scope="write")
    callers = [await _account(conn, f"a{n}", f"a{n}.test") for n in range(3)]
    statuses: list[int] = []
    with counting() as silent:
        async with http_server(dsn, dns_servers=silent.address) as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:

                async def ask(key: str) -> None:
                    statuses.append((await client.get("/api/v1/doctor", headers=auth(key))).status_code)

                async with anyio.create_task_group() as tg:
                    for _, key in callers * 2:  # six calls in flight, two per account, a pool of three
                        tg.start_soon(ask, key)
                    await _asked(silent, 6)
                    read, unsubscribed, waited = await _others_answer(client, other, ids)
    assert (read, unsubscribed) == (200, 200) and waited < 3, (read, unsubscribed, waited)
    assert statuses == [200] * 6, statuses  # each said what DNS did not answer, none was refused for the pool


@pytest.mark.serial
@pytest.mark.anyio
async def test_approves_waiting_on_silent_dns_leave_other_accounts_answered(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _small_pool(monkeypatch, 3)
    monkeypatch.setattr(dns_checks, "QUERY_SECONDS", 2.0)
    ids = await subscriber(conn, account="other")
    _, other = await keys.mint(conn, account_id=ids[0], name="k", scope="write")
    drafts = []
    for n in range(3):
        account_id, key = await _account(conn, f"a{n}", f"a{n}.test")
        campaign = await conn.fetchval(
            "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids) "
            "VALUES ($1, 'n', 's', $2, 'b', '{}') RETURNING id",
            account_id,
            f"news@a{n}.test",
        )
        drafts.append((campaign, key))
    signing = {"dkim_domain": "a0.test", "dkim_selector": "s1", "dkim_private_key_file": _key(tmp_path, "k")[0]}
    statuses: list[int] = []
    with counting() as silent:
        async with http_server(dsn, dns_servers=silent.address, **signing) as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:

                async def approve(campaign: int, key: str) -> None:
                    answer = await client.post(f"/api/v1/campaigns/{campaign}/approve", headers=auth(key))
                    statuses.append(answer.status_code)

                async with anyio.create_task_group() as tg:
                    for campaign, key in drafts * 2:  # six approves in flight, a pool of three
                        tg.start_soon(approve, campaign, key)
                    await _asked(silent, 6)
                    read, unsubscribed, waited = await _others_answer(client, other, ids)
    assert (read, unsubscribed) == (200, 200) and waited < 3, (read, unsubscribed, waited)
    assert statuses == [409] * 6, statuses  # the doctor could not check: not approved, none refused for the pool


@pytest.mark.serial
@pytest.mark.anyio
async def test_webhook_registration_waiting_on_silent_dns_leaves_other_accounts_answered(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_pool(monkeypatch, 2)
    monkeypatch.setattr(policy, "RESOLVE_SECONDS", 6.0)
    ids = await subscriber(conn, account="other")
    _, other = await keys.mint(conn, account_id=ids[0], name="k", scope="write")
    _, key = await _account(conn, "hooks")
    statuses: list[int] = []
    with counting() as silent:
        async with http_server(dsn, dns_servers=silent.address) as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:

                async def register(n: int) -> None:
                    body = {"url": f"https://hook{n}.example/in"}
                    statuses.append((await client.post("/api/v1/webhooks", headers=auth(key), json=body)).status_code)

                async with anyio.create_task_group() as tg:
                    for n in range(3):
                        tg.start_soon(register, n)
                    await _asked(silent, 2, distinct=True)
                    read, unsubscribed, waited = await _others_answer(client, other, ids)
    assert (read, unsubscribed) == (200, 200) and waited < 2, (read, unsubscribed, waited)
    assert statuses == [422] * 3, statuses  # the names did not resolve: refused, one line each


@pytest.mark.anyio
async def test_a_domain_not_the_accounts_is_refused_without_asking_dns(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dns_checks, "QUERY_SECONDS", 0.5)
    _, key = await _account(conn, "acme", "acme.test")
    await _account(conn, "rival", "rival.test")
    with counting() as silent:
        async with http_server(dsn, dns_servers=silent.address) as base:
            async with httpx.AsyncClient(base_url=f"{base}/api/v1", timeout=60) as client:
                for domain in ("rival.test", "victim.example", "sub.acme.test"):
                    answer = await client.get("/doctor", headers=auth(key), params={"domain": domain})
                    assert answer.status_code == 422, answer.text
                    assert "not one of the account's domains" in answer.json()["error"]
                    assert len(answer.json()["error"].splitlines()) == 1
                assert silent.asked() == []
                own = await client.get("/doctor", headers=auth(key), params={"domain": "ACME.test."})
                assert own.status_code == 200 and own.json()["domain"] == "acme.test", own.text


@pytest.fixture
def counted_zones(tmp_path: Path) -> Iterator[dict]:
    """knotd serving good.test behind a counting relay: {"relay", "key", "record"}."""
    key, record = _key(tmp_path, "einmal")
    with dns_server(tmp_path, {"good.test": _sender(record)}) as at, counting(at) as relay:
        yield {"relay": relay, "key": key, "record": record}


@pytest.mark.anyio
async def test_a_second_call_within_the_cache_time_asks_dns_nothing_on_any_node_or_process(
    counted_zones: dict, conn: asyncpg.Connection, dsn: str
) -> None:
    relay = counted_zones["relay"]
    account_id, key = await _account(conn, "acme", "good.test")
    zone = env({"servers": relay.address, "key": counted_zones["key"]}, "good.test")
    settings = {k.removeprefix("EINMAL_").lower(): v for k, v in zone.items()}
    async with http_server(dsn, **settings, doctor_cache_seconds=300) as base:
        async with httpx.AsyncClient(base_url=f"{base}/api/v1", timeout=60) as client:
            first = await client.get("/doctor", headers=auth(key))
            assert first.status_code == 200 and first.json()["ok"] is True, first.text
            asked = len(relay.asked())
            assert asked > 0
            again = await client.get("/doctor", headers=auth(key))
            assert again.json() == first.json() and len(relay.asked()) == asked
    async with http_server(dsn, **settings, doctor_cache_seconds=300) as base:  # another node, a fresh process state
        async with httpx.AsyncClient(base_url=f"{base}/api/v1", timeout=60) as client:
            other = await client.get("/doctor", headers=auth(key))
            assert other.json() == first.json() and len(relay.asked()) == asked
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account_id)
    made = einmal(
        "campaign", "create", "--account", "acme", "--name", "n", "--subject", "Hi", "--from", "news@good.test",
        "--text", "Hello", "--list", "news", "--at", "2099-01-01T00:00:00+00:00", dsn=dsn,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    approved = einmal("campaign", "approve", made.stdout.strip(), dsn=dsn, env=zone)  # another process
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert len(relay.asked()) == asked
    stored = await conn.fetchval("SELECT count(*) FROM einmal.doctor_reports WHERE account_id = $1", account_id)
    assert stored == 1


@pytest.mark.serial
@pytest.mark.anyio
async def test_doctor_runs_per_account_are_bounded_with_retry_after(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dns_checks, "QUERY_SECONDS", 1.0)
    monkeypatch.setattr(doctor, "RUNS_PER_WINDOW", 3)
    _, key = await _account(conn, "acme", "acme.test")
    _, rival = await _account(conn, "rival", "rival.test")
    answers: list[httpx.Response] = []
    with counting() as silent:
        async with http_server(dsn, dns_servers=silent.address) as base:
            async with httpx.AsyncClient(base_url=f"{base}/api/v1", timeout=60) as client:

                async def ask() -> None:
                    answers.append(await client.get("/doctor", headers=auth(key)))

                async with anyio.create_task_group() as tg:  # three at once: one past the runs in flight
                    for _ in range(doctor.IN_FLIGHT + 1):
                        tg.start_soon(ask)
                refused = [a for a in answers if a.status_code == 429]
                assert len(refused) == 1 and int(refused[0].headers["Retry-After"]) >= 1, [a.text for a in answers]
                assert "doctor" in refused[0].json()["error"]
                answers.clear()
                for _ in range(2):  # DNS did not answer: nothing kept, each call a run, the window's third past it
                    answers.append(await client.get("/doctor", headers=auth(key)))
                assert [a.status_code for a in answers] == [200, 429], [a.text for a in answers]
                assert int(answers[1].headers["Retry-After"]) >= 1
                assert (await client.get("/doctor", headers=auth(rival))).status_code == 200  # its own bound


def _spf_zones(record: str) -> dict[str, list[str]]:
    """mxterms.test: fifteen mx: terms, each one exchanger with an address; bigmx.test: an `mx` of fifteen;
    voids.test: five names that do not exist."""
    terms = " ".join(f"mx:h{n}.mxterms.test" for n in range(1, 16))
    return {
        "mxterms.test": [
            *_sender(record, spf=f"v=spf1 {terms} -all"),
            *(line for n in range(1, 16) for line in (f"h{n} MX 10 x{n}", f"x{n} A 192.0.2.{n}")),
        ],
        "voids.test": _sender(record, spf=f"v=spf1 {' '.join(f'a:nx{n}.voids.test' for n in range(1, 6))} -all"),
        "bigmx.test": [
            *_sender(record, spf="v=spf1 mx:big.bigmx.test -all"),
            *(line for n in range(1, 16) for line in (f"big MX {n} x{n}", f"x{n} A 198.51.100.{n}")),
        ],
    }


def test_the_spf_walk_stops_at_the_rfc_limits_and_says_permerror(tmp_path: Path) -> None:
    key, record = _key(tmp_path, "einmal")
    with dns_server(tmp_path, _spf_zones(record)) as at, counting(at) as relay:
        zones = {"servers": relay.address, "key": key}
        done = einmal("doctor", "--domain", "mxterms.test", env=env(zones, "mxterms.test"))
        assert done.returncode == 1, done.stdout + done.stderr
        assert any(
            t.startswith("SPF of mxterms.test: receivers answer permerror: 11 DNS lookups, over 10")
            for t in failing(done.stdout).values()
        ), done.stdout
        walked = [n for n in relay.asked() if n.startswith(("h", "x"))]
        assert len([n for n in walked if n.startswith("h")]) == 10  # the ten terms allowed, the eleventh not asked
        assert len(walked) == 30, walked  # each term: its MX, then A and AAAA of its one exchanger

        before = len(relay.asked())
        done = einmal("doctor", "--domain", "bigmx.test", env=env(zones, "bigmx.test"))
        assert done.returncode == 1, done.stdout + done.stderr
        said = " | ".join(failing(done.stdout).values())
        assert "receivers answer permerror: big.bigmx.test has 15 MX records, over 10" in said, done.stdout
        asked = relay.asked()[before:]
        assert not [n for n in asked if n.startswith("x")], asked  # no exchanger's address asked past the limit

        before = len(relay.asked())
        done = einmal("doctor", "--domain", "voids.test", env=env(zones, "voids.test"))
        said = " | ".join(failing(done.stdout).values())
        assert "receivers answer permerror: 3 void lookups, over 2" in said, done.stdout
        asked = {n for n in relay.asked()[before:] if n.startswith("nx")}
        assert asked == {"nx1.voids.test", "nx2.voids.test", "nx3.voids.test"}, asked  # the fourth not asked


@pytest.mark.serial
@pytest.mark.anyio
async def test_test_messages_waiting_on_a_silent_relay_leave_other_accounts_answered(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test message waits on its relay with no connection held: the relay here accepts and never greets."""
    _small_pool(monkeypatch, 3)
    ids = await subscriber(conn, account="other")
    _, other = await keys.mint(conn, account_id=ids[0], name="k", scope="write")
    senders = []
    for n in range(3):
        account_id, campaign, _ = await subscriber(conn, account=f"t{n}")
        _, key = await keys.mint(conn, account_id=account_id, name="k", scope="write")
        senders.append((campaign, key))
    accepted: list[anyio.abc.SocketStream] = []
    statuses: list[int] = []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as silent, anyio.create_task_group() as relay:

        async def keep(stream: anyio.abc.SocketStream) -> None:  # open, and never a greeting
            accepted.append(stream)
            await anyio.sleep_forever()

        relay.start_soon(silent.serve, keep)
        port = silent.extra(anyio.abc.SocketAttribute.local_port)
        settings = {"smtp_urls": f"smtp://127.0.0.1:{port}", "smtp_timeout_seconds": 6}
        async with http_server(dsn, **settings) as base, httpx.AsyncClient(base_url=base, timeout=60) as client:

            async def send(campaign: int, key: str) -> None:
                body = {"to": "me@example.org", "subscriber": "ann.example@example.org"}
                answer = await client.post(f"/api/v1/campaigns/{campaign}/test", headers=auth(key), json=body)
                statuses.append(answer.status_code)

            async with anyio.create_task_group() as tg:
                for campaign, key in senders:
                    tg.start_soon(send, campaign, key)
                with anyio.move_on_after(8):
                    while len(accepted) < 3:
                        await anyio.sleep(0.05)
                await anyio.sleep(0.3)
                read, unsubscribed, waited = await _others_answer(client, other, ids)
        relay.cancel_scope.cancel()
    assert (read, unsubscribed) == (200, 200) and waited < 2, (read, unsubscribed, waited)
    assert statuses == [503] * 3, statuses  # no relay answered: 503 each, none refused for the pool
