"""POST /api/v1/subscribers/batch over real HTTP (einmal serve on loopback) and a real PostgreSQL: each row's
outcome, invalid rows reported and the valid ones written, one subscriber per mailbox key within a batch and
across batches, the lists' confirmed memberships that never confirm a sign-up, suppressions kept, the bounds
(rows and bytes), another account untouched, overlapping batches at once, and an Idempotency-Key replay."""

import json

import anyio
import asyncpg
import httpx
import pytest

from service import db
from service.subscribers import batch, subscriber
from tests.support import doc_examples
from tests.support.web import http_server
from tests.web.test_api import ALICE, auth, snapshot, two_accounts  # noqa: F401  two_accounts: a fixture

pytestmark = pytest.mark.anyio


async def _acme(conn: asyncpg.Connection) -> int:
    return await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")


async def test_each_row_has_its_outcome_and_only_the_valid_rows_are_written(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    acme = await _acme(conn)
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news'), ($1, 'vip')", acme)
    # dora signed up to vip and has not confirmed; erin's mailbox is unsubscribed
    dora = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, 'dora@example.org', "
        "'dora@example.org') RETURNING id",
        acme,
    )
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id, state) "
        "SELECT id, $2, 'unconfirmed' FROM einmal.lists WHERE account_id = $1 AND name = 'vip'",
        acme,
        dora,
    )
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower, reason) "
        "VALUES ($1, 'erin@example.org', 'unsubscribe')",
        acme,
    )
    rows = [
        {"email": "ALICE@example.ORG", "attributes": {"plan": "pro"}, "lists": ["news"]},  # alice, respelt
        {"email": "carol@bücher.example", "name": "Carol", "lists": ["news", "vip"]},
        {"email": "not an address"},
        {"email": "bad@example.org", "name": "a\nb"},
        {"email": "typo@example.org", "lists": ["nwes"]},
        {"email": "long@example.org", "attributes": {"bio": "x" * 10_001}},
        {"email": "dora@example.org", "lists": ["vip", "news"]},
        {"email": "Erin@Example.org", "name": "Erin"},
        {"email": "CAROL@xn--bcher-kva.example", "attributes": {"city": "Bonn"}},  # carol again, another spelling
        {"email": "Bob@Example.net", "name": "Robert"},  # other's bob: acme's own, new
        {"email": "age@example.org", "attributes": {"age": 42}},  # a row's own error, not the batch's (was: 422)
        {"email": "flag@example.org", "attributes": {"vip": True, "plan": "pro"}},
    ]
    others = await snapshot(conn, "other")
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        answer = await client.post("/subscribers/batch", headers=auth(two_accounts["acme"]), json={"subscribers": rows})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["created"], body["updated"], body["invalid"]) == (3, 3, 6)
    told = body["subscribers"]
    assert [r["email"] for r in told] == [r["email"] for r in rows]
    assert [r["outcome"] for r in told] == [
        "updated",
        "created",
        "invalid",
        "invalid",
        "invalid",
        "invalid",
        "updated",
        "created",
        "updated",
        "created",
        "invalid",
        "invalid",
    ]
    assert told[10]["reason"] == "attributes: 'age' is a number; attribute values are text, e.g. \"42\""
    assert told[11]["reason"] == "attributes: 'vip' is true or false; attribute values are text, e.g. \"42\""
    assert told[2]["reason"].startswith("not an email address: ") and told[2]["id"] is None
    assert told[3]["reason"] == "name: control characters or text that is not UTF-8"
    assert told[4]["reason"] == "lists: the account has no list 'nwes'"
    assert told[5]["reason"] == "attributes: 'bio' is longer than 10000 characters"
    assert all("\n" not in r["reason"] for r in told if r["reason"])
    assert told[1]["id"] == told[8]["id"]  # one mailbox, one subscriber
    assert told[6]["id"] == dora and told[6]["unconfirmed_lists"] == ["vip"]  # a sign-up stays unconfirmed
    assert told[6]["status"] == "confirmed"  # now a confirmed member of news
    assert told[7]["status"] == "unsubscribed"
    stored = {
        r["email"]: r
        for r in await conn.fetch(
            "SELECT s.email, s.name, s.attributes, array(SELECT l.name || ':' || m.state FROM einmal.list_members m "
            "JOIN einmal.lists l ON l.id = m.list_id WHERE m.subscriber_id = s.id ORDER BY l.name) AS lists "
            "FROM einmal.subscribers s WHERE s.account_id = $1",
            acme,
        )
    }
    assert set(stored) == {ALICE, "carol@bücher.example", "dora@example.org", "Erin@Example.org", "Bob@Example.net"}
    assert json.loads(stored[ALICE]["attributes"]) == {"city": "Köln", "plan": "pro"}
    assert stored[ALICE]["lists"] == ["news:confirmed"]
    carol = stored["carol@bücher.example"]
    assert (carol["name"], json.loads(carol["attributes"]), carol["lists"]) == (
        "Carol",
        {"city": "Bonn"},
        ["news:confirmed", "vip:confirmed"],
    )
    assert stored["dora@example.org"]["lists"] == ["news:confirmed", "vip:unconfirmed"]
    assert await conn.fetchval("SELECT reason FROM einmal.suppressions WHERE email_lower = 'erin@example.org'") == (
        "unsubscribe"
    )
    assert await snapshot(conn, "other") == others  # other's bob, of the same mailbox, is as it was


async def test_a_mailbox_in_another_spelling_in_a_later_batch_updates_its_subscriber(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        first = await client.post(
            "/subscribers/batch", headers=key, json={"subscribers": [{"email": "Zoë@Example.org"}]}
        )
        again = await client.post(
            "/subscribers/batch",
            headers=key,
            json={"subscribers": [{"email": "zoë@example.ORG", "name": "Zoë"}, {"email": "ZOË@example.org"}]},
        )
    [made] = first.json()["subscribers"]
    assert made["outcome"] == "created"
    assert [(r["outcome"], r["id"]) for r in again.json()["subscribers"]] == [("updated", made["id"])] * 2
    rows = await conn.fetch("SELECT email, name FROM einmal.subscribers WHERE email_lower = 'zoë@example.org'")
    assert [tuple(r) for r in rows] == [("Zoë@Example.org", "Zoë")]


async def test_the_bounds_are_refused_with_nothing_written(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = auth(two_accounts["acme"])
    before = await snapshot(conn)
    too_many = {"subscribers": [{"email": f"r{i}@example.org"} for i in range(batch.MAX_ROWS + 1)]}
    too_big = {"subscribers": [{"email": f"r{i}@example.org", "name": "n" * 1100} for i in range(batch.MAX_ROWS)]}
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        many = await client.post("/subscribers/batch", headers=key, json=too_many)
        big = await client.post("/subscribers/batch", headers=key, json=too_big)
        empty = await client.post("/subscribers/batch", headers=key, json={"subscribers": []})
        shapeless = await client.post("/subscribers/batch", headers=key, json={"subscribers": [{"name": "x"}]})
        read_only = await client.post(
            "/subscribers/batch",
            headers=auth(two_accounts["acme-read"]),
            json={"subscribers": [{"email": "r@example.org"}]},
        )
        # the most rows, each near the most a real row holds, fit the body's bound
        full = {"subscribers": [{"email": f"f{i}@example.org", "name": "n" * 900} for i in range(batch.MAX_ROWS)]}
        assert len(json.dumps(full)) > 64 * 1024  # the bound of every other body of the API
        fits = await client.post("/subscribers/batch", headers=key, json=full)
    assert many.status_code == 422 and "at most 1000" in many.json()["error"], many.text
    assert big.status_code == 413 and big.json() == {"error": "The request body is too large."}, big.text
    assert empty.status_code == 422 and shapeless.status_code == 422
    assert read_only.status_code == 403
    assert fits.status_code == 200 and fits.json()["created"] == batch.MAX_ROWS, fits.text[:300]
    await conn.execute("DELETE FROM einmal.subscribers WHERE email LIKE 'f%@example.org'")
    assert await snapshot(conn) == before


async def test_overlapping_batches_at_once_neither_deadlock_nor_make_a_mailbox_twice(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    """Six batches at once, of the same 200 new mailboxes in three spellings, each batch in its own order
    (ascending, descending, shuffled): every one is answered 200, each mailbox is one subscriber created by
    exactly one row, with every batch's attribute merged."""
    key = auth(two_accounts["acme"])
    spell = (str.lower, str.upper, str.title)
    order = list(range(200))
    orders = [order, order[::-1], order[::7] + [i for i in order if i % 7]]
    answers: list[httpx.Response] = []
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", limits=httpx.Limits(max_connections=6)) as client,
    ):

        async def post(n: int) -> None:
            rows = [{"email": spell[n % 3](f"m{i}@example.org"), "attributes": {f"b{n}": "1"}} for i in orders[n % 3]]
            answers.append(await client.post("/subscribers/batch", headers=key, json={"subscribers": rows}, timeout=30))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for n in range(6):
                    tg.start_soon(post, n)
    assert [a.status_code for a in answers] == [200] * 6, [a.text[:200] for a in answers]
    assert sum(a.json()["created"] for a in answers) == 200
    rows = await conn.fetch(
        "SELECT email_lower, count(*) AS n, min(attributes::text) AS attributes FROM einmal.subscribers "
        "WHERE email_lower LIKE 'm%@example.org' GROUP BY 1"
    )
    assert len(rows) == 200 and {r["n"] for r in rows} == {1}
    assert all(json.loads(r["attributes"]) == {f"b{n}": "1" for n in range(6)} for r in rows)


async def test_a_retried_batch_under_its_idempotency_key_writes_nothing_twice(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    """The retry gets the first answer, marked replayed, and runs nothing: a name changed between the two
    stays changed. Another batch under the key is 422."""
    headers = {**auth(two_accounts["acme"]), "Idempotency-Key": "sync-42"}
    rows = {"subscribers": [{"email": "new@example.org", "name": "New"}, {"email": ALICE, "name": "Alice"}]}
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        first = await client.post("/subscribers/batch", headers=headers, json=rows)
        await conn.execute("UPDATE einmal.subscribers SET name = 'Changed since' WHERE email_lower = 'new@example.org'")
        again = await client.post("/subscribers/batch", headers=headers, json=rows)
        other = await client.post("/subscribers/batch", headers=headers, json={"subscribers": [{"email": ALICE}]})
    assert first.status_code == 200 and [r["outcome"] for r in first.json()["subscribers"]] == ["created", "updated"]
    assert again.status_code == 200 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert other.status_code == 422 and "another request" in other.json()["error"]
    assert [
        tuple(r) for r in await conn.fetch("SELECT name FROM einmal.subscribers WHERE email_lower = 'new@example.org'")
    ] == [("Changed since",)]


async def test_a_batch_waits_for_an_import_then_is_503_with_nothing_written(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscriber, "LOCK_SECONDS", 0.5)
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        async with conn.transaction():
            await conn.execute(*db.sql("subscribers_import_lock", account_id=await _acme(conn)))
            started = anyio.current_time()
            waited = await client.post(
                "/subscribers/batch", headers=key, json={"subscribers": [{"email": "someone@example.org"}]}
            )
            assert (waited.status_code, waited.headers["retry-after"]) == (503, "5"), waited.text
            assert anyio.current_time() - started >= 0.5
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers WHERE email_lower LIKE 'someone%'") == 0


async def test_the_keys_locks_are_taken_in_one_order_whatever_the_batchs(conn: asyncpg.Connection, dsn: str) -> None:
    """Two writers of the same two mailboxes, one naming them in the other's reverse order: A holds the key
    whose lock comes first, B asks for both (the other first), then A asks for the second. Taken in the batch's
    order, B would hold the second and wait for the first while A waits for the second: a deadlock, which
    PostgreSQL breaks after deadlock_timeout by failing one. Taken in the locks' order, B waits for the first
    holding nothing, A gets the second and commits, and B follows."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    lock_id = "SELECT hashtextextended('einmal.subscriber:' || $1::bigint || ':' || $2::text, 0)"
    ids = {k: await conn.fetchval(lock_id, account, k) for k in ("one@example.org", "two@example.org")}
    first, second = sorted(ids, key=ids.__getitem__)
    lock = "SELECT einmal.subscribers_lock($1, $2::text[], '5s')"
    other = await asyncpg.connect(dsn)
    done: list[str] = []

    async def b() -> None:
        async with other.transaction():
            await other.execute(lock, account, [second, first])
        done.append("b")

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                async with conn.transaction():
                    await conn.execute(lock, account, [first])
                    tg.start_soon(b)
                    await anyio.sleep(0.3)  # B waits now
                    await conn.execute(lock, account, [second])
                    await anyio.sleep(1.5)  # past deadlock_timeout (1 s): a deadlock would have failed one of them
                    assert done == []  # B still waits for A
                    done.append("a")
    finally:
        await other.close()
    assert done == ["a", "b"]


async def test_the_guide_example_runs_as_written_and_answers_what_it_shows(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    async with http_server(dsn) as base:
        code, out, err = await doc_examples.run(doc_examples.example("guide/http-api.md", "bash"), dsn, base)
    assert code == 0, err
    shown = json.loads(doc_examples.example("guide/http-api.md", "json"))
    answer = json.loads(out)
    ada = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'ada@example.org'")
    for row in shown["subscribers"]:  # the ids of the page are those of a new database
        row["id"] = ada if row["id"] is not None else None
    assert answer == shown


async def test_a_body_that_is_no_batch_is_answered_as_before(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    """The route reads its body itself (in a worker thread): each odd body gets FastAPI's answer to a body of
    the Batch model, word for word, and writes nothing."""
    before = await snapshot(conn)
    json_type = {"content-type": "application/json"}
    cases = [
        (b"{not json", json_type, 422, "body.1: JSON decode error"),
        (b"", json_type, 422, "body: Field required"),
        (
            '{"subscribers": [{"email": "\xe9"}]}'.encode("latin-1"),
            json_type,
            400,
            "There was an error parsing the body",
        ),
        (
            b'{"subscribers": [{"email": "a@example.org"}]}',
            {},
            422,
            "body: Input should be a valid dictionary or object to extract fields from",
        ),
        (
            b'{"subscribers": [{"email": "a@example.org"}]}',
            {"content-type": "text/plain"},
            422,
            "body: Input should be a valid dictionary or object to extract fields from",
        ),
        (
            b'{"subscribers": [{"email": "a@example.org", "x": 1}]}',
            json_type,
            422,
            "body.subscribers.0.x: Extra inputs are not permitted",
        ),
        (
            b'{"subscribers": [{"email": 42}]}',
            json_type,
            422,
            "body.subscribers.0.email: Input should be a valid string",
        ),
        (
            b'{"subscribers": [{"email": "a@example.org", "name": "\\ud800"}]}',
            json_type,
            422,
            "body.subscribers.0.name: Input should be a valid string, unable to parse raw data as a unicode string",
        ),
        (
            b'{"subscribers": [{"email": "a@example.org", "lists": "news"}]}',
            json_type,
            422,
            "body.subscribers.0.lists: Input should be a valid list",
        ),
        (
            b'{"subscribers": ["a@example.org"]}',
            json_type,
            422,
            "body.subscribers.0: Input should be a valid dictionary",
        ),
        (
            b'["a@example.org"]',
            json_type,
            422,
            "body: Input should be a valid dictionary or object to extract fields from",
        ),
    ]
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        for body, headers, status, error in cases:
            answer = await client.post("/subscribers/batch", headers={**key, **headers}, content=body)
            assert (answer.status_code, answer.json()) == (status, {"error": error}), body
    assert await snapshot(conn) == before


async def test_each_rows_status_is_the_subscribers_state_whatever_its_lists_and_suppression(
    conn: asyncpg.Connection,
) -> None:
    """The batch reads its rows' states in one pass (migration 0156): each must be einmal.subscriber_state's."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    news, vip = await conn.fetchval(
        "WITH l AS (INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news'), ($1, 'vip') RETURNING id) "
        "SELECT array_agg(id ORDER BY id) FROM l",
        account,
    )
    states = {  # an address: its memberships before the batch, its suppression, the state the batch tells
        "none@example.org": ((), None, "confirmed"),
        "signup@example.org": ((("vip", "unconfirmed"),), None, "unconfirmed"),
        "both@example.org": ((("vip", "unconfirmed"), ("news", "confirmed")), None, "confirmed"),
        "left@example.org": ((("news", "confirmed"),), "unsubscribe", "unsubscribed"),
        "gone@example.org": ((), "bounce", "bounced"),
        "angry@example.org": ((), "complaint", "complained"),
        "held@example.org": ((("vip", "unconfirmed"),), "manual", "suppressed"),
    }
    for email, (memberships, reason, _) in states.items():
        sid = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, $2) RETURNING id",
            account,
            email,
        )
        for list_name, state in memberships:
            await conn.execute(
                "INSERT INTO einmal.list_members (list_id, subscriber_id, state) VALUES ($1, $2, $3)",
                {"news": news, "vip": vip}[list_name],
                sid,
                state,
            )
        if reason:
            await conn.execute(
                "INSERT INTO einmal.suppressions (account_id, email_lower, reason) VALUES ($1, $2, $3)",
                account,
                email,
                reason,
            )
    rows = [batch.Row(email, name="Named") for email in states] + [batch.Row("new@example.org")]
    async with conn.transaction():
        outcomes = await batch.upsert(conn, account_id=account, rows=rows)
    told = {o.email: o.status for o in outcomes}
    assert told == {**{e: s for e, (_, _, s) in states.items()}, "new@example.org": "confirmed"}
    by_the_rule = await conn.fetch(
        "SELECT s.email, einmal.subscriber_state(s.id, x.reason) AS state FROM einmal.subscribers s "
        "LEFT JOIN einmal.suppressions x ON x.account_id = s.account_id AND x.email_lower = s.email_lower "
        "WHERE s.account_id = $1",
        account,
    )
    assert {r["email"]: r["state"] for r in by_the_rule} == told
