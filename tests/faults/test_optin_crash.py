"""A double opt-in confirmation under `kill -9`: a real node (`einmal run` with its HTTP surface) takes a
sign-up from the hosted form and is SIGKILLed while the confirmation is on its SMTP connection; a node
started again, and the same form submitted again meanwhile and after, never make a second message.
With EINMAL_IN_DOUBT=hold and the final dot written, the one message stays the only one and its row is in
doubt; with resend and the node killed before the data, the message goes out once after the restart."""

import signal
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest

from tests.support.optin import FORM, FROM, SECRET, account_with_list, confirmation_rows
from tests.support.pipeline import TAKEOVER_TIMEOUT, node_env, start_node, stop_node
from tests.support.smtp_servers import FaultServer, free_port
from tests.web.test_http_node import wait_ready

pytestmark = pytest.mark.anyio

SETTLE = 3.0  # seconds in which a second message would have arrived (ticks are 0.5 s)


async def ready(base: str) -> None:
    async with httpx.AsyncClient() as client:
        await wait_ready(client, f"{base}/readyz")


async def sign_up(base: str, list_id: int, times: int) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(times):
            answer = await client.post(f"{base}{FORM}", data={"email": "crash@example.org"})
            assert answer.status_code == 200, answer.text


async def row_status(conn: asyncpg.Connection, wanted: str, timeout: float = 30) -> None:
    with anyio.fail_after(timeout):
        while [r["status"] for r in await confirmation_rows(conn)] != [wanted]:
            await anyio.sleep(0.05)


@pytest.mark.parametrize(("in_doubt", "stage"), [("hold", "data_end"), ("resend", "rcpt")])
async def test_a_node_killed_while_the_confirmation_goes_out_never_sends_a_second(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path, in_doubt: str, stage: str
) -> None:
    _, list_id, _ = await account_with_list(conn, dsn)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with FaultServer() as server:
        server.inject(stage, None, delay=6, times=1)  # the first message's reply (to RCPT, or to the dot) waits
        env = node_env(
            dsn,
            server.port,
            EINMAL_IN_DOUBT=in_doubt,
            EINMAL_HTTP_ADDRESS=f"127.0.0.1:{port}",
            EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
            EINMAL_UNSUBSCRIBE_SECRET=SECRET,
            EINMAL_CONFIRM_URL=f"{base}/confirm",
            EINMAL_OPTIN_FROM=FROM,
        )
        victim = start_node(env, tmp_path / "victim.log")
        try:
            await ready(base)
            await sign_up(base, list_id, 2)  # a double submit
            await row_status(conn, "sending")  # on the wire: the node is inside the SMTP transaction
            if stage == "data_end":
                with anyio.fail_after(10):
                    await server.arrived(1)
            else:
                with anyio.fail_after(10):
                    while not server.rcpts:
                        await anyio.sleep(0.02)
                assert server.messages == [], "killed before the data"
        finally:
            victim.send_signal(signal.SIGKILL)
            victim.wait()
        survivor = start_node(env, tmp_path / "survivor.log")
        try:
            await ready(base)
            await sign_up(base, list_id, 3)  # submitted again after the crash
            await row_status(conn, "in_doubt" if in_doubt == "hold" else "sent")
            await anyio.sleep(SETTLE)
            await sign_up(base, list_id, 1)
            await anyio.sleep(SETTLE)
        finally:
            assert await stop_node(survivor) == 0, (tmp_path / "survivor.log").read_text()
        delivered = server.messages
    assert len(delivered) == 1 and delivered[0].rcpt_tos == ("crash@example.org",), delivered
    assert [r["status"] for r in await confirmation_rows(conn)] == ["in_doubt" if in_doubt == "hold" else "sent"]
    assert await conn.fetchval("SELECT state FROM einmal.list_members") == "unconfirmed"
