"""The eval report: one board per config, built from the case records a run produced.

A board turns case records into the numbers people read (accuracies with Wilson intervals,
pass^k, cost, latency, scorer tallies) while keeping the records themselves, so the gate and
the benchmark records can always go back to the case level instead of trusting a headline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from nl2sql_assets.evaluation.judging import stats
from nl2sql_assets.evaluation.judging.stats import rate_cell
from nl2sql_assets.evaluation.reporting.board import (
    Averages,
    Board,
    CaseDifferences,
    Comparison,
    ConfigHeadline,
    EvalReport,
    Latency,
)
from nl2sql_assets.evaluation.reporting.coverage import (
    coverage_line,
    domains_markdown,
)
from nl2sql_assets.evaluation.reporting.streamed import read_records
from nl2sql_assets.evaluation.reporting.tally import BoardTally
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    RunFacts,
    RunMeta,
)

# ---------------------------------------------------------------- building boards


def build_board(config: str, records: Iterable[CaseRecord], meta: RunMeta,
                scorer_classes: Mapping[str, type] | None = None, *, keep_records: bool = True) -> Board:
    """One config's board, in one pass over its records (``reporting.tally``). Skipped runs
    appear in the summary only; latency and cost per case are over the runs that ask a question
    (a policy probe asks none). A run the provider failed (an environment error) is counted apart
    and left out of every rate: it says nothing of the model. ``keep_records``: the board holds
    its records (``results``); a board built from a stream of them leaves it empty."""
    tally = BoardTally(config, meta, scorer_classes)
    kept: list[CaseRecord] = []
    for record in records:
        tally.add(record)
        if keep_records:
            kept.append(record)
    return tally.board(kept)


def _comparison(boards: Mapping[str, Board], runs: Mapping[str, Mapping[str, list[bool]]]) -> Comparison | None:
    """Configs side by side; ``runs``: each config's verdicts by case and pass."""
    if len(boards) < 2:
        return None
    names = list(boards)
    reference = names[0]
    headlines = {
        name: ConfigHeadline(
            overall=b.accuracy.overall, lenient=b.accuracy.lenient, execution=b.accuracy.execution,
            generated=b.accuracy.generated, pass_k=b.accuracy.pass_k.overall,
            cost_per_case_usd=b.cost.per_case_usd,
        )
        for name, b in boards.items()
    }
    ref_runs = runs[reference]
    differences = []
    for name in names[1:]:
        mine = runs[name]
        shared = [key for key in ref_runs if key in mine]
        here = sorted(k for k in shared if all(mine[k]) and not all(ref_runs[k]))
        there = sorted(k for k in shared if all(ref_runs[k]) and not all(mine[k]))
        differences.append(CaseDifferences(
            config=name, reference=reference, passes_only_here=here, passes_only_in_reference=there,
            p_value=float(stats.mcnemar_exact(len(there), len(here))),
        ))
    return Comparison(reference=reference, headlines=headlines, differences=differences)


def build_report(records: Iterable[CaseRecord], meta: RunMeta,
                 scorer_classes: Mapping[str, type] | None = None, *, keep_records: bool = True) -> EvalReport:
    """A board for each config (in ``meta.configs`` order, then any others as they come), in one
    pass over ``records`` (a list, or a stream read from a records file: ``keep_records=False``
    leaves the boards' ``results`` empty and holds no record). ``scorer_classes`` name scorers
    not registered in this process (a run's in-code scorers) so their summaries reach the boards."""
    tallies = {name: BoardTally(name, meta, scorer_classes) for name in meta.configs}
    kept: dict[str, list[CaseRecord]] = {name: [] for name in meta.configs}
    for record in records:
        tally = tallies.get(record.config)
        if tally is None:
            tally = tallies[record.config] = BoardTally(record.config, meta, scorer_classes)
        tally.add(record)
        if keep_records:
            kept.setdefault(record.config, []).append(record)
    boards = {name: tally.board(kept.get(name)) for name, tally in tallies.items()}
    runs = {name: tally.all_overall.by_key() for name, tally in tallies.items()}
    facts = {name: getattr(meta, name) for name in RunFacts.model_fields}
    return EvalReport(**facts, configs=boards, comparison=_comparison(boards, runs))


# ---------------------------------------------------------------- Markdown


def md_escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _averages_line(a: Averages) -> str:
    tokens = (f"{a.average_input_tokens:,.0f} input / {a.average_output_tokens:,.0f} output tokens"
              + (f" ({a.token_source})" if a.token_source else ""))
    service = f"{a.average_service_latency_ms:,.1f} ms" if a.average_service_latency_ms is not None else "n/a"
    oracle = f"{a.average_oracle_latency_ms:,.2f} ms" if a.average_oracle_latency_ms is not None else "n/a"
    return (f"On average per question run ({a.question_runs}): {tokens}; service latency {service}; "
            f"the gold SQL {oracle}.")


def comparison_markdown(report: EvalReport) -> str:
    """Every config's headline side by side: execution accuracy with its interval, lenient and
    overall accuracy, cost per case and median latency."""
    rows = []
    robust = {name: board.summaries().get("neighbour_match") for name, board in report.configs.items()}
    shown = any(summary is not None for summary in robust.values())
    for name, board in report.configs.items():
        a = board.accuracy
        on = robust[name]
        cell = (f" {on.robust.with_interval('-')} |" if on is not None else " n/a |") if shown else ""
        rows.append(f"| {md_escape(name)} | {a.execution.with_interval('-')} |{cell} "
                    f"{a.lenient.text()} | {a.overall.text()} | ${board.cost.per_case_usd:.4f} | "
                    f"{board.latency.p50:.2f}s |")
    head = " on neighbours (95% CI) |" if shown else ""
    return (f"| config | execution (95% CI) |{head} lenient | overall | cost/case | p50 |\n"
            f"|---|---|{'---|' if shown else ''}---|---|---|---|\n" + "\n".join(rows))


def _latency_line(lat: Latency) -> str:
    line = (f"Latency after warm-up: mean {lat.mean:.2f} s, p50 {lat.p50:.2f} s, p95 {lat.p95:.2f} s, "
            f"max {lat.max:.2f} s")
    if lat.warmup_runs:
        line += f" ({lat.warmup_runs} warm-up run(s) apart, the longest {lat.warmup_max:.2f} s)"
    if lat.oracle_p50 is not None:
        line += f"; the gold SQL alone: p50 {lat.oracle_p50 * 1000:.1f} ms"
    return line + "."


def to_markdown(board: Board) -> str:
    """A board as Markdown tables: accuracies with intervals, pass^k, cost, latency, failures."""
    acc = board.accuracy
    lines = [
        f"### {md_escape(board.config)}",
        "",
        "| measure | passed | total | rate (95% CI) |",
        "| --- | ---: | ---: | --- |",
    ]
    for label, rate in (
        ("overall", acc.overall), ("lenient", acc.lenient), ("execution", acc.execution),
        ("execution, lenient", acc.execution_lenient), ("generated", acc.generated),
        (f"pass^{acc.pass_k.k} overall", acc.pass_k.overall),
        (f"pass^{acc.pass_k.k} execution", acc.pass_k.execution),
        *((("execution success (SQL ran)", board.execution_success),) if board.execution_success else ()),
    ):
        lines.append(f"| {label} | {rate.passed} | {rate.total} | {rate_cell(rate)} |")
    total = board.summary.total
    lines += [
        "",
        f"Cases: {board.summary.line(total)} ({board.completed_cases} of {board.planned_cases} planned"
        + (f"; {board.stopped_by_cap} stopped by the cost cap in flight" if board.stopped_by_cap else "") + ")."
        + ("" if len(board.summary.roles) < 2 else " By role: " + "; ".join(
            f"{role} {board.summary.line(counts)}" for role, counts in board.summary.roles.items()) + "."),
        f"Cost per case: ${board.cost.per_case_usd:.4f} (total ${board.cost.total_usd:.4f}"
        + (f", {board.cost.unknown_cost_calls} calls not priced" if board.cost.unknown_cost_calls else "")
        + ").",
        _latency_line(board.latency),
        *((_averages_line(board.averages),) if board.averages is not None else ()),
    ]
    lines += [line for summary in board.summaries().values() if (line := summary.markdown())]
    if board.coverage is not None:
        lines.append(coverage_line(board.coverage))
    if board.candidate_uplift is not None:
        lines.append(board.candidate_uplift.markdown())
    if board.by_domain:
        lines += ["", domains_markdown(board.by_domain), ""]
    if board.determinism is not None:
        d = board.determinism
        lines.append(f"Determinism: {d.deterministic_cases} of {d.total_cases} cases identical across passes.")
    failures = [r for r in board.results if r.status in ("fail", "error")]
    if failures:
        lines += ["", "| case | role | pass | status | reason |", "| --- | --- | ---: | --- | --- |"]
        for r in failures:
            reason = r.reason or r.error_message or r.error_code or ""
            lines.append(f"| {md_escape(r.case_id)} | {md_escape(r.role)} | {r.pass_index} | {r.status} "
                         f"| {md_escape(reason)} |")
    return "\n".join(lines) + "\n"


def report_from_records(path: Path, meta: RunMeta, scorer_classes: Mapping[str, type] | None = None) -> EvalReport:
    """The report of a run whose records were streamed to ``path``: its boards built in one pass
    over the file, holding no record (the boards' ``results`` stay empty)."""
    return build_report(read_records(path), meta, scorer_classes, keep_records=False)
