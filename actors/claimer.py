"""Batch claimer: claims due rows with FOR UPDATE SKIP LOCKED for the sender.

It claims only when the feed (actors/feed.py) wakes it, when the sender's
rows run low, so a node never holds more than it can send; it takes
campaigns in turn (interleaved by account, actors/turns.py) so one big campaign does not
starve a small one. Each account's transactional messages come first (actors/message_lane.py), then its
campaigns' rows (actors/campaign_lane.py); both lanes ask the same question before a claim is handed on,
whether the campaign or message may be sent from here (actors/claims.py `sendable`).
"""

import time
from collections import Counter

import anyio
import asyncpg
from anyio.abc import TaskStatus

from actors.campaign_lane import Templates, campaign_turn
from actors.feed import Feed
from actors.message_lane import IDLE_SECONDS, MessageLane
from actors.sections import ClaimerConfig
from actors.turns import Turns
from actors.wires import MessageNotices, Replication, Wakeups
from service import db
from service.metrics import Metrics

LIST_SECONDS = 1.0  # how long the list of sending campaigns is reused while claiming


class Claimer:
    """Reads the replication (`refusing`), `stopping` and the message notices; waits on `wakeups.claimer`;
    puts batches into the feed."""

    def __init__(
        self,
        config: ClaimerConfig,
        pool: asyncpg.Pool,
        notices: MessageNotices,
        replication: Replication,
        wakeups: Wakeups,
        stopping: anyio.Event,
        metrics: Metrics,
        token: str,
        feed: Feed,
    ) -> None:
        self.config, self.pool, self.replication, self.wakeups = config, pool, replication, wakeups
        self.stopping, self.metrics, self.token, self.feed = stopping, metrics, token, feed
        self.messages = MessageLane(config, notices, replication, stopping, metrics, token, feed)

    def over(self) -> bool:
        return self.stopping.is_set() or self.feed.closed

    async def room(self) -> None:
        """Wait until the feed has room, or IDLE_SECONDS passed (to look at `stopping`)."""
        with anyio.move_on_after(IDLE_SECONDS):
            await self.feed.room.wait()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        config, token, feed = self.config, self.token, self.feed
        # one connection for the claimer's life, and one for the notified messages' task
        async with (
            db.actor_connection(self.pool, "claimer", token, config.db_timeout_seconds) as conn,
            db.actor_connection(self.pool, "messages", token, config.db_timeout_seconds) as messages_conn,
            anyio.create_task_group() as tg,
        ):
            task_status.started()
            templates = Templates(config, conn)
            turns = Turns()  # the accounts with due work take turns (actors/turns.py)
            ahead: Counter[int] = Counter()  # messages each account claimed this pass while notified
            campaigns: list[asyncpg.Record] = []
            listed_at, turn = -LIST_SECONDS, 0
            tg.start_soon(self.messages.notified, messages_conn, turns, ahead)
            rate = config.budget.rate_limit
            while not self.over():
                while not (feed.room.is_set() or self.stopping.is_set()):  # set by the sender when its rows run low
                    await self.room()
                if self.over():
                    break
                if self.replication.refusing:  # EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION, unmet: nothing is claimed
                    await self.wakeups.claimer.wait(IDLE_SECONDS)
                    continue
                messaging = [r["account_id"] for r in await conn.fetch(*db.sql("message_accounts_due"))]
                if time.monotonic() - listed_at >= LIST_SECONDS:  # the claim re-checks the status itself
                    campaigns, listed_at = await conn.fetch(*db.sql("campaign_sending")), time.monotonic()
                    templates.keep({c["id"]: c["updated_at"] for c in campaigns})
                # an account's campaigns in turn too, the first of the last pass last
                turn = (turn + 1) % max(1, len(campaigns))
                by_account: dict[int, list[asyncpg.Record]] = {}
                for c in campaigns[turn:] + campaigns[:turn]:
                    by_account.setdefault(c["account_id"], []).append(c)
                claimed = 0
                ahead.clear()  # a new pass: each account's messages may go ahead of the feed's rows again
                for account_id in turns.round([*messaging, *by_account], config.budget.capacity()):
                    if self.over():
                        break
                    n = 0
                    if account_id in messaging:  # its messages first
                        n = await self.messages.claim(conn, account_id, turns.left(account_id))
                        turns.spend(account_id, n)
                        claimed += n
                    if account_id in by_account and feed.room.is_set() and (most := turns.left(account_id)) > 0:
                        # the slots its messages took just now do not keep its campaign out of its turn
                        reach = n / rate if rate else 0.0
                        batch, paused = await campaign_turn(
                            config, self.metrics, conn, token, feed, templates, by_account[account_id], most, reach
                        )
                        if paused:
                            listed_at = -LIST_SECONDS  # paused: list again
                        if batch:
                            feed.put(batch)
                            turns.spend(account_id, len(batch.rows))
                            claimed += len(batch.rows)
                if not claimed and (await self.wakeups.claimer.wait(IDLE_SECONDS) or campaigns):
                    listed_at = -LIST_SECONDS  # something changed, or idle: list again
            self.messages.notices.nudge.set()  # the notified messages' task ends too
