"""A datasource's kept neighbours for a set of gold queries, built once and reused.

The set lives in ``<folder>/<datasource>/<key>/`` (a project's ``warehouse/neighbours/``): the kept
files, ``manifest.json`` saying how they were made and what they separate, and ``golds.json``
holding every gold's accepted rows on each kept neighbour (computed while distilling, so a gold
never runs twice on a neighbour) with what its mutants gave. The key is a digest of everything
the files depend on (the database file's bytes, the gold queries, the settings, the generator's
and the comparator's versions), so a changed suite or database builds a new set and an unchanged
one is read back. A set is built in a temporary folder and renamed into place whole.

``project_sets`` is the one entry the CLI, the runner and the Dagster assets use: the gold of
every suite the project runs, grouped by datasource, each datasource's set built or read back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.config import DatasourceConfig, NeighbourSettings, ProjectConfig
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.judging.comparison import COMPARATOR_VERSION, compare_results
from nl2sql_assets.evaluation.neighbours.distill import Distillation, GoldQuery, distill, distinct_golds
from nl2sql_assets.evaluation.neighbours.formats import (
    FORMATS,
    SERVER_ENGINES,
    discard,
    fingerprint,
    format_of,
)
from nl2sql_assets.evaluation.neighbours.generate import (
    GENERATOR_VERSION,
    generate_neighbours,
    gold_literals,
    targeted_neighbours,
)

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.neighbours.verdict import NeighbourJudge
    from nl2sql_assets.evaluation.neighbours.witness import WitnessSearch
    from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite

MANIFEST = "manifest.json"
GOLDS = "golds.json"


class NeighbourFile(BaseModel):
    """One kept neighbour: its file, its rows per table and its size."""

    model_config = ConfigDict(extra="forbid")

    name: str
    rows: dict[str, int]
    bytes: int
    #: mutants it separates that the original and the neighbours kept before it did not
    separates: int = 0


class NeighbourSet(BaseModel):
    """What a kept set of neighbours is and what it tells apart (the manifest)."""

    model_config = ConfigDict(extra="forbid")

    datasource: str
    engine: str = "sqlite"
    key: str
    generator_version: int
    comparator_version: int = COMPARATOR_VERSION
    seed: int
    keep: int
    candidates: int
    max_rows: int
    kept: list[str]  # file names, in the order distillation chose them
    files: list[NeighbourFile] = Field(default_factory=list)
    gold_queries: int
    mutants: int
    separated_on_original: int
    separated: int
    separable: int
    possibly_equivalent: int
    #: possibly equivalent mutants by the rule that made them
    possibly_equivalent_by_rule: dict[str, int] = Field(default_factory=dict)
    seconds: float
    generation_s: float = 0.0
    distillation_s: float = 0.0

    def paths(self, folder: Path) -> list[Path]:
        return [folder / name for name in self.kept]

    @property
    def separated_share(self) -> float | None:
        """Separated of separable (None: nothing to separate)."""
        return self.separated / self.separable if self.separable else None


class GoldOnNeighbours(BaseModel):
    """One gold query on the set: its accepted rows on each kept neighbour (None where the gold
    fails there), what its mutants gave, and whether any database told its result apart."""

    model_config = ConfigDict(extra="forbid")

    key: str
    rows: list[list[list[list[Any]] | None] | None]
    mutants: int = 0
    separated: int = 0
    possibly_equivalent: list[str] = Field(default_factory=list)  # the mutants' SQL
    #: the gold's rows were the same on the original and on every candidate neighbour
    same_everywhere: bool = False
    #: alternative index (0-based) -> the first kept neighbour on which it disagrees with the gold
    alternatives_disagree: dict[int, int] = Field(default_factory=dict)
    #: the first kept neighbour on which the gold fails (a database that tells nothing of the case)
    fails_on: int | None = None


@dataclass
class KeptSet:
    """A datasource's kept neighbours as stored: the manifest, the folder, the golds' sidecar."""

    manifest: NeighbourSet
    home: Path
    #: read back as stored (its inputs unchanged), not made by this call
    reused: bool = False
    #: the database the set was made of (the witness search builds its candidates from it)
    source: Path | None = None

    @property
    def paths(self) -> list[Path]:
        return self.manifest.paths(self.home)

    @property
    def engine(self) -> str:
        return self.manifest.engine

    @cached_property
    def golds(self) -> dict[str, GoldOnNeighbours]:
        """Gold digest -> the gold on the set (read from the sidecar on first use)."""
        path = self.home / GOLDS
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot read the neighbours' gold rows ({exc}); delete {self.home} "
                            "and it is made again") from None
        return {digest: GoldOnNeighbours.model_validate(item) for digest, item in data.items()}

    def judge(self, witness: int = 0) -> NeighbourJudge:
        """The judge of this set; ``witness``: candidates the witness search tries per pass that
        holds on every kept neighbour (0, or no source known: no search)."""
        from nl2sql_assets.evaluation.neighbours.verdict import NeighbourJudge

        return NeighbourJudge(self.paths, self.engine, {d: g.rows for d, g in self.golds.items()},
                              witness=self.witness_search(witness))

    def witness_search(self, candidates: int) -> WitnessSearch | None:
        """The witness search on this set's datasource, its outcomes kept in ``witnesses/``."""
        if candidates <= 0 or self.source is None:
            return None
        from nl2sql_assets.evaluation.neighbours.witness import FOLDER, WitnessSearch

        return WitnessSearch(self.source, self.engine, candidates=candidates, seed=self.manifest.seed,
                             evidence=self.home / FOLDER, max_rows=self.manifest.max_rows)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def set_key(source: Path, golds: Sequence[GoldQuery], settings: NeighbourSettings, engine: str = "sqlite") -> str:
    """The digest of everything a set's files depend on: the database (a file's bytes; a server's
    catalog, sampled rows and scratch place), the gold, the settings, the versions."""
    described = {
        "generator": GENERATOR_VERSION, "comparator": COMPARATOR_VERSION, "engine": engine,
        **settings.set_identity(), "database": fingerprint(source, engine, settings.max_rows),
        "golds": sorted(g.digest for g in distinct_golds(golds)),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:20]


def read_set(home: Path) -> KeptSet | None:
    """The set stored at ``home``, or None when it is missing or not whole."""
    manifest_path = home / MANIFEST
    if not manifest_path.is_file() or not (home / GOLDS).is_file():
        return None
    try:
        stored = NeighbourSet.model_validate_json(manifest_path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    if not all(p.is_file() for p in stored.paths(home)):
        return None
    return KeptSet(stored, home, reused=True)


def neighbour_set(datasource: DatasourceConfig, golds: Sequence[GoldQuery], folder: Path,
                  settings: NeighbourSettings | None = None, *, workers: int | None = None) -> KeptSet:
    """The kept neighbours of ``datasource`` for ``golds``: read back when built before with the
    same inputs, else generated, distilled and stored."""
    settings = settings or NeighbourSettings()
    source = source_of(datasource, folder, settings)
    key = set_key(source, golds, settings, datasource.engine)
    home = folder / datasource.id / key
    stored = read_set(home)
    if stored is not None:
        stored.source = source
        return stored
    try:
        built = _build(datasource, source, golds, folder, home, key, settings, workers)
        built.source = source
        return built
    except (sqlite3.DatabaseError, duckdb_errors()) as exc:  # not a database, or a damaged one
        hint = " (run `nl2sql-assets data` for the demo's databases)" if "not a database" in str(exc) else ""
        raise UserError(f"datasource {datasource.id!r}: cannot make neighbours of {source}: {exc}{hint}") from None


def duckdb_errors() -> type[BaseException]:
    """DuckDB's base error where DuckDB is installed (it is a dependency; imported on first use)."""
    import duckdb

    return duckdb.Error


def source_of(datasource: DatasourceConfig, folder: Path, settings: NeighbourSettings) -> Path:
    """What a datasource's neighbours are made of: its database file, or for a server its handle
    (``servers``: its settings, never a password, and where its neighbours are made), kept under
    ``folder/<datasource>/``."""
    if datasource.engine not in FORMATS and datasource.engine not in SERVER_ENGINES:
        raise UserError(f"datasource {datasource.id!r}: neighbour databases are made of "
                        f"{', '.join([*FORMATS, *SERVER_ENGINES])} datasources, not {datasource.engine}")
    if datasource.engine in SERVER_ENGINES:
        from nl2sql_assets.evaluation.neighbours.servers import project_tag, source_handle

        (folder / datasource.id).mkdir(parents=True, exist_ok=True)
        return source_handle(folder / datasource.id / f"source{format_of(datasource.engine).suffix}", datasource,
                             settings.url_env, project_tag(folder))
    source = datasource.database_file
    if not source.is_file():
        raise UserError(f"datasource {datasource.id!r}: database file not found: {source} "
                        "(run `nl2sql-assets data` to make the demo's)")
    return source


def _build(datasource: DatasourceConfig, source: Path, golds: Sequence[GoldQuery], folder: Path, home: Path,
           key: str, settings: NeighbourSettings, workers: int | None) -> KeptSet:
    files = format_of(datasource.engine)
    if hasattr(files, "check_writable"):
        files.check_writable(source)  # a server: the role may make neighbours where they live
    started = time.perf_counter()
    pool: list[Path] = []
    kept_paths: list[Path] = []
    (folder / datasource.id).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder / datasource.id))
    try:
        golds = distinct_golds(golds)
        read = files.read(source, settings.max_rows)  # once for both kinds of candidate (a server's: a catalog read)
        pool = generate_neighbours(source, work / "candidates", settings.candidates, settings.seed,
                                   max_rows=settings.max_rows, engine=datasource.engine, workers=workers,
                                   literals=gold_literals([g.sql for g in golds], dialect=files.dialect), read=read)
        pool += targeted_neighbours(source, work / "candidates", [g.sql for g in golds], settings.candidates,
                                    settings.seed, start=len(pool), max_rows=settings.max_rows,
                                    engine=datasource.engine, read=read)
        generated = time.perf_counter()
        result = distill(golds, source, pool, settings.count, datasource.engine, workers=workers)
        distilled = time.perf_counter()
        for index, path in enumerate(pool):
            if index not in result.kept:
                discard(path, datasource.engine)  # a server's namespace goes; a file goes with the folder
        built = work / "set"
        built.mkdir()
        kept: list[NeighbourFile] = []
        for n, index in enumerate(result.kept):
            name = f"neighbour_{n:02d}{files.suffix}"
            os.replace(pool[index], built / name)
            kept_paths.append(built / name)
            kept.append(NeighbourFile(name=name, rows=_row_counts(built / name, datasource.engine),
                                      bytes=(built / name).stat().st_size,
                                      separates=len(result.by_neighbour.get(index, ()))))
        by_rule: dict[str, int] = {}
        for gold_key, i in result.possibly_equivalent:
            rule = result.mutants[gold_key][i].rule
            by_rule[rule] = by_rule.get(rule, 0) + 1
        manifest = NeighbourSet(
            datasource=datasource.id, engine=datasource.engine, key=key, generator_version=GENERATOR_VERSION,
            seed=settings.seed, keep=settings.count, candidates=settings.candidates, max_rows=settings.max_rows,
            kept=[f.name for f in kept], files=kept, gold_queries=len(golds), mutants=result.total,
            separated_on_original=len(result.on_original), separated=result.separated,
            separable=result.separable, possibly_equivalent=len(result.possibly_equivalent),
            possibly_equivalent_by_rule=dict(sorted(by_rule.items())),
            seconds=round(time.perf_counter() - started, 3), generation_s=round(generated - started, 3),
            distillation_s=round(distilled - generated, 3))
        # python mode, written by json: NaN and the infinities stay themselves (JSON mode makes them
        # null, and a gold's NaN read back as NULL would tell every prediction apart from it)
        sidecar = {g.digest: _gold_on_set(g, result).model_dump() for g in golds}
        (built / GOLDS).write_text(json.dumps(sidecar, default=str, separators=(",", ":")) + "\n", encoding="utf-8")
        (built / MANIFEST).write_text(manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
        other = read_set(home)
        if other is not None:  # another process (a shard's worker, a parallel partition) finished first
            for path in kept_paths:
                discard(path, datasource.engine)
            return other
        if home.exists():  # a set left half-made (its manifest or a file missing): made again
            shutil.rmtree(home, ignore_errors=True)
        try:
            os.replace(built, home)
        except OSError:  # another process put its own whole set there in the meantime: that one serves
            other = read_set(home)
            if other is None:
                raise
            for path in kept_paths:
                discard(path, datasource.engine)
            return other
    except BaseException:
        for path in [*pool, *kept_paths]:  # a server's namespaces made so far go with the failed build
            with contextlib.suppress(Exception):
                discard(path, datasource.engine)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return KeptSet(manifest, home)


def _gold_on_set(gold: GoldQuery, result: Distillation) -> GoldOnNeighbours:
    """What the set knows of one gold: its rows on each kept neighbour and what its mutants gave."""
    on_kept = [result.accepted[1 + index].get(gold.digest) for index in result.kept]
    everywhere = [rows.get(gold.digest) for rows in result.accepted]
    first = everywhere[0][0] if everywhere and everywhere[0] else None
    same = first is not None and all(a is not None and compare_results(first, a[0], gold.order_matters)
                                     for a in everywhere)
    disagree: dict[int, int] = {}
    on_original = everywhere[0] if everywhere else None
    for alt_index in range(len(gold.alternatives)):
        relation = _relation(on_original[0], on_original[alt_index + 1], gold) if on_original else None
        if relation is None:
            continue  # the alternative fails on the original, or shares nothing with the gold there
        for n, accepted in enumerate(on_kept):
            alt = accepted[alt_index + 1] if accepted is not None else None
            if accepted is not None and alt is not None and not relation(accepted[0], alt):
                disagree[alt_index] = n
                break
    made = result.mutants.get(gold.key, [])
    separated = {i for k, i in result.on_original if k == gold.key}
    for pairs in result.by_neighbour.values():
        separated |= {i for k, i in pairs if k == gold.key}
    return GoldOnNeighbours(
        key=gold.key, rows=on_kept, mutants=len(made), separated=len(separated),
        possibly_equivalent=sorted(made[i].sql for k, i in result.possibly_equivalent if k == gold.key),
        same_everywhere=same, alternatives_disagree=disagree,
        fails_on=next((n for n, a in enumerate(on_kept) if a is None), None))


def _relation(gold_rows: list[list[Any]], alt_rows: list[list[Any]] | None,
              gold: GoldQuery) -> Callable[[list[list[Any]], list[list[Any]]], bool] | None:
    """How an alternative's rows stand to the gold's on the original, as a test to hold it to
    elsewhere: equal (strict), equal leniently (another shape of the same rows), or the same number
    of rows (another shape altogether); None where not even that holds (nothing to keep)."""
    from nl2sql_assets.evaluation.judging.comparison import compare_results_lenient

    if alt_rows is None:
        return None
    order = gold.order_matters
    tests: list[Callable[[list[list[Any]], list[list[Any]]], bool]] = [
        lambda a, b: compare_results(a, b, order),
        lambda a, b: compare_results_lenient(a, b, order) or compare_results_lenient(b, a, order),
        lambda a, b: len(a) == len(b),
    ]
    return next((test for test in tests if test(gold_rows, alt_rows)), None)


def _row_counts(path: Path, engine: str) -> dict[str, int]:
    files = format_of(engine)
    source = files.read(path, max_rows=1)
    adapter = files.open(path)
    try:
        return {t.name: adapter.execute(f"SELECT COUNT(*) FROM {t.quoted}").rows[0][0] for t in source.tables}
    finally:
        adapter.close()


# ---------------------------------------------------------------- a project's sets


def gold_query(case: EvalCase, suite: str) -> GoldQuery:
    """A case's gold as neighbours grade it (named ``suite/case``)."""
    return GoldQuery(f"{suite}/{case.id}", case.sql or "", case.order_matters, tuple(case.alt_sql))


def neighbour_cases(suite: EvalSuite) -> list[EvalCase]:
    """The cases neighbours can grade: answer cases with gold SQL on one datasource, not retired."""
    return [c for c in suite.cases if c.kind == "answer" and c.sql and len(c.datasources) == 1
            and c.status != "retired"]


def golds_by_datasource(suites: Iterable[tuple[str, EvalSuite]]) -> dict[str, list[GoldQuery]]:
    """Every gradable case's gold of ``suites`` (name, suite), by the datasource it reads."""
    out: dict[str, list[GoldQuery]] = {}
    for name, suite in suites:
        for case in neighbour_cases(suite):
            out.setdefault(case.datasources[0], []).append(gold_query(case, name))
    return out


def project_suites(config: ProjectConfig, extra: Iterable[tuple[str, EvalSuite]] = ()
                   ) -> list[tuple[str, EvalSuite]]:
    """The suites whose gold a project's neighbours are distilled over: evals.yaml's (through
    the suite cache; a missing file is left to the run that reads it) and ``extra`` (a run's or a
    graded suite of its own), each name once."""
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import suite_cache_dir

    out: dict[str, EvalSuite] = {}
    for path in config.evals_config.suites:
        if Path(path).is_file():
            suite = load_suite(path, cache_dir=suite_cache_dir(config.root))
            out.setdefault(suite.name or Path(path).stem, suite)
    for name, suite in extra:
        out.setdefault(name, suite)
    return list(out.items())


def project_sets(config: ProjectConfig, suites: Iterable[tuple[str, EvalSuite]], settings: NeighbourSettings,
                 folder: Path, *, datasources: Iterable[str] | None = None,
                 workers: int | None = None) -> dict[str, KeptSet]:
    """Each datasource's kept set (``datasources``: only those), distilled over the gold of
    ``suites`` that reads it. Pass every suite the project runs (evals.yaml's and the run's own),
    so a run of one suite grades on the same neighbours as a run of all of them."""
    golds = golds_by_datasource(suites)
    wanted = sorted(golds) if datasources is None else [d for d in sorted(set(datasources)) if d in golds]
    known = {d.id: d for d in config.datasources}
    out: dict[str, KeptSet] = {}
    for datasource in wanted:
        if datasource not in known:
            continue  # the run names it as it selects cases; its own error is the runner's
        if not has_neighbours(known[datasource]):
            continue  # a kind without neighbour databases: graded on the original only (``original_only``)
        out[datasource] = neighbour_set(config.datasource(datasource), golds[datasource], folder, settings,
                                        workers=workers)
    return out


def has_neighbours(datasource: DatasourceConfig) -> bool:
    """Whether neighbour databases are made of this datasource's kind (files, and Postgres and
    MySQL/MariaDB servers)."""
    return datasource.engine in FORMATS or datasource.engine in SERVER_ENGINES


def original_only(config: ProjectConfig, datasources: Iterable[str]) -> list[str]:
    """The configured datasources among ``datasources`` whose kind has no neighbour databases
    yet: a run grades them on the original database only, and says so."""
    known = {d.id: d for d in config.datasources}
    return sorted({d for d in datasources if d in known and not has_neighbours(known[d])})


def sets_of_folders(folders: Mapping[str, str | Path]) -> dict[str, KeptSet]:
    """Datasource -> the set stored in each folder (a scorer's config names them so)."""
    out: dict[str, KeptSet] = {}
    for datasource, folder in folders.items():
        kept = read_set(Path(folder))
        if kept is None:
            raise UserError(f"the neighbours of {datasource!r} at {folder} are missing or not whole; "
                            "run again and they are made anew")
        out[datasource] = kept
    return out


# ---------------------------------------------------------------- pruning


@dataclass
class Pruned:
    """What ``prune_sets`` removed (or, dry, would remove): set folders, and server namespaces;
    ``others``: namespaces of the product's in the same scratch places that were left alone, being
    another project's (or made before namespaces carried their project's mark)."""

    kept: list[str]
    sets: list[str]
    namespaces: list[str]
    others: list[str] = field(default_factory=list)


def prune_sets(config: ProjectConfig, settings: NeighbourSettings, folder: Path, *, dry_run: bool = False,
               every_project: bool = False) -> Pruned:
    """Remove every kept set under ``folder`` that no run of the project's suites uses with
    ``settings`` (evals.yaml's suites, alone or with one more of its suites/ files: another
    database, gold or setting made the rest), and on each server datasource's scratch place every
    namespace this project made that no remaining set names (the candidates of a build that died,
    the witness search's scratch of a process that was killed). Another project's namespaces there
    are left alone (``Pruned.others``) unless ``every_project``: then every namespace of the
    product's that no set of this project names goes."""
    from nl2sql_assets.evaluation.neighbours.servers import PREFIX, ServerFiles, handle_place, read_handle
    from nl2sql_assets.evaluation.suites import load_suite

    known = {d.id: d for d in config.datasources}
    # what a run grades on: evals.yaml's suites, alone or with one more suite file of the project's
    runs = [project_suites(config)]
    for path in sorted((config.root / "suites").glob("*.yaml")) if (config.root / "suites").is_dir() else []:
        with contextlib.suppress(UserError, OSError):
            runs.append(project_suites(config, [(path.stem, load_suite(path))]))
    wanted: set[Path] = set()
    sources: dict[str, Path] = {}
    for suites in runs:
        for datasource, its_golds in golds_by_datasource(suites).items():
            ds = known.get(datasource)
            if ds is None or not has_neighbours(ds):
                continue
            if datasource not in sources:
                sources[datasource] = source_of(ds, folder, settings)
            wanted.add(folder / datasource / set_key(sources[datasource], its_golds, settings, ds.engine))
    removed: list[str] = []
    for home in sorted(p for p in folder.glob("*/*") if p.is_dir() and p.parent.name in known):
        if home in wanted or home.name in ("audits", "audit"):
            continue
        removed.append(str(home))
        if not dry_run:
            engine = known[home.parent.name].engine
            for handle in [*home.glob("*.json"), *(home / "witnesses").glob("*.json")]:
                if handle.name.endswith((".pg.json", ".mysql.json")):
                    discard(handle, engine)
            shutil.rmtree(home, ignore_errors=True)
    named: set[str] = set()
    for handle in folder.glob("*/*/**/*.json"):
        if handle.name.endswith((".pg.json", ".mysql.json")) and handle.parent.is_dir():
            with contextlib.suppress(UserError):
                named.add(read_handle(handle)[1] or "")
    namespaces: list[str] = []
    others: list[str] = []
    for ds in known.values():
        if ds.engine not in SERVER_ENGINES:
            continue
        files = format_of(ds.engine)
        assert isinstance(files, ServerFiles)
        handle = folder / ds.id / f"source{files.suffix}"
        if not handle.is_file():
            continue
        place = handle_place(handle)  # where this datasource's neighbours live, and this project's mark
        if place is None:
            continue
        ours = PREFIX if every_project else (place.prefix if place.tag else None)
        for namespace in files.catalog.namespaces(place.config):
            if not namespace.startswith(PREFIX) or namespace in named or namespace in namespaces + others:
                continue
            if ours is None or not namespace.startswith(ours):
                others.append(namespace)
                continue
            namespaces.append(namespace)
            if not dry_run:
                files.catalog.drop(place.config, namespace)
    return Pruned(kept=sorted(str(p) for p in wanted if p.is_dir()), sets=removed, namespaces=namespaces,
                  others=others)
