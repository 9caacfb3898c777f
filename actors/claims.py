"""What both of the claimer's lanes share (actors/campaign_lane.py, actors/message_lane.py): whether a campaign,
or a message, may be sent from here, and what its claimed records become, a batch for the feed."""

import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import anyio
import asyncpg
from opentelemetry import trace

from actors.batch import Batch, Row
from actors.sections import ClaimerConfig
from service import relays, telemetry
from service.accounts import identity
from service.campaigns.transitions import transition
from service.errors import Conflict, Invalid, NotFound
from service.mail import render
from service.metrics import Metrics
from service.text import shown


async def sendable(
    conn: asyncpg.Connection,
    config: ClaimerConfig,
    campaign: Mapping[str, Any],
    sender: identity.Identity,
    *,
    in_thread: bool = False,
) -> render.CampaignTemplate | str:
    """The campaign's (or message's) template compiled as its account `sender`, or why it cannot be sent from
    here: bulk mail without the one-click unsubscribe it requires (docs/design.md#listening-surface), a From the
    rule as it is now refuses (service/mail/from_rule.py), a relay of its account this node cannot use, a
    template that does not compile. `in_thread`: compiled in a worker thread (a message's, compiled as claimed)."""
    reason = config.without_one_click(campaign) or await refused(
        conn, config, campaign["account_id"], campaign["from_address"]
    )
    if reason is not None:
        return reason
    try:
        for relay in sender.relays:
            relays.from_account(relay)  # a relay it cannot use: refused, naming the relay
        if in_thread:
            return await anyio.to_thread.run_sync(config.compile, dict(campaign), sender)
        return config.compile(campaign, sender)
    except Invalid as exc:
        return f"cannot render: {exc}"
    except ValueError as exc:
        return f"cannot send: {exc}"


async def refused(conn: asyncpg.Connection, config: ClaimerConfig, account_id: int, address: str) -> str | None:
    """What the From rule as it is now finds wrong with the campaign's From: a domain removed from its account,
    or given to another account, since it was made."""
    found = await config.from_problem(conn, account_id=account_id, address=address)
    return f"its From {shown(address)}: {found}" if found else None


async def pause(conn: asyncpg.Connection, campaign_id: int, reason: str) -> None:
    """Pause the campaign (or message) for the operator; another node may have paused it first."""
    with suppress(Conflict, NotFound):
        await transition(conn, verb="pause", campaign_id=campaign_id, reason=reason)


def batch_of(
    metrics: Metrics,
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
        batch.message, batch.finishes = True, False
        batch.honour_unsubscribe = bool(records[0]["honour_unsubscribe"])
    return batch
