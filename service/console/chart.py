"""A campaign's chart, drawn on the server as SVG (templates/chart.html): its messages sent, failed and
hard-bounced over time, and the recipients people clicked for once it tracks clicks, a line each over the
spans of service/campaigns/timeline.py. No script: the lines' points are computed here, their colours are the
stylesheet's."""

from dataclasses import dataclass
from datetime import UTC

from service.campaigns.timeline import Timeline

WIDTH, HEIGHT = 640, 220  # the drawing's units (it scales to the page's width)
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 28  # room for the axes' labels
LABELS = {"sent": "sent", "failed": "failed", "bounced": "bounced (hard)", "clicked": "clicked (people)"}


@dataclass(frozen=True)
class Line:
    kind: str
    label: str
    points: str  # the polyline's "x,y x,y …"
    total: int


@dataclass(frozen=True)
class Chart:
    lines: list[Line]
    top: int  # the most in one span: the vertical axis's top
    start: str  # when the first span starts and the last ends, as the page shows times
    end: str
    span: str  # one span's length, e.g. "5 min"

    width, height = WIDTH, HEIGHT
    left, right, top_y, bottom_y = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM


def seconds(width: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if width >= size:
            return f"{width / size:.3g} {unit}"
    return f"{width:.3g} s"


def drawn(timeline: Timeline, *, tracked: bool) -> Chart | None:
    """The chart of a campaign's timeline (`tracked`: it tracks clicks, so they are drawn too); None before
    anything happened."""
    first, last = timeline.at(0), timeline.at(len(timeline.counts["sent"]))
    if first is None or last is None or not timeline.counts["sent"]:
        return None
    kinds = [kind for kind in LABELS if kind != "clicked" or tracked]
    spans = len(timeline.counts["sent"])
    top = max(1, *(max(timeline.counts[kind]) for kind in kinds))

    def points(counts: list[int]) -> str:
        """Each span's count at its middle; one span's across the whole width (a single point draws nothing)."""
        places = [(i + 0.5) / spans for i in range(spans)] if spans > 1 else [0.0, 1.0]
        heights = counts if spans > 1 else counts * 2
        return " ".join(
            f"{LEFT + (WIDTH - RIGHT - LEFT) * x:.1f},{TOP + (HEIGHT - BOTTOM - TOP) * (1 - n / top):.1f}"
            for x, n in zip(places, heights, strict=True)
        )

    lines = [Line(kind, LABELS[kind], points(timeline.counts[kind]), sum(timeline.counts[kind])) for kind in kinds]
    when = "%Y-%m-%d %H:%M:%S UTC"
    return Chart(
        lines, top, first.astimezone(UTC).strftime(when), last.astimezone(UTC).strftime(when), seconds(timeline.width)
    )
