"""A predicted query graded on the original database and on every kept neighbour: it passes only
where it matches the gold (or a reviewed alternative) on all of them. A pass the original gives
and a neighbour takes back is ``fails_on_neighbour``, with the neighbour and both results as
evidence. A pass that holds on every kept neighbour is then searched for a witness (``witness``):
one found takes the pass back as ``fails_on_witness``, the witness database kept as evidence."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nl2sql_assets.evaluation.neighbours.distill import (
    Accepted,
    GoldQuery,
    accepted_rows,
    open_read_only,
    rows_or_none,
    tells_apart,
)


class WitnessSearch(Protocol):
    """What a judge asks of the witness search (``witness.WitnessSearch``): a pass searched, its
    outcome (``record``: found or not, the evidence; ``path``: the witness database, where kept)."""

    def search(self, gold: GoldQuery, predicted_sql: str) -> Any: ...


FAILS_ON_NEIGHBOUR = "fails_on_neighbour"
FAILS_ON_WITNESS = "fails_on_witness"
#: rows of each result an overturn keeps as evidence (reports, records, a witness's sidecar)
EVIDENCE_ROWS = 20
#: verdicts a judge keeps, by gold and SQL (the oldest let go first)
VERDICTS_KEPT = 4096


def evidence(gold_rows: list[list[Any]], predicted_rows: list[list[Any]] | None, limit: int = EVIDENCE_ROWS
             ) -> tuple[list[list[Any]], list[list[Any]] | None, int]:
    """Up to ``limit`` rows of each result, taken where the two differ: from the start, or, where
    their first ``limit`` rows agree, from two rows before the first that differs (a long result
    whose first rows agree still shows the difference); and the number (from 1) of the first row kept."""
    if predicted_rows is None:
        return gold_rows[:limit], None, 1
    first = next((i for i, (a, b) in enumerate(zip(gold_rows, predicted_rows, strict=False)) if a != b),
                 min(len(gold_rows), len(predicted_rows)))
    start = 0 if first < limit else max(0, first - 2)
    return gold_rows[start:start + limit], predicted_rows[start:start + limit], start + 1


@dataclass(frozen=True)
class NeighbourVerdict:
    """How a prediction fared: on the original, then on the neighbours in turn."""

    passed_original: bool
    passed: bool
    #: the first neighbour (its index among those given) on which a pass on the original failed
    neighbour: int | None = None
    #: the evidence: up to ``EVIDENCE_ROWS`` rows of each result where they differ (``evidence``),
    #: from row number ``rows_from``
    gold_rows: list[list[Any]] | None = None
    predicted_rows: list[list[Any]] | None = None
    rows_from: int = 1
    #: overturned by a witness the search found (no kept neighbour did), and its file where kept
    by_witness: bool = False
    witness: Path | None = None
    #: the kinds of edit between the prediction and the gold that led the search to it
    kinds: tuple[str, ...] = ()

    @property
    def reason(self) -> str | None:
        if not self.passed_original or self.passed:
            return None
        return FAILS_ON_WITNESS if self.by_witness else FAILS_ON_NEIGHBOUR


class NeighbourJudge:
    """Grades predictions on a fixed list of neighbours: one read-only connection per neighbour
    (opened on first use), and each gold's accepted rows on each neighbour read from ``stored``
    (gold digest -> rows per neighbour, as the set's sidecar keeps them) or computed once,
    however many predictions ask. Safe to share between threads."""

    def __init__(self, neighbours: Sequence[Path], engine: str = "sqlite",
                 stored: Mapping[str, Sequence[Accepted]] | None = None, witness: WitnessSearch | None = None) -> None:
        self.neighbours = list(neighbours)
        self.engine = engine
        self.witness = witness
        self._stored = stored or {}
        self._adapters: dict[int, Any] = {}
        self._accepted: dict[tuple[str, int], Accepted] = {}
        self._verdicts: dict[tuple[str, str, bool], NeighbourVerdict] = {}
        self._lock = threading.Lock()

    def _adapter(self, index: int) -> Any:
        with self._lock:
            if index not in self._adapters:
                self._adapters[index] = open_read_only(self.neighbours[index], self.engine)
            return self._adapters[index]

    def accepted(self, gold: GoldQuery, index: int) -> Accepted:
        stored = self._stored.get(gold.digest)
        if stored is not None and index < len(stored):
            return stored[index]
        key = (gold.digest, index)
        if key not in self._accepted:
            self._accepted[key] = accepted_rows(self._adapter(index), gold)
        return self._accepted[key]

    def overturn(self, gold: GoldQuery, predicted_sql: str, *, search: bool = True) -> NeighbourVerdict:
        """For a prediction that passed on the original: the first neighbour on which it fails, if
        any; else the witness the search finds (``search``: False leaves that to ``search``). The
        same SQL against the same gold is judged once (copies of a case, passes of a run)."""
        key = (gold.digest, predicted_sql, search)
        with self._lock:
            known = self._verdicts.get(key)
        if known is not None:
            return known
        verdict = self._overturn(gold, predicted_sql, search)
        with self._lock:
            if len(self._verdicts) >= VERDICTS_KEPT:
                self._verdicts.pop(next(iter(self._verdicts)))
            self._verdicts[key] = verdict
        return verdict

    def _overturn(self, gold: GoldQuery, predicted_sql: str, search: bool) -> NeighbourVerdict:
        for index in range(len(self.neighbours)):
            accepted = self.accepted(gold, index)
            if accepted is None:
                continue  # the gold fails here: this neighbour tells nothing of the case
            got = rows_or_none(self._adapter(index), predicted_sql)
            if tells_apart(gold, accepted, got):
                shown_gold, shown_predicted, rows_from = evidence(accepted[0], got)
                return NeighbourVerdict(True, False, index, shown_gold, shown_predicted, rows_from)
        if search:
            return self.search(gold, predicted_sql)
        return NeighbourVerdict(passed_original=True, passed=True)

    def search(self, gold: GoldQuery, predicted_sql: str) -> NeighbourVerdict:
        """For a pass that holds on every kept neighbour: the witness search's verdict."""
        return search_verdict(self.witness, gold, predicted_sql)

    def close(self) -> None:
        with self._lock:
            for adapter in self._adapters.values():
                adapter.close()
            self._adapters.clear()

    def __enter__(self) -> NeighbourJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def search_verdict(witness: WitnessSearch | None, gold: GoldQuery, predicted_sql: str) -> NeighbourVerdict:
    """A pass that held on every kept neighbour, searched for a witness (``witness``: None, no search)."""
    if witness is None:
        return NeighbourVerdict(passed_original=True, passed=True)
    outcome = witness.search(gold, predicted_sql)
    record = outcome.record
    if record is None or not record.found:
        return NeighbourVerdict(passed_original=True, passed=True, kinds=tuple(record.kinds) if record else ())
    return NeighbourVerdict(True, False, None, record.gold_rows, record.predicted_rows, record.rows_from,
                            by_witness=True, witness=outcome.path, kinds=tuple(record.kinds))


def overturn(gold: GoldQuery, predicted_sql: str, neighbours: Sequence[Path], engine: str = "sqlite",
             witness: WitnessSearch | None = None) -> NeighbourVerdict:
    """For a prediction that passed on the original: the first neighbour on which it fails, if
    any, else the witness ``witness`` finds."""
    with NeighbourJudge(neighbours, engine, witness=witness) as judge:
        return judge.overturn(gold, predicted_sql)


def neighbour_verdict(gold: GoldQuery, predicted_sql: str, original: Path,
                      neighbours: Sequence[Path], engine: str = "sqlite",
                      witness: WitnessSearch | None = None) -> NeighbourVerdict:
    """Grade ``predicted_sql`` against ``gold`` on ``original``, then each neighbour, then (where
    ``witness`` is given) on the databases the witness search builds."""
    adapter = open_read_only(original, engine)
    try:
        accepted = accepted_rows(adapter, gold)
        got = rows_or_none(adapter, predicted_sql)
    finally:
        adapter.close()
    if accepted is None or tells_apart(gold, accepted, got):
        return NeighbourVerdict(passed_original=False, passed=False)
    return overturn(gold, predicted_sql, neighbours, engine, witness)
