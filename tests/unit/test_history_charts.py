"""The scoreboard history's charts: one per measure, every config a series, a rate's interval as a
band, a measure a config does not have left out of its chart (never drawn at 0)."""

import base64
import re
import xml.etree.ElementTree as ET

import pytest

from nl2sql_assets.evaluation.reporting.charts import (
    HistoryPoint,
    chart_svg,
    charts_markdown,
    format_tick,
    history_charts,
    nice_top,
)

SVG = "{http://www.w3.org/2000/svg}"
T0 = 1_764_800_000.0
PLANS = {"accuracy": 1.0, "accuracy_low": 0.973, "accuracy_high": 1.0, "lenient_accuracy": 1.0,
         "cost_per_case_usd": 0.0, "latency_p95_s": 0.05}
RETRIEVAL = {"accuracy": 0.387, "accuracy_low": 0.29, "accuracy_high": 0.49, "cost_per_case_usd": 0.0,
             "latency_p95_s": 0.02}


def _legend(svg_text: str) -> dict[str, str]:
    root = ET.fromstring(svg_text)
    return {(t.text or "").strip(): t.find(f"{SVG}tspan").text
            for t in root.findall(f"{SVG}text") if t.find(f"{SVG}tspan") is not None}


@pytest.mark.parametrize(("points", "expected"), [
    # (config, seconds after T0, values) ... -> {measure: {config: samples}}
    ([("plans", 0, PLANS)],
     {"accuracy": {"plans": 1}, "lenient_accuracy": {"plans": 1}, "cost_per_case_usd": {"plans": 1},
      "latency_p95_s": {"plans": 1}}),
    ([("plans", 0, PLANS), ("retrieval", 60, RETRIEVAL), ("plans", 120, PLANS)],
     {"accuracy": {"plans": 2, "retrieval": 1}, "lenient_accuracy": {"plans": 2},
      "cost_per_case_usd": {"plans": 2, "retrieval": 1}, "latency_p95_s": {"plans": 2, "retrieval": 1}}),
    ([("retrieval", 0, RETRIEVAL)],  # no lenient chart at all: no config has the measure
     {"accuracy": {"retrieval": 1}, "cost_per_case_usd": {"retrieval": 1}, "latency_p95_s": {"retrieval": 1}}),
    ([("a", 0, {"pass_k": 0.5, "determinism": 0.9, "neighbour_robust_accuracy": 0.7})],
     {"neighbour_robust_accuracy": {"a": 1}, "pass_k": {"a": 1}, "determinism": {"a": 1}}),
    ([("a", 0, {"unknown_measure": 3.0})], {}),
])
def test_one_chart_per_measure_with_each_config_that_has_it(points, expected):
    charts = history_charts(HistoryPoint(T0 + dt, config, values) for config, dt, values in points)
    assert {c.spec.key: {cfg: len(s) for cfg, s in c.series.items()} for c in charts} == expected


def test_samples_run_oldest_first_with_the_interval_where_the_point_has_both_bounds():
    points = [HistoryPoint(T0 + 60, "plans", {"accuracy": 0.9, "accuracy_low": 0.8, "accuracy_high": 0.95}),
              HistoryPoint(T0, "plans", {"accuracy": 0.7, "accuracy_low": 0.6}),  # one bound: no band
              HistoryPoint(T0 + 30, "plans", {"lenient_accuracy": 0.9})]
    (accuracy, lenient) = history_charts(points)
    assert [(s.value, s.low, s.high) for s in accuracy.series["plans"]] == [(0.7, None, None), (0.9, 0.8, 0.95)]
    assert [s.at for s in lenient.series["plans"]] == [T0 + 30]


def test_each_series_keeps_its_newest_samples_and_the_chart_says_how_many_were_left_out():
    points = [HistoryPoint(T0 + i, "plans", {"accuracy": i / 100}) for i in range(70)]
    (chart,) = history_charts(points, max_samples=60)
    assert [s.value for s in chart.series["plans"]] == [i / 100 for i in range(10, 70)]
    assert chart.dropped == 10
    assert "10 older point(s) not drawn" in chart_svg(chart)


@pytest.mark.parametrize(("value", "unit", "text"), [
    (0.0, "share", "0%"), (0.25, "share", "25%"), (0.387, "share", "38.7%"), (1.0, "share", "100%"),
    (0.0, "usd", "$0"), (0.0012, "usd", "$0.0012"), (0.00055, "usd", "$0.00055"), (12.5, "usd", "$12.5"),
    (0.0, "s", "0 s"), (2.5, "s", "2.5 s"), (0.125, "s", "0.125 s"),
])
def test_axis_ticks_read_in_the_measures_unit(value, unit, text):
    assert format_tick(value, unit) == text


@pytest.mark.parametrize(("top", "axis"), [
    (0.0, 1.0), (-1.0, 1.0), (float("nan"), 1.0), (1.0, 1.0), (1.2, 2.0), (2.3, 2.5), (0.0019, 0.002),
    (3.1, 4.0), (4.5, 5.0), (7.0, 8.0), (9.0, 10.0), (0.05, 0.05), (120.0, 200.0),
])
def test_the_axis_top_is_a_short_number_at_or_above_the_highest_value(top, axis):
    assert nice_top(top) == pytest.approx(axis)


def test_rates_are_drawn_on_the_whole_scale_and_the_legend_gives_each_configs_latest_value():
    points = [HistoryPoint(T0, "plans", PLANS), HistoryPoint(T0 + 60, "retrieval", RETRIEVAL),
              HistoryPoint(T0 + 120, "retrieval", {**RETRIEVAL, "accuracy": 0.4})]
    accuracy = history_charts(points)[0]
    svg = chart_svg(accuracy)
    assert _legend(svg) == {"plans": "100.0%", "retrieval": "40.0%"}
    ticks = [t.text for t in ET.fromstring(svg).findall(f"{SVG}text")]
    assert "0%" in ticks and "100%" in ticks  # 0-100% whatever the values
    root = ET.fromstring(svg)
    assert len(root.findall(f"{SVG}polygon")) == 1  # retrieval's band over two samples
    assert len(root.findall(f"{SVG}line[@stroke-width='6']")) == 1  # plans' one interval as a bar
    assert len(root.findall(f"{SVG}circle")) == 3


def test_a_config_name_is_escaped_and_shortened_in_the_legend():
    (chart, *_) = history_charts([HistoryPoint(T0, "<b>&a-very-long-config-name", {"accuracy": 0.5})])
    svg = chart_svg(chart)
    ET.fromstring(svg)  # still well-formed
    assert list(_legend(svg)) == ["<b>&a-very-lo…"]  # 14 characters


def test_the_markdown_holds_one_svg_image_per_chart_and_the_same_points_give_the_same_bytes():
    points = [HistoryPoint(T0, "plans", PLANS), HistoryPoint(T0 + 60, "retrieval", RETRIEVAL)]
    markdown = charts_markdown(history_charts(points))
    images = re.findall(r"!\[([^\]]+)\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert [title for title, _ in images] == [
        "accuracy (strict), with its 95% Wilson interval", "lenient accuracy", "cost per case", "latency p95"]
    for _, data in images:
        ET.fromstring(base64.b64decode(data))
    assert charts_markdown(history_charts(list(reversed(points)))) == markdown
    assert charts_markdown([]) == "No scoreboard recorded yet."
