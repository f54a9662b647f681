"""Which neighbours to keep: the fewest that tell the most near-miss mutants apart from their gold.

Each gold query's mutants (``mutants``) run on the original database and on every candidate
neighbour. A mutant is *separated* where its rows differ from the gold's and every reviewed
alternative's under the product's own strict comparator (order counting where the case says it
does), or where it fails and the gold does not. The original separates some already; of the rest,
the neighbours are chosen greedily, each the one that separates the most not yet separated (set
cover, as test-suite distillation does), up to K. A mutant that no candidate separates is
*possibly equivalent*: reported, never counted as a miss.

The databases are independent of each other, so they are spread over worker processes (one per
core); each gives back what it separates and every gold's accepted rows there, which the kept
neighbours' sidecar stores (``store``), so a gold is never run twice on one neighbour.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nl2sql_assets.evaluation.judging.answers import first_strict_match
from nl2sql_assets.evaluation.neighbours.formats import format_of, pool_size, side_by_side
from nl2sql_assets.evaluation.neighbours.mutants import Mutant, mutants
from nl2sql_assets.forking import process_pool

#: Rows of each accepted answer on one database: the gold's first, then each alternative's (None
#: for one that fails there); None where the gold itself fails (the database tells nothing of the case).
Accepted = list[list[list[Any]] | None] | None
#: below this many candidate databases a worker pool costs more than it saves
POOL_THRESHOLD = 4


@dataclass(frozen=True)
class GoldQuery:
    """One case's gold SQL and its reviewed alternatives (each an accepted answer), as
    distillation and grading need them. ``key`` names it in messages; ``digest`` is what it asks
    (SQL, order rule, alternatives), the same for two cases that ask the same."""

    key: str
    sql: str
    order_matters: bool = False
    alternatives: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        text = json.dumps([self.sql, self.order_matters, list(self.alternatives)])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Distillation:
    """The neighbours kept and what they tell apart."""

    kept: list[int]  # indices into the candidate neighbours, in the order chosen
    mutants: dict[str, list[Mutant]]
    #: (gold key, mutant index) pairs the original database already separates
    on_original: set[tuple[str, int]] = field(default_factory=set)
    #: pairs a kept neighbour separates, by the neighbour that does (its first in ``kept``)
    by_neighbour: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    #: pairs no database separates: possibly equivalent to their gold
    possibly_equivalent: set[tuple[str, int]] = field(default_factory=set)
    #: each gold's accepted rows (by gold digest) on the original, then on each candidate
    accepted: list[dict[str, Accepted]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(m) for m in self.mutants.values())

    @property
    def separated(self) -> int:
        return len(self.on_original) + sum(len(s) for s in self.by_neighbour.values())

    @property
    def separable(self) -> int:
        return self.total - len(self.possibly_equivalent)


def open_read_only(path: Path, engine: str = "sqlite") -> Any:
    """The product's own read-only access to a database file (row limit, a timeout that interrupts)."""
    return format_of(engine).open(path)


def rows_or_none(adapter: Any, sql: str) -> list[list[Any]] | None:
    """The rows of ``sql``, or None when the database refuses or fails it."""
    from nl2sql_assets.datasources.base import DatasourceError

    try:
        return adapter.execute(sql).rows
    except DatasourceError:
        return None


def accepted_rows(adapter: Any, gold: GoldQuery) -> Accepted:
    """The rows of each accepted answer on one database: the gold's first, then each alternative's
    (None for one that fails there); None when the gold itself fails (the database tells nothing
    of the case)."""
    gold_rows = rows_or_none(adapter, gold.sql)
    if gold_rows is None:
        return None
    return [gold_rows, *(rows_or_none(adapter, sql) for sql in gold.alternatives)]


def tells_apart(gold: GoldQuery, accepted: Accepted, other: list[list[Any]] | None) -> bool:
    """Whether other SQL's rows (None: it failed) match none of the accepted answers' rows under
    the strict comparator (a database where the gold fails tells nothing apart)."""
    if accepted is None:
        return False
    return first_strict_match(accepted, other, gold.order_matters) is None


def separations(golds: Sequence[GoldQuery], made: Mapping[str, Sequence[Mutant] | Sequence[tuple[int, Mutant]]],
                database: Path, engine: str = "sqlite") -> tuple[set[tuple[str, int]], dict[str, Accepted]]:
    """The (gold key, mutant index) pairs ``database`` separates, and each gold's accepted rows
    there. ``made``: each gold's mutants, or only some of them with their indices."""
    adapter = open_read_only(database, engine)
    try:
        out: set[tuple[str, int]] = set()
        rows: dict[str, Accepted] = {}
        for gold in golds:
            accepted = rows[gold.digest] = accepted_rows(adapter, gold)
            if accepted is None:
                continue
            for i, mutant in _indexed(made[gold.key]):
                if tells_apart(gold, accepted, rows_or_none(adapter, mutant.sql)):
                    out.add((gold.key, i))
        return out, rows
    finally:
        adapter.close()


def original_separations(golds: Sequence[GoldQuery], made: Mapping[str, Sequence[Mutant]], database: Path,
                         engine: str) -> tuple[set[tuple[str, int]], dict[str, Accepted]]:
    """``separations`` on the original, where every mutant runs: the golds cut in the format's
    ``side_by_side`` parts, each read on a connection of its own (a file: one part, this thread)."""
    width = format_of(engine).side_by_side
    if len(golds) < 2 * width:
        width = 1
    parts = [golds[i::width] for i in range(width)]
    found = side_by_side(format_of(engine), lambda part: separations(part, made, database, engine), parts,
                         width=width)
    out: set[tuple[str, int]] = set()
    rows: dict[str, Accepted] = {}
    for separated, accepted in found:
        out |= separated
        rows.update(accepted)
    return out, rows


def _indexed(made: Sequence[Mutant] | Sequence[tuple[int, Mutant]]) -> list[tuple[int, Mutant]]:
    return [item if isinstance(item, tuple) else (i, item) for i, item in enumerate(made)]


def _separations_task(task: tuple[Sequence[GoldQuery], Mapping[str, Any], Path, str]
                      ) -> tuple[set[tuple[str, int]], dict[str, Accepted]]:
    return separations(*task)


def distinct_golds(golds: Sequence[GoldQuery]) -> list[GoldQuery]:
    """Gold queries asked the same way (SQL, order rule, alternatives) once: copies of a case add
    nothing to tell apart."""
    unique: dict[str, GoldQuery] = {}
    for gold in golds:
        unique.setdefault(gold.digest, gold)
    return list(unique.values())


def distill(golds: Sequence[GoldQuery], original: Path, candidates: Sequence[Path], keep: int,
            engine: str = "sqlite", *, workers: int | None = None) -> Distillation:
    """Keep at most ``keep`` of ``candidates`` (greedy set cover over the mutants the original
    does not separate already). ``workers``: processes for the databases (None: one per core)."""
    golds = distinct_golds(golds)
    dialect = format_of(engine).dialect
    made = {g.key: mutants(g.sql, dialect=dialect) for g in golds}
    universe = {(g.key, i) for g in golds for i in range(len(made[g.key]))}
    on_original, on_original_rows = original_separations(golds, made, original, engine)
    left = universe - on_original
    # On the candidates only the mutants the original leaves: a neighbour is kept for what it adds.
    # Each keeps its index in ``made``, so the pairs read the same everywhere.
    rest = {g.key: [(i, m) for i, m in enumerate(made[g.key]) if (g.key, i) in left] for g in golds}
    tasks = [(golds, rest, path, engine) for path in candidates]
    workers = max(1, workers if workers is not None else pool_size(len(candidates)))
    files = format_of(engine)
    if files.side_by_side > 1 and workers > 1:  # round trips: threads, each candidate on its own connection
        found = side_by_side(files, _separations_task, tasks, width=2 * files.side_by_side)
    elif workers == 1 or len(candidates) < POOL_THRESHOLD:
        found = [_separations_task(task) for task in tasks]
    else:
        with process_pool(workers) as pool:
            found = list(pool.map(_separations_task, tasks))
    found = [(on_original, on_original_rows), *found]
    covers = [separated & left for separated, _ in found[1:]]
    reachable = set().union(*covers) if covers else set()
    result = Distillation(kept=[], mutants=made, on_original=on_original, possibly_equivalent=left - reachable,
                          accepted=[rows for _, rows in found])
    uncovered = set(reachable)
    while uncovered and len(result.kept) < keep:
        best = max((i for i in range(len(candidates)) if i not in result.kept),
                   key=lambda i: (len(covers[i] & uncovered), -i), default=None)
        if best is None or not covers[best] & uncovered:
            break
        result.kept.append(best)
        result.by_neighbour[best] = covers[best] & uncovered
        uncovered -= covers[best]
    return result
