"""A relay that takes time (bench/relay.py: the end of DATA answered after 0–100 ms): einmal, one
node at 20 SMTP connections, against the reference of the same run: a free-running pool of 20
aiosmtplib connections, each sending its next prerendered message as soon as its own reply is in.

Each side gets a fresh relay with the same seed, so the same sequence of delays."""

from dataclasses import dataclass
from email.utils import formatdate

import aiosmtplib
import anyio

from bench import send
from bench.relay import Relay

CONNECTIONS = 20
SEED = 11


@dataclass
class Latency:
    messages: int
    pool_seconds: float
    pool_delivered: int
    einmal: send.Run

    @property
    def pool_rate(self) -> float:
        return self.messages / self.pool_seconds

    @property
    def ratio(self) -> float:
        return self.einmal.rate / self.pool_rate if self.einmal.sent else 0.0


def prerender(count: int) -> list[tuple[str, bytes]]:
    """(recipient, message) pairs of about the size einmal sends (bench/send.py's body)."""
    text = send.body()
    date = formatdate(localtime=False)
    return [
        (
            f"user{i}@example.com",
            (
                f"From: News <news@example.com>\r\nTo: User {i} <user{i}@example.com>\r\nSubject: Hello User {i}\r\n"
                f"Date: {date}\r\nMessage-ID: <{i}.bench@example.com>\r\nMIME-Version: 1.0\r\n"
                "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
                + text.replace("{{ name }}", f"User {i}").replace("\n", "\r\n")
            ).encode(),
        )
        for i in range(1, count + 1)
    ]


async def pool(port: int, messages: list[tuple[str, bytes]], connections: int = CONNECTIONS) -> float:
    """Seconds for `connections` open connections to send every message, each taking the next one
    as soon as its own reply is in (connecting is not timed)."""
    queue = iter(messages)  # shared: whichever connection is free takes the next message
    clients = [aiosmtplib.SMTP(hostname="127.0.0.1", port=port, timeout=30) for _ in range(connections)]
    for client in clients:
        await client.connect()

    async def work(client: aiosmtplib.SMTP) -> None:
        for recipient, message in queue:
            await client.sendmail("news@example.com", [recipient], message)

    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(work, client)
    seconds = anyio.current_time() - started
    for client in clients:
        await client.quit()
    return seconds


async def measure(server: str, messages: int, tick: float, say=print) -> Latency:
    say(f"relay 0-100 ms: a pool of {CONNECTIONS} aiosmtplib connections, {messages:,} messages")
    with Relay(SEED) as relay:
        base = relay.messages
        seconds = await pool(relay.port, prerender(messages))
        await anyio.to_thread.run_sync(relay.wait_messages, base + messages, 5)
        delivered = relay.messages - base
    say(f"  {messages / seconds:,.0f} msg/s ({seconds:.2f} s), delivered {delivered:,}")
    say(f"relay 0-100 ms: einmal, 1 node, EINMAL_SMTP_CONNECTIONS={CONNECTIONS}, {messages:,} recipients")
    with Relay(SEED) as relay:
        run = await send.campaign(
            server,
            relay,
            nodes=1,
            messages=messages,
            tick=tick,
            say=say,
            label="relay",
            timeout=max(120.0, messages / 20),
            extra_env={"EINMAL_SMTP_CONNECTIONS": str(CONNECTIONS)},
        )
    from bench.report import run_line

    say(f"  {run_line(run)}")
    return Latency(messages, seconds, delivered, run)
