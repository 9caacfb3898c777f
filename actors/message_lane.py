"""The claimer's message lane (docs/design.md#messages): transactional messages come first.

Each pass of the claimer, and whenever a new message is notified, the due messages' rows are claimed
(einmal.sends_messages, account by account, within the same budget: `send_claim` with no campaign) into the
feed's first lane, up to MESSAGE_BATCHES batches of them held. The notified ones are claimed by a task of its own
on a database connection of its own (`notified`), so neither a full feed nor a campaign's claim under way holds
them back. Each message is its own campaign: compiled when claimed, in a worker thread, and not kept (one
compile per message, no cache to grow); one that may not be sent from here (actors/claims.py `sendable`) goes
back to the queue and is paused for the operator.
"""

import logging
import time
from collections import Counter

import anyio
import asyncpg

from actors.campaign_lane import IDENTITY_SECONDS
from actors.claims import batch_of, pause, sendable
from actors.feed import Feed
from actors.sections import ClaimerConfig
from actors.turns import Turns
from actors.wires import MessageNotices, Replication
from service import db
from service.accounts import identity
from service.mail import render
from service.metrics import Metrics

log = logging.getLogger("einmal.claimer")

IDLE_SECONDS = 0.5
MESSAGE_BATCHES = 3  # batches of messages' rows a node holds claimed at most, beyond its campaigns'
MESSAGE_TURN = 25  # messages' rows an account claims at most in its turn: each is compiled, some 10 ms, before the
#                    next account's turn


class MessageLane:
    """Takes the message notices; reads the replication (`refusing`) and `stopping`; puts into the feed."""

    def __init__(
        self,
        config: ClaimerConfig,
        notices: MessageNotices,
        replication: Replication,
        stopping: anyio.Event,
        metrics: Metrics,
        token: str,
        feed: Feed,
    ) -> None:
        self.config, self.notices, self.replication, self.stopping = config, notices, replication, stopping
        self.metrics, self.token, self.feed = metrics, token, feed
        self.identities: dict[int, tuple[identity.Identity, float]] = {}  # each account's, and when it was read

    async def claim(self, conn: asyncpg.Connection, account_id: int, most: int) -> int:
        """Claim at most `most` of the account's due messages' rows into the feed's first lane while it holds
        fewer than MESSAGE_BATCHES batches of them, MESSAGE_TURN at most; how many were claimed."""
        feed = self.feed
        if most <= 0 or feed.messages_held >= MESSAGE_BATCHES * self.config.budget.batch_size or self.stopping.is_set():
            return 0
        most = min(most, MESSAGE_TURN)
        known = self.identities.get(account_id)
        if known is None or time.monotonic() - known[1] > IDENTITY_SECONDS:
            if len(self.identities) > 256:
                self.identities.clear()
            known = (await identity.of_account(conn, account_id=account_id), time.monotonic())
            self.identities[account_id] = known
        sender: identity.Identity = known[0]
        if not feed.usable(sender.relays):
            return 0  # every relay of its account is down: its rows would only come back
        began = time.time_ns()
        records = await conn.fetch(
            *db.sql(
                "message_claim_batch",
                account_id=account_id,
                token=self.token,
                **self.config.budget.of_claim(sender.relays, most),
            )
        )
        claimed = 0
        by_message: dict[int, list[asyncpg.Record]] = {}
        for r in records:
            by_message.setdefault(r["campaign_id"], []).append(r)
        for campaign_id, rows in by_message.items():
            if not any(r["status"] == "claimed" for r in rows):
                self.metrics.count({"suppressed": len(rows)})
                continue
            template = await self.template(conn, campaign_id, sender, rows)
            if template is not None and (
                batch := batch_of(
                    self.metrics, self.token, campaign_id, account_id, template, sender.relays, began, rows, True
                )
            ):
                feed.put(batch)
                claimed += len(batch.rows)
        return claimed

    async def template(
        self, conn: asyncpg.Connection, campaign_id: int, sender: identity.Identity, rows: list[asyncpg.Record]
    ) -> render.CampaignTemplate | None:
        """A message's template compiled as its account, in a worker thread. None when it cannot be sent from
        here: its claimed row goes back to the queue and the message is paused for the operator."""
        found = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
        assert found is not None  # its row was claimed a moment ago; its campaign is deleted only after its row
        made = await sendable(conn, self.config, dict(found), sender, in_thread=True)
        if not isinstance(made, str):
            return made
        claimed = [r for r in rows if r["status"] == "claimed"]
        await conn.execute(
            *db.sql(
                "send_release",
                ids=[r["id"] for r in claimed],
                campaign_ids=[campaign_id] * len(claimed),
                token=self.token,
            )
        )
        await pause(conn, campaign_id, made)
        log.error("message %d paused: %s", campaign_id, made)
        return None

    async def notified(self, conn: asyncpg.Connection, turns: Turns, ahead: Counter[int]) -> None:
        """Claim each notified account's new messages at once, on a connection of its own: neither a campaign's
        claim under way nor a full feed holds them back (bounded: MESSAGE_BATCHES held), each within what its
        account's turn has left, and MESSAGE_TURN a pass however much its own campaign took (`ahead`)."""
        while not (self.stopping.is_set() or self.feed.closed):
            if not await self.notices.nudge.wait(IDLE_SECONDS) or self.replication.refusing or self.feed.closed:
                continue
            for account_id in self.notices.take():
                # a message goes ahead of its account's bulk, and no account past MESSAGE_TURN a pass
                most = max(turns.left(account_id), MESSAGE_TURN - ahead[account_id])
                n = await self.claim(conn, account_id, most)
                turns.spend(account_id, n)
                ahead[account_id] += n
