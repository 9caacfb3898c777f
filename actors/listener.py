"""Suppression listener: LISTEN einmal_suppression (and einmal_campaign).

Keeps the node's in-memory set of addresses suppressed since it started,
fed by notifications. A notification is only a hint: after every (re)connect
the table is read for what a lost notification could have carried. Campaign
notifications wake the scheduler and the claimer at once instead of at their next tick; einmal_queued (a
sign-up's confirmation, a sequence step's rows) and einmal_message (a new transactional message) the
claimer alone, and einmal_unsubscribe says which suppressions are only an unsubscribe, which
a message passes unless it honours them (docs/design.md#messages).
Its connection is to EINMAL_LISTEN_DATABASE_URL when that is set (the
database without the pooler in front of EINMAL_DATABASE_URL), else to the
node's database.
"""

import datetime as dt
import logging

import anyio
import asyncpg
from anyio.abc import TaskStatus

from actors.sections import ListenerConfig
from actors.wires import MessageNotices, Suppressions, Wakeups
from service import db

log = logging.getLogger("einmal.listener")

HEALTH_CHECK_SECONDS = 1.0
# suppressions.created_at is its transaction's start, which can precede the commit
RELOAD_MARGIN = dt.timedelta(minutes=5)


class Listener:
    """Writes the suppressions and the message notices; wakes the scheduler and the claimer."""

    def __init__(
        self,
        config: ListenerConfig,
        suppressions: Suppressions,
        notices: MessageNotices,
        wakeups: Wakeups,
        node_id: str,
    ) -> None:
        self.config, self.suppressions, self.notices, self.wakeups = config, suppressions, notices, wakeups
        self.node_id = node_id  # its connection is named after it
        self.since: dt.datetime | None = None  # reload from here after a reconnect

    def _on_suppression(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        account, _, email_lower = str(payload).partition(":")  # a NOTIFY's payload is text
        self.suppressions.suppressed.add((int(account), email_lower))

    def _on_unsubscribe(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        # '+<account>:<key>': suppressed by an unsubscribe (heard before its einmal_suppression); '-': that
        # suppression is now for a bounce or complaint, which stops transactional messages too
        sign, account, _, email_lower = str(payload)[:1], *str(payload)[1:].partition(":")
        if sign == "+":
            self.suppressions.unsubscribed.add((int(account), email_lower))
        else:
            self.suppressions.unsubscribed.discard((int(account), email_lower))

    def _on_message(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        self.notices.notify(int(str(payload)))
        self.wakeups.claimer.set()

    def _on_campaign(self, _conn: object, _pid: int, _channel: str, _payload: object) -> None:
        self.wakeups.scheduler.set()
        self.wakeups.claimer.set()

    def _on_queued(self, _conn: object, _pid: int, _channel: str, _payload: object) -> None:
        self.wakeups.claimer.set()  # rows queued in a campaign that is sending and never finishes: no tick

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # its own URL when one is set: behind a transaction pooler, a direct one (a LISTEN needs a session)
        conn = await db.connect(
            self.config.url, command_timeout=self.config.db_timeout_seconds, name=f"einmal listener {self.node_id}"
        )
        lost = anyio.Event()
        conn.add_termination_listener(lambda _c: lost.set())
        try:
            await conn.add_listener("einmal_unsubscribe", self._on_unsubscribe)
            await conn.add_listener("einmal_suppression", self._on_suppression)
            await conn.add_listener("einmal_message", self._on_message)
            await conn.add_listener("einmal_campaign", self._on_campaign)
            await conn.add_listener("einmal_queued", self._on_queued)
            now = await conn.fetchval("SELECT now()")
            if self.since is not None:  # a reconnect: read what the lost connection may have missed
                rows = await conn.fetch(*db.sql("suppression_since", since=self.since - RELOAD_MARGIN))
                for r in rows:
                    key = (r["account_id"], r["email_lower"])
                    if r["reason"] == "unsubscribe":  # before the key joins `suppressed`: a message may pass it
                        self.suppressions.unsubscribed.add(key)
                    else:
                        self.suppressions.unsubscribed.discard(key)
                    self.suppressions.suppressed.add(key)
                log.info("listener reconnected; reloaded %d suppressions", len(rows))
            self.since = now
            self.wakeups.scheduler.set()
            self.notices.nudge.set()
            task_status.started()
            while True:
                with anyio.move_on_after(HEALTH_CHECK_SECONDS):
                    await lost.wait()
                if lost.is_set():
                    raise ConnectionError("LISTEN connection lost")
                self.since = await conn.fetchval("SELECT now()")
        except asyncpg.InterfaceError as exc:  # the connection closed under a call: an outage, said plainly
            if lost.is_set():
                raise ConnectionError("LISTEN connection lost") from exc
            raise
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                try:
                    await conn.close()
                except (OSError, asyncpg.InterfaceError, asyncpg.PostgresError):
                    conn.terminate()
