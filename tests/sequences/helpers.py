"""Helpers of the sequence tests: an account with a list and a sequence of steps made through the subject's
functions (service/sequences/), members joining and leaving through einmal.list_members (the trigger of
sql/migrations/0115_sequences.sql makes and stops their progress), and what a recording SMTP server saw, by step."""

import re
import time
from email.parser import BytesHeaderParser

import asyncpg

from service.addresses import email_key
from service.mail.mailing import Mailing
from service.sequences import sequences, steps
from tests.support.pipeline import Received, node_settings

MESSAGE_ID = re.compile(r"^<campaign\.(\d+)\.(\d+)@")


class Stamped(Received):
    """A recording server that also keeps each message's wall-clock arrival (comparable with PostgreSQL's now())."""

    def __init__(self, decide=None, delay: float = 0.0) -> None:
        super().__init__(decide, delay)
        self.arrivals: list[tuple[float, str, str]] = []  # (epoch seconds, recipient, Message-ID)
        self.subjects: dict[str, str] = {}  # Message-ID -> Subject

    async def handle_DATA(self, server, session, envelope) -> str:
        reply = await super().handle_DATA(server, session, envelope)
        if reply.startswith("250"):
            self.arrivals.append((time.time(), self.messages[-1][1], self.messages[-1][2]))
            parsed = BytesHeaderParser().parsebytes(envelope.original_content or b"")
            self.subjects[self.messages[-1][2]] = str(parsed.get("Subject", ""))
        return reply

    def by_step(self) -> dict[int, list[int]]:
        """Subscriber ids received, by step (campaign id), in arrival order: the Message-ID names both (P4)."""
        found: dict[int, list[int]] = {}
        for _, _, message_id in self.arrivals:
            if matched := MESSAGE_ID.match(message_id):
                found.setdefault(int(matched[1]), []).append(int(matched[2]))
        return found


async def account_and_list(conn: asyncpg.Connection, list_name: str = "news") -> tuple[int, int]:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    list_id = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name) VALUES ($1, $2) RETURNING id", account, list_name
    )
    return account, list_id


async def make_sequence(
    conn: asyncpg.Connection,
    dsn: str,
    delays: list[int],
    *,
    window: steps.Window | None = None,
    list_name: str = "news",
) -> tuple[int, int, int, list[int]]:
    """(account, list, sequence, the steps' campaign ids): a sequence on a new account's list with one step per
    delay, each saying its position."""
    account, list_id = await account_and_list(conn, list_name)
    made = await sequences.create(conn, account_id=account, name="welcome", list_name=list_name)
    settings = node_settings(dsn, 25)
    ids = []
    for i, seconds in enumerate(delays, 1):
        step = await steps.add(
            conn,
            mailing=Mailing.of(settings),
            account_id=account,
            sequence_id=made.id,
            subject=f"Step {i} for {{{{ name }}}}",
            from_address="news@example.com",
            text=f"Hello {{{{ email }}}}, this is step {i}.",
            delay_seconds=seconds,
            send_window=window,
        )
        ids.append(step.campaign_id)
    return account, list_id, made.id, ids


async def join(conn: asyncpg.Connection, account: int, list_id: int, emails: list[str]) -> list[int]:
    """The subscribers of `emails` (made when new), confirmed members of the list from now; their ids."""
    ids = []
    for email in emails:
        subscriber = await conn.fetchval(
            """
            INSERT INTO einmal.subscribers (account_id, email, email_lower, name) VALUES ($1, $2, $3, 'N')
            ON CONFLICT (account_id, email) DO UPDATE SET name = EXCLUDED.name RETURNING id""",
            account,
            email,
            email_key(email),
        )
        await conn.execute(
            "INSERT INTO einmal.list_members (list_id, subscriber_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            list_id,
            subscriber,
        )
        ids.append(subscriber)
    return ids


async def leave(conn: asyncpg.Connection, list_id: int, subscriber_id: int) -> None:
    await conn.execute(
        "DELETE FROM einmal.list_members WHERE list_id = $1 AND subscriber_id = $2", list_id, subscriber_id
    )


async def rows(conn: asyncpg.Connection, step: int) -> dict[int, str]:
    """The step's send rows: subscriber -> status."""
    found = await conn.fetch("SELECT subscriber_id, status FROM einmal.sends WHERE campaign_id = $1", step)
    return {r["subscriber_id"]: r["status"] for r in found}
