"""Prometheus metrics of one process, served at GET /metrics.

Counted where einmal already counts: the claimer per claimed batch, the
sender per group-commit statement, the recorder per closed batch (its
outcome counts and SMTP reply classes), the supervisor per restart. The
database-wide figures (in-doubt rows, the progress of sending campaigns) are
read when /metrics is scraped, at most every few seconds (service/web/app.py).
Each process has a registry of its own, so several nodes in one process
(tests) do not add up.
"""

import math
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable

import asyncpg
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from service import db

CONTENT_TYPE = CONTENT_TYPE_LATEST
# a send row's settled states as the recorder and claimer count them
OUTCOMES = ("sent", "failed", "queued", "in_doubt", "suppressed", "released", "not_started")
REPLY_CLASSES = {"2": "2xx", "3": "3xx", "4": "4xx", "5": "5xx"}
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
BATCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.messages = Counter(
            "einmal_messages",
            "Send rows settled by this process, by outcome (queued: back in the queue for a retry)",
            ["outcome"],
            registry=r,
        )
        self.smtp_replies = Counter(
            "einmal_smtp_replies", "SMTP replies to the messages this process sent, by class", ["class"], registry=r
        )
        self.batch_seconds = Histogram(
            "einmal_batch_duration_seconds", "From a batch's claim to its close", buckets=BATCH_BUCKETS, registry=r
        )
        self.group_commit_seconds = Histogram(
            "einmal_group_commit_duration_seconds",
            "One group-commit statement (outcomes recorded, next rows started)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.relay_unavailable = Counter(
            "einmal_relay_unavailable",
            "Tries that reached no SMTP relay (refused connection, TLS or AUTH), by relay",
            ["relay"],
            registry=r,
        )
        self.domain_throttled = Counter(
            "einmal_domain_throttled",
            "421/4.7.x answers and 5.7.x refusals that paused a recipient domain, by domain",
            ["domain"],
            registry=r,
        )
        self.lost_outcomes = Counter(
            "einmal_lost_outcomes",
            "SMTP answers that found no row of their token's to record them on (kept in einmal.lost_outcomes)",
            registry=r,
        )
        self.rows_claimed = Counter("einmal_rows_claimed", "Send rows claimed by this process", registry=r)
        self.rows_in_flight = Gauge(
            "einmal_rows_in_flight", "Send rows this process holds: claimed, not yet closed", registry=r
        )
        self.in_doubt = Gauge("einmal_in_doubt_rows", "Send rows in doubt in the database (every node's)", registry=r)
        self.actor_restarts = Counter(
            "einmal_actor_restarts", "Restarts of an actor by the supervisor", ["actor"], registry=r
        )
        self.campaign_rows = Gauge(
            "einmal_campaign_rows", "Send rows of each sending campaign by state", ["campaign_id", "status"], registry=r
        )
        self.database_up = Gauge("einmal_database_up", "1 when the database answered the last scrape", registry=r)
        self.unsubscribes = Counter(
            "einmal_unsubscribes",
            "One-click unsubscribe requests by result (applied, repeated, refused)",
            ["result"],
            registry=r,
        )
        self.opens = Counter(
            "einmal_opens",
            "Open-tracking pixel requests by result (recorded, repeated: an open written before, dropped: the buffer "
            "was full, refused: a pixel that is not einmal's, answered all the same)",
            ["result"],
            registry=r,
        )
        self.clicks = Counter(
            "einmal_clicks",
            "Tracked link requests by result (recorded, repeated: a click written before, dropped: the buffer "
            "was full, refused: a link that is not einmal's)",
            ["result"],
            registry=r,
        )
        self.inbound = Counter(
            "einmal_inbound_messages",
            "Messages to the return path by result (applied, "
            "repeated, ignored: not a report, dropped: touches no send row, unsigned: "
            "no VERP token that verifies, refused; busy: connections answered 421)",
            ["result"],
            registry=r,
        )
        self.webhooks = Counter(
            "einmal_webhook_events",
            "Provider webhook events by provider and result (applied, "
            "repeated, ignored, dropped: names no send row, refused: the request)",
            ["provider", "result"],
            registry=r,
        )
        self._outcome = {name: self.messages.labels(name) for name in OUTCOMES}
        self._reply = {digit: self.smtp_replies.labels(label) for digit, label in REPLY_CLASSES.items()}

    def watch_heartbeat(self, last_heartbeat: Callable[[], float]) -> None:
        """A node's heartbeat age: seconds since `last_heartbeat()` (a monotonic time, 0 = never)."""
        gauge = Gauge(
            "einmal_heartbeat_age_seconds", "Seconds since this node last wrote its heartbeat", registry=self.registry
        )

        def age() -> float:
            at = last_heartbeat()
            return time.monotonic() - at if at else math.nan

        gauge.set_function(age)

    def watch_bodies(self, held: Callable[[], int]) -> None:
        """The bytes of request bodies the HTTP surface holds room for now (service/web/limits.py's BodyBudget)."""
        Gauge(
            "einmal_http_body_bytes",
            "Bytes of HTTP request bodies room is held for now, by all requests",
            registry=self.registry,
        ).set_function(held)

    def count(self, outcomes: dict[str, int]) -> None:
        for status, n in outcomes.items():
            child = self._outcome.get(status) or self._outcome.setdefault(status, self.messages.labels(status))
            child.inc(n)

    def count_replies(self, replies: Iterable[str]) -> None:
        for digit, n in Tally(reply[:1] for reply in replies).items():
            if digit in self._reply:
                self._reply[digit].inc(n)

    async def refresh(self, conn: asyncpg.Connection) -> None:
        """The figures only the database knows, read at scrape time."""
        rows = await conn.fetch(*db.sql("metrics_campaign_rows"))
        self.in_doubt.set(await conn.fetchval(*db.sql("metrics_in_doubt")))
        self.campaign_rows.clear()  # campaigns no longer sending drop out
        for row in rows:
            self.campaign_rows.labels(str(row["campaign_id"]), row["status"]).set(row["n"])

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
