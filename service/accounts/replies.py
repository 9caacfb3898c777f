"""What an account is shown of a send row's last reply (docs/operations/security.md, "What an account sees").

The environment's relays (EINMAL_SMTP_URLS) are the installation's, shared by every account without relays of
its own: their names and their words (a host name, a queue id, an address of the operator's, why AUTH failed)
are the operator's to read, in the CLI. Over the API an account sees all the words of a reply only when its
mail goes through relays of its own (`einmal account relay attach`); otherwise a reply keeps its codes
(`550 5.1.1`), which say what became of the message, and einmal's own words keep their sense with the relay's
name and words left out. A domain's pause is the installation's, whichever account's message met it: its
reply is shown by its codes alone to every account. Webhook events apply the same rule in the database
(`einmal.reply_shown`, migration 0125), held to this one by tests/web/test_api_replies.py."""

import re

import asyncpg

from service import db
from service.smtp import reasons

RELAY = re.compile(r"SMTP [^:\n]{1,200}: .*", re.S)  # service/smtp/connection.py SmtpUnavailable: the relay's name
REPLY = re.compile(r"\s*[2-5][0-9][0-9](?:[ -]|$)")
GAVE_UP = re.compile(r" \(gave up after [0-9]+ attempts\)$")  # actors/sender.py: einmal's, kept
UNEXPECTED = re.compile(r"(reply to end of DATA: )\s*([2-5][0-9][0-9]).*", re.S)  # connection.py: the relay's words


def codes(reply: str) -> str:
    """The reply's code and enhanced status (`550 5.1.1`), its words left out."""
    code = reply.strip()[:3]
    status = reasons.status_in(reply[4:])
    return f"{code} {status}" if status and "." in status else code


def shown(reply: str | None, *, own_relays: bool) -> str | None:
    """`reply` as the account is shown it: whole when its mail goes through relays of its own."""
    if reply is None or own_relays:
        return reply
    if REPLY.match(reply):
        gave_up = GAVE_UP.search(reply)
        return codes(reply) + (gave_up[0] if gave_up else "")
    return UNEXPECTED.sub(r"\1\2", RELAY.sub("the relay could not be reached", reply))


async def own_relays(conn: asyncpg.Connection, *, account_id: int) -> bool:
    """Whether the account's mail goes through relays of its own."""
    return bool(await conn.fetchval(*db.sql("account_relays_any", account_id=account_id)))
