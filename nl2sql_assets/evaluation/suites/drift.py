"""Drift: whether a suite file on disk is what ``regenerate`` writes from its SQL today.

The rows in a suite file are written by regenerate, never typed. A copy regenerated elsewhere
(the warehouse) and compared with the file tells whether the committed rows went stale, and
which cases' rows did, without ever touching the file itself.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from nl2sql_assets.evaluation.suites.loader import load_suite
from nl2sql_assets.evaluation.suites.regenerate import AdapterSource, RegenerateReport, regenerate


@dataclass(frozen=True)
class Drift:
    """``same``: the file is byte for byte (line endings aside) what regenerate writes;
    ``stale``: the cases whose rows or alternative rows differ from their SQL's."""

    same: bool
    stale: list[str] = field(default_factory=list)


def regenerate_copy(suite: str | Path, copy: str | Path, registry: AdapterSource) -> RegenerateReport:
    """Copy the suite to ``copy`` and regenerate the copy; the suite file is left as it is."""
    copy = Path(copy)
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(suite, copy)
    return regenerate(copy, registry)


def drift(suite: str | Path, regenerated: str | Path) -> Drift:
    """Compare a suite file with its regenerated copy."""
    suite, regenerated = Path(suite), Path(regenerated)
    if regenerated.read_bytes().replace(b"\r\n", b"\n") == suite.read_bytes().replace(b"\r\n", b"\n"):
        return Drift(same=True)
    fresh = {c.id: c for c in load_suite(regenerated).cases}
    stale = [c.id for c in load_suite(suite, allow_stale_rows=True).cases
             if c.id in fresh and (c.rows, c.alt_rows) != (fresh[c.id].rows, fresh[c.id].alt_rows)]
    return Drift(same=False, stale=stale)
