"""Transactional messages under `kill -9` (real nodes, `einmal run` with its HTTP surface, a real SMTP server on
loopback): 50 POSTs with one Idempotency-Key go on while the node serving them is SIGKILLed with the message on
its SMTP connection; a node started again takes every retry. One message row, one send row, every answer the
same id, and one message at the server: with EINMAL_IN_DOUBT=hold and the final dot written, the row is in
doubt (never a second copy) until `einmal reconcile --mark-sent`; with resend and the node killed before the
data, the message goes out once after the restart. A retry whose first try the dead node had claimed waits out
the middleware's takeover (60 s) and then runs the route again, which finds the message by its key."""

import signal
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest

from service.api.idempotency import TAKEOVER_SECONDS
from tests.conftest import einmal
from tests.messages.support import FROM, account_with_key, message_rows
from tests.support.pipeline import TAKEOVER_TIMEOUT, node_env, start_node, stop_node
from tests.support.smtp_servers import FaultServer, free_port
from tests.web.test_api import auth
from tests.web.test_http_node import wait_ready

pytestmark = pytest.mark.anyio

BODY = {"to": "crash@example.org", "subject": "Reset", "text": "Your link.", "from": FROM}


async def row_status(conn: asyncpg.Connection, wanted: str, timeout: float = 30) -> None:
    with anyio.fail_after(timeout):
        while [r["status"] for r in await message_rows(conn)] != [wanted]:
            await anyio.sleep(0.05)


@pytest.mark.parametrize(("in_doubt", "stage"), [("hold", "data_end"), ("resend", "rcpt")])
async def test_a_node_killed_under_fifty_posts_and_its_message_makes_one(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, in_doubt: str, stage: str
) -> None:
    _, key = await account_with_key(conn, dsn)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    headers = {**auth(key), "Idempotency-Key": "reset-crash"}
    answers: list[int] = []
    with FaultServer() as server:
        server.inject(stage, None, delay=6, times=1)  # the message's reply (to RCPT, or to the dot) waits
        env = node_env(
            dsn,
            server.port,
            EINMAL_IN_DOUBT=in_doubt,
            EINMAL_HTTP_ADDRESS=f"127.0.0.1:{port}",
            EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
        )
        victim = start_node(env, tmp_path / "victim.log")
        killed = anyio.Event()
        try:
            async with httpx.AsyncClient(base_url=f"{base}/api/v1", headers=headers, timeout=30) as client:
                await wait_ready(client, f"{base}/readyz")

                async def post() -> None:
                    while not killed.is_set():  # until the node dies under it
                        try:
                            answer = await client.post("/messages", json=BODY)
                        except httpx.TransportError:
                            return
                        if answer.status_code == 202:
                            answers.append(answer.json()["id"])

                async with anyio.create_task_group() as group:
                    for _ in range(50):
                        group.start_soon(post)
                    await row_status(conn, "sending")  # on the wire: the node is inside the SMTP transaction
                    with anyio.fail_after(10):
                        if stage == "data_end":
                            await server.arrived(1)
                        else:
                            while not server.rcpts:
                                await anyio.sleep(0.02)
                    victim.send_signal(signal.SIGKILL)
                    victim.wait()
                    killed.set()
        finally:
            if victim.poll() is None:
                victim.send_signal(signal.SIGKILL)
                victim.wait()
        assert answers, "some POSTs were answered before the kill"
        survivor = start_node(env, tmp_path / "survivor.log")
        try:
            async with httpx.AsyncClient(base_url=f"{base}/api/v1", headers=headers, timeout=30) as client:
                await wait_ready(client, f"{base}/readyz")

                async def retry() -> None:
                    with anyio.fail_after(TAKEOVER_SECONDS + 30):  # a claim of the dead node is taken over
                        while (answer := await client.post("/messages", json=BODY)).status_code == 409:
                            await anyio.sleep(1)
                    assert answer.status_code == 202, answer.text
                    answers.append(answer.json()["id"])

                async with anyio.create_task_group() as group:
                    for _ in range(50):
                        group.start_soon(retry)
                await row_status(conn, "in_doubt" if in_doubt == "hold" else "sent")
                await anyio.sleep(2)  # time for a second copy, were there one
                shown = (await client.get(f"/messages/{answers[0]}")).json()
        finally:
            assert await stop_node(survivor) == 0, (tmp_path / "survivor.log").read_text()
        delivered = server.messages
    assert len(set(answers)) == 1 and len(answers) >= 51, (len(answers), set(answers))
    assert await conn.fetchval("SELECT count(*) FROM einmal.messages") == 1
    rows = await message_rows(conn)
    assert len(rows) == 1 and rows[0]["campaign_id"] == answers[0]
    assert len(delivered) == 1 and delivered[0].rcpt_tos == ("crash@example.org",), delivered
    if in_doubt == "hold":
        assert shown["state"] == "in_doubt", shown
        decided = einmal("reconcile", str(answers[0]), "--mark-sent", dsn=dsn)
        assert decided.returncode == 0, decided.stderr
        assert [r["status"] for r in await message_rows(conn)] == ["sent"]
    else:
        assert shown["state"] == "sent" and shown["attempts"] == 1, shown  # the rescue counts one (resend)
