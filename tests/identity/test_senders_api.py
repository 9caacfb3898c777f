"""/api/v1/account/domains and /account/identity (service/api/senders.py) over real HTTP and a real
PostgreSQL: a key reads its own account's From domains, which only the operator gives, and makes their DKIM
keys (the answer's record verifies the key stored), reads its identity without a secret in it, sets its return
path; a read key only reads, another account sees nothing of it, bad input is 422."""

import asyncpg
import httpx
import pytest

from tests.conftest import einmal
from tests.identity.test_senders_cli import PASSWORD, stored_record
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio


async def test_a_key_manages_its_account_s_domains_and_keys_and_never_sees_a_secret(
    conn: asyncpg.Connection, dsn: str
) -> None:
    acme = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('other')")
    write, read, other = make_key(dsn, "acme"), make_key(dsn, "acme", "--scope", "read"), make_key(dsn, "other")
    added = einmal("relay", "add", "ses", "--url", f"smtp://u:{PASSWORD}@127.0.0.1:2525", "--rate", "5", dsn=dsn)
    assert added.returncode == 0, added.stderr
    assert einmal("account", "relay", "attach", "--account", "acme", "ses", "--weight", "2", dsn=dsn).returncode == 0
    answers: list[httpx.Response] = []
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:

        async def call(method: str, path: str, key: str = write, **kw) -> httpx.Response:
            answer = await client.request(method, path, headers=auth(key), **kw)
            answers.append(answer)
            return answer

        put = await call("PUT", "/account/domains/news.acme.example")
        assert put.status_code == 405, "a key holder cannot give its account a domain"
        assert (await call("GET", "/account/domains")).json() == []
        granted = einmal("account", "domain", "add", "--account", "acme", "News.Acme.Example", dsn=dsn)
        assert granted.returncode == 0, granted.stderr
        assert (await call("GET", "/account/domains")).json() == [{"domain": "news.acme.example", "keys": []}]
        records = {}
        for selector, algorithm in (("s1", "rsa"), ("s2", "ed25519")):
            made = await call(
                "POST", "/account/domains/news.acme.example/dkim", json={"selector": selector, "algorithm": algorithm}
            )
            assert made.status_code == 201, made.text
            assert made.json()["name"] == f"{selector}._domainkey.news.acme.example"
            assert made.json()["record"] == await stored_record(conn, acme, "news.acme.example", selector)
            records[selector] = made.json()["record"]
        listed = await call("GET", "/account/domains", read)
        assert listed.json() == [
            {
                "domain": "news.acme.example",
                "keys": [
                    {"selector": s, "name": f"{s}._domainkey.news.acme.example", "record": r}
                    for s, r in records.items()
                ],
            }
        ]
        third = await call("POST", "/account/domains/news.acme.example/dkim", json={"selector": "s3"})
        assert third.status_code == 422 and "more than two keys" in third.json()["error"]
        changed = await call(
            "PATCH",
            "/account/identity",
            json={"return_path": "bounces@news.acme.example", "unsubscribe_mailto": "unsub@acme.example"},
        )
        assert changed.status_code == 200, changed.text
        identity = (await call("GET", "/account/identity", read)).json()
        assert identity["relays"] == [{"name": "ses", "weight": 2}]
        assert identity["return_path"] == "bounces@news.acme.example" and identity["return_path_secret_set"]
        assert identity["unsubscribe_mailto"] == "unsub@acme.example"
        assert (await call("GET", "/account/identity", other)).json()["domains"] == []
        assert (await call("GET", "/account/domains", other)).json() == []
        assert (await call("DELETE", "/account/domains/news.acme.example", other)).status_code == 404
        assert (await call("DELETE", "/account/domains/news.acme.example", read)).status_code == 403
        bad = {
            ("DELETE", "/account/domains/not_a domain"): "is not a domain name",
            ("PATCH", "/account/identity", "return_path", "b@elsewhere.example"): "nor a subdomain",
            ("PATCH", "/account/identity", "return_path_secret", "short"): "at least 16 characters",
            ("PATCH", "/account/identity", "unsubscribe_mailto", "x"): "a plain ASCII address",
        }
        for (method, path, *field), said in bad.items():
            answer = await call(method, path, json=dict([field]) if field else None)
            assert answer.status_code == 422 and said in answer.json()["error"], (path, answer.text)
        weak = await call("POST", "/account/domains/news.acme.example/dkim", json={"selector": "s_1"})
        assert weak.status_code == 422
        given = await call("PATCH", "/account/identity", json={"return_path_secret": "a-verp-key-of-the-account"})
        assert given.status_code == 200 and given.json()["return_path_secret_set"]
        gone = await call("DELETE", "/account/domains/news.acme.example")
        assert gone.status_code == 204
        assert (await call("DELETE", "/account/domains/news.acme.example")).status_code == 404
        assert (await call("GET", "/account/domains")).json() == []
    secret = await conn.fetchval("SELECT return_path_secret FROM einmal.accounts WHERE id = $1", acme)
    assert secret == "a-verp-key-of-the-account"
    for answer in answers:
        assert PASSWORD not in answer.text and secret not in answer.text and "PRIVATE" not in answer.text
        assert "127.0.0.1:2525" not in answer.text, "no relay URL at all"
    stored = await conn.fetch("SELECT body FROM einmal.api_requests")
    assert all(b"PRIVATE" not in bytes(r["body"]) for r in stored)
