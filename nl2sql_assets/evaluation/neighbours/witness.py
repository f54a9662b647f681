"""The witness search: for a prediction that passes on the original and on every kept neighbour,
look for a database on which it and its gold give different rows.

The search is led by where the two queries differ (``focus.difference``: the literal, the
comparison, the join, the aggregate and its threshold, the sort key or direction, the LIMIT,
DISTINCT, the grouping). Each candidate is a small database of the datasource's own schema built
for that difference (``targeted``): the first candidates apply one leaned-on strategy each, the
rest draw a mix. A candidate is a *witness* only where all of these hold:

- the gold runs there, and the prediction's rows match neither the gold's nor any reviewed
  alternative's under the product's strict comparator (the same test as on a neighbour);
- the gold's answer is settled there: its sort keys do not tie where its LIMIT cuts (``audit``'s tie
  probe), and it gives the same rows with every table read in the other physical order. A gold
  whose answer rests on the order of equal rows proves nothing about the prediction.

Candidates are real databases of the schema (keys unique, references pointing at rows that are
there, NOT NULL and CHECK held by the database itself), so an equivalent query never differs on
one. A found witness is saved beside the kept neighbours (``witnesses/``) with a sidecar naming the
gold, the prediction, what differed and both results; an outcome, found or not, is kept too, so the
same pass is never searched twice. What it cannot find: a difference that needs more rows than a
threshold's group (``MAX_GROUP``), values no strategy writes (a string matching a pattern in the
middle, an arithmetic edge), or an order no reversed scan shows; docs/neighbours.md says more.
"""

from __future__ import annotations

import functools
import hashlib
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.evaluation.judging.comparison import compare_results
from nl2sql_assets.evaluation.neighbours.distill import GoldQuery, accepted_rows, rows_or_none, tells_apart
from nl2sql_assets.evaluation.neighbours.focus import Focus, difference
from nl2sql_assets.evaluation.neighbours.formats import Source, format_of
from nl2sql_assets.evaluation.neighbours.targeted import STRATEGIES_FOR, build, chosen, ordered, table_rows
from nl2sql_assets.evaluation.neighbours.verdict import evidence

#: Bumped whenever the same pass and budget could find another witness (or none): part of a
#: stored outcome's key and of a record's series.
WITNESS_VERSION = 2
#: candidate databases tried per pass when the settings do not say
DEFAULT_CANDIDATES = 32
FOLDER = "witnesses"
#: rounds of each leaned-on strategy tried alone before the mixes
SYSTEMATIC_TURNS = 3
#: below this many passes to search, worker processes cost more than they save
POOL_THRESHOLD = 8


class WitnessRecord(BaseModel):
    """One pass searched: what was tried and, where a witness was found, the evidence (the
    sidecar ``witnesses/<gold>-<prediction>.json``; the database beside it, ``.sqlite``/``.duckdb``)."""

    model_config = ConfigDict(extra="forbid")

    version: int = WITNESS_VERSION
    gold: str  # the gold's key (suite/case)
    gold_sql: str
    predicted_sql: str
    candidates: int
    seed: int
    tried: int
    seconds: float
    found: bool
    #: the kinds of edit between the two queries that led the search
    kinds: list[str] = Field(default_factory=list)
    #: the strategies that built the witness
    strategies: list[str] = Field(default_factory=list)
    file: str | None = None  # the witness database's file name, beside the sidecar
    rows: dict[str, int] = Field(default_factory=dict)  # its rows per table
    gold_rows: list[list[Any]] | None = None
    predicted_rows: list[list[Any]] | None = None
    rows_from: int = 1  # the number of the first row kept of each (``verdict.evidence``)
    #: the prediction failed on the witness (the database refused it), where the gold ran
    predicted_error: bool = False


@dataclass(frozen=True)
class SearchOutcome:
    """A pass searched: the record (None where the two queries read the same: nothing to search)."""

    record: WitnessRecord | None
    path: Path | None = None  # the witness database, where one was found

    @property
    def found(self) -> bool:
        return self.record is not None and self.record.found


@functools.lru_cache(maxsize=512)
def _difference(gold_sql: str, predicted_sql: str, dialect: str) -> Focus | None:
    """``focus.difference``, worked out once per pair (asked before a search and again in it)."""
    return difference(gold_sql, predicted_sql, dialect)


def prediction_digest(sql: str) -> str:
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()[:16]


class WitnessSearch:
    """Searches passes for a witness on one datasource: its schema and sampled rows read once (on
    first use), each pass's outcome kept in ``evidence`` (a kept set's ``witnesses/`` folder; None:
    nothing kept). ``candidates``: the budget per pass. Safe to share between threads."""

    def __init__(self, original: Path, engine: str, *, candidates: int = DEFAULT_CANDIDATES, seed: int = 1,
                 evidence: Path | None = None, max_rows: int = 200) -> None:
        self.original = Path(original)
        self.engine = engine
        self.files = format_of(engine)
        self.candidates = candidates
        self.seed = seed
        self.evidence = evidence
        self.max_rows = max_rows
        self._source: Source | None = None
        self._template: Any = None
        #: each column's values for the focus's literals, worked out once (``targeted.Builder.values``)
        self._memo: dict[Any, Any] = {}
        self._outcomes: dict[str, SearchOutcome] = {}  # stored outcomes read back, by pass
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # a server's candidates side by side

    def spec(self) -> tuple[str, str, int, int, str | None, int]:
        """What makes this search, as a worker process builds it again (``search_all``)."""
        return (str(self.original), self.engine, self.candidates, self.seed,
                None if self.evidence is None else str(self.evidence), self.max_rows)

    @classmethod
    def from_spec(cls, spec: tuple[str, str, int, int, str | None, int]) -> WitnessSearch:
        original, engine, candidates, seed, evidence, max_rows = spec
        return cls(Path(original), engine, candidates=candidates, seed=seed,
                   evidence=None if evidence is None else Path(evidence), max_rows=max_rows)

    @property
    def source(self) -> Source:
        with self._lock:
            if self._source is None:
                self._source = self.files.read(self.original, self.max_rows)
                self._template = self.files.template(self._source)
            return self._source

    def _stored(self, stem: str) -> SearchOutcome | None:
        if self.evidence is None:
            return None
        with self._lock:
            known = self._outcomes.get(stem)
        if known is not None:
            return known
        sidecar = self.evidence / f"{stem}.json"
        try:
            record = WitnessRecord.model_validate_json(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if (record.version, record.candidates, record.seed) != (WITNESS_VERSION, self.candidates, self.seed):
            return None
        path = self.evidence / record.file if record.file else None
        if record.found and (path is None or not path.is_file()):
            return None
        outcome = SearchOutcome(record, path)
        with self._lock:
            self._outcomes[stem] = outcome
        return outcome

    def known(self, gold: GoldQuery, predicted_sql: str) -> SearchOutcome | None:
        """The outcome without searching, where there is one: nothing to search (no budget; the two
        queries read the same), or the outcome stored by an earlier search. None: search."""
        if self.candidates <= 0 or " ".join(gold.sql.split()) == " ".join(predicted_sql.split()):
            return SearchOutcome(None)
        stored = self._stored(f"{gold.digest}-{prediction_digest(predicted_sql)}")  # before parsing anything
        if stored is not None:
            return stored
        return SearchOutcome(None) if _difference(gold.sql, predicted_sql, self.files.dialect) is None else None

    def search(self, gold: GoldQuery, predicted_sql: str) -> SearchOutcome:
        """The witness of ``predicted_sql`` against ``gold``, if the budget finds one."""
        known = self.known(gold, predicted_sql)
        if known is not None:
            return known
        focus = _difference(gold.sql, predicted_sql, self.files.dialect)
        assert focus is not None
        stem = f"{gold.digest}-{prediction_digest(predicted_sql)}"
        started = time.perf_counter()
        found, tried = self._first_witness(gold, predicted_sql, focus)
        record = WitnessRecord(gold=gold.key, gold_sql=gold.sql, predicted_sql=predicted_sql,
                               candidates=self.candidates, seed=self.seed, tried=tried,
                               seconds=round(time.perf_counter() - started, 4), found=found is not None,
                               kinds=sorted(focus.kinds))
        path = None
        if found is not None:
            _, strategies, scratch, rows, gold_rows, predicted_rows = found
            try:
                name = f"{stem}{self.files.suffix}"
                if self.evidence is not None:
                    path = scratch.save(self.evidence / name)
                shown_gold, shown_predicted, rows_from = evidence(gold_rows, predicted_rows)
                record = record.model_copy(update={
                    "strategies": strategies, "file": name if path is not None else None, "rows": rows,
                    "gold_rows": shown_gold, "predicted_rows": shown_predicted, "rows_from": rows_from,
                    "predicted_error": predicted_rows is None})
            finally:
                scratch.close()
        outcome = SearchOutcome(record, path)
        if self.evidence is not None:
            self.evidence.mkdir(parents=True, exist_ok=True)
            atomic_write(self.evidence / f"{stem}.json", record.model_dump_json(indent=1) + "\n")
            with self._lock:
                self._outcomes[stem] = outcome
        return outcome

    def _first_witness(self, gold: GoldQuery, predicted_sql: str, focus: Focus
                       ) -> tuple[tuple[int, list[str], Any, dict[str, int], Any, Any] | None, int]:
        """The witness of the lowest index within the budget (None), and how many candidates that
        took. Candidates are tried in turn; on a server, whose candidates mostly wait on the
        network and the server, ``files.side_by_side`` at a time, each thread in its own scratch
        namespace, the lowest index found kept: the same witness as one at a time."""
        width = max(1, self.files.side_by_side)
        for start in range(0, self.candidates, width):
            indices = list(range(start, min(start + width, self.candidates)))
            if len(indices) == 1:
                results = [self._try(gold, predicted_sql, focus, indices[0], self._memo)]
            else:
                results = list(self._threads(width).map(
                    lambda i: self._try(gold, predicted_sql, focus, i, self._memo), indices))
            hits = [r for r in results if r is not None]
            for other in hits[1:]:
                other[2].close()
            if hits:
                return hits[0], hits[0][0] + 1
        return None, self.candidates

    def _threads(self, width: int) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="nl2sql-witness")
            return self._pool

    def _strategies(self, focus: Focus, index: int, rng: random.Random) -> tuple[list[str], int | None]:
        """The first candidates one leaned-on strategy each, in turn (``SYSTEMATIC_TURNS`` rounds),
        then mixes drawn at random; and the round of a strategy tried alone."""
        leaned = sorted({s for kind in focus.kinds for s in STRATEGIES_FOR.get(kind, ())})
        if index < len(leaned) * SYSTEMATIC_TURNS:
            alone, turn = leaned[index % len(leaned)], index // len(leaned)
            # the first round alone; the next with the compared values written in too
            return ordered([alone, "literal"] if turn and focus.literals else [alone]), turn
        return chosen(focus.kinds, rng, focus), None

    def _try(self, gold: GoldQuery, predicted_sql: str, focus: Focus, index: int, memo: dict[Any, Any]
             ) -> tuple[int, list[str], Any, dict[str, int], Any, Any] | None:
        """One candidate: built, read, and kept open only where it is a witness."""
        from nl2sql_assets.evaluation.neighbours.ties import tie_probe, unbroken_tie

        rng = random.Random(f"{WITNESS_VERSION}:{self.seed}:{gold.digest}:{prediction_digest(predicted_sql)}:{index}")
        strategies, turn = self._strategies(focus, index, rng)
        rows = build(self.source, focus, rng, strategies, turn, memo)
        scratch = self.files.scratch(self.source, rows, self._template)
        keep = False
        try:
            adapter = scratch.adapter()
            accepted = accepted_rows(adapter, gold)
            if accepted is None:
                return None  # the gold fails here: this database tells nothing
            got = rows_or_none(adapter, predicted_sql)
            if not tells_apart(gold, accepted, got):
                return None
            probe = tie_probe(gold.sql, self.files.dialect, gold.order_matters)
            if probe is not None:
                probed = rows_or_none(adapter, probe.sql)
                if probed is None or unbroken_tie(probed, probe, gold.order_matters):
                    return None  # which tied row the gold keeps is the database's choice
            backwards = rows_or_none(scratch.reversed(), gold.sql)
            if backwards is None or not compare_results(accepted[0], backwards, gold.order_matters):
                return None  # the gold's answer rests on the rows' physical order here
            keep = True
            return index, strategies, scratch, table_rows(rows), accepted[0], got
        finally:
            if not keep:
                scratch.close()


def witness_sidecars(home: Path) -> list[WitnessRecord]:
    """The witnesses found on a kept set (its ``witnesses/`` folder), in file order."""
    folder = home / FOLDER
    out = []
    for sidecar in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = WitnessRecord.model_validate_json(sidecar.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if record.found:
            out.append(record)
    return out


#: A worker process's searches, by spec: each datasource's schema and rows read once per process.
_SEARCHES: dict[tuple[str, str, int, int, str | None, int], WitnessSearch] = {}


def _search_task(task: tuple[tuple[str, str, int, int, str | None, int], GoldQuery, str]) -> SearchOutcome:
    spec, gold, sql = task
    if spec not in _SEARCHES:
        _SEARCHES[spec] = WitnessSearch.from_spec(spec)
    return _SEARCHES[spec].search(gold, sql)


def search_all(tasks: Sequence[tuple[WitnessSearch, GoldQuery, str]], workers: int | None = None
               ) -> list[SearchOutcome]:
    """Many passes searched, in order: what is known without a search (nothing to search, an
    outcome stored) answered here, the rest spread over worker processes (one per core; none when
    there are few)."""
    from nl2sql_assets.evaluation.neighbours.formats import pool_size
    from nl2sql_assets.forking import process_pool

    out: list[SearchOutcome | None] = [search.known(gold, sql) for search, gold, sql in tasks]
    first: dict[tuple[Any, ...], int] = {}  # one search per problem: the same gold asked the same
    for i, known in enumerate(out):
        if known is None:
            search, gold, sql = tasks[i]
            first.setdefault((search.spec(), gold.digest, sql), i)
    todo = sorted(first.values())
    workers = max(1, workers if workers is not None else pool_size(len(todo)))
    if workers == 1 or len(todo) < POOL_THRESHOLD:
        for i in todo:
            search, gold, sql = tasks[i]
            out[i] = search.search(gold, sql)
    else:
        jobs = [(tasks[i][0].spec(), tasks[i][1], tasks[i][2]) for i in todo]
        with process_pool(workers) as pool:
            for i, outcome in zip(todo, pool.map(_search_task, jobs, chunksize=max(1, len(jobs) // (workers * 4))),
                                  strict=True):
                out[i] = outcome
    for i, known in enumerate(out):
        if known is None:
            search, gold, sql = tasks[i]
            out[i] = out[first[(search.spec(), gold.digest, sql)]]
    return [o if o is not None else SearchOutcome(None) for o in out]
