"""neighbour_match: does a pass on the original database hold on every kept neighbour?

Execution match on one database passes wrong SQL whenever the data hides the difference. A run
with ``neighbours:`` (evals.yaml, or ``eval run --neighbours``) adds this scorer: for an allowed
question whose rows matched the gold strictly on the original, the engine's final SQL runs on each
kept neighbour of its datasource and must match the gold (or a reviewed alternative) there too.
The original's verdict is result_match's; a case that fails there is not this scorer's to fail
again (it does not apply, and counts as not robust in the summary). So the case passes only where
it matches on the original and on every neighbour, and the board shows the neighbour-robust rate
beside the original's. A pass that holds on every kept neighbour is searched for a witness
(``witness``: the budget per pass, evals.yaml's ``neighbours: witness``); a witness found fails it as
``fails_on_witness``, the database kept in the set's ``witnesses/`` folder.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, Score, Scored, ScorerSummary
from nl2sql_assets.evaluation.judging.scorers.result_match import ResultMatch
from nl2sql_assets.evaluation.judging.stats import Rate, rate_cell
from nl2sql_assets.evaluation.neighbours.verdict import FAILS_ON_NEIGHBOUR, FAILS_ON_WITNESS
from nl2sql_assets.evaluation.neighbours.witness import FOLDER as WITNESS_FOLDER

#: what a case's detail says when the scorer did not grade it on neighbours, and why
FAILS_ON_ORIGINAL = "fails_on_original"
NO_SQL = "no_sql"


class NeighbourMatchConfig(StrictModel):
    """The kept neighbour sets, by datasource: each the folder ``neighbours.store`` keeps it in
    (the runner fills it in before the run; a worker process reads the same folders back), the
    database each was made of, and the witness search's budget per pass (0: no search)."""

    sets: dict[str, str] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)
    witness: int = 0


class NeighbourDetail(StrictModel):
    """One case run on the neighbours: matched everywhere, overturned (with the neighbour and
    both results), or not graded there (the original failed; no SQL to run)."""

    reason: str
    message: str
    neighbours: int = 0
    neighbour: str | None = None  # the neighbour file that overturned it (``witnesses/...``: a witness)
    #: the kinds of edit between the prediction and the gold the witness search was led by
    difference: list[str] = Field(default_factory=list)
    #: the set's key: the file lies in the project's warehouse/neighbours/<datasource>/<key>/
    neighbour_set: str | None = None
    gold_rows: list[list[Any]] | None = None
    predicted_rows: list[list[Any]] | None = None
    rows_from: int = 1  # the number of the first row shown of each (where the two differ)


class Overturned(StrictModel):
    case: str
    role: str
    pass_index: int = 1
    neighbour: str


class NeighbourSummary(ScorerSummary):
    """Neighbour-robust accuracy: of the questions graded, those that matched on the original and
    on every kept neighbour (a pass the original gave and a neighbour took back is overturned)."""

    questions: int
    robust: Rate
    overturned: list[Overturned] = Field(default_factory=list)
    fails_on_original: int = 0
    unchecked: int = 0  # passed on the original, but the engine gave no SQL to run elsewhere

    @property
    def by_witness(self) -> int:
        return sum(1 for o in self.overturned if o.neighbour.startswith(f"{WITNESS_FOLDER}/"))

    def metrics(self) -> dict[str, float]:
        out = {"neighbour_overturned": float(len(self.overturned)), "witness_overturned": float(self.by_witness)}
        if self.robust.rate is not None:
            out["neighbour_robust_accuracy"] = self.robust.rate
        return out

    def _witnessed(self) -> str:
        return f" ({self.by_witness} by a witness the search found)" if self.by_witness else ""

    def text(self) -> str:
        return (f"on neighbours {self.robust.count_text()}, {len(self.overturned)} pass(es) overturned"
                + self._witnessed() + (f", {self.unchecked} without SQL to check" if self.unchecked else ""))

    def beside_accuracy(self) -> str:
        return self.text()

    def markdown(self) -> str:
        shown = ", ".join(f"{o.case}@{o.role} (neighbour {o.neighbour})" for o in self.overturned[:10])
        more = f" and {len(self.overturned) - 10} more" if len(self.overturned) > 10 else ""
        return (f"On neighbour databases: {rate_cell(self.robust)} of {self.questions} question runs match on the "
                f"original and every kept neighbour; {len(self.overturned)} pass(es) overturned{self._witnessed()}"
                + (f": {shown}{more}" if shown else "") + ".")

    def cell(self) -> str:
        return f"on neighbours {rate_cell(self.robust)}"


class NeighbourMatch:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NeighbourMatchConfig
    detail_model: ClassVar[type[BaseModel]] = NeighbourDetail
    summary_model: ClassVar[type[ScorerSummary]] = NeighbourSummary
    modes: ClassVar[frozenset[str]] = frozenset({"full", "plans"})

    def __init__(self, sets: dict[str, str] | None = None, sources: dict[str, str] | None = None,
                 witness: int = 0) -> None:
        self.folders = dict(sets or {})
        self.sources = dict(sources or {})
        self.witness = witness
        self._sets: dict[str, Any] = {}
        self._judges: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: BaseModel) -> NeighbourMatch:
        assert isinstance(cfg, NeighbourMatchConfig)
        return cls(cfg.sets, cfg.sources, cfg.witness)

    def _judge(self, datasource: str) -> tuple[Any, Any] | None:
        """The datasource's set and its judge (read on first use), or None without a set."""
        if datasource not in self.folders:
            return None
        with self._lock:
            if datasource not in self._judges:
                from nl2sql_assets.evaluation.neighbours.store import sets_of_folders

                kept = sets_of_folders({datasource: self.folders[datasource]})[datasource]
                if datasource in self.sources:
                    kept.source = Path(self.sources[datasource])
                self._sets[datasource], self._judges[datasource] = kept, kept.judge(self.witness)
            return self._sets[datasource], self._judges[datasource]

    def score(self, run: CaseRun) -> Score:
        case = run.case
        if (run.expected != "allowed" or case.kind != "answer" or not case.sql or len(case.datasources) != 1
                or case.datasources[0] not in self.folders):
            return Score()
        original = ResultMatch().score(run)
        if not original.passed:
            return Score(detail=NeighbourDetail(reason=FAILS_ON_ORIGINAL, message="fails on the original "
                                                "database (result_match's verdict)").model_dump())
        sql = run.result.sql
        if not sql:
            return Score(detail=NeighbourDetail(reason=NO_SQL, message="passes on the original, but the engine "
                                                "gave no SQL to run on the neighbours").model_dump())
        from nl2sql_assets.evaluation.neighbours.store import gold_query

        found = self._judge(case.datasources[0])
        assert found is not None
        kept, judge = found
        outcome = judge.overturn(gold_query(case, ""), sql)
        count = len(kept.paths)
        if outcome.passed:
            detail = NeighbourDetail(reason="match", neighbours=count, neighbour_set=kept.manifest.key,
                                     message=f"matches on the original and on {count} neighbour(s)")
            return Score(value=1.0, passed=True, detail=detail.model_dump())
        if outcome.by_witness:
            name = f"{WITNESS_FOLDER}/{outcome.witness.name}" if outcome.witness else WITNESS_FOLDER
            message = (f"passes on the original and on {count} neighbour(s), fails on a witness database the search "
                       f"built for where it differs from the gold ({', '.join(outcome.kinds)}): {name}")
        else:
            name = kept.paths[outcome.neighbour or 0].name
            message = f"passes on the original, fails on neighbour {name} of {count}"
        detail = NeighbourDetail(
            reason=outcome.reason or FAILS_ON_NEIGHBOUR, neighbours=count, neighbour=name,
            neighbour_set=kept.manifest.key, message=message, difference=list(outcome.kinds),
            gold_rows=outcome.gold_rows or [], predicted_rows=outcome.predicted_rows, rows_from=outcome.rows_from)
        return Score(value=0.0, passed=False, detail=detail.model_dump())

    def close(self) -> None:
        with self._lock:
            for judge in self._judges.values():
                judge.close()
            self._judges.clear()
            self._sets.clear()

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> NeighbourSummary | None:
        graded = [s for s in scores if s.score.detail.get("reason")]
        if not graded:
            return None
        robust = [s for s in graded if s.score.passed]
        overturned = [Overturned(case=s.case_id, role=s.role, pass_index=s.pass_index,
                                 neighbour=str(s.score.detail.get("neighbour")))
                      for s in graded if s.score.detail.get("reason") in (FAILS_ON_NEIGHBOUR, FAILS_ON_WITNESS)]
        unchecked = sum(1 for s in graded if s.score.detail.get("reason") == NO_SQL)
        questions = len(graded) - unchecked
        return NeighbourSummary(
            questions=questions, robust=Rate.of(len(robust), questions), overturned=overturned,
            fails_on_original=sum(1 for s in graded if s.score.detail.get("reason") == FAILS_ON_ORIGINAL),
            unchecked=unchecked)
