"""Which neighbours to keep: the fewest that tell the most near-miss mutants apart from their gold.

Each gold query's mutants (``mutants``) run on the original database and on every candidate
neighbour. A mutant is *separated* where its rows differ from the gold's and every reviewed
alternative's under the product's own strict comparator (order counting where the case says it
does), or where it fails and the gold does not. The original separates some already; of the rest, the neighbours are chosen greedily,
each the one that separates the most not yet separated (set cover, as test-suite distillation
does), up to K. A mutant that no candidate separates is *possibly equivalent*: reported, never
counted as a miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.evaluation.judging.comparison import compare_results
from nl2sql_assets.evaluation.neighbours.mutants import Mutant, mutants

#: Rows read from a mutant or gold per database: enough to tell results apart, never a flood.
ROW_LIMIT = 2000
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class GoldQuery:
    """One case's gold SQL and its reviewed alternatives (each an accepted answer), as
    distillation and grading need them."""

    key: str
    sql: str
    order_matters: bool = False
    alternatives: tuple[str, ...] = ()


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

    @property
    def total(self) -> int:
        return sum(len(m) for m in self.mutants.values())

    @property
    def separated(self) -> int:
        return len(self.on_original) + sum(len(s) for s in self.by_neighbour.values())

    @property
    def separable(self) -> int:
        return self.total - len(self.possibly_equivalent)


def open_read_only(path: Path) -> Any:
    """The product's own read-only SQLite access (row limit, a timeout that interrupts)."""
    from nl2sql_assets.datasources.sqlite import SqliteAdapter

    config = DatasourceConfig(id="neighbour", engine="sqlite", path=path, row_limit=ROW_LIMIT, timeout_s=TIMEOUT_S)
    return SqliteAdapter(config, keep_open=True)


def rows_or_none(adapter: Any, sql: str) -> list[list[Any]] | None:
    """The rows of ``sql``, or None when the database refuses or fails it."""
    from nl2sql_assets.datasources.base import DatasourceError

    try:
        return adapter.execute(sql).rows
    except DatasourceError:
        return None


def accepted_rows(adapter: Any, gold: GoldQuery) -> list[list[list[Any]]] | None:
    """The rows of each accepted answer on one database: the gold's first, then each alternative
    that runs there; None when the gold itself fails (the database tells nothing of the case)."""
    gold_rows = rows_or_none(adapter, gold.sql)
    if gold_rows is None:
        return None
    others = (rows_or_none(adapter, sql) for sql in gold.alternatives)
    return [gold_rows, *(rows for rows in others if rows is not None)]


def tells_apart(gold: GoldQuery, accepted: list[list[list[Any]]] | None, other: list[list[Any]] | None) -> bool:
    """Whether other SQL's rows (None: it failed) match none of the accepted answers' rows under
    the strict comparator (a database where the gold fails tells nothing apart)."""
    if accepted is None:
        return False
    if other is None:
        return True
    return not any(compare_results(rows, other, gold.order_matters) for rows in accepted)


def separations(golds: Sequence[GoldQuery], made: dict[str, list[Mutant]], database: Path) -> set[tuple[str, int]]:
    """The (gold key, mutant index) pairs ``database`` separates."""
    adapter = open_read_only(database)
    try:
        out: set[tuple[str, int]] = set()
        for gold in golds:
            accepted = accepted_rows(adapter, gold)
            if accepted is None:
                continue
            for i, mutant in enumerate(made[gold.key]):
                if tells_apart(gold, accepted, rows_or_none(adapter, mutant.sql)):
                    out.add((gold.key, i))
        return out
    finally:
        adapter.close()


def distill(golds: Sequence[GoldQuery], original: Path, candidates: Sequence[Path], keep: int,
            dialect: str = "sqlite") -> Distillation:
    """Keep at most ``keep`` of ``candidates`` (greedy set cover over the mutants the original
    does not separate already). Gold queries asked the same way (SQL, order rule, alternatives)
    are distilled once: copies of a case add nothing to tell apart."""
    unique: dict[tuple[str, bool, tuple[str, ...]], GoldQuery] = {}
    for gold in golds:
        unique.setdefault((gold.sql, gold.order_matters, gold.alternatives), gold)
    golds = list(unique.values())
    made = {g.key: mutants(g.sql, dialect=dialect) for g in golds}
    universe = {(g.key, i) for g in golds for i in range(len(made[g.key]))}
    on_original = separations(golds, made, original)
    left = universe - on_original
    covers = [separations(golds, made, path) & left for path in candidates]
    reachable = set().union(*covers) if covers else set()
    result = Distillation(kept=[], mutants=made, on_original=on_original,
                          possibly_equivalent=left - reachable)
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
