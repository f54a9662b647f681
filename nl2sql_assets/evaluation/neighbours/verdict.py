"""A predicted query graded on the original database and on every kept neighbour: it passes only
where it matches the gold (or a reviewed alternative) on all of them. A pass the original gives
and a neighbour takes back is ``fails_on_neighbour``, with the neighbour and both results as
evidence."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nl2sql_assets.evaluation.neighbours.distill import (
    Accepted,
    GoldQuery,
    accepted_rows,
    open_read_only,
    rows_or_none,
    tells_apart,
)

FAILS_ON_NEIGHBOUR = "fails_on_neighbour"


@dataclass(frozen=True)
class NeighbourVerdict:
    """How a prediction fared: on the original, then on the neighbours in turn."""

    passed_original: bool
    passed: bool
    #: the first neighbour (its index among those given) on which a pass on the original failed
    neighbour: int | None = None
    gold_rows: list[list[Any]] | None = None
    predicted_rows: list[list[Any]] | None = None

    @property
    def reason(self) -> str | None:
        return FAILS_ON_NEIGHBOUR if self.passed_original and not self.passed else None


class NeighbourJudge:
    """Grades predictions on a fixed list of neighbours: one read-only connection per neighbour
    (opened on first use), and each gold's accepted rows on each neighbour read from ``stored``
    (gold digest -> rows per neighbour, as the set's sidecar keeps them) or computed once,
    however many predictions ask. Safe to share between threads."""

    def __init__(self, neighbours: Sequence[Path], engine: str = "sqlite",
                 stored: Mapping[str, Sequence[Accepted]] | None = None) -> None:
        self.neighbours = list(neighbours)
        self.engine = engine
        self._stored = stored or {}
        self._adapters: dict[int, Any] = {}
        self._accepted: dict[tuple[str, int], Accepted] = {}
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

    def overturn(self, gold: GoldQuery, predicted_sql: str) -> NeighbourVerdict:
        """For a prediction that passed on the original: the first neighbour on which it fails, if any."""
        for index in range(len(self.neighbours)):
            accepted = self.accepted(gold, index)
            if accepted is None:
                continue  # the gold fails here: this neighbour tells nothing of the case
            got = rows_or_none(self._adapter(index), predicted_sql)
            if tells_apart(gold, accepted, got):
                return NeighbourVerdict(True, False, index, accepted[0], got)
        return NeighbourVerdict(passed_original=True, passed=True)

    def close(self) -> None:
        with self._lock:
            for adapter in self._adapters.values():
                adapter.close()
            self._adapters.clear()

    def __enter__(self) -> NeighbourJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def overturn(gold: GoldQuery, predicted_sql: str, neighbours: Sequence[Path], engine: str = "sqlite") -> NeighbourVerdict:
    """For a prediction that passed on the original: the first neighbour on which it fails, if any."""
    with NeighbourJudge(neighbours, engine) as judge:
        return judge.overturn(gold, predicted_sql)


def neighbour_verdict(gold: GoldQuery, predicted_sql: str, original: Path,
                      neighbours: Sequence[Path], engine: str = "sqlite") -> NeighbourVerdict:
    """Grade ``predicted_sql`` against ``gold`` on ``original`` and then each neighbour."""
    adapter = open_read_only(original, engine)
    try:
        accepted = accepted_rows(adapter, gold)
        got = rows_or_none(adapter, predicted_sql)
    finally:
        adapter.close()
    if accepted is None or tells_apart(gold, accepted, got):
        return NeighbourVerdict(passed_original=False, passed=False)
    return overturn(gold, predicted_sql, neighbours, engine)
