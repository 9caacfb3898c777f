"""The API's render threads are shared between accounts (service/api/deps.py `renders`): one account's
previews, trial renders and template checks hold at most RENDER_SHARE of the process's RENDERS threads, so
another account's preview is rendered while the first one's wait in its own line."""

import anyio
import asyncpg
import httpx
import pytest

from service.api import app as api_app
from service.api import deps
from service.api.deps import RENDER_SHARE, RENDERS
from service.settings import Settings
from tests.support.web import SECRET
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

SLOW = "{% for i in range(30000) %}{{ i }}{% endfor %}{{ unsubscribe_url }}"  # within the sandbox's budget
QUICK = "Hi {{ name }}\n{{ unsubscribe_url }}\n"
FLOOD = 16  # A's previews at once: well over RENDERS


async def _account(conn: asyncpg.Connection, dsn: str, name: str) -> tuple[int, str]:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
    list_id = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news') RETURNING id", account
    )
    subscriber = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower, name) "
        "VALUES ($1, $2, lower($2), 'Ann') RETURNING id",
        account,
        f"ann@{name}.example.org",
    )
    await conn.execute("INSERT INTO einmal.list_members (list_id, subscriber_id) VALUES ($1, $2)", list_id, subscriber)
    return account, make_key(dsn, name)


def _in_line(app) -> int:
    """The previews holding a render thread or waiting in a line for one."""
    slots = getattr(app.state, "trial_slots", None)
    lines = slots.accounts.values() if slots else ()
    return sum(line.borrowed_tokens + line.statistics().tasks_waiting for line in lines)


async def test_one_accounts_previews_leave_another_account_its_renders(conn: asyncpg.Connection, dsn: str) -> None:
    assert RENDER_SHARE < RENDERS
    accounts = {name: await _account(conn, dsn, name) for name in ("a", "b")}
    keys = {name: key for name, (_, key) in accounts.items()}
    settings = Settings(database_url=dsn, unsubscribe_url="https://news.example.org/u", unsubscribe_secret=SECRET)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=FLOOD + 4)
    try:
        app = api_app.api(pool, settings)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=deps.KeyFirst(app, pool)), base_url="http://einmal", timeout=60
        ) as client:
            campaigns = {}
            for name, text in (("a", SLOW), ("b", QUICK)):
                made = await client.post(
                    "/campaigns",
                    headers=auth(keys[name]),
                    json={
                        "name": "N",
                        "subject": "S",
                        "from": f"n@{name}.example.com",
                        "text": text,
                        "lists": ["news"],
                    },
                )
                assert made.status_code == 201, made.text
                campaigns[name] = made.json()["id"]
            done: list[str] = []

            async def preview(name: str) -> None:
                answer = await client.get(f"/campaigns/{campaigns[name]}/preview", headers=auth(keys[name]))
                assert answer.status_code == 200, answer.text
                done.append(name)

            async with anyio.create_task_group() as tg:
                for _ in range(FLOOD):
                    tg.start_soon(preview, "a")
                with anyio.fail_after(30):  # until A's requests are all in: its share rendering, the rest waiting
                    while _in_line(app) + len(done) < FLOOD:
                        await anyio.sleep(0.01)
                ahead = len(done)  # A's that were over before B's was asked for
                await preview("b")
            a_before_b = done.index("b") - ahead
        # B's preview was not queued behind A's. Had it been, every A preview waiting when it came would have had a
        # thread before it: FLOOD - ahead - RENDERS of them at the least (A holding all RENDERS threads). In its
        # own line it waits for none: only the ones in A's share, and what A's threads finish while B's request
        # reads its key and campaign (a few on a loaded machine), are over first.
        assert a_before_b < FLOOD - ahead - RENDERS, (ahead, done)
        assert done.count("a") == FLOOD
    finally:
        await pool.close()
