"""Which case runs an eval makes: approved cases, narrowed by id/tag selectors and by role.

A selector that matches nothing is an error rather than an empty run: a typo in
``--cases`` must not produce a report that looks like a clean pass over zero cases.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, Outcome

if TYPE_CHECKING:
    from nl2sql_assets.config import ProjectConfig


class SelectionError(UserError, ValueError):
    """A case or role selector that matches nothing, or a run with nothing to do."""


@dataclass(frozen=True)
class SelectedCase:
    suite: str
    case: EvalCase


@dataclass(frozen=True)
class RoleRun:
    """One case asked as one role (the unit a pass repeats and a config answers)."""

    suite: str
    case: EvalCase
    role: str

    @property
    def expected(self) -> Outcome:
        return self.case.outcome[self.role]


def select_cases(suites: Sequence[tuple[str, EvalSuite]], selectors: Iterable[str] | None = None) -> list[SelectedCase]:
    """Approved cases of every suite, in file order. ``selectors`` keep the cases whose id or
    one of whose tags equals a selector; each selector must match at least one case."""
    approved = [SelectedCase(name, suite.with_conversation(c)) for name, suite in suites for c in suite.cases
                if c.status == "approved"]
    if selectors is None:
        return approved
    wanted = list(dict.fromkeys(selectors))
    if not wanted:
        return approved
    unmatched = [s for s in wanted if not any(s == sc.case.id or s in sc.case.tags for sc in approved)]
    if unmatched:
        names = ", ".join(repr(s) for s in unmatched)
        raise SelectionError(
            f"case selector(s) {names} match no approved case id or tag in suite(s) "
            f"{sorted({name for name, _ in suites})}"
        )
    keep = set(wanted)
    return [sc for sc in approved if sc.case.id in keep or keep.intersection(sc.case.tags)]


def role_runs(
    selected: Sequence[SelectedCase],
    roles: Iterable[str] | None = None,
    *,
    clarify: bool = False,
) -> tuple[list[RoleRun], int]:
    """``(runs, skipped)``: one run per case and role in its outcome map (narrowed by ``roles``);
    ``clarify`` runs are left out and counted in ``skipped`` unless ``clarify`` is on."""
    keep: set[str] | None = None
    if roles is not None:
        keep = set(roles)
        known = {role for sc in selected for role in sc.case.outcome}
        unknown = sorted(keep - known)
        if unknown:
            raise SelectionError(f"role(s) {unknown} appear in no selected case's outcome; roles there: {sorted(known)}")
    runs: list[RoleRun] = []
    skipped = 0
    for sc in selected:
        for role, outcome in sc.case.outcome.items():
            if keep is not None and role not in keep:
                continue
            if outcome == "clarify" and not clarify:
                skipped += 1
                continue
            runs.append(RoleRun(sc.suite, sc.case, role))
    return runs, skipped


def _missing_listed_suite(config: ProjectConfig, index: int, path: Path) -> str:
    """Why a suite evals.yaml lists cannot be read: both paths, and the rule they follow."""
    evals = config.evals_config
    written = evals.suites_as_written[index] if index < len(evals.suites_as_written) else str(path)
    source = evals.source or config.source
    message = (f"{source}: suites: {written!r} is {path}, which does not exist (suite paths in evals.yaml are "
               f"relative to the folder of {config.source or 'nl2sql.yaml'}, {config.root})")
    if source is not None and not Path(written).is_absolute():
        beside = source.parent / written
        if beside.exists() and beside.resolve() != path.resolve():
            message += (f"; {beside} exists beside evals.yaml: list it as "
                        f"{os.path.relpath(beside, config.root)!r}")
    return message


def load_run_suites(config: ProjectConfig, suites: Sequence[str | Path] | None) -> list[tuple[str, Path, EvalSuite]]:
    """A run's suites (``suites``, else evals.yaml's), each read through the warehouse's suite
    cache (a hit skips YAML parsing): (name, path, suite). Two suites may not share a name."""
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import suite_cache_dir

    cache_dir = suite_cache_dir(config.root)
    paths = list(suites) if suites is not None else list(config.evals_config.suites)
    if not paths:
        raise SelectionError("no suites to run: pass suites=[...] or list them under suites in evals.yaml")
    out: list[tuple[str, Path, EvalSuite]] = []
    for n, p in enumerate(paths):
        path = config.resolve(p)
        if not Path(p).is_absolute() and not path.exists() and Path(p).exists():
            path = Path(p).resolve()  # a suite given relative to the working folder
        if suites is None and not path.exists():
            raise SelectionError(_missing_listed_suite(config, n, path))
        suite = load_suite(path, cache_dir=cache_dir)
        out.append((suite.name or path.stem, path, suite))
    names = [name for name, _, _ in out]
    if len(set(names)) != len(names):
        raise SelectionError(f"two suites share a name (their file stem): {names}")
    return out
