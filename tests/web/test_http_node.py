"""The HTTP surface of a real node (`einmal run` with EINMAL_HTTP_ADDRESS): a campaign goes to a
capture server, the List-Unsubscribe URL of a captured message is posted as a mail provider
would, the next campaign skips the address; /metrics agrees with the rows; logs are JSON with the
batch's trace ids; readiness follows the node; a node at a low file limit keeps sending through a
flood of idle HTTP connections."""

import email.parser
import json
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import asyncpg
import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.smtp import capture
from tests.conftest import ROOT
from tests.support.pipeline import (
    approve,
    node_env,
    node_settings,
    running_node,
    seed,
    start_node,
    stop_node,
    wait_status,
)
from tests.support.smtp_servers import free_port

pytestmark = pytest.mark.anyio

SECRET = "node-test-key-of-32-characters-or-more"
BODY = "Hello {{ name }}, leave here: {{ unsubscribe_url }}"


def captured(folder: Path, campaign_id: int) -> dict[str, email.message.Message]:
    """recipient -> headers of each captured message of the campaign."""
    found = {}
    for path in folder.glob(f"*{capture.SUFFIX}"):
        with open(path, "rb") as f:
            headers = email.parser.BytesHeaderParser().parse(f)
        if str(headers["Message-ID"]).startswith(f"<campaign.{campaign_id}."):
            found[headers["Delivered-To"]] = headers
    return found


def samples(text: str, name: str) -> dict[tuple, float]:
    """labels -> value of the samples called `name` in a Prometheus text exposition."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


async def second_campaign(conn: asyncpg.Connection, first: int) -> int:
    return await conn.fetchval(
        """
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
        SELECT account_id, 'again', subject, from_address, body_text, list_ids FROM einmal.campaigns WHERE id = $1
        RETURNING id""",
        first,
    )


async def wait_ready(client: httpx.AsyncClient, url: str) -> None:
    with anyio.fail_after(60):
        while True:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await anyio.sleep(0.05)


async def test_a_captured_messages_link_unsubscribes_and_the_next_campaign_skips_the_address(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    addresses = [f"reader{i}@example.com" for i in range(30)]
    first = await seed(conn, addresses, body=BODY)
    http_port, out, log = free_port(), tmp_path / "mail", tmp_path / "node.log"
    base = f"http://127.0.0.1:{http_port}"
    async with capture.capture_server(out) as (_, smtp_port), httpx.AsyncClient(timeout=60) as client:
        env = node_env(
            dsn,
            smtp_port,
            EINMAL_HTTP_ADDRESS=f"127.0.0.1:{http_port}",
            EINMAL_UNSUBSCRIBE_URL=f"{base}/unsubscribe",
            EINMAL_UNSUBSCRIBE_SECRET=SECRET,
            EINMAL_BATCH_SIZE="7",
            EINMAL_LOG_FORMAT="json",
            EINMAL_LOG_LEVEL="DEBUG",
            OTEL_TRACES_EXPORTER="console",
        )
        proc = start_node(env, log)
        try:
            await wait_ready(client, f"{base}/readyz")
            await approve(conn, first)
            await wait_status(conn, first, "sent")
            headers = captured(out, first)["reader3@example.com"]
            assert str(headers["List-Unsubscribe-Post"]) == "List-Unsubscribe=One-Click"
            link = str(headers["List-Unsubscribe"]).strip("<>")
            assert link.startswith(f"{base}/unsubscribe?token=")
            # as Gmail or Yahoo do: a POST of the RFC 8058 body, multipart/form-data
            answer = await client.post(link, files={"List-Unsubscribe": (None, "One-Click")})
            assert (answer.status_code, answer.content) == (200, b"")
            second = await second_campaign(conn, first)
            await approve(conn, second)
            await wait_status(conn, second, "sent")
            metrics = (await client.get(f"{base}/metrics")).text
        finally:
            code = await stop_node(proc)
    assert code == 0, log.read_text()
    suppressed = await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in suppressed] == [("reader3@example.com", "unsubscribe")]
    skipped = await conn.fetchval(
        "SELECT status FROM einmal.sends WHERE campaign_id = $1 AND email_lower = 'reader3@example.com'", second
    )
    assert skipped == "suppressed"
    assert "reader3@example.com" not in captured(out, second) and len(captured(out, second)) == 29

    sent_rows = await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE status = 'sent'")
    assert sent_rows == 59
    assert samples(metrics, "einmal_messages_total")[(("outcome", "sent"),)] == sent_rows
    assert samples(metrics, "einmal_smtp_replies_total")[(("class", "2xx"),)] == sent_rows
    assert samples(metrics, "einmal_rows_claimed_total")[()] == sent_rows
    assert samples(metrics, "einmal_batch_duration_seconds_count")[()] >= 59 / 7
    assert samples(metrics, "einmal_group_commit_duration_seconds_count")[()] > 0
    assert samples(metrics, "einmal_rows_in_flight")[()] == 0
    assert samples(metrics, "einmal_unsubscribes_total")[(("result", "applied"),)] == 1
    assert 0 <= samples(metrics, "einmal_heartbeat_age_seconds")[()] < 30

    lines = [json.loads(line) for line in log.read_text().splitlines()]  # every line is one JSON object
    batches = [e for e in lines if e["logger"] == "einmal.recorder" and "batch of" in e["message"]]
    assert len(batches) >= 59 / 7
    assert all(len(e["trace_id"]) == 32 and len(e["span_id"]) == 16 for e in batches)
    assert len({e["trace_id"] for e in batches}) == len(batches)  # one trace per batch


async def scrape_until(client: httpx.AsyncClient, base: str, done: Callable[[str], bool]) -> str:
    with anyio.fail_after(60):
        while not done(metrics := (await client.get(f"{base}/metrics")).text):
            await anyio.sleep(0.2)
    return metrics


async def test_metrics_show_the_progress_of_a_sending_campaign_and_in_doubt_rows(
    conn: asyncpg.Connection, dsn: str
) -> None:
    from tests.support.pipeline import Received, recording_server

    campaign = await seed(conn, [f"p{i}@example.com" for i in range(40)])
    sock_port = free_port()
    async with recording_server(Received()) as port, httpx.AsyncClient() as client:
        settings = node_settings(dsn, port, http_address=f"127.0.0.1:{sock_port}")
        async with running_node(settings):
            base = f"http://127.0.0.1:{sock_port}"
            await wait_ready(client, f"{base}/readyz")
            await conn.execute("UPDATE einmal.campaigns SET status = 'paused' WHERE id = $1", campaign)
            # a paused campaign is not sending: build its rows by hand, some in doubt, the others due
            # only in an hour, so that the node leaves them be while the test looks
            await conn.execute(
                """
                INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                          next_attempt_at)
                SELECT $1::bigint, account_id, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id,
                       CASE WHEN id % 10 = 0 THEN 'in_doubt' ELSE 'queued' END, now() + interval '1 hour'
                FROM einmal.subscribers""",
                campaign,
            )
            # the database's figures are read again a few seconds after the last read
            paused = await scrape_until(client, base, lambda m: samples(m, "einmal_in_doubt_rows")[()] == 4)
            await conn.execute(
                "UPDATE einmal.campaigns SET status = 'sending', recipients_built_at = now() WHERE id = $1", campaign
            )
            sending = await scrape_until(client, base, lambda m: samples(m, "einmal_campaign_rows") != {})
            await conn.execute("UPDATE einmal.campaigns SET status = 'paused' WHERE id = $1", campaign)
            paused_again = await scrape_until(client, base, lambda m: samples(m, "einmal_campaign_rows") == {})
    assert samples(paused, "einmal_campaign_rows") == {}
    progress = samples(sending, "einmal_campaign_rows")
    assert progress[(("campaign_id", str(campaign)), ("status", "in_doubt"))] == 4
    assert progress[(("campaign_id", str(campaign)), ("status", "queued"))] == 36
    assert samples(sending, "einmal_database_up")[()] == 1
    assert samples(paused_again, "einmal_campaign_rows") == {}  # no longer sending: gone from the metric


async def test_readiness_is_503_with_the_reason_while_the_smtp_relay_refuses(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(conn, ["a@example.com", "b@example.com"])
    http_port = free_port()
    nothing_listens = free_port()
    base = f"http://127.0.0.1:{http_port}"
    async with httpx.AsyncClient() as client:
        async with running_node(node_settings(dsn, nothing_listens, http_address=f"127.0.0.1:{http_port}")):
            await wait_ready(client, f"{base}/readyz")
            assert (await client.get(f"{base}/readyz")).json() == {"ready": True}
            await approve(conn, campaign)
            with anyio.fail_after(60):
                while (answer := await client.get(f"{base}/readyz")).status_code == 200:
                    await anyio.sleep(0.05)
            assert (await client.get(f"{base}/healthz")).status_code == 200
    assert answer.status_code == 503
    assert answer.json()["ready"] is False
    assert answer.json()["reason"].startswith("SMTP relay refusing"), answer.json()


async def test_readiness_is_503_draining_once_the_node_is_told_to_stop(conn: asyncpg.Connection, dsn: str) -> None:
    from actors import node
    from tests.support.pipeline import Received, recording_server

    campaign = await seed(conn, [f"d{i}@example.com" for i in range(20)])
    received = Received(delay=2)  # each SMTP transaction takes 2 s: the drain waits for those under way
    http_port = free_port()
    base = f"http://127.0.0.1:{http_port}"
    stop = anyio.Event()
    async with recording_server(received) as port, httpx.AsyncClient(timeout=30) as client:
        settings = node_settings(dsn, port, http_address=f"127.0.0.1:{http_port}", smtp_connections=2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(node.serve, settings, stop)
            await wait_ready(client, f"{base}/readyz")
            await approve(conn, campaign)
            with anyio.fail_after(60):
                while await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE status = 'sending'") == 0:
                    await anyio.sleep(0.01)
            stop.set()
            draining = await client.get(f"{base}/readyz")
    assert draining.status_code == 503
    assert draining.json()["reason"].startswith("draining"), draining.json()


def test_the_demo_serves_http_and_follows_a_captured_messages_unsubscribe_link(dsn: str, tmp_path: Path) -> None:
    from tests.conftest import UNSUBSCRIBE, einmal

    # as a new operator runs it, nothing set: the demo configures its own unsubscribe
    result = einmal(
        "demo",
        "--database-url",
        dsn,
        "--subscribers",
        "40",
        "--out",
        str(tmp_path / "out"),
        env=dict.fromkeys(UNSUBSCRIBE),
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(
        r"unsubscribe link of \d+\.eml \(to (\S+)\):\n  http://127\.0\.0\.1:\d+/unsubscribe\?token=\S+\n"
        r"  one-click POST: HTTP 200; (\S+) suppressed: yes\n",
        result.stdout,
    )
    assert found and found[1] == found[2], result.stdout


def start_limited_node(env: dict[str, str], log: Path, files: tuple[int, int]) -> subprocess.Popen:
    """`einmal run` with a (soft, hard) limit on open files."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, files)

    return subprocess.Popen(
        [sys.executable, "-m", "service", "run"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),
        preexec_fn=limit,
    )


async def test_a_node_at_a_low_file_limit_keeps_sending_through_a_flood_of_idle_connections(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    from tests.support.pipeline import Received, counts, recording_server

    campaign = await seed(conn, [f"f{i}@example.com" for i in range(300)])
    http_port, log = free_port(), tmp_path / "node.log"
    base = f"http://127.0.0.1:{http_port}"
    flood: list[anyio.abc.SocketStream] = []
    async with recording_server(Received(delay=0.01)) as smtp_port, httpx.AsyncClient(timeout=30) as client:
        # connections that never send a byte, held longer than the test: only the cap stands in their way
        env = node_env(
            dsn, smtp_port, EINMAL_HTTP_ADDRESS=f"127.0.0.1:{http_port}", EINMAL_HTTP_HEADER_TIMEOUT_SECONDS="600"
        )
        proc = start_limited_node(env, log, (1024, 1024))
        try:
            await wait_ready(client, f"{base}/readyz")
            with anyio.fail_after(120):
                for _ in range(1000):
                    flood.append(await anyio.connect_tcp("127.0.0.1", http_port))
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=120)
            async with httpx.AsyncClient(timeout=30) as fresh:  # a new connection, while the flood's are open
                health = await fresh.get(f"{base}/healthz")
                metrics = (await fresh.get(f"{base}/metrics")).text
            held = sum(
                c.laddr.port == http_port and c.status == psutil.CONN_ESTABLISHED
                for c in psutil.Process(proc.pid).net_connections("tcp")
            )
            running = proc.poll() is None
        finally:
            for stream in flood:
                await stream.aclose()
            code = await stop_node(proc)
    assert running and code == 0, log.read_text()[-3000:]
    assert health.status_code == 200
    assert await counts(conn, campaign) == {"sent": 300}
    assert samples(metrics, "einmal_actor_restarts_total") == {}, log.read_text()[-3000:]
    assert 0 < held <= 1024 // 4  # the cap: a quarter of the file limit
    assert "Too many open files" not in log.read_text()
