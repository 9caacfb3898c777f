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
"""

import logging
import time
from contextlib import suppress

import anyio
import asyncpg
from anyio.abc import TaskStatus
from opentelemetry import trace

from actors.feed import Feed
from service import db, relays, telemetry
from service.accounts import identity
from service.campaigns.transitions import transition
from service.context import Batch, NodeContext, Row
from service.errors import Conflict, Invalid, NotFound
from service.mail import render, unsubscribe

log = logging.getLogger("einmal.claimer")

IDLE_SECONDS = 0.5
LIST_SECONDS = 1.0  # how long the list of sending campaigns is reused while claiming
IDENTITY_SECONDS = 30.0  # how long a campaign's compiled template, and its account's identity, is reused


class Templates:
    """Each campaign's template and its account's identity, compiled once per IDENTITY_SECONDS (a few dozen
    kept)."""

    def __init__(self, ctx: NodeContext, conn: asyncpg.Connection) -> None:
        self.ctx, self.conn = ctx, conn
        self.compiled: dict[int, render.CampaignTemplate] = {}
        self.identities: dict[int, identity.Identity] = {}  # by campaign, read when compiled
        self.compiled_at: dict[int, float] = {}
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

    def relays(self, campaign_id: int) -> tuple[identity.AccountRelay, ...]:
        """The relays of the campaign's account (empty: the environment's)."""
        found = self.identities.get(campaign_id)
        return found.relays if found else ()

    async def get(self, campaign_id: int) -> render.CampaignTemplate | None:
        """The template; None when it cannot be rendered here (the campaign is paused then)."""
        if campaign_id in self.compiled and time.monotonic() - self.compiled_at[campaign_id] > IDENTITY_SECONDS:
            # the account's identity may have changed: compiled anew only if it did
            account_id = self.compiled[campaign_id].account_id
            self.compiled_at[campaign_id] = time.monotonic()
            if await identity.of_account(self.conn, account_id=account_id) != self.identities[campaign_id]:
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
            reason = unsubscribe.without_one_click(campaign, self.ctx.settings)
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


async def claim(
    ctx: NodeContext,
    conn: asyncpg.Connection,
    token: str,
    campaign_id: int,
    account_id: int,
    template: render.CampaignTemplate,
    account_relays: tuple[identity.AccountRelay, ...] = (),
) -> Batch | None:
    """Claim one batch of a campaign; None when nothing of it is due (and no trace for that)."""
    began = time.time_ns()
    settings = ctx.settings
    rated = {domain: limit.rate for domain, limit in ctx.domain_limits.items() if limit.rate}
    records = await conn.fetch(
        *db.sql(
            "send_claim_batch",
            campaign_id=campaign_id,
            token=token,
            batch_size=settings.batch_size,
            rate=settings.rate_limit,
            quota_hour=settings.quota_hour,
            quota_day=settings.quota_day,
            hour_seconds=settings.quota_hour_seconds,
            day_seconds=settings.quota_day_seconds,
            domains=list(rated),
            domain_rates=list(rated.values()),
            probes=settings.domain_probes,
            pause_seconds=settings.domain_pause_seconds,
            pause_max_seconds=settings.domain_pause_max_seconds,
            relays=[relay.name for relay in account_relays],
        )
    )
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
    return Batch(campaign_id, account_id, token, rows, root, time.monotonic(), template, relays=account_relays)


async def run(
    ctx: NodeContext, token: str, feed: Feed, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    # one connection for the claimer's life
    async with db.actor_connection(ctx.pool, "claimer", token, ctx.settings.db_timeout_seconds) as conn:
        task_status.started()
        templates = Templates(ctx, conn)
        turn, campaigns, listed_at = 0, [], -LIST_SECONDS
        while not (ctx.stopping.is_set() or feed.closed):
            await feed.room.wait()  # set by the sender when its rows run low
            if ctx.stopping.is_set() or feed.closed:
                break
            if ctx.refusing:  # EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION, unmet: nothing is claimed while it holds
                await ctx.claim_nudge.wait(IDLE_SECONDS)
                continue
            if time.monotonic() - listed_at >= LIST_SECONDS:  # the claim re-checks the status itself
                campaigns, listed_at = await conn.fetch(*db.sql("campaign_sending")), time.monotonic()
                templates.keep({c["id"]: c["updated_at"] for c in campaigns})
            batch = None
            for i in range(len(campaigns)):
                campaign = campaigns[(turn + i) % len(campaigns)]
                template = await templates.get(campaign["id"])
                if template is None:
                    listed_at = -LIST_SECONDS  # paused: list again
                    break
                if not feed.usable(own_relays := templates.relays(campaign["id"])):
                    continue  # every relay of its account is down: its rows would only come back
                batch = await claim(ctx, conn, token, campaign["id"], campaign["account_id"], template, own_relays)
                if batch:
                    turn = (turn + i + 1) % len(campaigns)
                    break
            if batch is None:
                if await ctx.claim_nudge.wait(IDLE_SECONDS) or campaigns:
                    listed_at = -LIST_SECONDS  # something changed, or idle: list again
                continue
            feed.put(batch)
