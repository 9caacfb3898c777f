"""A campaign pauses itself when, over a minimum sample, its complaint, hard-bounce or policy-rejection rate
crosses its threshold (service/campaigns/self_pause.py): real nodes sending to real SMTP servers on loopback, complaints
handed to the inbound listener with the VERP token of their message, hard bounces posted as Postmark's
webhook, 5.7.26 refusals from a server that answers them for many domains."""

import re
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from tests.conftest import einmal
from tests.inbound.test_bounce_inbound import RETURN_PATH, SECRET, hand_over, running_node_with_inbound
from tests.support import reports
from tests.support import webhook_fixtures as fx
from tests.support.pipeline import (
    approve,
    counts,
    node_env,
    node_settings,
    running_node,
    seed,
    start_node,
    stop_node,
    wait_status,
)
from tests.support.smtp_servers import FaultServer
from tests.support.web import http_server
from tests.web.test_http_webhooks import sent

pytestmark = pytest.mark.anyio

OFF = {"pause_complaint_rate": 0, "pause_hard_bounce_rate": 0, "pause_policy_rejection_rate": 0}
DMARC = "550 5.7.26 Unauthenticated email from example.com is not accepted due to domain's DMARC policy"


async def delivered(server: FaultServer, at_least: int) -> list:
    with anyio.fail_after(30):
        while len(server.messages) < at_least:
            await anyio.sleep(0.02)
    return server.messages


async def state(conn: asyncpg.Connection, campaign: int) -> tuple[str, str | None]:
    row = await conn.fetchrow("SELECT status, pause_reason FROM einmal.campaigns WHERE id = $1", campaign)
    return row["status"], row["pause_reason"]


async def settled(conn: asyncpg.Connection, campaign: int) -> dict[str, int]:
    """The campaign's rows by status once none is claimed or on the wire (the pause let them go)."""
    with anyio.fail_after(20):
        while {"claimed", "sending"} & set(found := await counts(conn, campaign)):
            await anyio.sleep(0.1)
    return found


async def sent_after_the_pause(conn: asyncpg.Connection, campaign: int) -> int:
    """Rows answered after the pause committed: at most the messages that were on the wire then. Both times are
    their transactions' starts, so a slow pause commit counts the rows recorded meanwhile too: the tests that
    count them are `serial`, never beside another test's load (three were counted once beside it)."""
    return await conn.fetchval(
        """SELECT count(*) FROM einmal.sends s JOIN einmal.campaigns c ON c.id = s.campaign_id
                                  WHERE c.id = $1 AND s.sent_at > c.updated_at""",
        campaign,
    )


@pytest.mark.serial
async def test_complaints_past_the_threshold_pause_the_campaign_and_a_resume_judges_it_afresh(
    conn: asyncpg.Connection, dsn: str, smtp_server: FaultServer
) -> None:
    people = [f"p{i}@example.com" for i in range(400)]
    campaign = await seed(conn, people)
    settings = node_settings(
        dsn,
        smtp_server.port,
        return_path=RETURN_PATH,
        return_path_secret=SECRET,
        smtp_connections=2,
        rate_limit=40,
        **OFF | {"pause_complaint_rate": 1},
        pause_min_sample=100,
    )
    async with running_node_with_inbound(settings) as inbound_port:
        await approve(conn, campaign)
        first = (await delivered(smtp_server, 20))[:3]
        for n, message in enumerate(first):
            reply = await hand_over(inbound_port, message.mail_from, reports.arf(report_id=f"<c{n}@isp.test>"))
            assert reply.startswith("250 "), reply
        assert await state(conn, campaign) == ("sending", None), "3 of ~20 delivered is below the sample of 100"
        await wait_status(conn, campaign, "paused", timeout=30)
        _, reason = await state(conn, campaign)
        found = re.fullmatch(
            r"complaint rate (\d+\.\d\d) % \(3 of (\d+) delivered\) over the 1\.00 % threshold "
            r"\(EINMAL_PAUSE_COMPLAINT_RATE\)",
            reason,
        )
        assert found, reason
        assert 100 <= int(found[2]) < 300 and float(found[1]) == round(300 / int(found[2]), 2)
        during = await settled(conn, campaign)
        assert set(during) == {"sent", "queued"} and during["queued"] > 0, during
        assert await sent_after_the_pause(conn, campaign) <= 2, "nothing sent after the pause but what was on the wire"
        assert len(smtp_server.messages) == during["sent"]
        shown = await anyio.to_thread.run_sync(lambda: einmal("campaign", "status", str(campaign), dsn=dsn))
        assert "EINMAL_PAUSE_COMPLAINT_RATE" in shown.stdout, shown.stdout

        resumed = await anyio.to_thread.run_sync(lambda: einmal("campaign", "resume", str(campaign), dsn=dsn))
        assert resumed.returncode == 0, resumed.stderr
        await wait_status(conn, campaign, "sent", timeout=60)  # the 3 complaints before it do not pause it again
    assert await state(conn, campaign) == ("sent", None)
    assert await counts(conn, campaign) == {"sent": len(people)}
    assert not smtp_server.duplicates()


async def test_complaints_below_the_minimum_sample_do_not_pause(
    conn: asyncpg.Connection, dsn: str, smtp_server: FaultServer
) -> None:
    people = [f"p{i}@example.com" for i in range(60)]
    campaign = await seed(conn, people)
    settings = node_settings(
        dsn,
        smtp_server.port,
        return_path=RETURN_PATH,
        return_path_secret=SECRET,
        smtp_connections=2,
        rate_limit=30,
        **OFF | {"pause_complaint_rate": 1},
        pause_min_sample=100,
    )
    async with running_node_with_inbound(settings) as inbound_port:
        await approve(conn, campaign)
        for n, message in enumerate((await delivered(smtp_server, 10))[:5]):
            assert (
                await hand_over(inbound_port, message.mail_from, reports.arf(report_id=f"<c{n}@isp.test>"))
            ).startswith("250 ")
        await wait_status(conn, campaign, "sent", timeout=30)
    assert await state(conn, campaign) == ("sent", None), "5 of 60 is 8 %, but 60 is below the sample of 100"
    assert await counts(conn, campaign) == {"sent": len(people)}


@pytest.mark.serial
async def test_hard_bounces_posted_by_a_provider_past_the_threshold_pause_the_campaign(
    conn: asyncpg.Connection, dsn: str, smtp_server: FaultServer
) -> None:
    people = [f"p{i}@example.com" for i in range(400)]
    campaign = await seed(conn, people)
    pause = OFF | {"pause_hard_bounce_rate": 2, "pause_min_sample": 100}
    settings = node_settings(dsn, smtp_server.port, smtp_connections=2, rate_limit=40, **pause)
    auth = {"headers": fx.postmark_auth()}
    async with (
        running_node(settings),
        http_server(dsn, postmark_webhook_secret=SecretStr(fx.POSTMARK_SECRET), **pause) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        await approve(conn, campaign)
        for n, message in enumerate((await delivered(smtp_server, 20))[:5]):
            answer = await client.post("/inbound/postmark", json=fx.postmark_bounce(message.rcpt_tos[0], id_=n), **auth)
            assert answer.status_code == 200, answer.text
        assert await state(conn, campaign) == ("sending", None), "5 of ~20 delivered is below the sample of 100"
        await wait_status(conn, campaign, "paused", timeout=30)
        _, reason = await state(conn, campaign)
        found = re.fullmatch(
            r"hard-bounce rate (\d+\.\d\d) % \(5 of (\d+) delivered or rejected\) over the "
            r"2\.00 % threshold \(EINMAL_PAUSE_HARD_BOUNCE_RATE\)",
            reason,
        )
        assert found and 100 <= int(found[2]) < 250, reason
        during = await settled(conn, campaign)
        assert set(during) == {"sent", "queued"} and during["queued"] > 0, during
        assert await sent_after_the_pause(conn, campaign) <= 2
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions WHERE reason = 'bounce'") == 5


async def test_a_hard_bounce_rate_on_the_threshold_does_not_pause_and_one_bounce_more_does(
    conn: asyncpg.Connection, dsn: str
) -> None:
    people = [f"p{i}@example.com" for i in range(21)]
    campaign = (await sent(conn, people))[people[0]][0]
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    # 1,000 delivered, as a send pipeline's writer counts them (send_advance.sql)
    await conn.execute(
        "INSERT INTO einmal.campaign_tallies (campaign_id, source, delivered) VALUES ($1, 'n1/1.1', 1000)", campaign
    )
    pause = OFF | {"pause_hard_bounce_rate": 2, "pause_min_sample": 1000}
    async with (
        http_server(dsn, postmark_webhook_secret=SecretStr(fx.POSTMARK_SECRET), **pause) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):

        async def bounce(n: int) -> None:
            answer = await client.post(
                "/inbound/postmark", json=fx.postmark_bounce(people[n], id_=n), headers=fx.postmark_auth()
            )
            assert answer.json()["applied"] == 1, answer.text

        for n in range(20):
            await bounce(n)
        assert await state(conn, campaign) == ("sending", None), "20 of 1,000 is 2 %: on the threshold, not over"
        await bounce(20)
    assert await state(conn, campaign) == (
        "paused",
        "hard-bounce rate 2.10 % (21 of 1,000 delivered or rejected) "
        "over the 2.00 % threshold (EINMAL_PAUSE_HARD_BOUNCE_RATE)",
    )


@pytest.mark.serial
async def test_policy_refusals_from_many_domains_pause_the_campaign_not_its_subscribers_once_for_two_nodes(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    domains = [f"d{d}.example" for d in range(40)]
    people = [f"u{i}@{domain}" for i in range(10) for domain in domains]  # the domains interleaved
    campaign = await seed(conn, people)
    with FaultServer() as server:
        for domain in domains[:20]:
            server.inject("rcpt", DMARC, domain=domain)
        env = node_env(
            dsn,
            server.port,
            EINMAL_SMTP_CONNECTIONS="4",
            EINMAL_BATCH_SIZE="20",
            EINMAL_RATE_LIMIT="50",
            EINMAL_DOMAIN_PAUSE_SECONDS="60",
            EINMAL_MAX_ATTEMPTS="20",
            EINMAL_PAUSE_COMPLAINT_RATE="0",
            EINMAL_PAUSE_HARD_BOUNCE_RATE="0",
            EINMAL_PAUSE_POLICY_REJECTION_RATE="5%",
            EINMAL_PAUSE_MIN_SAMPLE="50",
        )
        logs = [tmp_path / f"node{n}.log" for n in range(2)]
        nodes = [start_node(env, log) for log in logs]
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "paused", timeout=30)
            during = await settled(conn, campaign)
            after = await sent_after_the_pause(conn, campaign)
            refusals = len([a for _, a in server.rcpts if a.split("@")[1] in domains[:20]])
            await anyio.sleep(1.5)  # a few ticks of each node, each checking the rates again
        finally:
            for node in nodes:
                assert await stop_node(node) == 0
    _, reason = await state(conn, campaign)
    found = re.fullmatch(
        r"policy-rejection rate (\d+\.\d\d) % \((\d+) of (\d+) attempts\) over the 5\.00 % "
        r"threshold \(EINMAL_PAUSE_POLICY_REJECTION_RATE\)",
        reason,
    )
    assert found and int(found[3]) >= 50 and 0 < int(found[2]) <= refusals, (reason, refusals)
    assert "failed" not in during and during["queued"] > len(people) // 2, during  # the accepting domains' too
    assert after <= 2 * 4, "nothing sent after the pause but what was on the wire"
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0
    paused = [line for log in logs for line in log.read_text().splitlines() if f"campaign {campaign} paused" in line]
    assert len(paused) == 1, paused  # one node's compare-and-set moved it; the other found it paused


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("EINMAL_PAUSE_COMPLAINT_RATE", "abc"),
        ("EINMAL_PAUSE_COMPLAINT_RATE", "-0.1"),
        ("EINMAL_PAUSE_HARD_BOUNCE_RATE", "150%"),
        ("EINMAL_PAUSE_POLICY_REJECTION_RATE", "nan"),
        ("EINMAL_PAUSE_MIN_SAMPLE", "0"),
        ("EINMAL_PAUSE_MIN_SAMPLE", "ten"),
    ],
)
def test_a_bad_threshold_is_one_line_and_exit_2(name: str, value: str) -> None:
    result = einmal("campaign", "status", "1", dsn="postgresql://postgres@127.0.0.1:1/nowhere", env={name: value})
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"einmal: {name}: "), result.stderr
    assert "Traceback" not in result.stderr
    if "RATE" in name:
        assert "a percentage from 0 to 100" in result.stderr, result.stderr
