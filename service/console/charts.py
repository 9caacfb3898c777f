"""Charts drawn on the server as SVG (no script, no chart library): a bar a day of a rate, against its
thresholds. The markup is made of numbers and fixed words only; the page's table gives the same figures in text."""

from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH, HEIGHT, LEFT, BOTTOM = 600, 160, 44, 20


def rate_chart(title: str, rates: Sequence[float | None], lines: Sequence[tuple[float, str]]) -> Markup:
    """Bars of `rates` (per cent, one a day, oldest first; None: nothing delivered that day, no bar) under
    the horizontal `lines` (a threshold in per cent and its class: limit, aim), the scale reaching past the
    highest of both."""
    top = max([*(r for r in rates if r is not None), *(value for value, _ in lines), 0.01]) * 1.25
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - 6
    step = plot_w / max(len(rates), 1)

    def y(value: float) -> float:
        return 6 + plot_h * (1 - min(value, top) / top)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - 4}" y2="{y(0):.1f}"/>',
    ]
    for i, value in enumerate(rates):
        if value is None:
            continue
        over = any(value >= limit for limit, kind in lines if kind == "limit")
        height = max(y(0) - y(value), 1.0 if value > 0 else 0.0)
        parts.append(
            f'<rect class="{"bar over" if over else "bar"}" x="{LEFT + i * step + 1:.1f}" y="{y(0) - height:.1f}" '
            f'width="{max(step - 2, 1):.1f}" height="{height:.1f}"/>'
        )
    for value, kind in lines:
        parts.append(f'<line class="{kind}" x1="{LEFT}" y1="{y(value):.1f}" x2="{WIDTH - 4}" y2="{y(value):.1f}"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g} %</text>')
    parts.append(f'<text x="{LEFT - 4}" y="{y(0) + 4:.1f}" text-anchor="end">0</text>')
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 4}">{len(rates)} days ago</text>')
    parts.append(f'<text x="{WIDTH - 4}" y="{HEIGHT - 4}" text-anchor="end">today</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
