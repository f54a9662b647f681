"""The gold audit: gold SQL that tests less than it seems, found by the neighbours' machinery.

Per case of a suite (answer cases with gold SQL on one datasource), a flag for each of:

- ``order_sensitive``: the gold leans on the order of equal rows, on the original or a kept
  neighbour: its sort keys tie across its LIMIT (or, where the case counts the order, between two
  rows it returns), or its result changes when the rows are read in the other physical order;
- ``empty_on_original``: the gold returns no row on the original database (any empty answer passes);
- ``slow`` / ``timeout``: the gold takes far longer than the suite's median (``SLOW_FACTOR`` times
  it, and at least ``SLOW_FLOOR_S``), or runs past the datasource's timeout;
- ``same_everywhere``: the gold's result is the same on the original and on every candidate
  neighbour (the case tests nothing of the data);
- ``alternative_disagrees``: a reviewed alternative's rows differ from the gold's on a kept
  neighbour (it may answer a different question);
- ``fails_on_neighbour``: the gold itself fails on a kept neighbour (that database tells nothing of
  the case);
- ``gold_unparsable``: the product's SQL reader (sqlglot, in the datasource's dialect) cannot read
  the gold, so no near-miss mutant, literal or tie probe is made of it (the database may still run
  it: then it is graded as usual);
- ``gold_fails``: the database rejects the gold on the original: a prediction is never graded
  against it (``eval grade`` reports such a case as a gold error, in no rate).

Every message starts with the suite file, the line of the case's ``sql`` and the case.

The last three come from the set's sidecar (``store``); the others run the gold here.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.config import NeighbourSettings, ProjectConfig
from nl2sql_assets.evaluation.judging.comparison import compare_results
from nl2sql_assets.evaluation.neighbours.formats import FORMATS, format_of, side_by_side
from nl2sql_assets.evaluation.neighbours.store import (
    KeptSet,
    gold_query,
    has_neighbours,
    neighbour_cases,
    project_sets,
    project_suites,
)
from nl2sql_assets.evaluation.neighbours.ties import tie_probe, unbroken_tie

#: a gold this many times slower than the suite's median is flagged ...
SLOW_FACTOR = 10.0
#: ... when it also takes at least this long (a 2 ms query beside 0.1 ms ones is no finding)
SLOW_FLOOR_S = 0.05
#: times each gold runs on the original; the fastest counts (a cold cache is not the query's)
TIMED_RUNS = 2

FlagKind = Literal["gold_unparsable", "gold_fails", "order_sensitive", "empty_on_original", "slow", "timeout",
                   "same_everywhere", "alternative_disagrees", "fails_on_neighbour"]
#: every flag, in the order the audit lists them
KINDS: tuple[FlagKind, ...] = ("gold_unparsable", "gold_fails", "order_sensitive", "empty_on_original", "timeout",
                               "slow", "same_everywhere", "alternative_disagrees", "fails_on_neighbour")


class AuditFlag(BaseModel):
    """One finding on one case's gold."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    case: str
    kind: FlagKind
    message: str
    #: the database the finding shows on: "original" or a kept neighbour's file
    where: str | None = None
    #: ``FILE, line N: case ID``: where the case's gold SQL is written
    location: str | None = None


class GoldAudit(BaseModel):
    """A suite's gold audit: the flags, their counts, the gold's times and the set it used."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    cases: int
    flags: list[AuditFlag] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    median_ms: float | None = None
    #: each datasource's kept set (its folder), as the flags that name a neighbour mean it
    sets: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0

    def for_cases(self, ids: Iterable[str]) -> list[AuditFlag]:
        wanted = set(ids)
        return [f for f in self.flags if f.case in wanted]


def slow_flags(suite: str, times: dict[str, float | None], *, factor: float = SLOW_FACTOR,
               floor_s: float = SLOW_FLOOR_S) -> tuple[list[AuditFlag], float | None]:
    """The ``slow`` and ``timeout`` flags of a suite's gold times (case -> seconds; None: it ran
    past its timeout), and the median of the times that finished."""
    finished = [t for t in times.values() if t is not None]
    median = statistics.median(finished) if finished else None
    flags = []
    for case, seconds in times.items():
        if seconds is None:
            flags.append(AuditFlag(suite=suite, case=case, kind="timeout", where="original",
                                   message="the gold runs past the datasource's timeout on the original"))
        elif median is not None and seconds >= floor_s and seconds > factor * median:
            flags.append(AuditFlag(suite=suite, case=case, kind="slow", where="original",
                                   message=f"the gold takes {seconds * 1000:.0f} ms, {seconds / median:.0f}x the "
                                           f"suite's median of {median * 1000:.1f} ms"))
    return flags, median


@dataclass(frozen=True)
class Timed:
    """The gold run ``TIMED_RUNS`` times on the original: its rows (None where it failed), the
    fastest run, whether it ran past the timeout, and the database's error where it failed."""

    rows: list[list[Any]] | None
    seconds: float | None
    timed_out: bool = False
    error: str | None = None


def _timed(adapter: Any, sql: str) -> Timed:
    from nl2sql_assets.datasources.base import DatasourceError, QueryTimeout

    best: float | None = None
    rows: list[list[Any]] | None = None
    for _ in range(TIMED_RUNS):
        started = time.perf_counter()
        try:
            rows = adapter.execute(sql).rows
        except QueryTimeout:
            return Timed(None, None, timed_out=True)
        except DatasourceError as exc:
            return Timed(None, None, error=str(exc))
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
    return Timed(rows, best)


def _order_sensitive(backwards: Any, sql: str, rows: list[list[Any]] | None, order_matters: bool) -> bool:
    """Whether ``sql`` gives other rows (in its order where it counts) than ``rows`` on ``backwards``
    (the same database, its tables scanned in the other order)."""
    from nl2sql_assets.evaluation.neighbours.distill import rows_or_none

    if rows is None:
        return False
    other = rows_or_none(backwards, sql)
    return other is not None and not compare_results(rows, other, order_matters)


#: Bumped whenever the same gold and sets could give other flags: part of a stored audit's key.
AUDIT_VERSION = 2
CACHE = "audits"


def audit_suite(config: ProjectConfig, suite_name: str, suite: Any, settings: NeighbourSettings | None = None,
                folder: Path | None = None, *, sets: dict[str, KeptSet] | None = None) -> GoldAudit:
    """Audit every gradable case's gold of ``suite`` (see the module's docstring). ``sets``: the
    kept neighbours where the caller has them, else built or read back under ``folder``. An audit
    is kept under the folder, keyed by the suite's cases, each database file, the sets and this
    module's version, and read back while they are unchanged (a run of every pass asks for it)."""
    from nl2sql_assets.paths import neighbours_dir

    settings = settings or NeighbourSettings()
    cases = neighbour_cases(suite)
    folder = folder or neighbours_dir(config.root)
    if sets is None:
        sets = project_sets(config, project_suites(config, [(suite_name, suite)]), settings, folder,
                            datasources={c.datasources[0] for c in cases})
    stored = folder / CACHE / f"{suite_name}-{_audit_key(config, suite, sets)}.json"
    if stored.is_file():
        try:
            kept = GoldAudit.model_validate_json(stored.read_text(encoding="utf-8"))
        except ValueError:
            pass  # a damaged copy: audited again and written over
        else:  # the sets where they lie now (a copied project's warehouse lies elsewhere)
            return kept.model_copy(update={"sets": {ds: str(k.home) for ds, k in sorted(sets.items())}})
    audit = _audit(config, suite_name, suite, cases, sets)
    from nl2sql_assets.atomic import atomic_write

    atomic_write(stored, audit.model_dump_json() + "\n")
    return audit


def _audit_key(config: ProjectConfig, suite: Any, sets: dict[str, KeptSet]) -> str:
    import hashlib
    import json

    from nl2sql_assets.evaluation.neighbours.store import file_digest

    used = sorted({c.datasources[0] for c in neighbour_cases(suite)})
    described = {
        "version": AUDIT_VERSION, "cases": suite.model_dump(mode="json"), "path": str(suite.path),
        "databases": {ds: file_digest(config.datasource(ds).database_file) for ds in used  # a server's: its set's key
                      if config.datasource(ds).engine in FORMATS and config.datasource(ds).database_file.is_file()},
        "timeouts": {ds: config.datasource(ds).timeout_s for ds in used},
        "sets": {ds: kept.manifest.key for ds, kept in sorted(sets.items())},
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:20]


def unparsable(sql: str, dialect: str) -> str | None:
    """Why the product's SQL reader cannot read ``sql`` in ``dialect`` (None: it can)."""
    import sqlglot

    try:
        sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" at line {first['line']}, column {first['col']}" if first.get("line") else ""
        return f"{first.get('description') or 'not SQL'}{where}"
    except sqlglot.errors.SqlglotError as exc:
        return " ".join(str(exc).split())
    return None


def _audit(config: ProjectConfig, suite_name: str, suite: Any, cases: list[Any],
           sets: dict[str, KeptSet]) -> GoldAudit:
    from nl2sql_assets.datasources.registry import open_adapter
    from nl2sql_assets.evaluation.suites.loader import case_location

    started = time.perf_counter()
    flags: list[AuditFlag] = []
    times: dict[str, float | None] = {}
    by_datasource: dict[str, list[Any]] = {}
    for case in cases:
        by_datasource.setdefault(case.datasources[0], []).append(case)
    for datasource, its_cases in sorted(by_datasource.items()):
        ds = config.datasource(datasource)
        kept = sets.get(datasource)
        if not has_neighbours(ds) or (ds.engine not in FORMATS and kept is None):
            continue  # no neighbour databases of this kind (a server's come with its set)
        files = format_of(ds.engine)
        adapter = open_adapter(ds)
        paths = kept.paths if kept else []
        neighbour_adapters = [files.open(p) for p in paths]
        # each database once more, read backwards (opened once: a DuckDB or a server's one is a copy)
        original = kept.source if kept is not None and kept.source is not None else ds.database_file
        backwards = side_by_side(files, functools.partial(files.open_reversed, timeout_s=ds.timeout_s),
                                 [original, *paths])
        try:
            # copies of one gold (the same SQL, order rule and alternatives) are audited once: their
            # findings are the same, each case's flags name its own file, line and id
            audited: dict[str, tuple[list[tuple[FlagKind, str, str | None]], float | None, bool]] = {}
            for case in its_cases:
                digest = gold_query(case, suite_name).digest
                if digest not in audited:
                    audited[digest] = _gold_findings(case, suite_name, files, adapter, neighbour_adapters, backwards,
                                                     paths, kept)
                findings, seconds, ran = audited[digest]
                location = case_location(suite, case.id, "sql", suite_name) if findings else ""
                flags += [AuditFlag(suite=suite_name, case=case.id, kind=kind, where=where, location=location,
                                    message=f"{location}: {message}") for kind, message, where in findings]
                if ran:
                    times[case.id] = seconds
        finally:
            adapter.close()
            for other in [*neighbour_adapters, *backwards]:
                other.close()
    found, median = slow_flags(suite_name, times)
    for f in found:
        location = case_location(suite, f.case, "sql", suite_name)
        flags.append(f.model_copy(update={"location": location, "message": f"{location}: {f.message}"}))
    order = {kind: i for i, kind in enumerate(KINDS)}
    position: dict[str, int] = {}
    for i, c in enumerate(cases):
        position.setdefault(c.id, i)
    flags.sort(key=lambda f: (position[f.case], order[f.kind]))
    return GoldAudit(suite=suite_name, cases=len(cases), flags=flags,
                     counts=dict(Counter(f.kind for f in flags).most_common()),
                     median_ms=None if median is None else round(median * 1000, 3),
                     sets={ds: str(kept.home) for ds, kept in sorted(sets.items())},
                     seconds=round(time.perf_counter() - started, 3))


def _gold_findings(case: Any, suite_name: str, files: Any, adapter: Any, neighbour_adapters: Sequence[Any],
                   backwards: Sequence[Any], paths: Sequence[Path], kept: KeptSet | None
                   ) -> tuple[list[tuple[FlagKind, str, str | None]], float | None, bool]:
    """What the audit finds of one gold: each finding (kind, message, where), its time on the
    original (None past the timeout), and whether it ran there (a gold the database rejects has no time)."""
    out: list[tuple[FlagKind, str, str | None]] = []
    why = unparsable(case.sql, files.dialect)
    if why is not None:
        out.append(("gold_unparsable", f"the gold cannot be read as {files.dialect} SQL, so no near miss is made "
                                       f"of it ({why})", None))
    timed = _timed(adapter, case.sql)
    if timed.error is not None:
        out.append(("gold_fails", f"the database rejects the gold on the original ({timed.error}): no prediction "
                                  "is graded against it", "original"))
        return out, None, False
    rows = timed.rows
    if rows is not None and not rows:
        out.append(("empty_on_original", "the gold returns no row on the original database: any empty answer "
                                         "passes", "original"))
    found = _order_where(rows, case, ["original", *(p.name for p in paths)], [adapter, *neighbour_adapters],
                         backwards, files.dialect)
    if found is not None:
        out.append(("order_sensitive", f"the gold leans on the order of equal rows: {found[1]}", found[0]))
    if kept is not None:
        out += [(f.kind, f.message, f.where) for f in _sidecar_flags(suite_name, case, kept)]
    return out, None if timed.timed_out else timed.seconds, True


def _order_where(rows: list[list[Any]] | None, case: Any, names: Sequence[str], forwards: Sequence[Any],
                 backwards: Sequence[Any], dialect: str) -> tuple[str, str] | None:
    """The first database (the original, then each kept neighbour) on which the gold's result
    leans on the order of equal rows, and how: its sort keys tie where the order decides, or it
    changes with the physical order; None where neither shows. ``forwards[0]``: the original."""
    from nl2sql_assets.evaluation.neighbours.distill import rows_or_none

    probe = tie_probe(case.sql, dialect, case.order_matters)
    for n, name in enumerate(names):
        here = rows if n == 0 else rows_or_none(forwards[n], case.sql)
        probed = rows_or_none(forwards[n], probe.sql) if probe is not None else None
        if probe is not None and probed is not None and unbroken_tie(probed, probe, case.order_matters):
            where = f"at its LIMIT {probe.limit}" if probe.limit is not None else "in the order the case counts"
            return name, f"its sort keys tie {where} on {name}: which tied row comes first is the database's choice"
        if _order_sensitive(backwards[n], case.sql, here, case.order_matters):
            return name, f"its result changes with the rows' physical order on {name}"
    return None


def _sidecar_flags(suite_name: str, case: Any, kept: KeptSet) -> list[AuditFlag]:
    gold = kept.golds.get(gold_query(case, suite_name).digest)
    if gold is None:
        return []
    out = []
    names = [p.name for p in kept.paths]
    if gold.same_everywhere:
        out.append(AuditFlag(suite=suite_name, case=case.id, kind="same_everywhere", where=None,
                             message=f"the gold gives the same result on the original and on all "
                                     f"{kept.manifest.candidates} candidate neighbours: the case tests nothing of "
                                     "the data"))
    for alt, n in sorted(gold.alternatives_disagree.items()):
        out.append(AuditFlag(suite=suite_name, case=case.id, kind="alternative_disagrees", where=names[n],
                             message=f"alt_sql[{alt + 1}] gives other rows than the gold on {names[n]}: it may "
                                     "answer a different question"))
    if gold.fails_on is not None:
        out.append(AuditFlag(suite=suite_name, case=case.id, kind="fails_on_neighbour", where=names[gold.fails_on],
                             message=f"the gold fails on {names[gold.fails_on]} (that database tells nothing of "
                                     "the case)"))
    return out
