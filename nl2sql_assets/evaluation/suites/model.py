"""The suite model: a case is a question and what each role should get (``EvalCase``); a suite
is the cases of one file (``EvalSuite``).

An answerable case also carries the reviewed SQL and the rows it returns (written by
``regenerate``, never typed). Rules that span fields raise ``ValueError("<field>: <problem>")``
so the loader can name the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from nl2sql_assets.engine.plan import PlanModel

Outcome = Literal["allowed", "refused", "unanswerable", "clarify"]
CaseStatus = Literal["draft", "approved", "retired"]
CaseKind = Literal["answer", "routing"]
Origin = Literal["hand", "seeded", "feedback"]
Difficulty = Literal["easy", "medium", "hard"]

_TABLE_COLUMN = re.compile(r"^[^.\s]+\.[^.\s]+$")


class EvalCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    datasources: list[str] = Field(min_length=1)
    status: CaseStatus
    kind: CaseKind = "answer"
    origin: Origin = "hand"
    difficulty: Difficulty | None = None
    tags: list[str] = Field(default_factory=list)
    paraphrase_group: str | None = None
    outcome: dict[str, Outcome] = Field(min_length=1)
    tables: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    order_matters: bool = False
    sql: str | None = None
    rows: list[dict[str, Any]] | None = None
    alt_sql: list[str] = Field(default_factory=list)
    alt_rows: list[list[dict[str, Any]]] = Field(default_factory=list)
    plan: PlanModel | None = None

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
            if len(self.alt_rows) != len(self.alt_sql) and not stale_ok:
                raise ValueError(
                    f"alt_rows: needs one entry per alt_sql ({len(self.alt_sql)} alt_sql, "
                    f"{len(self.alt_rows)} alt_rows); run regenerate"
                )
        return self

    @property
    def runs(self) -> bool:
        """Only approved cases run."""
        return self.status == "approved"

    @property
    def answerable(self) -> bool:
        return self.kind == "answer" and self.sql is not None

    def expected(self, role: str) -> Outcome:
        return self.outcome[role]


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
