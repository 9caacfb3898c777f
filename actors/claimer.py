"""Batch claimer: claims due rows with FOR UPDATE SKIP LOCKED for the sender.

It claims only when the feed (actors/feed.py) wakes it, when the sender's
rows run low, so a node never holds more than it can send; it takes
campaigns in turn (interleaved by account) so one big campaign does not
starve a small one. It compiles each campaign's template once, before its
first claim: a campaign that cannot be rendered here, or a bulk campaign
this node would send without the one-click unsubscribe it requires, is
paused for the operator, and nothing of it is claimed.

A campaign is compiled as its account's identity (service/accounts/identity.py:
DKIM keys, return path, unsubscribe mailto, relays), read when this node
picks the campaign up and again every IDENTITY_SECONDS while it sends, so a
change reaches the running campaigns within that time
(docs/design.md#sending-identity). The claim carries the account's relays,
whose rates and quotas bound it like the cluster's.

Transactional messages (docs/design.md#messages) come first: each pass, and whenever a new message is
notified, the claimer claims the due messages' rows (einmal.sends_messages, account by account, within the same
budget: `send_claim` with no campaign) into the feed's first lane, up to MESSAGE_BATCHES batches of them held.
The notified ones are claimed by a task of its own on a database connection of its own (`notified_messages`), so
neither a full feed nor a campaign's claim under way holds them back. Each message is its own campaign: compiled
when claimed, in a worker thread, and not kept (one compile per message, no cache to grow).
"""

import logging
import math
import time
from collections import Counter
from contextlib import suppress

import anyio
import asyncpg
from anyio.abc import TaskStatus
from opentelemetry import trace

from actors.context import Batch, NodeContext, Row
from actors.feed import Feed
from actors.turns import Turns
from service import db, relays, telemetry
from service.accounts import identity
from service.campaigns.transitions import transition
from service.errors import Conflict, Invalid, NotFound
from service.mail import from_rule, render, unsubscribe
from service.text import shown

log = logging.getLogger("einmal.claimer")

IDLE_SECONDS = 0.5
LIST_SECONDS = 1.0  # how long the list of sending campaigns is reused while claiming
IDENTITY_SECONDS = 30.0  # how long a campaign's compiled template, and its account's identity, is reused
MESSAGE_BATCHES = 3  # batches of messages' rows a node holds claimed at most, beyond its campaigns'
MESSAGE_TURN = 25  # messages' rows an account claims at most in its turn: each is compiled, some 10 ms, before the
#                    next account's turn


class Templates:
    """Each campaign's template and its account's identity, compiled once per IDENTITY_SECONDS (a few dozen
    kept)."""

    def __init__(self, ctx: NodeContext, conn: asyncpg.Connection) -> None:
        self.ctx, self.conn = ctx, conn
        self.compiled: dict[int, render.CampaignTemplate] = {}
        self.identities: dict[int, identity.Identity] = {}  # by campaign, read when compiled
        self.compiled_at: dict[int, float] = {}
        self.froms: dict[int, tuple[int, str]] = {}  # by campaign, its account and From, read when compiled
        self.listed: dict[int, object] = {}  # by campaign, its updated_at when last listed
        self.versions: dict[int, object] = {}  # by campaign, its updated_at listed before it was compiled

    def keep(self, campaigns: dict[int, object]) -> None:
        """Forget the templates of campaigns no longer sending, or changed since (each given with its updated_at):
        one paused, fixed and resumed, or a sequence's step edited while it sends, is compiled anew."""
        self.listed = campaigns
        self.compiled = {
            k: v for k, v in self.compiled.items() if k in campaigns and campaigns[k] == self.versions.get(k)
        }
        self.identities = {k: v for k, v in self.identities.items() if k in self.compiled}
        self.versions = {k: v for k, v in self.versions.items() if k in self.compiled}
        self.compiled_at = {k: v for k, v in self.compiled_at.items() if k in self.compiled}
        self.froms = {k: v for k, v in self.froms.items() if k in self.compiled}

    def relays(self, campaign_id: int) -> tuple[identity.AccountRelay, ...]:
        """The relays of the campaign's account (empty: the environment's)."""
        found = self.identities.get(campaign_id)
        return found.relays if found else ()

    async def refused(self, campaign_id: int) -> str | None:
        """What the From rule as it is now finds wrong with the campaign's From (service/mail/from_rule.py): a domain
        removed from its account, or given to another account, since it was made."""
        account_id, address = self.froms[campaign_id]
        found = await from_rule.problem(self.conn, settings=self.ctx.settings, account_id=account_id, address=address)
        return f"its From {shown(address)}: {found}" if found else None

    async def get(self, campaign_id: int) -> render.CampaignTemplate | None:
        """The template; None when it cannot be rendered here (the campaign is paused then)."""
        if campaign_id in self.compiled and time.monotonic() - self.compiled_at[campaign_id] > IDENTITY_SECONDS:
            # the account's identity may have changed: compiled anew only if it did
            account_id = self.compiled[campaign_id].account_id
            self.compiled_at[campaign_id] = time.monotonic()
            if await identity.of_account(self.conn, account_id=account_id) != self.identities[campaign_id] or (
                await self.refused(campaign_id)  # another account given its domain since
            ):
                del self.compiled[campaign_id]
        if campaign_id not in self.compiled:
            if len(self.compiled) > 64:
                self.compiled.clear()
            found = await self.conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
            assert found is not None  # listed as sending a moment ago; a campaign is never deleted
            campaign = dict(found)
            sender = await identity.of_account(self.conn, account_id=campaign["account_id"])
            self.identities[campaign_id], self.compiled_at[campaign_id] = sender, time.monotonic()
            self.versions[campaign_id] = self.listed.get(campaign_id)  # read after it was listed: never newer
            # bulk mail without a one-click unsubscribe only when the operator said so
            # (docs/design.md#listening-surface)
            self.froms[campaign_id] = (campaign["account_id"], campaign["from_address"])
            reason = unsubscribe.without_one_click(campaign, self.ctx.settings) or await self.refused(campaign_id)
            if reason is None:
                try:
                    for relay in sender.relays:
                        relays.from_account(relay)  # a relay it cannot use: paused, naming the relay
                    self.compiled[campaign_id] = render.CampaignTemplate.compile(campaign, self.ctx.settings, sender)
                except Invalid as exc:
                    reason = f"cannot render: {exc}"
                except ValueError as exc:
                    reason = f"cannot send: {exc}"
            if reason is not None:
                with suppress(Conflict, NotFound):  # another node paused it first
                    await transition(self.conn, verb="pause", campaign_id=campaign_id, reason=reason)
                log.error("campaign %d paused: %s", campaign_id, reason)
                return None
        return self.compiled[campaign_id]


def capacity(ctx: NodeContext) -> int:
    """The rows one pass of the claimer may take, shared among the accounts (actors/turns.py): a batch, and with
    a rate limit no more than the claim's horizon of slots (einmal.send_claim: one second)."""
    settings = ctx.settings
    rated = math.ceil(settings.rate_limit) if settings.rate_limit else settings.batch_size
    return max(1, min(settings.batch_size, rated))


def budget(
    ctx: NodeContext,
    account_relays: tuple[identity.AccountRelay, ...],
    batch_size: int | None = None,
    reach: float = 0.0,
) -> dict[str, object]:
    """What a claim, of a campaign's rows or of messages', is bounded by (docs/design.md#sending-budget): the
    batch size (`batch_size`: the account's turn), the cluster's rate and quotas, the account's rate and quotas
    (its own, else the installation's defaults), the domains' rates and pauses, the account's relays; `reach`:
    the seconds of the cluster's slots the account's turn took just before (einmal.send_claim's p_reach)."""
    settings = ctx.settings
    rated = {domain: limit.rate for domain, limit in ctx.domain_limits.items() if limit.rate}
    return {
        "batch_size": settings.batch_size if batch_size is None else min(batch_size, settings.batch_size),
        "rate": settings.rate_limit,
        "quota_hour": settings.quota_hour,
        "quota_day": settings.quota_day,
        "hour_seconds": settings.quota_hour_seconds,
        "day_seconds": settings.quota_day_seconds,
        "domains": list(rated),
        "domain_rates": list(rated.values()),
        "probes": settings.domain_probes,
        "pause_seconds": settings.domain_pause_seconds,
        "pause_max_seconds": settings.domain_pause_max_seconds,
        "relays": [relay.name for relay in account_relays],
        "account_rate": settings.account_rate_limit,
        "account_quota_hour": settings.account_quota_hour,
        "account_quota_day": settings.account_quota_day,
        "reach": reach,
    }


async def claim(
    ctx: NodeContext,
    conn: asyncpg.Connection,
    token: str,
    campaign_id: int,
    account_id: int,
    template: render.CampaignTemplate,
    account_relays: tuple[identity.AccountRelay, ...] = (),
    batch_size: int | None = None,
    reach: float = 0.0,
) -> Batch | None:
    """Claim one batch of a campaign (at most `batch_size` rows); None when nothing of it is due (and no trace
    for that)."""
    began = time.time_ns()
    records = await conn.fetch(
        *db.sql(
            "send_claim_batch",
            campaign_id=campaign_id,
            token=token,
            **budget(ctx, account_relays, batch_size, reach),
        )
    )
    return _batch(ctx, token, campaign_id, account_id, template, account_relays, began, records)


def _batch(
    ctx: NodeContext,
    token: str,
    campaign_id: int,
    account_id: int,
    template: render.CampaignTemplate,
    account_relays: tuple[identity.AccountRelay, ...],
    began: int,
    records: list[asyncpg.Record],
    message: bool = False,
) -> Batch | None:
    """The claimed records as a batch (the suppressed ones counted); None when none was claimed."""
    now = time.monotonic()
    rows = [
        Row(
            r["id"],
            r["account_id"],
            r["subscriber_id"],
            r["email"],
            r["email_lower"],
            r["attempts"],
            r["name"],
            r["attributes"],
            now + r["delay"] if r["slot_at"] else 0.0,
        )
        for r in records
        if r["status"] == "claimed"
    ]
    metrics = ctx.metrics
    if len(records) > len(rows):
        metrics.count({"suppressed": len(records) - len(rows)})
    if not rows:
        return None
    metrics.rows_claimed.inc(len(rows))
    metrics.rows_in_flight.inc(len(rows))
    tracer = telemetry.tracer()
    root = tracer.start_span(
        "batch",
        start_time=began,
        attributes={
            "einmal.campaign_id": campaign_id,
            "einmal.account_id": account_id,
            "einmal.node_id": token,
            "einmal.batch_size": len(rows),
        },
    )
    span = tracer.start_span("claim", context=trace.set_span_in_context(root), start_time=began)
    span.set_attribute("einmal.claimed", len(rows))
    span.set_attribute("einmal.suppressed", len(records) - len(rows))
    span.end()
    batch = Batch(campaign_id, account_id, token, rows, root, time.monotonic(), template, relays=account_relays)
    if message:
        batch.message, batch.honour_unsubscribe = True, bool(records[0]["honour_unsubscribe"])
    return batch


async def claim_messages(
    ctx: NodeContext,
    conn: asyncpg.Connection,
    token: str,
    feed: Feed,
    identities: dict[int, tuple[identity.Identity, float]],
    account_id: int,
    most: int,
) -> int:
    """Claim at most `most` of the account's due messages' rows into the feed's first lane while it holds fewer
    than MESSAGE_BATCHES batches of them, MESSAGE_TURN at most; how many were claimed.
    `identities`: each account's identity and when it was read (reused for IDENTITY_SECONDS)."""
    if most <= 0 or feed.messages_held >= MESSAGE_BATCHES * ctx.settings.batch_size or ctx.stopping.is_set():
        return 0
    most = min(most, MESSAGE_TURN)
    if most <= 0:
        return 0
    known = identities.get(account_id)
    if known is None or time.monotonic() - known[1] > IDENTITY_SECONDS:
        if len(identities) > 256:
            identities.clear()
        known = identities[account_id] = (await identity.of_account(conn, account_id=account_id), time.monotonic())
    sender: identity.Identity = known[0]
    if not feed.usable(sender.relays):
        return 0  # every relay of its account is down: its rows would only come back
    began = time.time_ns()
    records = await conn.fetch(
        *db.sql("message_claim_batch", account_id=account_id, token=token, **budget(ctx, sender.relays, most))
    )
    claimed = 0
    by_message: dict[int, list[asyncpg.Record]] = {}
    for r in records:
        by_message.setdefault(r["campaign_id"], []).append(r)
    for campaign_id, rows in by_message.items():
        if not any(r["status"] == "claimed" for r in rows):
            ctx.metrics.count({"suppressed": len(rows)})
            continue
        template = await _message_template(ctx, conn, token, campaign_id, sender, rows)
        if template is not None and (
            batch := _batch(ctx, token, campaign_id, account_id, template, sender.relays, began, rows, True)
        ):
            feed.put(batch)
            claimed += len(batch.rows)
    return claimed


async def _message_template(
    ctx: NodeContext,
    conn: asyncpg.Connection,
    token: str,
    campaign_id: int,
    sender: identity.Identity,
    rows: list[asyncpg.Record],
) -> render.CampaignTemplate | None:
    """A message's template compiled as its account, in a worker thread. None when it cannot be sent from here:
    its claimed row goes back to the queue and the message is paused for the operator (as a campaign would be)."""
    found = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
    assert found is not None  # its row was claimed a moment ago; a message's campaign is deleted only after its row
    try:
        address = found["from_address"]  # judged as the From rule is now (service/mail/from_rule.py)
        if refused := await from_rule.problem(
            conn, settings=ctx.settings, account_id=sender.account_id, address=address
        ):
            raise ValueError(f"its From {shown(address)}: {refused}")
        for relay in sender.relays:
            relays.from_account(relay)
        return await anyio.to_thread.run_sync(render.CampaignTemplate.compile, dict(found), ctx.settings, sender)
    except (Invalid, ValueError) as exc:
        reason = f"cannot send: {exc}"
    claimed = [r for r in rows if r["status"] == "claimed"]
    await conn.execute(
        *db.sql("send_release", ids=[r["id"] for r in claimed], campaign_ids=[campaign_id] * len(claimed), token=token)
    )
    with suppress(Conflict, NotFound):  # another node paused it first
        await transition(conn, verb="pause", campaign_id=campaign_id, reason=reason)
    log.error("message %d paused: %s", campaign_id, reason)
    return None


async def notified_messages(
    ctx: NodeContext,
    conn: asyncpg.Connection,
    token: str,
    feed: Feed,
    turns: Turns,
    ahead: Counter[int],
    identities: dict[int, tuple[identity.Identity, float]],
) -> None:
    """Claim each notified account's new messages at once, on a connection of its own: neither a campaign's claim
    under way nor a full feed holds them back (bounded: MESSAGE_BATCHES held), each within what its account's turn
    has left, and MESSAGE_TURN a pass however much its own campaign took."""
    while not (ctx.stopping.is_set() or feed.closed):
        if not await ctx.message_nudge.wait(IDLE_SECONDS) or ctx.refusing or feed.closed:
            continue
        notified = list(ctx.message_accounts)
        ctx.message_accounts.clear()
        for account_id in notified:
            # a message goes ahead of its account's bulk, and no account past MESSAGE_TURN a pass
            most = max(turns.left(account_id), MESSAGE_TURN - ahead[account_id])
            n = await claim_messages(ctx, conn, token, feed, identities, account_id, most)
            turns.spend(account_id, n)
            ahead[account_id] += n


async def room(ctx: NodeContext, feed: Feed) -> None:
    """Wait until the feed has room, or IDLE_SECONDS passed (to look at `stopping`)."""
    with anyio.move_on_after(IDLE_SECONDS):
        await feed.room.wait()


async def campaign_turn(
    ctx: NodeContext,
    conn: asyncpg.Connection,
    token: str,
    feed: Feed,
    templates: Templates,
    campaigns: list[asyncpg.Record],
    most: int,
    reach: float = 0.0,
) -> tuple[Batch | None, bool]:
    """Claim at most `most` rows of one of an account's sending `campaigns` (the first with rows due, in the
    order given); the batch (None when none had any) and whether one was paused (the list is stale)."""
    for campaign in campaigns:
        template = await templates.get(campaign["id"])
        if template is None:
            return None, True
        if not feed.usable(own_relays := templates.relays(campaign["id"])):
            continue  # every relay of its account is down: its rows would only come back
        batch = await claim(ctx, conn, token, campaign["id"], campaign["account_id"], template, own_relays, most, reach)
        if batch:
            return batch, False
    return None, False


async def run(
    ctx: NodeContext, token: str, feed: Feed, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    # one connection for the claimer's life
    async with (
        db.actor_connection(ctx.pool, "claimer", token, ctx.settings.db_timeout_seconds) as conn,
        db.actor_connection(ctx.pool, "messages", token, ctx.settings.db_timeout_seconds) as messages_conn,
        anyio.create_task_group() as tg,
    ):
        task_status.started()
        templates = Templates(ctx, conn)
        turns = Turns()  # the accounts with due work take turns (actors/turns.py)
        ahead: Counter[int] = Counter()  # messages each account claimed this pass while notified
        campaigns: list[asyncpg.Record] = []
        listed_at, turn = -LIST_SECONDS, 0
        # each messaging account's identity, and when it was read
        identities: dict[int, tuple[identity.Identity, float]] = {}
        tg.start_soon(notified_messages, ctx, messages_conn, token, feed, turns, ahead, identities)
        while not (ctx.stopping.is_set() or feed.closed):
            while not (feed.room.is_set() or ctx.stopping.is_set()):  # set by the sender when its rows run low
                await room(ctx, feed)
            if ctx.stopping.is_set() or feed.closed:
                break
            if ctx.refusing:  # EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION, unmet: nothing is claimed while it holds
                await ctx.claim_nudge.wait(IDLE_SECONDS)
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
            for account_id in turns.round([*messaging, *by_account], capacity(ctx)):
                if ctx.stopping.is_set() or feed.closed:
                    break
                n = 0
                if account_id in messaging:  # its messages first
                    n = await claim_messages(ctx, conn, token, feed, identities, account_id, turns.left(account_id))
                    turns.spend(account_id, n)
                    claimed += n
                if account_id in by_account and feed.room.is_set() and (most := turns.left(account_id)) > 0:
                    # the slots its messages took just now do not keep its campaign out of its turn
                    reach = n / ctx.settings.rate_limit if ctx.settings.rate_limit else 0.0
                    batch, paused = await campaign_turn(
                        ctx, conn, token, feed, templates, by_account[account_id], most, reach
                    )
                    if paused:
                        listed_at = -LIST_SECONDS  # paused: list again
                    if batch:
                        feed.put(batch)
                        turns.spend(account_id, len(batch.rows))
                        claimed += len(batch.rows)
            if not claimed and (await ctx.claim_nudge.wait(IDLE_SECONDS) or campaigns):
                listed_at = -LIST_SECONDS  # something changed, or idle: list again
        ctx.message_nudge.set()  # the notified messages' task ends too
