"""A board's headline: the few measures a board is read by, as numbers to plot and as formatted
cells to show.

A measure that does not apply to the board's mode is absent, never 0: a mode that executes
nothing (retrieval) has no execution accuracy, so its headline ``accuracy`` is the share of case
runs that passed (an executing mode's is execution accuracy); lenient accuracy reads executed results; pass^k and determinism need two passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from nl2sql_assets.evaluation.judging.stats import Rate, percent, rate_cell
from nl2sql_assets.evaluation.reporting.board import Board
from nl2sql_assets.evaluation.running.modes import get_mode


@dataclass(frozen=True)
class Measure:
    """One headline measure: a stable key, how a table names it, its number and its cell."""

    key: str
    label: str
    value: float
    cell: str


def dollars(value: float) -> str:
    return f"${value:.4f}"


def headline(board: Board, mode: str) -> list[Measure]:
    """The measures that apply to ``mode``, in reading order."""
    executes = get_mode(mode).executes
    acc = board.accuracy
    out: list[Measure] = []
    # One key for every mode, so configs of different modes share a chart: what it counts is in
    # its label (executed results, or the case runs that passed where nothing is executed).
    main, label = ((acc.execution, "execution accuracy (95% CI)") if executes
                   else (acc.overall, "case runs that passed (95% CI)"))
    if main.total:
        out += _with_interval(main, "accuracy", label)
    if executes and acc.execution_lenient.total:
        out.append(Measure("lenient_accuracy", "lenient accuracy (95% CI)", acc.execution_lenient.rate,
                           rate_cell(acc.execution_lenient)))
    pass_k = acc.pass_k.execution if executes else acc.pass_k.overall
    if acc.pass_k.k >= 2 and pass_k.total:
        out.append(Measure("pass_k", f"pass^{acc.pass_k.k} (cases passed in all {acc.pass_k.k} passes)",
                           pass_k.rate, rate_cell(pass_k)))
    if board.completed_cases or board.results:
        cost = board.cost
        lower_bound = f" or more ({cost.unknown_cost_calls} calls not priced)" if cost.unknown_cost_calls else ""
        flagged = (f" ({cost.token_source}: {cost.estimated_calls} calls counted with the tokenizer)"
                   if cost.token_source in ("estimated", "mixed") else "")
        out.append(Measure("cost_per_case_usd", "cost per case", cost.per_case_usd,
                           dollars(cost.per_case_usd) + lower_bound + flagged))
        out.append(Measure("latency_p95_s", "latency p95 (after warm-up)", board.latency.p95,
                           f"{board.latency.p95:.2f} s"))
    if board.candidate_uplift is not None:
        u = board.candidate_uplift
        out.append(Measure("candidate_uplift", "candidate uplift (selected minus first)", u.uplift,
                           f"{u.uplift:+.3f} over {u.runs} run(s), McNemar p {u.p_value:.3g}, "
                           f"+{u.extra_latency_ms:.1f} ms per run"))
    if board.determinism is not None and board.determinism.total_cases:
        d = board.determinism
        out.append(Measure("determinism", "determinism (cases identical across passes)", d.rate,
                           f"{percent(d.rate)} ({d.deterministic_cases} of {d.total_cases})"))
    return out


def _with_interval(rate: Rate, key: str, label: str) -> list[Measure]:
    """The rate as one row, its interval as two more numbers to plot (no rows of their own)."""
    return [Measure(key, label, rate.rate, rate_cell(rate)),
            Measure(f"{key}_low", "", rate.low, percent(rate.low)),
            Measure(f"{key}_high", "", rate.high, percent(rate.high))]


def headline_metrics(board: Board, mode: str) -> dict[str, float]:
    """The headline as numbers under stable keys (what Dagster plots, one chart per key). A rate's
    interval bounds are left out: there they would be two charts apart from their rate; the
    interval is in the headline's cell and drawn as a band in the history's charts."""
    return {m.key: m.value for m in headline(board, mode) if m.label}


def headline_rows(board: Board, mode: str) -> list[tuple[str, str]]:
    """The headline as (measure, formatted value) rows; interval bounds are in their rate's cell."""
    return [(m.label, m.cell) for m in headline(board, mode) if m.label]


def display_value(key: str, value: float) -> float:
    """A metadata number as a person reads it (the report's JSON keeps the value whole): dollars
    to four significant figures, seconds to two decimals, milliseconds to one, a share (in -1..1)
    to three decimals (a percentage to one), anything else to four significant figures. Still a
    number, so Dagster plots it."""
    import math

    if not math.isfinite(value):
        return value
    if key.endswith("_usd"):
        return float(f"{value:.4g}")
    if key.endswith(("_s", "_seconds")):
        return round(value, 2)
    if key.endswith("_ms"):
        return round(value, 1)
    if -1.0 <= value <= 1.0:
        return round(value, 3)
    return float(f"{value:.4g}")
