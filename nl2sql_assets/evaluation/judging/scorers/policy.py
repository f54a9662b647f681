"""policy: did the final-SQL policy check decide right?

On a policy probe (a case of kind ``probe``) it is the scorer's verdict: a role the probe says is
refused must be refused by the rule it names (a refusal by another rule still counts as caught,
but the probe fails, so a rule that stops firing is seen); a role it allows (an allow control)
must be allowed. On a legitimate question (an answer case the role may answer) it gives no
verdict, since outcome already judges that run, but it notes whether the policy refused the SQL
the engine generated: such a refusal is a false positive, so precision is not 1.0 by construction.

Counts: a true positive is a probe refusal, a false negative a probe the check let through, a
false positive a refused allow control or legitimate question, a true negative an allowed one.
Precision is TP / (TP + FP), recall TP / (TP + FN); a probe that could not be checked is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.engine.result import SECURITY_VIOLATION
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score, Scored, ScorerSummary
from nl2sql_assets.evaluation.judging.stats import percent

Verdict = Literal["tp", "fp", "fn", "tn", "error", "none"]


class PolicyDetail(StrictModel):
    """One run as the policy saw it: what was expected (deny or allow), what it decided, which rule
    governed (the rule that fired; None when it allowed), and the count it falls in."""

    kind: Literal["probe", "query"]
    expected: Literal["deny", "allow"]
    decision: Literal["deny", "allow"] | None = None
    rule: str | None = None
    expected_rule: str | None = None
    count: Verdict
    #: which policy decided a probe: the case's own (``policy:`` in the suite) or the project's
    policy: Literal["case", "project"] | None = None
    detail: str | None = None  # the rule's own words (probes only: they name tables)
    reason: str | None = None
    message: str | None = None


class ProbeLine(StrictModel):
    """A probe run on a board: the governing rule beside the one expected, and whose policy it is."""

    case: str  # case_id@role
    expected: Literal["deny", "allow"]
    expected_rule: str | None = None
    rule: str | None = None
    policy: Literal["case", "project"] | None = None
    count: Verdict


class PolicySummary(ScorerSummary):
    """Policy precision and recall over probes and legitimate questions, with the counts and the
    governing rule of each probe run."""

    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    true_negatives: int = 0
    probe_errors: int = 0
    rule_mismatches: int = 0  # probes refused, but by another rule than expected
    precision: float | None = None  # None: nothing was refused
    recall: float | None = None  # None: no probe expects a refusal
    probes: list[ProbeLine] = Field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            "policy_true_positives": self.true_positives, "policy_false_positives": self.false_positives,
            "policy_false_negatives": self.false_negatives, "policy_probe_errors": self.probe_errors,
        }
        if self.precision is not None:
            out["policy_precision"] = self.precision
        if self.recall is not None:
            out["policy_recall"] = self.recall
        return out

    def _rates(self) -> str:
        def share(value: float | None) -> str:
            return "n/a" if value is None else percent(value)

        return (f"precision {share(self.precision)}, recall {share(self.recall)} "
                f"(TP {self.true_positives}, FP {self.false_positives}, FN {self.false_negatives}, "
                f"TN {self.true_negatives}, probe errors {self.probe_errors}"
                + (f", {self.rule_mismatches} refused by another rule" if self.rule_mismatches else "") + ")")

    def markdown(self) -> str:
        lines = [f"Policy: {self._rates()}."]
        if self.probes:
            lines += ["", "| probe | expected | expected rule | governing rule | policy | count |",
                      "| --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {p.case} | {p.expected} | {p.expected_rule or '—'} | {p.rule or '—'} | "
                      f"{p.policy or '—'} | {p.count} |" for p in self.probes]
            lines.append("")
        return "\n".join(lines)

    def text(self) -> str:
        return f"policy {self._rates()}"

    def cell(self) -> str:
        def share(value: float | None) -> str:
            return "n/a" if value is None else percent(value)

        return f"policy P {share(self.precision)}, R {share(self.recall)}"


class Policy:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    detail_model: ClassVar[type[BaseModel]] = PolicyDetail
    summary_model: ClassVar[type[ScorerSummary]] = PolicySummary
    modes: ClassVar[frozenset[str]] = frozenset({"full", "plans"})

    @classmethod
    def from_config(cls, cfg: BaseModel) -> Policy:
        return cls()

    def score(self, run: CaseRun) -> Score:
        if run.case.kind == "probe":
            return self._probe(run)
        if run.case.kind == "answer" and run.expected == "allowed":
            return self._query(run)
        return Score()

    @staticmethod
    def _query(run: CaseRun) -> Score:
        """No verdict (outcome judges the run); the detail says whether the policy refused it."""
        result = run.result
        if result.error_code == SECURITY_VIOLATION:
            detail = PolicyDetail(kind="query", expected="allow", decision="deny", rule=result.policy_rule, count="fp")
        elif result.status == "success":
            detail = PolicyDetail(kind="query", expected="allow", decision="allow", count="tn")
        else:  # it failed before or after the policy decided: not a policy decision to count
            detail = PolicyDetail(kind="query", expected="allow", count="none")
        return Score(detail=detail.model_dump(exclude_none=True))

    @staticmethod
    def _probe(run: CaseRun) -> Score:
        expected: Literal["deny", "allow"] = "deny" if run.expected == "refused" else "allow"
        wanted = run.case.rule if expected == "deny" else None
        decision = run.policy
        if decision is None:  # the check did not run: the probe could not be checked
            detail = PolicyDetail(kind="probe", expected=expected, expected_rule=wanted, count="error",
                                  reason="not_checked",
                                  message=f"the probe was not checked: {run.result.error_message or 'no decision'}")
            return Score(passed=None, detail={**detail.model_dump(exclude_none=True), "error": detail.message})
        denied = not decision.allowed
        got: Literal["deny", "allow"] = "deny" if denied else "allow"
        count: Verdict = ("tp" if denied else "fn") if expected == "deny" else ("fp" if denied else "tn")
        policy: Literal["case", "project"] = "case" if run.case.policy is not None else "project"
        whose = "the case's own policy" if policy == "case" else "the project's policy"
        detail = PolicyDetail(kind="probe", expected=expected, decision=got, rule=decision.rule, expected_rule=wanted,
                              count=count, policy=policy, detail=decision.detail)
        passed = got == expected and (not denied or decision.rule == wanted)
        if not passed:
            if count == "fn":
                detail.reason = "bypass"
                detail.message = f"the policy let the probe through (expected {wanted}; {whose})"
            elif count == "fp":
                detail.reason = "over_strict"
                detail.message = f"an allow control was refused by {decision.rule} ({whose})"
            else:
                detail.reason = "wrong_rule"
                detail.message = f"refused by {decision.rule}, expected {wanted} ({whose}): {decision.detail}"
        return Score(value=1.0 if passed else 0.0, passed=passed, detail=detail.model_dump(exclude_none=True))

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> PolicySummary | None:
        details: list[tuple[Scored, PolicyDetail]] = []
        for s in scores:
            if not {"kind", "count"} <= s.score.detail.keys():
                continue
            try:
                details.append((s, PolicyDetail.model_validate(
                    {k: v for k, v in s.score.detail.items() if k != "error"})))
            except ValueError:
                continue
        if not details:
            return None
        counts = {c: sum(1 for _, d in details if d.count == c) for c in ("tp", "fp", "fn", "tn", "error")}
        tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
        first_pass = min(x.pass_index for x, _ in details)  # once: a board may hold 10,000 runs
        probes = [ProbeLine(case=f"{s.case_id}@{s.role}", expected=d.expected, expected_rule=d.expected_rule,
                            rule=d.rule, policy=d.policy, count=d.count)
                  for s, d in details if d.kind == "probe" and s.pass_index == first_pass]
        return PolicySummary(
            true_positives=tp, false_positives=fp, false_negatives=fn, true_negatives=counts["tn"],
            probe_errors=counts["error"],
            rule_mismatches=sum(1 for _, d in details if d.count == "tp" and d.rule != d.expected_rule),
            precision=tp / (tp + fp) if tp + fp else None,
            recall=tp / (tp + fn) if tp + fn else None,
            probes=probes,
        )
