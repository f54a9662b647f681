"""The results dashboard's data: every run the project keeps (the benchmark records under
``benchmarks/`` and the warehouse's stored scoreboards), reduced to what a page across runs draws
and filters.

Built from the same typed case records the reports and the gate read, by the gate's own verdicts:
a case passes a run when every pass of it passed (``reporting.gate.key_passes``), on executed
results where the mode executes SQL and on the case's status where it does not; leniently on the
lenient verdict; on neighbours where a kept neighbour did not overturn the pass. Each run keeps one
character per case of the page (``p`` pass, ``f`` fail, ``.`` not run), so a page can recount any
filter (suite, mode, config, role, tag) and pair any two runs case by case without the records.
Texts repeat across runs (reasons, predicted SQL): each is kept once and referred to by number.
Deterministic: the same inputs give the same data, in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.history.records import BenchmarkRecord
from nl2sql_assets.evaluation.reporting.board import Board, EvalReport
from nl2sql_assets.evaluation.running.results import CaseRecord, NeighbourRun

NOT_RUN = "."


class DashCase(StrictModel):
    """One case under one role: what a row of the page's tables shows and its filters read."""

    suite: str
    case_id: str
    role: str
    domain: str | None = None
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    question: str | None = None
    gold_sql: str | None = None

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.case_id}@{self.role}"


class DashRun(StrictModel):
    """One run of one suite under one config: its verdicts per case of the page and its costs."""

    id: str
    source: Literal["record", "warehouse"]
    where: str  # the file it was read from, relative to the folder it was found in
    suite: str
    config: str
    mode: str
    recorded_at: datetime
    note: str | None = None
    passes: int = 1
    neighbours: str | None = None  # "K 10, seed 1" when the run was graded on neighbours too
    strict: str  # per case of the page: p, f or . (not run)
    lenient: str | None = None  # None where the mode executes nothing (no lenient reading)
    robust: str | None = None  # on the neighbours too; None without neighbours
    reasons: list[int]  # per case of the page: a reason's number in DashboardData.reasons, -1 none
    #: per case of the page: how its rows differed (the comparator's words), or why a neighbour
    #: overturned it, as a number in DashboardData.reasons; -1 none
    differences: list[int] = Field(default_factory=list)
    sql: list[int]  # per case of the page: the predicted SQL's number in DashboardData.sql, -1 none
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # model calls that could not be priced: the cost is a lower bound
    case_runs: int = 0
    latency_p95_s: float | None = None


class DashFlag(StrictModel):
    """A gold audit finding on one case (``neighbours.audit``), as a run on neighbours carries it."""

    suite: str
    case_id: str
    kind: str
    message: str


class DashboardData(StrictModel):
    cases: list[DashCase]
    audit: list[DashFlag] = Field(default_factory=list)
    runs: list[DashRun]
    reasons: list[str]
    sql: list[str]
    sources: list[str]  # the folders read, as given


@dataclass(frozen=True)
class SourcedRun:
    """A stored run (a benchmark record, or a stored scoreboard) and where it came from."""

    source: Literal["record", "warehouse"]
    where: str
    mode: str
    finished_at: datetime
    passes: int
    neighbours: NeighbourRun | None
    boards: dict[str, Board]  # config -> its board
    note: str | None = None
    audit: tuple[DashFlag, ...] = ()

    @classmethod
    def of_record(cls, record: BenchmarkRecord, where: str) -> SourcedRun:
        audit = tuple(DashFlag(suite=f.suite, case_id=f.case, kind=f.kind, message=f.message)
                      for f in record.gold_audit)
        return cls("record", where, record.kind, record.recorded_at, record.passes, record.neighbours,
                   {record.config.name: record.scoreboard}, record.note, audit=audit)

    @classmethod
    def of_report(cls, report: EvalReport, where: str) -> SourcedRun:
        audit = tuple(DashFlag(suite=f.suite, case_id=f.case, kind=f.kind, message=f.message)
                      for f in report.gold_audit)
        return cls("warehouse", where, report.mode, report.run_stamp.finished_at, report.passes,
                   report.neighbours, dict(report.configs), audit=audit)


def read_sources(records: Iterable[Path] = (), warehouses: Iterable[Path] = ()) -> Iterator[SourcedRun]:
    """Every benchmark record below each ``records`` folder and every stored scoreboard of each
    warehouse folder (``reports/<suite>/<config>.json``)."""
    from nl2sql_assets.evaluation.history.records import iter_records
    from nl2sql_assets.evaluation.reporting.board import load_report

    for folder in records:
        for path, record in iter_records(folder):
            yield SourcedRun.of_record(record, path.relative_to(folder).as_posix())
    for root in warehouses:
        reports = root / "reports"
        for path in sorted(reports.glob("*/*.json")) if reports.is_dir() else []:
            if not path.stem.startswith("_"):
                yield SourcedRun.of_report(load_report(path), path.relative_to(root).as_posix())


def dashboard_data(sources: Iterable[SourcedRun], questions: dict[str, dict[str, tuple[str, str | None]]]
                   | None = None, folders: Iterable[str] = (), only_suite: str | None = None) -> DashboardData:
    """The page's data from the stored runs: one run per (stored run, config, suite), oldest first;
    the cases every run ran, ordered by suite, case and role. ``questions``: per suite, per case id,
    its question and gold SQL (from the suite files, where they are at hand). ``only_suite``: that
    suite's runs, cases and audit findings only."""
    from nl2sql_assets.evaluation.judging.stats import percentile
    from nl2sql_assets.evaluation.reporting.gate import VERDICTS, key_passes, on_neighbours
    from nl2sql_assets.evaluation.running.modes import get_mode

    runs: list[tuple[SourcedRun, str, str, list[CaseRecord]]] = []
    cases: dict[str, DashCase] = {}
    flags: dict[tuple[str, str, str, str], DashFlag] = {}
    for item in sources:
        for flag in item.audit:
            if only_suite in (None, flag.suite):
                flags.setdefault((flag.suite, flag.case_id, flag.kind, flag.message), flag)
        for config, board in item.boards.items():
            for suite, results in _by_suite(board.results).items():
                if only_suite not in (None, suite):
                    continue
                runs.append((item, config, suite, results))
                for record in results:
                    case = DashCase(suite=suite, case_id=record.case_id, role=record.role, domain=record.domain,
                                    difficulty=record.difficulty, tags=sorted(record.tags))
                    cases.setdefault(case.key, case)
    ordered = sorted(cases.values(), key=lambda c: (c.suite, c.case_id, c.role))
    for case in ordered:
        asked = (questions or {}).get(case.suite, {}).get(case.case_id)
        if asked is not None:
            case.question, case.gold_sql = asked
    index = {case.key: n for n, case in enumerate(ordered)}
    texts = _Interned()
    sql = _Interned()
    out: list[DashRun] = []
    runs.sort(key=lambda r: (r[0].finished_at, r[2], r[1], r[0].where))
    for item, config, suite, results in runs:
        executes = get_mode(item.mode).executes
        strict_verdict = VERDICTS["execution" if executes else "status"]
        strict = key_passes(results, strict_verdict)
        lenient = key_passes(results, _lenient) if executes else None
        robust = key_passes(results, on_neighbours(strict_verdict)) if item.neighbours else None
        reasons = [-1] * len(ordered)
        differences = [-1] * len(ordered)
        predicted = [-1] * len(ordered)
        for record in sorted(results, key=lambda r: r.pass_index):
            n = index[f"{suite}/{record.case_id}@{record.role}"]
            if reasons[n] == -1 and record.status != "pass" and record.reason:
                reasons[n] = texts.number(record.reason)
            if predicted[n] == -1 and record.sql:
                predicted[n] = sql.number(record.sql)
            difference = _difference(record)
            if differences[n] == -1 and difference:
                differences[n] = texts.number(difference)
        cost = sum(r.cost_usd or 0.0 for r in results)
        latencies = [r.latency_s for r in results if not r.warmup]
        out.append(DashRun(
            id=f"{item.source}:{item.where}#{suite}/{config}", source=item.source, where=item.where,
            suite=suite, config=config, mode=item.mode, recorded_at=item.finished_at,
            note=item.note, passes=item.passes,
            neighbours=(f"K {item.neighbours.count}, seed {item.neighbours.seed}"
                        + (f", witness search {item.neighbours.witness}" if item.neighbours.witness else "")
                        if item.neighbours else None),
            strict=_outcomes(strict, suite, ordered, index),
            lenient=_outcomes(lenient, suite, ordered, index) if lenient is not None else None,
            robust=_outcomes(robust, suite, ordered, index) if robust is not None else None,
            reasons=reasons, differences=differences, sql=predicted, cost_usd=round(cost, 6),
            unpriced_calls=sum(r.unknown_cost_calls for r in results), case_runs=len(results),
            latency_p95_s=round(percentile(latencies, 95), 4) if latencies else None))
    return DashboardData(cases=ordered, audit=[flags[k] for k in sorted(flags)], runs=out, reasons=texts.items,
                         sql=sql.items, sources=list(folders))


def _difference(record: CaseRecord) -> str | None:
    """How a case run's rows differed from the gold (the comparator's message), or why a kept
    neighbour or a witness the search found overturned its pass (the database and the message)."""
    from nl2sql_assets.evaluation.running.scorers import NEIGHBOUR_SCORER

    robust = record.scores.get(NEIGHBOUR_SCORER)
    if robust is not None and robust.passed is False:
        where = robust.detail.get("neighbour")
        if robust.detail.get("reason") == "fails_on_witness":
            return f"on a witness database the search built ({where}): {robust.detail.get('message', '')}"
        return f"on neighbour {where}: {robust.detail.get('message', '')}" if where else robust.detail.get("message")
    match = record.scores.get("result_match")
    if match is not None and match.passed is False:
        return match.detail.get("message") or None
    return None


def _lenient(record: CaseRecord) -> str | None:
    if record.kind == "probe":
        return record.status
    return record.lenient_status if record.lenient_status is not None else record.execution_status


def _by_suite(results: list[CaseRecord]) -> dict[str, list[CaseRecord]]:
    out: dict[str, list[CaseRecord]] = {}
    for record in results:
        out.setdefault(record.suite, []).append(record)
    return dict(sorted(out.items()))


def _outcomes(passes: dict[str, bool], suite: str, cases: list[DashCase], index: dict[str, int]) -> str:
    """One character per case of the page: ``passes`` is keyed as ``reporting.case_key`` (case@role)."""
    chars = [NOT_RUN] * len(cases)
    for key, passed in passes.items():
        chars[index[f"{suite}/{key}"]] = "p" if passed else "f"
    return "".join(chars)


class _Interned:
    """Texts kept once, in first-seen order, each referred to by its number."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._numbers: dict[str, int] = {}

    def number(self, text: str) -> int:
        if text not in self._numbers:
            self._numbers[text] = len(self.items)
            self.items.append(text)
        return self._numbers[text]


def suite_questions(paths: Iterable[Path]) -> dict[str, dict[str, tuple[str, str | None]]]:
    """Per suite (its file's stem), per case id: the question and the gold SQL, for the page's
    case details. A suite that cannot be read is left out (its cases show ids only)."""
    from nl2sql_assets.evaluation.suites import load_suite

    out: dict[str, dict[str, tuple[str, str | None]]] = {}
    for path in paths:
        try:
            suite = load_suite(path)
        except Exception:  # a damaged suite costs the page its questions, not the page
            continue
        out[Path(path).stem] = {case.id: (case.question, case.sql) for case in suite.cases}
    return out


def build_dashboard(records: Iterable[Path], warehouses: Iterable[Path], suites: Iterable[Path] = (),
                    only_suite: str | None = None, root: Path | None = None) -> DashboardData:
    """The page's data from record folders and warehouses (``only_suite``: one suite's runs). The
    folders are named relative to ``root`` (the project) where they lie in it, so the same runs
    give the same page in any checkout."""
    records, warehouses = list(records), list(warehouses)
    return dashboard_data(read_sources(records, warehouses), suite_questions(suites),
                          folders=[_shown(p, root) for p in [*records, *warehouses]], only_suite=only_suite)


def _shown(folder: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return Path(folder).resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return str(folder)


# ---------------------------------------------------------------- the page

PAGE_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.filters label { margin-right: 1em; } table { border-collapse: collapse; }
td, th { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: 0.4em; white-space: pre-wrap; margin: 0.2em 0 0.6em; }
details.case { margin: 0.2em 0; } .note { color: #555; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
"""


def render_html(data: DashboardData, title: str = "nl2sql-assets results") -> str:
    """One self-contained page: the Plotly bundle and the data inlined, nothing fetched. The same
    data gives the same bytes."""
    from html import escape

    import plotly.offline

    script = (Path(__file__).with_name("dashboard_page.js")).read_text(encoding="utf-8")
    payload = data.model_dump_json().replace("</", "<\\/")
    sources = ", ".join(data.sources) or "(given runs)"
    filters = "".join(f'<label>{name} <select id="filter-{name}"></select></label>'
                      for name in ("suite", "mode", "config", "role", "tag"))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:">
<style>{PAGE_STYLE}</style></head>
<body>
<script>window.blockedRequests = []; document.addEventListener("securitypolicyviolation", (e) => window.blockedRequests.push(e.blockedURI));</script>
<h1>{escape(title)}</h1>
<p class="note">From {escape(sources)}: {len(data.runs)} run(s) of {len({(r.suite, r.config) for r in data.runs})} suite and config pair(s), {len(data.cases)} case(s). A case passes a run when every pass of it passed, on executed results where the mode executes SQL (else its status); the band is the 95% Wilson interval.</p>
<div class="filters">{filters}</div>
<p id="runs-count"></p>
<h2>Accuracy over time</h2><p id="time-count" class="note"></p><div id="time-chart"></div>
<h2>Two runs side by side</h2>
<p><label>run A <select id="run-a"></select></label> <label>run B <select id="run-b"></select></label></p>
<p id="pair-summary"></p>
<div class="pair"><div><h3>pass to fail (<span id="pair-lost-count"></span>)</h3><div id="pair-lost"></div></div>
<div><h3>fail to pass (<span id="pair-gained-count"></span>)</h3><div id="pair-gained"></div></div></div>
<h2>Cost against accuracy</h2><table id="cost-table"></table><div id="cost-chart"></div>
<h2>Failure reasons (run B)</h2><p id="reasons-count" class="note"></p>
<div class="pair"><div id="reasons-domain"></div><div id="reasons-difficulty"></div></div>
<h2>Neighbour overturns</h2><p id="neighbours-count" class="note"></p><table id="neighbours-table"></table>
<h2>Gold audit</h2><p id="audit-count" class="note"></p><table id="audit-table"></table>
<script>{plotly.offline.get_plotlyjs()}</script>
<script type="application/json" id="dashboard-data">{payload}</script>
<script>{script}</script>
</body></html>
"""
