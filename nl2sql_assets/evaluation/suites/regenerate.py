"""regenerate: write a suite's expected rows from its reviewed SQL, through the datasource adapters.

Rows are never typed by hand: they come from the same adapter (read-only, the datasource's
row limit and timeout) that the engine's own queries run on, so gold and candidate rows are
normalised alike. Only ``rows`` and ``alt_rows`` change; the rest of each case, and the
file's comments, quoting and layout, stay exactly as they were: only the ``rows`` and
``alt_rows`` blocks whose values change are rewritten in the text, and any plain scalar
another YAML reader could misread is quoted (``portable``), its value unchanged. A case that cannot be
regenerated keeps its old rows and is reported; it never blocks the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nl2sql_assets import paths
from nl2sql_assets.atomic import atomic_write, remove_stale_temps
from nl2sql_assets.datasources.base import DatasourceAdapter, DatasourceError
from nl2sql_assets.evaluation.suites.loader import SuiteError, parse_suite
from nl2sql_assets.evaluation.suites.model import EvalCase, same_rows
from nl2sql_assets.evaluation.suites.patch import PatchError, patch_rows
from nl2sql_assets.evaluation.suites.portable import portable_text
from nl2sql_assets.evaluation.suites.writer import _same, dump_suite
from nl2sql_assets.yamlio import YamlFileError, dump_yaml, load_yaml_text

Rows = list[dict[str, Any]]


def distinct_column_names(columns: list[str]) -> list[str]:
    """The result's column names as row keys: a name met again gets ``(2)``, ``(3)``... after it
    (``T1.id, T2.id`` is ``id`` and ``id (2)``). Rows are compared by position, so the keys only
    have to keep each column, in order."""
    taken = set(columns)
    seen: dict[str, int] = {}
    out = []
    for name in columns:
        count = seen.get(name, 0) + 1
        seen[name] = count
        if count == 1:
            out.append(name)
            continue
        n = count
        while f"{name} ({n})" in taken:
            n += 1
        out.append(f"{name} ({n})")
        taken.add(out[-1])
    return out


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
    which case the file was not touched; ``requoted`` counts the plain scalars quoted so that
    every YAML reader reads them alike (see ``portable``)."""

    model_config = ConfigDict(extra="forbid")

    path: Path
    written: int = 0
    cases: int = 0
    failed: list[RegenerateFailure] = Field(default_factory=list)
    unchanged: bool = True
    requoted: int = 0


def regenerate(path: str | Path, registry: AdapterSource, *, allow_packaged: bool = False,
               include_drafts: bool = False) -> RegenerateReport:
    """Run every approved case's ``sql`` and ``alt_sql`` and write their rows into the suite at ``path``.

    ``include_drafts`` also writes the rows of draft cases (a benchmark import: its drafts are
    graded against their benchmark's gold SQL before anyone reviews them).

    A suite the package ships is refused (``PackagedSuiteError``) unless ``allow_packaged``. A
    file that is not a suite at all (bad YAML, no list of cases) raises ``SuiteError`` before
    anything runs; a case that is invalid on its own, whose SQL fails, or whose rows disagree
    with its paraphrase group is listed in ``failed`` and never blocks the others. Only the
    ``rows`` / ``alt_rows`` blocks that change are rewritten (see ``patch``)."""
    path = Path(path)
    if paths.is_packaged(path) and not allow_packaged:
        raise PackagedSuiteError(
            f"{path}: this suite ships with the package and is not yours to rewrite; copy it into "
            "your project (nl2sql-assets init --demo DIR) and regenerate the copy, or pass "
            "allow_packaged=True (--allow-packaged) from a checkout"
        )
    try:
        before = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite file not found") from None
    text = before.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    raw_cases = _raw_cases(text, path)
    remove_stale_temps(path.parent)  # left by an earlier run that was killed mid-write

    report = RegenerateReport(path=path)
    valid: dict[int, EvalCase] = {}
    for index, raw in enumerate(raw_cases):
        case, problem = _case(raw, index, path, text)
        if case is None:
            report.failed.append(RegenerateFailure(case_id=_label(raw, index), reason=problem))
            continue
        valid[index] = case
    results, failed = rows_of_cases(valid, registry, include_drafts=include_drafts)
    report.failed.extend(failed)
    order = {id(f): n for n, f in enumerate(report.failed)}
    ids = [_label(raw, i) for i, raw in enumerate(raw_cases)]
    report.failed.sort(key=lambda f: (ids.index(f.case_id) if f.case_id in ids else len(ids), order[id(f)]))

    updates: dict[int, dict[str, list[Any]]] = {}
    for index, (rows, alt_rows) in results.items():
        report.cases += 1
        report.written += 1 + len(alt_rows)
        raw = raw_cases[index]
        change: dict[str, list[Any]] = {}
        if not _same(raw.get("rows"), rows):
            change["rows"] = rows
        if not _same(raw.get("alt_rows", []), alt_rows):
            change["alt_rows"] = alt_rows
        if change:
            updates[index] = change
    after_text, report.requoted = _portable(_patched(text, raw_cases, updates, valid, path), path)
    after = after_text.encode("utf-8")
    report.unchanged = _lf(after) == _lf(before.removeprefix(b"\xef\xbb\xbf"))
    if not report.unchanged:
        atomic_write(path, after)
    return report


def rows_of_cases(cases: dict[int, EvalCase], registry: AdapterSource, *, include_drafts: bool = False
                  ) -> tuple[dict[int, tuple[Rows, list[Rows]]], list[RegenerateFailure]]:
    """Each approved answer case's rows and alternative rows (drafts too with ``include_drafts``),
    by its index, and the cases that could not have theirs (SQL that fails, a result cut at the
    row limit, rows that disagree with the case's paraphrase group), in case order."""
    results: dict[int, tuple[Rows, list[Rows]]] = {}
    failed: list[RegenerateFailure] = []
    for index, case in cases.items():
        wanted = case.status == "approved" or (include_drafts and case.status == "draft")
        if not wanted or case.kind != "answer" or case.sql is None:
            continue
        outcome = _run_case(case, registry)
        if isinstance(outcome, str):
            failed.append(RegenerateFailure(case_id=case.id, reason=outcome))
            continue
        results[index] = outcome
    for index, reason in paraphrase_conflicts(cases, results).items():
        failed.append(RegenerateFailure(case_id=cases[index].id, reason=reason))
        del results[index]
    return results, failed


def _raw_cases(text: str, path: Path) -> list[Any]:
    """The file's list of cases as plain data; a file that is not a suite is a SuiteError."""
    try:
        data = load_yaml_text(text, path)
    except YamlFileError as exc:
        raise SuiteError(str(exc)) from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(cases, list):
        parse_suite(text, path)  # raises the loader's own message for what is wrong
        raise SuiteError(f"{path}: a suite is a mapping with a list of cases")
    return cases


def _label(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str | int) and str(raw.get("id")):
        return str(raw["id"])
    return f"cases[{index}]"


def _case(raw: Any, index: int, path: Path, text: str) -> tuple[EvalCase | None, str]:
    """The case, or why it cannot be read (the loader's messages for it, without the file name)."""
    if not isinstance(raw, dict):
        return None, f"not a case: a mapping of fields, not a {type(raw).__name__}"
    try:
        return EvalCase.model_validate(raw, context={"allow_stale_rows": True}), ""
    except ValidationError:
        pass
    try:  # the loader names the field and the line: reuse its words for this one case
        parse_suite(dump_yaml({"version": 1, "cases": [raw]}), path, allow_stale_rows=True)
    except SuiteError as exc:
        messages = [p.split(": ", 1)[1] if ": " in p else p for p in exc.problems]
        return None, "not a valid case: " + "; ".join(m.removeprefix(f"case {_label(raw, index)}: ") for m in messages)
    return None, "not a valid case"


def paraphrase_conflicts(cases: dict[int, EvalCase], results: dict[int, tuple[Rows, list[Rows]]]) -> dict[int, str]:
    """Cases of one paraphrase group must return the same rows (values in column order; row
    order counts only when both say it matters). Each case whose new rows differ from the first
    of its group's is named here with the case it differs from."""
    first: dict[str, tuple[int, Rows]] = {}
    conflicts: dict[int, str] = {}
    for index, case in cases.items():
        group = case.paraphrase_group
        rows = results[index][0] if index in results else case.rows
        if group is None or rows is None:
            continue
        if group not in first:
            first[group] = (index, rows)
            continue
        ref_index, ref_rows = first[group]
        ref = cases[ref_index]
        if not same_rows(ref_rows, rows, ref.order_matters and case.order_matters) and index in results:
            conflicts[index] = (f"paraphrase_group {group}: its rows differ from those of case {ref.id} "
                                "(cases of one group ask the same thing and return the same rows)")
    return conflicts


def _patched(text: str, raw_cases: list[Any], updates: dict[int, dict[str, list[Any]]],
             valid: dict[int, EvalCase], path: Path) -> str:
    """The text with the updates patched in; when the file's own layout cannot take a patch,
    the canonical layout (only possible when every case is valid)."""
    if not updates:
        return text
    expected = [dict(raw, **updates.get(i, {})) if isinstance(raw, dict) else raw for i, raw in enumerate(raw_cases)]
    for case in expected:
        if isinstance(case, dict) and case.get("alt_rows") == []:
            del case["alt_rows"]
    try:
        out = patch_rows(text, updates)
        loaded = load_yaml_text(out, path)
        if isinstance(loaded, dict) and _same_values(loaded.get("cases"), expected):
            return out
    except (PatchError, YamlFileError):
        pass
    if len(valid) != len(raw_cases):
        raise SuiteError(f"{path}: cannot write the new rows into this file's layout, and it holds invalid cases")
    suite = parse_suite(text, path, allow_stale_rows=True)
    cases = [c.model_copy(update=updates.get(i, {})) for i, c in enumerate(suite.cases)]
    return dump_suite(suite.model_copy(update={"cases": cases}))


def _portable(text: str, path: Path) -> tuple[str, int]:
    """The text with every scalar another YAML reader could misread quoted as the writer quotes it
    now (a file written in the old style is rewritten once, its values unchanged)."""
    try:
        return portable_text(text)
    except PatchError as exc:
        raise SuiteError(f"{path}: {exc}") from None


def _same_values(a: Any, b: Any) -> bool:
    """Equal values of the same types, mappings compared whatever their key order."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_values(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b, strict=True))
    return _same(a, b)


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
        names = distinct_column_names(out.columns)
        results.append([dict(zip(names, row, strict=True)) for row in out.rows])
    if reasons:
        return "; ".join(reasons)
    return results[0], results[1:]
