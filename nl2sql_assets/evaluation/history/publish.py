"""Publish: record reports under ``benchmarks/`` and rebuild the pages made from every record.

The pages depend on the records alone (no clock, stable ordering, fixed number formats), so
the same records always give the same bytes and a test can check the committed pages.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.history.records import (
    BenchmarkRecord,
    iter_records,
    records_from_report,
    run_digest,
    series_key,
    write_record,
)
from nl2sql_assets.evaluation.judging.stats import Rate, percent, rate_cell
from nl2sql_assets.evaluation.reporting.board import EvalReport, atomic_write_text, load_report
from nl2sql_assets.evaluation.reporting.report import md_escape
from nl2sql_assets.evaluation.running.modes import get_mode

START = "<!-- results:start -->"
END = "<!-- results:end -->"
BENCHMARKS_MD = Path("docs") / "benchmarks.md"
README = Path("README.md")
PAGES_LOCK = Path("benchmarks") / ".publish.lock"


class PublishError(UserError, ValueError):
    """A report that cannot be read or was recorded already, or a README whose markers are broken."""


@dataclass
class PublishResult:
    """What publish did: the records it created, and which pages it rewrote or left as they were
    (a project without a README has no results block, so ``readme`` stays None)."""

    records: list[Path] = field(default_factory=list)
    benchmarks_md: Path | None = None
    readme: Path | None = None
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)


@dataclass
class _Row:
    path: Path
    record: BenchmarkRecord


@dataclass
class _Series:
    title: tuple[str, str, str, str]  # mode, database, config, suite digest(s)
    key: tuple
    rows: list[_Row] = field(default_factory=list)


def _load(item: Path | str | EvalReport) -> EvalReport:
    if isinstance(item, EvalReport):
        return item
    try:
        return load_report(item)
    except ValueError as exc:
        raise PublishError(str(exc)) from exc


def _reports(reports: Sequence[Path | str | EvalReport], from_dirs: Iterable[Path | str]) -> list[EvalReport]:
    loaded = [_load(item) for item in reports]
    for folder in from_dirs:
        folder = Path(folder)
        if not folder.is_dir():
            raise PublishError(f"{folder}: not a folder of reports")
        loaded.extend(_load(path) for path in sorted(folder.glob("*.json")))
    return loaded


def publish(reports: Sequence[Path | str | EvalReport] = (), *, note: str | None = None,
            from_dirs: Iterable[Path | str] = (), root: Path | str, allow_incomplete: bool = False) -> PublishResult:
    """Record every config of each report (and of each report JSON in ``from_dirs``) under
    ``root/benchmarks/``, then rewrite ``docs/benchmarks.md`` and the README's results block
    from every record there. A folder without a README (a demo project) gets no README.
    A run recorded already (the same ``run_digest``) is refused before anything is written, and
    so is an incomplete run (the provider failed some case runs) unless ``allow_incomplete``."""
    root = Path(root)
    result = PublishResult()
    loaded = _reports(reports, from_dirs)
    if not allow_incomplete:
        for report in loaded:
            if report.incomplete:
                kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(report.env_errors.items()))
                raise PublishError(
                    f"the mode {report.mode} run started {report.run_stamp.started_at:%Y-%m-%d %H:%M} UTC is "
                    f"incomplete (environment errors: {kinds}); not recorded unless asked "
                    "(allow_incomplete / --allow-incomplete); nothing was written")
    new = [record for report in loaded for record in records_from_report(report, note)]
    _refuse_duplicates(new, root)
    for record in new:
        result.records.append(write_record(record, root))
    # Rebuilt under a lock from every record on disk: whoever renders last saw every record
    # written before it took the lock, so concurrent publishes never drop one from the pages.
    with pages_lock(root):
        benchmarks_md, readme_text = render_pages(root)
        result.benchmarks_md = root / BENCHMARKS_MD
        pages = [(result.benchmarks_md, benchmarks_md)]
        if (root / README).is_file():
            result.readme = root / README
            pages.append((result.readme, readme_text))
        for path, text in pages:
            (result.written if _write_if_changed(path, text) else result.unchanged).append(path)
    return result


def _refuse_duplicates(new: list[BenchmarkRecord], root: Path) -> None:
    """A PublishError naming the record file when one of ``new`` records a run already recorded."""
    seen: dict[str, Path] = {}
    for path, record in iter_records(root / "benchmarks"):
        seen[record.run_digest or run_digest(record)] = path
    given: set[str] = set()
    for record in new:
        digest = record.run_digest or run_digest(record)
        run = (f"the run of config {record.config.name} (mode {record.kind}, started "
               f"{record.recorded_at:%Y-%m-%d %H:%M} UTC)")
        if digest in seen:
            where = seen[digest]
            shown = where.relative_to(root) if where.is_relative_to(root) else where
            raise PublishError(f"{run} is already recorded as {shown}; nothing was written")
        if digest in given:
            raise PublishError(f"{run} is given twice; nothing was written")
        given.add(digest)


@contextlib.contextmanager
def pages_lock(root: Path) -> Iterator[None]:
    """An exclusive lock (``benchmarks/.publish.lock``) held while the pages are rebuilt."""
    path = Path(root) / PAGES_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless the file holds it already; True when it was written."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    atomic_write_text(path, text)
    return True


# ---------------------------------------------------------------- rendering


def _series(root: Path) -> list[_Series]:
    groups: dict[tuple, _Series] = {}
    for path, record in iter_records(root / "benchmarks"):
        digests = ", ".join(sorted(d.digest[:12] for d in record.datasets))
        title = (record.kind, record.database_id, record.config.name, digests)
        key = (title, series_key(record))
        groups.setdefault(key, _Series(title=title, key=key)).rows.append(_Row(path, record))
    return [groups[k] for k in sorted(groups, key=repr)]


def _commit(record: BenchmarkRecord) -> str:
    short = record.git_commit[:7] if record.git_commit != "unknown" else "unknown"
    return short + ("+dirty" if record.git_dirty is True else "")


def _executes(record: BenchmarkRecord) -> bool:
    return get_mode(record.kind).executes


def _when(record: BenchmarkRecord) -> str:
    return record.recorded_at.strftime("%Y-%m-%d %H:%M")


def _pass_k(record: BenchmarkRecord) -> str:
    pk = record.metrics.pass_k
    rate = pk.execution if _executes(record) else pk.overall
    if pk.k < 2 or rate.total == 0:
        return "—"
    return f"pass^{pk.k} {percent(rate.rate)}"


def _series_heading(series: _Series) -> str:
    mode, database, config, digests = series.title
    return f"{mode} · {database} · {config} · suite {digests}"


def _series_detail(series: _Series) -> str:
    first = series.rows[0].record
    suites = ", ".join(f"`{d.name}` (`{d.digest[:12]}`)" for d in first.datasets)
    schemas = ", ".join(f"`{d.datasource_id}` {d.engine} (`{d.schema_fingerprint[:12]}`)"
                        for d in first.databases)
    parts = [f"Suite {suites}; schema {schemas}"]
    if get_mode(first.kind).uses_curated:
        parts.append(f"roles {', '.join(sorted(first.roles)) or 'none'}; "
                     f"curated answers {'on' if first.curated else 'off'}")
    if first.neighbours is not None:
        n = first.neighbours
        parts.append(f"graded on neighbour databases too: K {n.count}, seed {n.seed} ({n.candidates} candidates of "
                     f"at most {n.max_rows} rows a table, generator version {n.generator_version})")
    return "; ".join(parts) + "."


def _on_neighbours(record: BenchmarkRecord) -> str:
    """The neighbour-robust rate of a run graded on neighbours (the scorer's summary on its board)."""
    summary = record.scoreboard.summaries().get("neighbour_match")
    robust = getattr(summary, "robust", None)
    return rate_cell(robust) if robust is not None else "—"


def _recall(record: BenchmarkRecord) -> str:
    """What the scorers of a run that executes nothing say about it (recall, routing)."""
    parts = [cell for summary in record.scoreboard.summaries().values() if (cell := summary.cell())]
    return "; ".join(parts) or "—"


def _headline(record: BenchmarkRecord) -> Rate:
    """Execution accuracy; a mode that executes nothing (retrieval) is read by its cases' status."""
    m = record.metrics
    return m.execution if _executes(record) else m.accuracy_all_scorers


def _lenient(record: BenchmarkRecord) -> str:
    return rate_cell(record.metrics.execution_lenient) if _executes(record) else "—"


def render_benchmarks(root: Path) -> str:
    """docs/benchmarks.md: one table per series, oldest run first."""
    lines = [
        "# Benchmarks",
        "",
        "<!-- Written by `nl2sql-assets eval publish` from the records under benchmarks/; edits are overwritten. -->",
        "",
        "Every recorded run, grouped into series of comparable runs (the same mode, suite digest and "
        "schema fingerprint, and in mode full the same roles and curated setting). The headline is "
        "execution accuracy (result_match and outcome) with its 95% Wilson interval; lenient reads "
        "result_match leniently; pass^k counts the cases that passed in every one of k passes. Retrieval "
        "runs execute nothing, so their accuracy is the share of cases that passed retrieval recall "
        "(and routing), shown beside the mean recall.",
        "",
    ]
    all_series = _series(Path(root))
    if not all_series:
        lines += ["No runs recorded yet.", ""]
    for series in all_series:
        lines += [f"## {md_escape(_series_heading(series))}", "", md_escape(_series_detail(series)), ""]
        retrieval = not get_mode(series.title[0]).executes  # recall and routing instead of execution
        neighbours = any(row.record.neighbours is not None for row in series.rows)
        header = "| recorded (UTC) | " + ("accuracy" if retrieval else "execution accuracy")
        header += " (95% CI) | " + ("on neighbours (95% CI) | " if neighbours else "") + "lenient | pass^k | "
        header += ("recall / routing | " if retrieval else "") + "cost per case | latency p50 | commit | note | record |"
        lines.append(header)
        lines.append("| --- | --- | " + ("--- | " if neighbours else "") + "--- | --- | " + ("--- | " if retrieval else "")
                     + "---: | ---: | --- | --- | --- |")
        for row in series.rows:
            r, m = row.record, row.record.metrics
            cells = [
                _when(r), rate_cell(_headline(r)), *([_on_neighbours(r)] if neighbours else []), _lenient(r),
                _pass_k(r), *([_recall(r)] if retrieval else []),
                f"${m.dollars.per_case_usd:.4f}", f"{m.latency.p50:.2f} s", f"`{_commit(r)}`",
                md_escape(r.note or ""),
                f"[{row.path.name}](../{row.path.relative_to(root).as_posix()})",
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def render_results_block(root: Path) -> str:
    """The README block: the newest record of each series, markers included."""
    lines = [START, ""]
    all_series = _series(Path(root))
    if not all_series:
        lines.append("No runs recorded yet; see [docs/benchmarks.md](docs/benchmarks.md).")
    else:
        lines += [
            "| mode | database | config | suite | accuracy (95% CI) | lenient | cost per case "
            "| recorded (UTC) | commit |",
            "| --- | --- | --- | --- | --- | --- | ---: | --- | --- |",
        ]
        for series in all_series:
            r = series.rows[-1].record
            mode, database, config, digests = series.title
            lines.append(
                f"| {mode} | {md_escape(database)} | {md_escape(config)} | `{digests}` "
                f"| {rate_cell(_headline(r))} | {_lenient(r)} "
                f"| ${r.metrics.dollars.per_case_usd:.4f} | {_when(r)} | `{_commit(r)}` |")
        lines += ["", "Accuracy is execution accuracy (result_match and outcome); retrieval runs, which execute "
                  "nothing, count the cases that passed. Every run, series by series: "
                  "[docs/benchmarks.md](docs/benchmarks.md)."]
    lines += ["", END]
    return "\n".join(lines)


def replace_results_block(readme: str, block: str) -> str:
    """Swap what lies between the markers (markers included) for ``block``, touching nothing
    else; without markers, append the block under a "## Results" heading."""
    start, end = readme.find(START), readme.find(END)
    if start == -1 and end == -1:
        prefix = readme if readme.endswith("\n") or not readme else readme + "\n"
        return f"{prefix}{chr(10) if prefix else ''}## Results\n\n{block}\n"
    if start == -1 or end == -1 or end < start or readme.count(START) > 1 or readme.count(END) > 1:
        raise PublishError(f"README: the markers {START} and {END} must each appear once, in that order")
    return readme[:start] + block + readme[end + len(END):]


def render_pages(root: Path | str) -> tuple[str, str]:
    """What publish would write: docs/benchmarks.md and the README with its results block."""
    root = Path(root)
    readme_path = root / README
    readme = readme_path.read_text(encoding="utf-8") if readme_path.is_file() else ""
    return render_benchmarks(root), replace_results_block(readme, render_results_block(root))
