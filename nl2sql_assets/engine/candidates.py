"""Execution-guided candidate selection: of N plans for one question, the one to answer with.

Plans that failed validation or execution are dropped; of the rest, the result set most of them
return wins (rows compared as multisets, column names aside), and a tie goes to the group whose
first plan came earliest. A pure function over outcomes, so it is tested with small tables.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CandidateOutcome:
    """What one candidate plan did: ``rows`` is None when it failed validation or execution."""

    index: int
    rows: Sequence[Sequence[Any]] | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.rows is not None


def result_key(rows: Sequence[Sequence[Any]]) -> str:
    """Rows as a multiset (order aside): two candidates agree when their keys are equal."""
    return json.dumps(sorted(json.dumps(list(r), default=str) for r in rows))


def select_candidate(outcomes: Sequence[CandidateOutcome]) -> int | None:
    """The index of the chosen candidate, or None when every one failed.

    Votes are counted per result set; the most common wins, ties go to the result set first
    returned, and the chosen candidate is the earliest that returned it."""
    groups: dict[str, list[int]] = {}
    for outcome in outcomes:
        if outcome.ok:
            assert outcome.rows is not None
            groups.setdefault(result_key(outcome.rows), []).append(outcome.index)
    if not groups:
        return None
    best = max(groups.values(), key=lambda members: (len(members), -min(members)))
    return min(best)
