"""A predicted query graded on the original database and on every kept neighbour: it passes only
where it matches the gold (or a reviewed alternative) on all of them. A pass the original gives and a neighbour takes back is
``fails_on_neighbour``, with the neighbour and both results as evidence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nl2sql_assets.evaluation.neighbours.distill import (
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
    """Grades predictions on a fixed list of neighbours: one read-only connection per neighbour,
    and each gold's accepted rows on each neighbour computed once, however many predictions ask."""

    def __init__(self, neighbours: Sequence[Path]) -> None:
        self.neighbours = list(neighbours)
        self._adapters = [open_read_only(path) for path in self.neighbours]
        self._accepted: dict[tuple[str, int], list[list[list[Any]]] | None] = {}

    def accepted(self, gold: GoldQuery, index: int) -> list[list[list[Any]]] | None:
        key = (gold.key, index)
        if key not in self._accepted:
            self._accepted[key] = accepted_rows(self._adapters[index], gold)
        return self._accepted[key]

    def overturn(self, gold: GoldQuery, predicted_sql: str) -> NeighbourVerdict:
        """For a prediction that passed on the original: the first neighbour on which it fails, if any."""
        for index, adapter in enumerate(self._adapters):
            accepted = self.accepted(gold, index)
            if accepted is None:
                continue  # the gold fails here: this neighbour tells nothing of the case
            got = rows_or_none(adapter, predicted_sql)
            if tells_apart(gold, accepted, got):
                return NeighbourVerdict(True, False, index, accepted[0], got)
        return NeighbourVerdict(passed_original=True, passed=True)

    def close(self) -> None:
        for adapter in self._adapters:
            adapter.close()

    def __enter__(self) -> NeighbourJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def overturn(gold: GoldQuery, predicted_sql: str, neighbours: Sequence[Path]) -> NeighbourVerdict:
    """For a prediction that passed on the original: the first neighbour on which it fails, if any."""
    with NeighbourJudge(neighbours) as judge:
        return judge.overturn(gold, predicted_sql)


def neighbour_verdict(gold: GoldQuery, predicted_sql: str, original: Path,
                      neighbours: Sequence[Path]) -> NeighbourVerdict:
    """Grade ``predicted_sql`` against ``gold`` on ``original`` and then each neighbour."""
    adapter = open_read_only(original)
    try:
        accepted = accepted_rows(adapter, gold)
        got = rows_or_none(adapter, predicted_sql)
    finally:
        adapter.close()
    if accepted is None or tells_apart(gold, accepted, got):
        return NeighbourVerdict(passed_original=False, passed=False)
    return overturn(gold, predicted_sql, neighbours)
