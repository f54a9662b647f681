"""Feedback: people's marks on stored case runs, and ``export --good``: good runs as draft cases.

A person marks a case run good or bad (``rate``; one line per mark in the warehouse's ratings
file, the newest mark of a run wins). A mark names the run it rates: the pass's run (when it
started) and the SQL that run executed, so a pass run again is not covered by a mark on the one
before. ``export_good`` turns each thumbs-up run into a draft case (``origin: feedback``): a run
a person marked good and did not mark bad since. A run that merely passed is not a thumbs-up.
The draft holds the question, the SQL the run executed, the datasources it read, and
``allowed`` for the role that asked; drafts of one question and SQL merge their roles. Drafts go
to a file of their own, never into a reviewed suite, and a question and SQL already drafted
there are not drafted again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.config import ProjectConfig, StrictModel
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.history.warehouse import Warehouse
from nl2sql_assets.evaluation.running.results import CaseRecord, RunMeta
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, SuiteError, dump_suite, load_suite
from nl2sql_assets.evaluation.suites.model import case_fingerprint


class FeedbackError(UserError, ValueError):
    """A mark or an export that cannot be made; the message says why."""


class RatedRun(StrictModel):
    """The run a mark was made on, for one pass: when that pass's run started, and the SQL it
    executed (SHA-256; None when it executed none)."""

    started_at: datetime
    sql_sha256: str | None = None


class Rating(StrictModel):
    """One person's mark on one stored case run (``pass_index`` None: every pass of it).
    ``runs`` names the run rated in each pass (empty in marks made before runs were named: they
    cover whatever is stored under the pass)."""

    suite: str
    config: str
    case_id: str
    role: str
    pass_index: int | None = None
    rating: Literal["good", "bad"]
    note: str = ""
    at: datetime
    runs: dict[int, RatedRun] = Field(default_factory=dict)

    def covers(self, record: CaseRecord, started_at: datetime | None = None) -> bool:
        """Whether the mark is on ``record``, stored in a pass whose run started ``started_at``."""
        if (self.suite, self.config, self.case_id, self.role) != (record.suite, record.config, record.case_id,
                                                                   record.role):
            return False
        if self.pass_index not in (None, record.pass_index):
            return False
        if not self.runs:
            return True
        rated = self.runs.get(record.pass_index)
        return rated is not None and rated.started_at == started_at and rated.sql_sha256 == _sql_digest(record)


def _sql_digest(record: CaseRecord) -> str | None:
    return hashlib.sha256(record.sql.encode("utf-8")).hexdigest() if record.sql is not None else None


def _started_at(meta: dict[str, Any] | None) -> datetime | None:
    return RunMeta.model_validate(meta).run_stamp.started_at if meta is not None else None


def rate(warehouse: Warehouse, suite: str, config: str, case: str, rating: Literal["good", "bad"], *,
         pass_index: int | None = None, note: str = "") -> Rating:
    """Mark the stored run ``case`` (``case_id@role``) of ``suite`` and ``config`` good or bad.
    The run must be stored; the mark is appended (under a lock) to the ratings file."""
    case_id, sep, role = case.rpartition("@")
    if not sep or not case_id or not role:
        raise FeedbackError(f"{case!r}: name the case run as CASE_ID@ROLE")
    passes = warehouse.passes(suite, config)
    if pass_index is not None and pass_index not in passes:
        raise FeedbackError(f"no stored pass {pass_index} of suite {suite!r}, config {config!r} (stored: {passes})")
    runs: dict[int, RatedRun] = {}
    for n in passes if pass_index is None else [pass_index]:
        records, meta = warehouse.read_pass(suite, config, n)
        record = next((r for r in records if r.case_id == case_id and r.role == role), None)
        started = _started_at(meta)
        if record is not None and started is not None:
            runs[n] = RatedRun(started_at=started, sql_sha256=_sql_digest(record))
    if not runs:
        raise FeedbackError(f"no stored run of {case} in suite {suite!r}, config {config!r} under {warehouse.root} "
                            "(stored runs come from `nl2sql-assets pipeline run` or the case_runs asset)")
    mark = Rating(suite=suite, config=config, case_id=case_id, role=role, pass_index=pass_index, rating=rating,
                  note=note, at=datetime.now(UTC), runs=runs)
    path = warehouse.ratings_path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(mark.model_dump_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    return mark


def ratings(warehouse: Warehouse) -> list[Rating]:
    """Every mark, oldest first; a line that cannot be read is an error naming it."""
    path = warehouse.ratings_path
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append(Rating.model_validate_json(line))
            except ValueError as exc:
                raise FeedbackError(f"{path}, line {number}: not a rating: {exc}") from None
    return out


def _verdict(record: CaseRecord, marks: list[Rating], started_at: datetime | None) -> Literal["good", "bad"] | None:
    """The newest mark on the run, or None: a run nobody marked is no thumbs-up, pass or fail."""
    for mark in reversed(marks):
        if mark.covers(record, started_at):
            return mark.rating
    return None


class FeedbackReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: Path
    drafted: int = 0
    case_ids: list[str] = Field(default_factory=list)
    runs: int = 0  # thumbs-up runs found
    skipped: list[str] = Field(default_factory=list)  # why some good runs gave no draft
    written: bool = False  # the drafts file was written (nothing new to draft: left as it was)


def _questions(meta: dict[str, Any] | None, cache: dict[str, EvalSuite | None]) -> dict[str, EvalCase]:
    out: dict[str, EvalCase] = {}
    if meta is None:
        return out
    for ref in RunMeta.model_validate(meta).suites:
        if ref.path not in cache:
            try:
                cache[ref.path] = load_suite(ref.path)
            except SuiteError:
                cache[ref.path] = None
        suite = cache[ref.path]
        if suite is not None:
            out.update({c.id: c for c in suite.cases})
    return out


_HEADER = (
    "# Draft cases from thumbs-up runs (`nl2sql-assets feedback export --good`): runs a person marked good\n"
    "# (`feedback rate ... --good`). Drafts never run. To promote one: check that its SQL answers the question; fill in\n"
    "# difficulty, tags, tables, columns and the outcome for every role; set status: approved; then run\n"
    "# `nl2sql-assets eval regenerate <this file>` to write its rows.\n"
)


def export_good(warehouse: Warehouse, out: str | Path, *, config: ProjectConfig | None = None,
                suites: list[str] | None = None, configs: list[str] | None = None) -> FeedbackReport:
    """Write every thumbs-up stored run as a draft case to ``out`` (see the module docstring)."""
    from nl2sql_assets.evaluation.suites.drafts import refuse_draft_target

    out = Path(out)
    existing = refuse_draft_target(config, out, "export feedback drafts")
    cases: list[EvalCase] = list(existing.cases) if existing is not None else []
    known = {c.fingerprint(): c for c in cases}
    report = FeedbackReport(path=out)
    marks = ratings(warehouse)
    cache: dict[str, EvalSuite | None] = {}
    drafts: dict[str, dict[str, Any]] = {}
    suite_names = suites if suites is not None else sorted(
        p.name.split("=", 1)[1] for p in (warehouse.root / "case_records").glob("suite=*") if p.is_dir())
    for suite in suite_names:
        for cfg in configs if configs is not None else warehouse.configs(suite):
            for n in warehouse.passes(suite, cfg):
                records, meta = warehouse.read_pass(suite, cfg, n)
                questions = _questions(meta, cache)
                started = _started_at(meta)
                for record in records:
                    if record.kind != "answer" or _verdict(record, marks, started) != "good":
                        continue
                    answered = record.sql is not None and record.result_status == "success"
                    report.runs += 1
                    where = f"{suite}/{cfg}/pass {n}: {record.case_id}@{record.role}"
                    case = questions.get(record.case_id)
                    if not answered:
                        report.skipped.append(f"{where}: the run executed no SQL")
                        continue
                    if case is None:
                        report.skipped.append(f"{where}: its suite file no longer holds the case")
                        continue
                    key = case_fingerprint(case.question, record.sql)
                    if key in known:
                        continue
                    draft = drafts.setdefault(key, {
                        "id": f"feedback_{key[:12]}", "question": case.question,
                        "datasources": list(record.datasources) or list(case.datasources), "status": "draft",
                        "origin": "feedback", "tags": ["feedback"], "outcome": {}, "sql": record.sql,
                    })
                    draft["outcome"][record.role] = "allowed"
    for draft in drafts.values():
        new = EvalCase.model_validate(draft)
        cases.append(new)
        report.case_ids.append(new.id)
    report.drafted = len(drafts)
    if drafts:  # nothing new: no file written (an empty suite of drafts would say nothing)
        text = dump_suite(EvalSuite.model_construct(version=1, cases=cases),
                          header=existing.header if existing is not None else _HEADER)
        atomic_write(out, text)
        load_suite(out)
        report.written = True
    return report
