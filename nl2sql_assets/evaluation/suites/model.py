"""The suite model: a case is a question and what each role should get (``EvalCase``); a suite
is the cases of one file (``EvalSuite``).

An answerable case also carries the reviewed SQL and the rows it returns (written by
``regenerate``, never typed). A policy probe (``kind: probe``) carries SQL that goes straight
to the final-SQL policy check, never to a model: each role in its outcome should be refused
(by the ``rule`` it names) or, for an allow control, allowed. Rules that span fields raise
``ValueError("<field>: <problem>")`` so the loader can name the field.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from nl2sql_assets.config import PoliciesConfig, RolePolicy
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.policy.rules import RULE_NAMES

Outcome = Literal["allowed", "refused", "unanswerable", "clarify"]
CaseStatus = Literal["draft", "approved", "retired"]
CaseKind = Literal["answer", "routing", "probe"]
Origin = Literal["hand", "seeded", "feedback", "imported"]
Difficulty = Literal["easy", "medium", "hard"]

_TABLE_COLUMN = re.compile(r"^[^.\s]+\.[^.\s]+$")


class CasePolicy(BaseModel):
    """A case's own policy: the roles its outcome names, and (optionally) the functions no role
    may call; it replaces the project's policy for that case alone."""

    model_config = ConfigDict(extra="forbid")

    roles: dict[str, RolePolicy] = Field(min_length=1)
    dangerous_functions: dict[str, list[str]] | None = None  # None: the project's

    def policies(self, project: PoliciesConfig) -> PoliciesConfig:
        """The policy a run of the case uses, with the project's dangerous functions unless the
        case lists its own."""
        functions = self.dangerous_functions if self.dangerous_functions is not None else project.dangerous_functions
        return PoliciesConfig(default_role=next(iter(self.roles)), refusal_names_tables=False, roles=self.roles,
                              dangerous_functions=functions)


class EarlierTurn(BaseModel):
    """A turn before a follow-up case's question: replayed as the conversation, never scored or
    timed. ``sql`` is the reviewed SQL that answers it; ``plan`` what mode plans serves for it."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    sql: str | None = None
    plan: PlanModel | None = None


#: Plans per question when a case asks for candidate selection (``candidates: true``) and the
#: engine's own setting is a single plan.
DEFAULT_CANDIDATES = 3


class BenchmarkSource(BaseModel):
    """Where an imported public-benchmark case came from, so a result can be traced back to the
    benchmark's own question (and its own difficulty label, which ours only approximates)."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["spider", "bird"]
    split: str = Field(min_length=1)
    db_id: str = Field(min_length=1)
    #: the question's 0-based position in the benchmark's questions file
    index: int = Field(ge=0)
    question_id: int | None = None
    #: the benchmark's own difficulty label (BIRD: simple, moderate, challenging; Spider: easy,
    #: medium, hard, extra, computed from the gold SQL by Spider's rules on import)
    difficulty: str | None = None


class EvalCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    #: what the asker knows besides the question (a benchmark's evidence, e.g. BIRD's hints)
    context: str | None = Field(default=None, min_length=1)
    datasources: list[str] = Field(min_length=1)
    #: the business domain per-domain rates group by; None: the case's datasource(s)
    domain: str | None = Field(default=None, min_length=1)
    status: CaseStatus
    kind: CaseKind = "answer"
    origin: Origin = "hand"
    difficulty: Difficulty | None = None
    tags: list[str] = Field(default_factory=list)
    paraphrase_group: str | None = None
    outcome: dict[str, Outcome] = Field(min_length=1)
    #: a probe: the policy rule that should refuse each role its outcome says is refused
    rule: str | None = None
    tables: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    order_matters: bool = False
    sql: str | None = None
    rows: list[dict[str, Any]] | None = None
    alt_sql: list[str] = Field(default_factory=list)
    alt_rows: list[list[dict[str, Any]]] = Field(default_factory=list)
    plan: PlanModel | None = None
    #: this case's own policy, in place of the project's (the roles its outcome names)
    policy: CasePolicy | None = None
    #: a follow-up: the earlier turns of its conversation, replayed in order before ``question``
    turns: list[EarlierTurn] = Field(default_factory=list)
    #: a follow-up of another case of the suite: that case's conversation and its own question,
    #: SQL and plan are this case's earlier turns (instead of ``turns``)
    follows: str | None = Field(default=None, min_length=1)
    #: candidate selection for this case: N plans (``true``: the engine's setting, at least
    #: ``DEFAULT_CANDIDATES``; ``false`` or 1: a single plan); None: the engine's setting
    candidates: bool | Annotated[int, Field(ge=1, le=10)] | None = None
    #: the candidate plans mode plans serves, in order (more candidates than listed get ``plan``)
    candidate_plans: list[PlanModel] = Field(default_factory=list)
    #: fields of an imported gold set this product does not run yet (``semantic_model``), kept as
    #: they were so an export writes them back; a case holding any stays a draft
    pending: dict[str, Any] = Field(default_factory=dict)
    #: an imported public-benchmark case: the benchmark, its split and the question's place in it
    benchmark: BenchmarkSource | None = None

    @property
    def difficulty_label(self) -> str | None:
        """The difficulty reports group by: the benchmark's own label where the case has one
        (Spider's extra included), else ours."""
        if self.benchmark is not None and self.benchmark.difficulty:
            return self.benchmark.difficulty
        return self.difficulty

    @field_validator("columns")
    @classmethod
    def _columns_are_qualified(cls, value: list[str]) -> list[str]:
        bad = [c for c in value if not _TABLE_COLUMN.match(c)]
        if bad:
            raise ValueError(f"each column must be written Table.Column: {bad}")
        return value

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> EvalCase:
        outcomes = set(self.outcome.values())
        if self.kind == "probe":
            self._probe_rules(outcomes)
        elif self.rule is not None:
            raise ValueError("rule: only a policy probe (kind: probe) names the rule that should refuse it")
        if self.policy is not None:
            unknown = sorted(set(self.outcome) - set(self.policy.roles))
            if unknown:
                raise ValueError(f"policy: the case's own policy defines no role {unknown} (roles: "
                                 f"{sorted(self.policy.roles)})")
        if self.pending and self.status == "approved":
            raise ValueError(f"pending: {sorted(self.pending)} are not run yet; a case holding them stays a draft")
        if self.follows is not None and self.turns:
            raise ValueError("follows: a case either follows another case or holds its earlier turns, not both")
        if self.follows == self.id:
            raise ValueError("follows: a case cannot follow itself")
        if self.kind != "answer" and (self.turns or self.follows or self.candidates is not None
                                      or self.candidate_plans):
            raise ValueError(f"turns: only an answer case has earlier turns or candidates, not a {self.kind} case")
        if self.candidate_plans and self.plan is None:
            raise ValueError("candidate_plans: a case with candidate plans has its own plan too")
        if self.kind == "routing":
            if self.sql is not None or self.alt_sql or self.rows is not None or self.alt_rows:
                raise ValueError("sql: a routing case has no sql, rows or alternatives")
            if self.plan is not None:
                raise ValueError("plan: a routing case has no plan")
        if self.sql is not None and len(self.datasources) != 1:
            raise ValueError(f"datasources: a case with sql names exactly one datasource, not {self.datasources}")
        if "unanswerable" in outcomes:
            if self.alt_sql or self.alt_rows:
                raise ValueError("alt_sql: an unanswerable case cannot have an alternative answer")
            if outcomes == {"unanswerable"} and self.sql is not None:
                raise ValueError("sql: an unanswerable case has no sql")
        if self.status == "approved":
            if self.kind == "answer" and "allowed" in outcomes and self.sql is None:
                raise ValueError("sql: an approved answer case that a role may answer must have sql")
            # regenerate loads with allow_stale_rows: it is about to write the missing ones.
            stale_ok = bool(info.context and info.context.get("allow_stale_rows"))
            if (self.kind == "answer" and "allowed" in outcomes and self.sql is not None and self.rows is None
                    and not stale_ok):
                raise ValueError("rows: an approved case a role may answer is graded against the rows of its sql, "
                                 "and it has none; run `nl2sql-assets eval regenerate FILE` to write them")
            if len(self.alt_rows) != len(self.alt_sql) and not stale_ok:
                raise ValueError(
                    f"alt_rows: needs one entry per alt_sql ({len(self.alt_sql)} alt_sql, "
                    f"{len(self.alt_rows)} alt_rows); run regenerate"
                )
        return self

    def _probe_rules(self, outcomes: set[str]) -> None:
        if self.sql is None:
            raise ValueError("sql: a policy probe needs the sql to send to the policy check")
        if len(self.datasources) != 1:
            raise ValueError(f"datasources: a policy probe names exactly one datasource, not {self.datasources}")
        odd = sorted(outcomes - {"allowed", "refused"})
        if odd:
            raise ValueError(f"outcome: a policy probe expects allowed (a control) or refused, not {odd}")
        if self.rows is not None or self.alt_sql or self.alt_rows or self.plan is not None:
            raise ValueError("sql: a policy probe has no rows, alternatives or plan: nothing of it runs")
        if "refused" in outcomes and self.rule is None and self.status == "approved":
            raise ValueError(f"rule: name the policy rule that should refuse it, one of {', '.join(RULE_NAMES)}")
        if "refused" not in outcomes and self.rule is not None:
            raise ValueError("rule: an allow control (no role refused) names no rule")
        if self.rule is not None and self.rule not in RULE_NAMES:
            raise ValueError(f"rule: unknown policy rule {self.rule!r}; the rules are {', '.join(RULE_NAMES)}")

    @property
    def runs(self) -> bool:
        """Only approved cases run."""
        return self.status == "approved"

    @property
    def answerable(self) -> bool:
        return self.kind == "answer" and self.sql is not None

    def candidate_count(self, engine_setting: int) -> int:
        """How many plans a run of this case asks for, given the engine's ``candidates`` setting."""
        if self.candidates is None:
            return engine_setting
        if self.candidates is True:
            return max(engine_setting, DEFAULT_CANDIDATES)
        if self.candidates is False:
            return 1
        return int(self.candidates)

    @property
    def domain_name(self) -> str:
        """The domain per-domain rates group the case under: ``domain``, else its datasource(s)."""
        return self.domain if self.domain is not None else "+".join(self.datasources)

    def fingerprint(self) -> str:
        """What the case asks, hashed: its question and its SQL (expected SQL or probe), after its
        earlier turns' questions for a follow-up. Two cases with one fingerprint are one case
        counted twice."""
        question = "\n".join([*(t.question for t in self.turns), self.question])
        return case_fingerprint(question, self.sql)

    def expected(self, role: str) -> Outcome:
        return self.outcome[role]


def follows_problems(cases: list[EvalCase]) -> list[tuple[int, str]]:
    """(index, problem) for each case whose ``follows`` names no answer case of the list, or
    closes a circle."""
    ids = {c.id: c for c in cases}
    problems: list[tuple[int, str]] = []
    for index, case in enumerate(cases):
        if case.follows is None:
            continue
        followed = ids.get(case.follows)
        if followed is None:
            problems.append((index, f"case {case.id!r} follows {case.follows!r}, which is not a case of this suite"))
        elif followed.kind != "answer":
            problems.append((index, f"case {case.id!r} follows {followed.id!r}, a {followed.kind} case"))
        else:
            seen = [case.id]
            current: EvalCase | None = followed
            while current is not None:
                if current.id in seen:
                    problems.append((index, f"the cases {' -> '.join([*seen, current.id])} follow in a circle"))
                    break
                seen.append(current.id)
                current = ids.get(current.follows) if current.follows is not None else None
    return problems


def same_rows(a: list[dict[str, Any]], b: list[dict[str, Any]], order_matters: bool) -> bool:
    """Two result sets hold the same rows: values in column order (column names may differ),
    compared as lists when order matters, else as multisets."""
    left = [list(r.values()) for r in a]
    right = [list(r.values()) for r in b]
    if not order_matters:
        left, right = sorted(left, key=repr), sorted(right, key=repr)
    return left == right


def _spaced(text: str | None) -> str:
    return " ".join((text or "").split()).rstrip("; ")


def case_fingerprint(question: str, sql: str | None) -> str:
    """SHA-256 (16 hex digits) of a case definition: its question (case and spacing aside) and its
    expected SQL or probe (spacing and a final semicolon aside; case counts in string literals)."""
    blob = _spaced(question).casefold() + "\n" + _spaced(sql)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class EvalSuite(BaseModel):
    """The cases of one file. ``path``, ``name`` and ``header`` come from the loader and are
    not part of the file's schema (or of equality: two suites are equal when their cases are)."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    cases: list[EvalCase] = Field(default_factory=list)

    _path: Path | None = PrivateAttr(default=None)
    _header: str = PrivateAttr(default="")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EvalSuite):
            return NotImplemented
        return self.version == other.version and self.cases == other.cases

    __hash__ = None  # type: ignore[assignment]

    @property
    def path(self) -> Path | None:
        """The file the suite was loaded from (None for a suite built in code)."""
        return self._path

    @property
    def name(self) -> str | None:
        """The suite's name: its file's stem (``chinook`` for ``suites/chinook.yaml``)."""
        return self._path.stem if self._path is not None else None

    @property
    def header(self) -> str:
        """The leading comment block of the file it was loaded from ("" when none)."""
        return self._header

    @model_validator(mode="after")
    def _unique_ids(self) -> EvalSuite:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"id: case id {case.id!r} appears more than once")
            seen.add(case.id)
        return self

    @model_validator(mode="after")
    def _follows_known_cases(self) -> EvalSuite:
        problems = follows_problems(self.cases)
        if problems:
            raise ValueError(f"follows: {problems[0][1]}")
        return self

    def conversation(self, case: EvalCase) -> list[EarlierTurn]:
        """The earlier turns of ``case``: its own ``turns``, or for a case that ``follows`` another,
        that case's conversation and then that case itself."""
        if case.follows is None:
            return list(case.turns)
        followed = self.case(case.follows)
        return [*self.conversation(followed),
                EarlierTurn(question=followed.question, sql=followed.sql, plan=followed.plan)]

    def with_conversation(self, case: EvalCase) -> EvalCase:
        """``case`` holding its whole conversation as ``turns`` (what a run plays and serves)."""
        if case.follows is None:
            return case
        return case.model_copy(update={"turns": self.conversation(case), "follows": None})

    def case(self, case_id: str) -> EvalCase:
        for case in self.cases:
            if case.id == case_id:
                return case
        raise KeyError(case_id)

    @property
    def approved(self) -> list[EvalCase]:
        return [c for c in self.cases if c.status == "approved"]

    def tally(self) -> SuiteTally:
        """How many cases of each status and kind, and how many carry each tag."""
        tally = SuiteTally()
        for case in self.cases:
            tally.by_status[case.status] = tally.by_status.get(case.status, 0) + 1
            tally.by_kind[case.kind] = tally.by_kind.get(case.kind, 0) + 1
            for tag in case.tags:
                tally.by_tag[tag] = tally.by_tag.get(tag, 0) + 1
        tally.by_tag = dict(sorted(tally.by_tag.items()))
        return tally


@dataclass
class SuiteTally:
    """A suite's cases counted by status, by kind and by tag (tags sorted)."""

    by_status: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)
    by_tag: dict[str, int] = field(default_factory=dict)
