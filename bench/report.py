"""The figures next to their targets, each with an honest PASS or MISS."""

from dataclasses import dataclass

from bench.build import Build
from bench.send import BATCH, CONNECTIONS, Run

MB = 1024 * 1024
RSS_LIMIT = 150 * MB


@dataclass
class Header:
    messages: int
    server: str
    version: str
    cpus: int
    tick: float
    load: float  # the machine's load average over the minute before the bench

    def lines(self) -> list[str]:
        return [f"einmal bench: ~4 KB messages, {CONNECTIONS} SMTP connections per node, batch {BATCH}, "
                f"EINMAL_TICK_SECONDS={self.tick:g}",
                f"PostgreSQL {self.version} ({self.server}), {self.cpus} CPUs (load average {self.load:.2f} "
                f"before the bench), smtp-sink on 127.0.0.1"]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def row(figure: str, measured: str, target: str, ok: bool | None) -> str:
    return f"{figure:<46} {measured:<36} {target:<16} {'-' if ok is None else verdict(ok)}"


def _rate(run: Run, wire_rate: float) -> str:
    if not run.sent:
        return f"< {run.rate:,.0f} msg/s: not sent in {run.seconds:.0f} s"
    return f"{run.rate:,.0f} msg/s = {run.rate / wire_rate:.3f} × wire"


def run_line(run: Run) -> str:
    parts = [f"{run.rate:,.0f} msg/s to sent ({run.seconds:.2f} s)" if run.sent
             else f"not sent in {run.seconds:.0f} s"]
    if last := run.last_seconds:
        parts.append(f"{run.delivered / last:,.0f} msg/s to the last message at the sink ({last:.2f} s)")
    parts.append(f"delivered {run.delivered:,}, rows {dict(sorted(run.counts.items()))}")
    return "; ".join(parts)


def _nodes(run: Run) -> str:
    return f"{run.nodes} node{'s' if run.nodes > 1 else ''}"


RENDER_BEFORE_JINJA = 5.0  # µs per message of the merge-field renderer Jinja templates replaced (same body)


def default(header: Header, wire_seconds: float, runs: list[Run], built: Build, say=print,
            renders: list[tuple[str, float | None]] = ()) -> None:
    wire_rate = header.messages / wire_seconds
    one, two = runs
    lines = [*header.lines(), "", row("figure", "measured", "target", None).replace(" -", "  verdict"),
             row(f"wire: smtp-source -> smtp-sink, {header.messages:,} msgs", f"{wire_rate:,.0f} msg/s",
                 "(the limit)", None)]
    lines.append(row("einmal 1 node: approval -> sent", _rate(one, wire_rate), ">= 0.25 × wire",
                     one.sent and one.rate >= 0.25 * wire_rate))
    lines.append(row("einmal 2 nodes: approval -> sent", _rate(two, wire_rate), ">= 1 node",
                     two.sent and (not one.sent or two.rate >= one.rate)))
    for run in runs:
        if run.last_seconds:
            rate = run.delivered / run.last_seconds
            lines.append(row(f"  {_nodes(run)}: approval -> last message at sink",
                             f"{rate:,.0f} msg/s = {rate / wire_rate:.3f} × wire", "", None))
            lines.append(row(f"  {_nodes(run)}: last message -> campaign sent",
                             f"{run.seconds - run.last_seconds:.2f} s", "", None))
    for run in runs:
        per = run.statements / run.messages
        lines.append(row(f"statements per message, {_nodes(run)}",
                         f"{per:.3f} ({run.statements:,} {run.statement_method})", "<= 0.1", per <= 0.1))
    if one.statement_method == "xact_commit":
        lines.append("    (transactions in the bench database: pg_stat_statements is not preloaded on this server. "
                     "asyncpg's reset when a connection goes back to its pool is 4 statements in one transaction: "
                     "it counts once here)")
    for run in runs:
        for calls, query in run.top_statements:
            lines.append(f"    {_nodes(run)}: {calls:>7,} × {query[:100]}")
    for run in runs:
        peak = max(run.rss)
        lines.append(row(f"peak RSS per node, {_nodes(run)}", " / ".join(f"{r / MB:.0f} MB" for r in run.rss),
                         "<= 150 MB", peak <= RSS_LIMIT))
    lines.append(row("peak RSS, 1,000,000-recipient campaign", "not measured: --big", "<= 150 MB, flat", None))
    for run in runs:
        first = run.first_seconds
        lines.append(row(f"approve -> first message, {_nodes(run)}", "none" if first is None else f"{first:.3f} s",
                         "<= 1 s", first is not None and first <= 1.0))
    if built.complete:
        measured = f"{built.einmal_seconds:.2f} s = {built.ratio:.2f} × bare"
    else:
        measured = (f"> {built.einmal_seconds:.0f} s = > {built.ratio:.2f} × bare (stopped at the time limit: "
                    f"{built.einmal_rows:,} of {built.rows:,} rows)")
    lines.append(row(f"recipient build, {built.subscribers:,} subscribers", measured, "<= 1.3 × bare",
                     built.complete and built.ratio <= 1.3))
    lines.append(row("  bare INSERT … SELECT DISTINCT ON", f"{built.bare_seconds:.2f} s ({built.rows:,} rows)", "",
                     None))
    for kind, us in renders:
        ok = None if us is None or not kind.startswith("merge") else us <= 2 * RENDER_BEFORE_JINJA
        lines.append(row(f"render, {kind}", "not supported" if us is None else f"{us:.1f} µs/message",
                         f"<= {2 * RENDER_BEFORE_JINJA:.0f} µs" if kind.startswith("merge") else "", ok))
    lines += _checks(runs)
    for line in lines:
        say(line)


def _checks(runs: list[Run]) -> list[str]:
    """Warnings when what arrived does not match the campaign's rows (the figures are then suspect)."""
    return [f"warning: {_nodes(run)}: {run.delivered:,} messages at the sink, {run.counts.get('sent', 0):,} rows "
            f"sent, of {run.messages:,} recipients" for run in runs
            if not run.delivered == run.counts.get("sent", 0) == run.messages]


def dkim(unsigned: Run, signed: dict[str, Run], say=print) -> None:
    """Signed throughput next to the unsigned run of the same bench: Ed25519 must keep 0.8 of it."""
    for kind, run in signed.items():
        ratio = run.rate / unsigned.rate if unsigned.rate else 0.0
        measured = (f"{run.rate:,.0f} msg/s = {ratio:.2f} × unsigned" if run.sent
                    else f"< {run.rate:,.0f} msg/s: not sent in {run.seconds:.0f} s")
        target, ok = (">= 0.8 × unsigned", run.sent and ratio >= 0.8) if kind == "ed25519" else ("(beside it)", None)
        say(row(f"einmal 1 node, DKIM {kind}: approval -> sent", measured, target, ok))
    for line in _checks(list(signed.values())):
        say(line)


def big(header: Header, run: Run, say=print) -> None:
    peak = max(run.rss)
    samples = [s for s in run.rss_samples if s[1]]
    lines = [*header.lines(), "", f"  {run_line(run)}"]
    if samples:
        quarters = [samples[min(len(samples) - 1, len(samples) * q // 4)] for q in (1, 2, 3, 4)]
        lines.append("RSS while sending: " + ", ".join(f"{m:,} sent: {r / MB:.0f} MB" for m, r in quarters))
    lines.append(row(f"peak RSS, {run.messages:,}-recipient campaign", f"{peak / MB:.0f} MB", "<= 150 MB",
                     peak <= RSS_LIMIT))
    lines += _checks([run])
    for line in lines:
        say(line)
