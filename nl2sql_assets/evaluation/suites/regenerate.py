"""regenerate: write a suite's expected rows from its reviewed SQL, through the datasource adapters.

Rows are never typed by hand: they come from the same adapter (read-only, the datasource's
row limit and timeout) that the engine's own queries run on, so gold and candidate rows are
normalised alike. Only ``rows`` and ``alt_rows`` change; the rest of each case, and the
file's leading comment block, are written back as they were, in the canonical layout of
``write_suite``. A case that cannot be regenerated keeps its old rows and is reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets import paths
from nl2sql_assets.atomic import atomic_write, remove_stale_temps
from nl2sql_assets.datasources.base import DatasourceAdapter, DatasourceError
from nl2sql_assets.evaluation.suites.loader import SuiteError, load_suite
from nl2sql_assets.evaluation.suites.model import EvalCase
from nl2sql_assets.evaluation.suites.writer import dump_suite

Rows = list[dict[str, Any]]


class AdapterSource(Protocol):
    """What regenerate needs of a registry: the adapter for a datasource id."""

    def get(self, datasource_id: str) -> DatasourceAdapter | None: ...


class PackagedSuiteError(SuiteError):
    """A suite the package ships was given to regenerate without ``allow_packaged``."""


class RegenerateFailure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    case_id: str
    reason: str


class RegenerateReport(BaseModel):
    """What one regenerate did.

    ``cases`` counts the cases whose rows were regenerated and ``written`` their result sets
    (``sql`` plus each ``alt_sql``), whether or not the values differ from the file's;
    ``unchanged`` is true when the file's bytes (line endings aside) did not change, in
    which case the file was not touched."""

    model_config = ConfigDict(extra="forbid")

    path: Path
    written: int = 0
    cases: int = 0
    failed: list[RegenerateFailure] = Field(default_factory=list)
    unchanged: bool = True


def regenerate(path: str | Path, registry: AdapterSource, *, allow_packaged: bool = False) -> RegenerateReport:
    """Run every approved case's ``sql`` and ``alt_sql`` and write their rows into the suite at ``path``.

    A suite the package ships is refused (``PackagedSuiteError``) unless ``allow_packaged``;
    an invalid suite raises ``SuiteError`` before anything runs."""
    path = Path(path)
    if paths.is_packaged(path) and not allow_packaged:
        raise PackagedSuiteError(
            f"{path}: this suite ships with the package and is not yours to rewrite; copy it into "
            "your project (nl2sql-assets init --demo DIR) and regenerate the copy, or pass "
            "allow_packaged=True (--allow-packaged) from a checkout"
        )
    suite = load_suite(path, allow_stale_rows=True)
    before = path.read_bytes()
    remove_stale_temps(path.parent)  # left by an earlier run that was killed mid-write

    report = RegenerateReport(path=path)
    cases: list[EvalCase] = []
    for case in suite.cases:
        if case.status != "approved" or case.kind != "answer" or case.sql is None:
            cases.append(case)
            continue
        outcome = _run_case(case, registry)
        if isinstance(outcome, str):
            report.failed.append(RegenerateFailure(case_id=case.id, reason=outcome))
            cases.append(case)
            continue
        rows, alt_rows = outcome
        cases.append(case.model_copy(update={"rows": rows, "alt_rows": alt_rows}))
        report.cases += 1
        report.written += 1 + len(alt_rows)

    after = dump_suite(suite.model_copy(update={"cases": cases})).encode("utf-8")
    report.unchanged = _lf(after) == _lf(before)
    if not report.unchanged:
        atomic_write(path, after)
    return report


def _lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _run_case(case: EvalCase, registry: AdapterSource) -> tuple[Rows, list[Rows]] | str:
    """The case's rows and alternative rows, or why they cannot be written (every reason found)."""
    if len(case.datasources) != 1:
        return (
            f"the case names {len(case.datasources)} datasources ({', '.join(case.datasources)}); "
            "a case with sql names exactly one"
        )
    datasource = case.datasources[0]
    try:
        adapter = registry.get(datasource)
    except Exception as exc:  # an unknown id or a database that cannot be opened: this case only
        return f"datasource {datasource!r} is not available: {exc}"
    if adapter is None:
        return f"datasource {datasource!r} is not available: unknown datasource"
    assert case.sql is not None
    statements = [("sql", case.sql)] + [(f"alt_sql[{i}]", sql) for i, sql in enumerate(case.alt_sql)]
    reasons: list[str] = []
    results: list[Rows] = []
    for label, sql in statements:
        try:
            out = adapter.execute(sql)
        except DatasourceError as exc:
            reasons.append(f"{label} failed: {exc}")
            continue
        if out.truncated:
            reasons.append(
                f"{label}: the result was cut at the datasource's row limit ({out.row_limit} rows); "
                "narrow the query or raise row_limit"
            )
            continue
        doubled = sorted({c for c in out.columns if out.columns.count(c) > 1})
        if doubled:
            reasons.append(
                f"{label}: the result has duplicate column names {doubled}, which a row "
                "mapping cannot hold; give each column a distinct alias"
            )
            continue
        results.append([dict(zip(out.columns, row, strict=True)) for row in out.rows])
    if reasons:
        return "; ".join(reasons)
    return results[0], results[1:]
