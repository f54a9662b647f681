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


def overturn(gold: GoldQuery, predicted_sql: str, neighbours: Sequence[Path]) -> NeighbourVerdict:
    """For a prediction that passed on the original: the first neighbour on which it fails, if any."""
    for index, database in enumerate(neighbours):
        adapter = open_read_only(database)
        try:
            accepted = accepted_rows(adapter, gold)
            got = rows_or_none(adapter, predicted_sql)
        finally:
            adapter.close()
        if tells_apart(gold, accepted, got):
            return NeighbourVerdict(True, False, index, accepted[0] if accepted else None, got)
    return NeighbourVerdict(passed_original=True, passed=True)


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
