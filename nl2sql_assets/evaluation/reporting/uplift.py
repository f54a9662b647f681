"""Candidate uplift: what choosing among N candidate plans gained over taking the first one.

Over the runs that tried candidates (``candidate_count`` > 1), each run is scored twice: as it
answered (the selected candidate) and as the first candidate would have answered. The uplift is
the difference of the two accuracies; the pairs that flip give McNemar's exact p, so a gain of
one or two cases is not read as a real one. The latency cost is the time the extra candidates
took (validation and execution after the first), per run and as a share of the runs' latency.
"""

from __future__ import annotations

from collections.abc import Sequence

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.stats import Rate, mcnemar_exact, percent
from nl2sql_assets.evaluation.running.results import CaseRecord


class CandidateUplift(StrictModel):
    """Selected vs first candidate on the candidate-enabled runs of a board (paired)."""

    runs: int
    selected: Rate
    first: Rate
    uplift: float  # selected accuracy minus first-candidate accuracy
    improved: int  # first candidate wrong, selected right
    worsened: int  # first candidate right, selected wrong
    p_value: float  # McNemar's exact two-sided p over the flips
    extra_latency_ms: float  # mean milliseconds spent on the candidates after the first
    latency_share: float  # that time as a share of the runs' total latency

    def markdown(self) -> str:
        return (f"Candidate uplift: {self.uplift:+.3f} (selected {percent(self.selected.rate)} vs first "
                f"{percent(self.first.rate)} over {self.runs} run(s); {self.improved} improved, "
                f"{self.worsened} worsened, McNemar p = {self.p_value:.3g}); latency cost "
                f"{self.extra_latency_ms:.1f} ms per run ({percent(self.latency_share)} of latency).")


def candidate_uplift(records: Sequence[CaseRecord]) -> CandidateUplift | None:
    """The uplift over the scored runs that tried candidates (None: no such run)."""
    runs = [r for r in records if r.candidate_count > 1 and r.first_candidate_status is not None
            and r.status != "skip"]
    if not runs:
        return None
    selected = [r.status == "pass" for r in runs]
    first = [r.first_candidate_status == "pass" for r in runs]
    improved = sum(1 for s, f in zip(selected, first, strict=True) if s and not f)
    worsened = sum(1 for s, f in zip(selected, first, strict=True) if f and not s)
    extra = sum(r.candidate_extra_s or 0.0 for r in runs)
    total = sum(r.latency_s for r in runs)
    n = len(runs)
    return CandidateUplift(
        runs=n,
        selected=Rate.of(sum(selected), n),
        first=Rate.of(sum(first), n),
        uplift=(sum(selected) - sum(first)) / n,
        improved=improved,
        worsened=worsened,
        p_value=mcnemar_exact(worsened, improved),
        extra_latency_ms=1000.0 * extra / n,
        latency_share=extra / total if total > 0 else 0.0,
    )
