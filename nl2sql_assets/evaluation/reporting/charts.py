"""The scoreboard history as charts: one per measure, every config a series over time, a rate's
95% interval drawn as a band around its line.

Dagster's own plots draw one series per metadata key, so configs cannot share a chart there; these
charts are small SVG files (drawn here, deterministic: the same points give the same bytes) that a
Markdown metadata entry shows as images. A config whose mode has no such measure (retrieval has no
lenient accuracy) is absent from that chart, never drawn at 0.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from xml.sax.saxutils import escape

#: Okabe-Ito: told apart with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 58, 150, 30, 40


@dataclass(frozen=True)
class ChartSpec:
    """How one measure is charted: its title, its unit, and where its interval's bounds are."""

    key: str
    title: str
    unit: str  # "share" (0..1, shown as %), "usd" or "s"
    band: tuple[str, str] | None = None


#: The measures the history charts, in reading order (the keys of ``reporting.headline`` and the
#: neighbour scorer's rate).
CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("accuracy", "accuracy (strict), with its 95% Wilson interval", "share",
              ("accuracy_low", "accuracy_high")),
    ChartSpec("lenient_accuracy", "lenient accuracy", "share"),
    ChartSpec("neighbour_robust_accuracy", "accuracy on the neighbour databases too", "share"),
    ChartSpec("pass_k", "pass^k (cases passed in every pass)", "share"),
    ChartSpec("determinism", "determinism (cases identical across passes)", "share"),
    ChartSpec("cost_per_case_usd", "cost per case", "usd"),
    ChartSpec("latency_p95_s", "latency p95", "s"),
)


@dataclass(frozen=True)
class HistoryPoint:
    """One recorded headline of one config: when (seconds since the epoch) and its numbers."""

    at: float
    config: str
    values: dict[str, float]


@dataclass(frozen=True)
class Sample:
    at: float
    value: float
    low: float | None = None
    high: float | None = None


@dataclass
class Chart:
    spec: ChartSpec
    series: dict[str, list[Sample]] = field(default_factory=dict)  # config -> samples, oldest first
    dropped: int = 0  # older samples left out to keep the chart readable


def history_charts(points: Iterable[HistoryPoint], max_samples: int = 60) -> list[Chart]:
    """One chart per measure that some config has, each config's samples in time order (the
    newest ``max_samples`` of each)."""
    ordered = sorted(points, key=lambda p: (p.at, p.config))
    charts: list[Chart] = []
    for spec in CHARTS:
        chart = Chart(spec)
        for point in ordered:
            value = point.values.get(spec.key)
            if value is None:
                continue
            low = high = None
            if spec.band and spec.band[0] in point.values and spec.band[1] in point.values:
                low, high = point.values[spec.band[0]], point.values[spec.band[1]]
            chart.series.setdefault(point.config, []).append(Sample(point.at, value, low, high))
        if not chart.series:
            continue
        for config, samples in chart.series.items():
            if len(samples) > max_samples:
                chart.dropped += len(samples) - max_samples
                chart.series[config] = samples[-max_samples:]
        chart.series = dict(sorted(chart.series.items()))
        charts.append(chart)
    return charts


def format_tick(value: float, unit: str) -> str:
    if unit == "share":
        return f"{value * 100:.0f}%" if abs(value * 100 - round(value * 100)) < 1e-9 else f"{value * 100:.1f}%"
    if unit == "usd":
        return f"${value:.3g}" if value else "$0"
    return f"{value:.3g} s" if value else "0 s"


def _y_range(chart: Chart) -> tuple[float, float]:
    if chart.spec.unit == "share":
        return 0.0, 1.0  # a rate is read against the whole scale
    top = max(max((s.high if s.high is not None else s.value) for s in samples)
              for samples in chart.series.values())
    return 0.0, nice_top(top)


def nice_top(top: float) -> float:
    """The axis top: the smallest of 1, 2, 2.5, 4, 5, 8 or 10 times a power of ten at or above
    ``top`` (so the four grid steps fall on short numbers); 1 for nothing above 0."""
    import math

    if not top > 0 or not math.isfinite(top):
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return next(m * power for m in (1, 2, 2.5, 4, 5, 8, 10) if m * power >= top * (1 - 1e-12))


def _time_label(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%m-%d %H:%M")


def _num(x: float) -> str:
    return f"{x:.1f}"


def chart_svg(chart: Chart) -> str:
    """The chart as a standalone SVG document (UTC times on x, the measure on y, a legend)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    times = sorted({s.at for samples in chart.series.values() for s in samples})
    t0, t1 = times[0], times[-1]
    y0, y1 = _y_range(chart)

    def x(at: float) -> float:
        return LEFT + (plot_w / 2 if t1 == t0 else (at - t0) / (t1 - t0) * plot_w)

    def y(value: float) -> float:
        clamped = min(max(value, y0), y1)
        return TOP + plot_h - (clamped - y0) / (y1 - y0) * plot_h

    unit = chart.spec.unit
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
           f'<text x="{LEFT}" y="18" font-size="13" font-weight="bold">{escape(chart.spec.title)}</text>']
    for i in range(5):  # y grid and labels
        value = y0 + (y1 - y0) * i / 4
        yy = _num(y(value))
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{yy}" y2="{yy}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy}" text-anchor="end" dominant-baseline="middle" '
                   f'fill="#555">{escape(format_tick(value, unit))}</text>')
    ticks = times if len(times) <= 4 else [times[round(i * (len(times) - 1) / 3)] for i in range(4)]
    for at in dict.fromkeys(ticks):  # x labels: up to four of the recorded times
        out.append(f'<text x="{_num(x(at))}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                   f'fill="#555">{_time_label(at)}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle" fill="#555">'
               f'recorded (UTC){escape(_dropped_note(chart))}</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#999"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#999"/>')
    for n, (config, samples) in enumerate(chart.series.items()):
        colour = PALETTE[n % len(PALETTE)]
        band = [(s.at, s.low, s.high) for s in samples if s.low is not None and s.high is not None]
        if len(band) == 1:  # one sample: the interval as a bar
            at, low, high = band[0]
            out.append(f'<line x1="{_num(x(at))}" x2="{_num(x(at))}" y1="{_num(y(low))}" y2="{_num(y(high))}" '
                       f'stroke="{colour}" stroke-width="6" stroke-opacity="0.25"/>')
        elif band:
            upper = [f"{_num(x(at))},{_num(y(high))}" for at, _, high in band]
            lower = [f"{_num(x(at))},{_num(y(low))}" for at, low, _ in reversed(band)]
            out.append(f'<polygon points="{" ".join(upper + lower)}" fill="{colour}" fill-opacity="0.15"/>')
        line = " ".join(f"{_num(x(s.at))},{_num(y(s.value))}" for s in samples)
        if len(samples) > 1:
            out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for s in samples:
            out.append(f'<circle cx="{_num(x(s.at))}" cy="{_num(y(s.value))}" r="3" fill="{colour}"/>')
        ly = TOP + 8 + n * 18
        latest = format_tick(samples[-1].value, unit) if unit != "share" else f"{samples[-1].value * 100:.1f}%"
        out.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{ly - 6}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 27}" y="{ly + 3}">{escape(_short(config))} '
                   f'<tspan fill="#555">{escape(latest)}</tspan></text>')
    out.append("</svg>")
    return "".join(out)


def _short(config: str, width: int = 14) -> str:
    return config if len(config) <= width else config[: width - 1] + "…"


def _dropped_note(chart: Chart) -> str:
    return f"; {chart.dropped} older point(s) not drawn" if chart.dropped else ""


def charts_markdown(charts: Sequence[Chart]) -> str:
    """The charts as Markdown images (SVG data URIs: nothing to serve), each titled inside; the
    legend gives each config's latest value."""
    if not charts:
        return "No scoreboard recorded yet."
    parts = []
    for chart in charts:
        data = base64.b64encode(chart_svg(chart).encode("utf-8")).decode("ascii")
        parts.append(f"![{chart.spec.title}](data:image/svg+xml;base64,{data})")
    return "\n\n".join(parts)
