"""The claimer's campaign lane: each sending campaign's template compiled once (`Templates`), and a claim of its
due rows within the account's turn (`campaign_turn`).

A campaign is compiled as its account's identity (service/accounts/identity.py: DKIM keys, return path,
unsubscribe mailto, relays), read when this node picks the campaign up and again every IDENTITY_SECONDS while it
sends, so a change reaches the running campaigns within that time (docs/design.md#sending-identity). A campaign
that may not be sent from here (actors/claims.py `sendable`) is paused for the operator, and nothing of it is
claimed. The claim carries the account's relays, whose rates and quotas bound it like the cluster's.
"""

import logging
import time
from dataclasses import dataclass

import asyncpg

from actors.batch import Batch
from actors.claims import batch_of, pause, refused, sendable
from actors.feed import Feed
from actors.sections import ClaimerConfig
from service import db
from service.accounts import identity
from service.mail import render
from service.metrics import Metrics

log = logging.getLogger("einmal.claimer")

IDENTITY_SECONDS = 30.0  # how long a campaign's compiled template, and its account's identity, is reused


@dataclass
class Compiled:
    """A campaign's template, compiled as its account's identity."""

    template: render.CampaignTemplate
    identity: identity.Identity  # read when compiled
    at: float  # time.monotonic() when compiled, or its identity last read again
    account_id: int
    from_address: str  # its From when compiled, judged again with the identity
    version: object  # its updated_at listed before it was compiled


class Templates:
    """Each campaign's template and its account's identity, compiled once per IDENTITY_SECONDS (a few dozen
    kept)."""

    def __init__(self, config: ClaimerConfig, conn: asyncpg.Connection) -> None:
        self.config, self.conn = config, conn
        self.compiled: dict[int, Compiled] = {}
        self.listed: dict[int, object] = {}  # by campaign, its updated_at when last listed

    def keep(self, campaigns: dict[int, object]) -> None:
        """Forget the templates of campaigns no longer sending, or changed since (each given with its updated_at):
        one paused, fixed and resumed, or a sequence's step edited while it sends, is compiled anew."""
        self.listed = campaigns
        self.compiled = {k: v for k, v in self.compiled.items() if k in campaigns and campaigns[k] == v.version}

    def relays(self, campaign_id: int) -> tuple[identity.AccountRelay, ...]:
        """The relays of the campaign's account (empty: the environment's)."""
        found = self.compiled.get(campaign_id)
        return found.identity.relays if found else ()

    async def get(self, campaign_id: int) -> render.CampaignTemplate | None:
        """The template; None when it cannot be sent from here (the campaign is paused then)."""
        found = self.compiled.get(campaign_id)
        if found is not None and time.monotonic() - found.at > IDENTITY_SECONDS:
            # the account's identity may have changed: compiled anew only if it did
            found.at = time.monotonic()
            if await identity.of_account(self.conn, account_id=found.account_id) != found.identity or (
                await refused(self.conn, self.config, found.account_id, found.from_address)  # its domain given away
            ):
                del self.compiled[campaign_id]
                found = None
        if found is None:
            if len(self.compiled) > 64:
                self.compiled.clear()
            row = await self.conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
            assert row is not None  # listed as sending a moment ago; a campaign is never deleted
            campaign = dict(row)
            sender = await identity.of_account(self.conn, account_id=campaign["account_id"])
            version = self.listed.get(campaign_id)  # read after it was listed: never newer
            made = await sendable(self.conn, self.config, campaign, sender)
            if isinstance(made, str):
                await pause(self.conn, campaign_id, made)
                log.error("campaign %d paused: %s", campaign_id, made)
                return None
            found = self.compiled[campaign_id] = Compiled(
                made, sender, time.monotonic(), campaign["account_id"], campaign["from_address"], version
            )
        return found.template


async def claim(
    config: ClaimerConfig,
    metrics: Metrics,
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
            **config.budget.of_claim(account_relays, batch_size, reach),
        )
    )
    return batch_of(metrics, token, campaign_id, account_id, template, account_relays, began, records)


async def campaign_turn(
    config: ClaimerConfig,
    metrics: Metrics,
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
        batch = await claim(
            config, metrics, conn, token, campaign["id"], campaign["account_id"], template, own_relays, most, reach
        )
        if batch:
            batch.finishes = campaign["finishes"]
            return batch, False
    return None, False
