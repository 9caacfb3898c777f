"""The API checks the account's From domain, not its return path's, when none is named."""

from collections.abc import Iterator

import asyncpg
import httpx
import pytest

from service.accounts import keys
from tests.identity.test_doctor import _key, _sender
from tests.support.dns_server import dns_server
from tests.support.web import http_server


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    folder = tmp_path_factory.mktemp("dns")
    rsa_key, rsa_record = _key(folder, "einmal")
    with dns_server(folder, {"good.test": _sender(rsa_record)}) as servers:
        yield {"servers": servers, "key": rsa_key}


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
    assert any("nomx.test" in f["title"] for f in report["findings"]), report  # the return path, as the envelope
