"""The failover barrier (docs/design.md#liveness): what the promise can count on from the server's
replication, and what a node does after a failover before it claims again.

The scheduler asks each tick, and so at start and on every new connection:
standbys but none synchronous is one warning line when it begins and a
/readyz detail while it lasts (with EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION,
not ready and nothing claimed); a new system identifier or timeline is one
line naming the failover. The send pipeline runs the same check when it
starts, and after a failover writes the node's journal again on the new
primary before it claims anything (`write_again`), and waits until every
other live node has done the same (`await_journals`).
"""

import logging
import time
from collections.abc import Iterable
from typing import TypedDict

import anyio
import asyncpg

from actors import writer
from actors.batch import Outcome
from actors.wires import Journal, Replication, Unrecorded
from service import db
from service.metrics import Metrics

log = logging.getLogger("einmal.scheduler")  # the name its lines have always had

BARRIER_POLL_SECONDS = 0.2  # how often a node waiting for the others' journals after a failover asks
WAITING_COMMITS = ("on", "remote_apply", "remote_write")  # synchronous_commit levels a sync standby holds
# a server that will not say (a managed service's restrictions): the check cannot tell
CANNOT_ASK = (asyncpg.InsufficientPrivilegeError, asyncpg.UndefinedFunctionError, asyncpg.FeatureNotSupportedError)


def replication_problem(state: asyncpg.Record) -> str | None:
    """Why the server's replication does not keep the promise through a failover; None when it does, or
    when there is no standby to fail over to."""
    standbys, synchronous = state["standbys"], state["synchronous"]
    if not standbys:
        return None
    if state["hidden"] == standbys:
        return (
            f"{standbys} standby(s) whose state this role may not read: grant it pg_monitor to let "
            "einmal check that one is synchronous"
        )
    if not synchronous:
        why = "synchronous_standby_names is empty" if not state["names_set"] else "none streams as sync"
        return (
            f"{standbys} standby(s), none synchronous ({why}): a failover to one may lose the last "
            "transitions, and a message may go out twice"
        )
    if state["synchronous_commit"] not in WAITING_COMMITS:
        return (
            f"synchronous_commit is {state['synchronous_commit']} for einmal's sessions: its commits do "
            "not wait for the synchronous standby"
        )
    return None


async def check_replication(replication: Replication, journal: Journal, conn: asyncpg.Connection) -> None:
    """What the promise can count on from the server's replication, and whether it is another primary than
    at the last check (a failover): one line when either changes, never one a tick. The one writer of
    `replication` (but for `failover_due`'s clearing by `write_again`)."""
    problem: str | None
    try:
        state = await conn.fetchrow(*db.sql("replication_state"))
    except CANNOT_ASK as exc:
        problem = f"cannot check replication: {str(exc).splitlines()[0]}"
    else:
        assert state is not None  # the query returns one row
        problem = replication_problem(state)
        identity = (state["system_identifier"], state["timeline"])
        if replication.identity not in (None, identity):
            (system, timeline), (new_system, new_timeline) = replication.identity, identity
            changed = (
                f"timeline {timeline} -> {new_timeline}"
                if system == new_system
                else f"system identifier {system} -> {new_system}"
            )
            log.warning(
                "the database is another primary than before (%s): a failover or a restore; the "
                "transitions the old one had not passed on are lost: the outcomes this node recorded "
                "in the last %gs are written again where they are missing before it claims again",
                changed,
                journal.seconds,
            )
            replication.failover_due = True
            if replication.standby_lag > (reach := journal.reach()):
                log.warning(
                    "the standby was %.1fs behind at the last check before the failover, more than "
                    "the %.1fs the journal covers: outcomes older than that which the failover lost are "
                    "not written again, and their rows may be in doubt or sent again",
                    replication.standby_lag,
                    reach,
                )
        replication.identity = identity
        replication.standby_lag = state["lag_seconds"] or 0.0
    if problem != replication.problem:
        if problem:
            log.warning(
                "replication: %s%s",
                problem,
                "; not claiming (EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION)" if replication.required else "",
            )
        else:
            assert state is not None  # no problem: the state was read
            log.info(
                "replication: %s",
                f"{state['synchronous']} synchronous standby(s)" if state["standbys"] else "no standby",
            )
        replication.problem = problem


async def write_again(
    conn: asyncpg.Connection, replication: Replication, journal: Journal, unrecorded: Unrecorded, metrics: Metrics
) -> None:
    """After a failover, before the send pipeline claims: the outcomes of the journal (returns to the queue
    among them) and the answers held unrecorded that end a row's send, written again where the new primary
    lost them (send_rewrite); one that finds its row settled by another token, or claimed by one since, is
    logged, counted and kept in einmal.lost_outcomes. The held ones it wrote are no longer held; the retries
    among them still are."""
    latest: dict[int, tuple[float, str, Outcome, float | None]] = {
        o.id: (at, token, o, at) for at, token, o in journal.recent()
    }
    for token, outcomes in unrecorded.held:
        for o in outcomes:
            if o.status != "queued":  # when it was answered is not kept: it outranks no other token's claim
                latest[o.id] = (time.time(), token, o, None)
    if latest:
        rows = latest.values()
        await writer.campaigns_of(conn, [o for _, _, o, _ in rows])
        result = await conn.fetchrow(*db.sql("send_rewrite", **columns(rows)))
        assert result is not None  # the query returns one row
        lost = result["lost"] or []
        for send_id, campaign_id, subscriber_id, outcome, code, status, owner, token in lost:
            found = f"the row is {status}" + (f" by {owner}" if owner else "") if status else "there is no such row"
            log.warning(
                "send %d (campaign %s, subscriber %s): its answer (%s, reply %s) under %s, lost by the "
                "failover, cannot be written again: %s; kept in einmal.lost_outcomes",
                send_id,
                campaign_id,
                subscriber_id,
                outcome,
                code or "without a code",
                token,
                found,
            )
        metrics.lost_outcomes.inc(len(lost))
        log.warning(
            "after the failover: wrote again %d outcome(s) the new primary had lost, %d were there, "
            "%d lost (the row is another token's, or gone)",
            result["rewritten"],
            result["there"],
            len(lost),
        )
    unrecorded.held = [
        (token, kept) for token, outcomes in unrecorded.held if (kept := [o for o in outcomes if o.status == "queued"])
    ]
    replication.failover_due = False


async def await_journals(
    conn: asyncpg.Connection, replication: Replication, tokens: list[str], node_timeout_seconds: float
) -> None:
    """The barrier after a failover, before the send pipeline claims: this node's tokens are marked as
    having written their journal on this primary, then it waits until every other live node has too
    (node_journals_pending). A row whose claim the failover lost is queued with no owner on the new primary,
    and only its owner's rewrite says it was sent; a claim before that would send it again. A node that
    never writes (dead, or an einmal without the barrier) is waited for until its heartbeat is older than
    the node timeout, and at most that long in all. A node that has just started has no journal and marks
    its primary at once: nobody waits for it."""
    if replication.identity is None:  # the server would not say which primary it is: nothing to compare
        return
    primary = "{}:{}".format(*replication.identity)
    await conn.execute(*db.sql("node_journal_written", tokens=tokens, primary=primary))
    timeout = node_timeout_seconds
    deadline, said = time.monotonic() + timeout, None
    pending_query = db.sql("node_journals_pending", primary=primary, node_timeout_seconds=timeout)
    while pending := [r["id"] for r in await conn.fetch(*pending_query)]:
        if time.monotonic() >= deadline:
            log.warning(
                "claiming though node(s) %s have not written their journal on this primary in %gs "
                "(EINMAL_NODE_TIMEOUT_SECONDS): rows whose claims the failover lost may be sent again",
                ", ".join(pending),
                timeout,
            )
            return
        if said is None:
            said = time.monotonic()
            log.warning(
                "after the failover: not claiming until node(s) %s have written their journal on this "
                "primary (at most %gs)",
                ", ".join(pending),
                timeout,
            )
        await anyio.sleep(BARRIER_POLL_SECONDS)
    if said is not None:
        log.info(
            "after the failover: every live node has written its journal; claiming after %.1fs", time.monotonic() - said
        )


class Rewrite(TypedDict):
    """send_rewrite's arrays, one element a row."""

    ids: list[int]
    tokens: list[str]
    statuses: list[str]
    replies: list[str]
    attempts: list[int]
    bounces: list[bool]
    ats: list[float]
    retry_afters: list[float]
    recorded_ats: list[float | None]
    campaign_ids: list[int | None]


def columns(rows: Iterable[tuple[float, str, Outcome, float | None]]) -> Rewrite:
    """send_rewrite's arrays, by name, from (wall time, token, outcome, when the journal recorded it)."""
    rows = list(rows)
    outcomes = [o for _, _, o, _ in rows]
    return {
        "ids": [o.id for o in outcomes],
        "tokens": [t for _, t, _, _ in rows],
        "statuses": [o.status for o in outcomes],
        "replies": [o.reply[:1000] for o in outcomes],
        "attempts": [o.attempts for o in outcomes],
        "bounces": [o.bounce for o in outcomes],
        "ats": [at for at, _, _, _ in rows],
        "retry_afters": [o.retry_after for o in outcomes],
        "recorded_ats": [r for _, _, _, r in rows],
        "campaign_ids": [o.campaign_id for o in outcomes],
    }
