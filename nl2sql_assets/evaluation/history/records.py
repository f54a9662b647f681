"""Benchmark records: one JSON file per recorded config run under ``benchmarks/``, never edited.

A record carries the whole board (every case record) next to its headline metrics, so it
serves both as a line of history and as a full baseline for the regression gate.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from nl2sql_assets.atomic import TEMP_PREFIX, write_new
from nl2sql_assets.config import StrictModel
from nl2sql_assets.errors import UserError, validation_summary
from nl2sql_assets.evaluation.judging.scorers import LEGACY_SUMMARY_KEYS, pop_legacy_summaries
from nl2sql_assets.evaluation.judging.stats import Rate
from nl2sql_assets.evaluation.neighbours.audit import AuditFlag
from nl2sql_assets.evaluation.reporting.board import (
    Answerability,
    Board,
    Determinism,
    EvalReport,
    Latency,
    PassK,
)
from nl2sql_assets.evaluation.running.modes import ModeName, get_mode
from nl2sql_assets.evaluation.running.results import CaseRecord, DatabaseRef, NeighbourRun
from nl2sql_assets.evaluation.running.scorers import scorer_class
from nl2sql_assets.llm.calls import TokenSource, Usage
from nl2sql_assets.redact import redact

RECORD_SCHEMA = 2
UNKNOWN = "unknown"
_RESULTS = "\u0000results\u0000"  # a placeholder no real value can equal


class RecordError(UserError, ValueError):
    """A record file that cannot be read or written; the message names the file."""


class DatasetRef(StrictModel):
    name: str
    digest: str


class ConfigRef(StrictModel):
    name: str
    models: dict[str, str] = Field(default_factory=dict)  # node -> model, as the run configured it


class Dollars(StrictModel):
    total_usd: float
    per_case_usd: float
    unknown_cost_calls: int = 0
    estimated_calls: int = 0
    token_source: TokenSource | None = None


class Metrics(StrictModel):
    """The headline numbers; execution accuracy (strict, then lenient) comes first. ``scorers``
    holds each scorer's own numbers (what its summary plots), by scorer name."""

    execution: Rate
    execution_lenient: Rate
    accuracy_all_scorers: Rate
    accuracy_generated: Rate
    pass_k: PassK
    answerability: Answerability | None = None
    dollars: Dollars
    tokens: Usage
    latency: Latency
    determinism: Determinism | None = None
    scorers: dict[str, dict[str, float]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _scorer_numbers(cls, data: Any) -> Any:
        """Records written before scorers owned their summaries kept three of them here under
        their own names; their numbers move under their scorers."""
        if not isinstance(data, dict) or not LEGACY_SUMMARY_KEYS.keys() & data.keys():
            return data
        data = dict(data)
        scorers = dict(data.get("scorers") or {})
        for name, legacy in pop_legacy_summaries(data).items():
            model = getattr(scorer_class(name), "summary_model", None)
            if model is not None:
                scorers.setdefault(name, model.model_validate(legacy).metrics())
        data["scorers"] = scorers
        return data


class BenchmarkRecord(StrictModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_version: Literal[2] = Field(default=RECORD_SCHEMA, alias="schema")
    kind: ModeName
    recorded_at: datetime  # the run's own stamp, never the time it was published
    engine_version: str
    git_commit: str = UNKNOWN  # the engine's commit (the installed package's checkout)
    git_dirty: bool | Literal["unknown"] = UNKNOWN
    project_git_commit: str = UNKNOWN  # the project folder's checkout, where one holds it
    project_git_dirty: bool | Literal["unknown"] = UNKNOWN
    note: str | None = None
    dataset: DatasetRef | list[DatasetRef]
    database: DatabaseRef | list[DatabaseRef]
    config: ConfigRef
    roles: list[str] = Field(default_factory=list)
    passes: int = 1
    curated: bool = False
    clarify: bool = False
    incomplete: bool = False  # recorded on purpose although the provider failed some case runs
    settings: dict[str, Any] = Field(default_factory=dict)
    metrics: Metrics
    scoreboard: Board
    comparator_version: int = 1
    #: the final-SQL policy check's version (1 in records made before it was kept)
    policy_check_version: int = 1
    #: the neighbour databases every pass was also graded on (settings, versions, each set's key);
    #: part of the series: another seed, K or generator starts a new one
    neighbours: NeighbourRun | None = Field(default=None, exclude_if=lambda v: v is None)
    #: the gold audit made with the neighbours (``neighbours.audit``); none kept before it was recorded
    gold_audit: list[AuditFlag] = Field(default_factory=list, exclude_if=lambda v: not v)
    # What was run and measured, hashed (``run_digest``): the same report is never recorded twice.
    run_digest: str | None = None

    @property
    def datasets(self) -> list[DatasetRef]:
        return self.dataset if isinstance(self.dataset, list) else [self.dataset]

    @property
    def databases(self) -> list[DatabaseRef]:
        return self.database if isinstance(self.database, list) else [self.database]

    @property
    def database_id(self) -> str:
        return database_id(self.databases)

    def to_json(self) -> str:
        """Indented JSON with each case record on one line: readable diffs at half the size."""
        data = self.model_dump(mode="json", by_alias=True)
        results = data["scoreboard"]["results"]
        data["scoreboard"]["results"] = _RESULTS
        text = json.dumps(data, indent=2, ensure_ascii=False)
        lines = ",\n".join("      " + json.dumps(item, ensure_ascii=False) for item in results)
        listed = f"[\n{lines}\n    ]" if results else "[]"
        return text.replace(json.dumps(_RESULTS), listed, 1) + "\n"


# ---------------------------------------------------------------- identity and series


def database_id(databases: list[DatabaseRef]) -> str:
    """The folder name: the datasource id, or the sorted ids joined with '-'."""
    ids = sorted({d.datasource_id for d in databases})
    return "-".join(ids) if ids else UNKNOWN


SeriesKey = tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], bool | None, tuple[Any, ...] | None]


def series_key(item: BenchmarkRecord | EvalReport) -> SeriesKey:
    """What makes two runs comparable: mode, suite digests, schema fingerprints, what the mode
    adds (mode full: the roles and whether curated answers were on) and the neighbour settings
    the passes were also graded on (None: none)."""
    if isinstance(item, BenchmarkRecord):
        mode, digests = item.kind, [d.digest for d in item.datasets]
        fingerprints = [d.schema_fingerprint for d in item.databases]
    else:
        mode, digests = item.mode, [s.digest for s in item.suites]
        fingerprints = [d.schema_fingerprint for d in item.databases]
    roles, curated = get_mode(mode).series_of(item.roles, item.curated)
    neighbours = item.neighbours.series() if item.neighbours is not None else None
    return mode, tuple(sorted(digests)), tuple(sorted(fingerprints)), roles, curated, neighbours


# ---------------------------------------------------------------- from a report


def run_digest(record: BenchmarkRecord) -> str:
    """SHA-256 of what a record says about its run, leaving out the note (a second publish of one
    report with another note is still the same run)."""
    data = record.model_dump(mode="json", by_alias=True, exclude={"note", "run_digest"})
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def record_for_config(report: EvalReport, config: str, note: str | None = None) -> BenchmarkRecord:
    board = report.configs[config]
    acc = board.accuracy
    stamp = report.run_stamp
    datasets = [DatasetRef(name=s.name, digest=s.digest) for s in report.suites]
    tokens = Usage()
    for usage in board.tokens_by_node.values():
        tokens = tokens + usage
    record = BenchmarkRecord(
        kind=report.mode,
        recorded_at=stamp.started_at,
        engine_version=stamp.package_version,
        git_commit=stamp.git_commit or UNKNOWN,
        git_dirty=UNKNOWN if stamp.git_dirty is None else stamp.git_dirty,
        project_git_commit=stamp.project_git_commit or UNKNOWN,
        project_git_dirty=stamp.project_git_dirty,
        note=note,
        dataset=datasets[0] if len(datasets) == 1 else datasets,
        database=report.databases[0] if len(report.databases) == 1 else list(report.databases),
        config=ConfigRef(name=config, models={node: provider_model(m) for node, m in board.models.items()}),
        roles=list(report.roles),
        passes=report.passes,
        curated=report.curated,
        clarify=report.clarify,
        incomplete=report.incomplete,
        settings=dict(report.settings),
        metrics=Metrics(
            execution=acc.execution,
            execution_lenient=acc.execution_lenient,
            accuracy_all_scorers=acc.overall,
            accuracy_generated=acc.generated,
            pass_k=acc.pass_k,
            answerability=board.answerability,
            dollars=Dollars(total_usd=board.cost.total_usd, per_case_usd=board.cost.per_case_usd,
                            unknown_cost_calls=board.cost.unknown_cost_calls,
                            estimated_calls=board.cost.estimated_calls, token_source=board.cost.token_source),
            tokens=tokens,
            latency=board.latency,
            determinism=board.determinism,
            scorers={name: summary.metrics() for name, summary in board.summaries().items()},
        ),
        scoreboard=compact_board(board),
        comparator_version=report.comparator_version,
        policy_check_version=report.policy_check_version,
        neighbours=report.neighbours,
        gold_audit=list(report.gold_audit),
    )
    return record.model_copy(update={"run_digest": run_digest(record)})


def provider_model(model: str) -> str:
    """A litellm model string as the records write it: ``openai/gpt-5.4`` -> ``openai:gpt-5.4``;
    an engine's own description (``http:http://host:port/``, an entry point's) as it is."""
    if "://" in model or model.startswith(("http:", "python:")):
        return model
    provider, sep, name = model.partition("/")
    return f"{provider}:{name}" if sep else model


# Per-case fields a record leaves out: the plan is in the suite (the plans tried and the full
# answer are in the run's report), the models are on the board, and what the retriever sent is
# summarised by the retrieval_recall score (and the board).
_HEAVY_FIELDS = {"plan": None, "plans_tried": [], "answer_content": None, "models": {}, "retrieval": None,
                 "timings": {}}


def compact_board(board: Board) -> Board:
    """The board with compact case records: verdicts, reasons, SQL, hashes, cost and latency."""

    def slim(record: CaseRecord) -> CaseRecord:
        generated = slim(record.generated) if record.generated is not None else None
        return record.model_copy(update={**_HEAVY_FIELDS, "generated": generated})

    return board.model_copy(update={"results": [slim(r) for r in board.results]})


def records_from_report(report: EvalReport, note: str | None = None) -> list[BenchmarkRecord]:
    """One record per config, in the report's order."""
    return [record_for_config(report, name, note) for name in report.configs]


# ---------------------------------------------------------------- files


def _safe(part: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", part).strip("-.")
    return cleaned or UNKNOWN


def record_dir(record: BenchmarkRecord, root: Path) -> Path:
    return Path(root) / "benchmarks" / record.kind / _safe(record.database_id)


def record_stem(record: BenchmarkRecord) -> str:
    recorded = record.recorded_at
    if recorded.tzinfo is not None:
        recorded = recorded.astimezone(UTC)
    commit = record.git_commit if re.fullmatch(r"[0-9a-fA-F]{7,64}", record.git_commit) else UNKNOWN
    short = commit[:7] if commit != UNKNOWN else UNKNOWN
    return f"{recorded:%Y-%m-%d}_{short}_{_safe(record.config.name)}"


def write_record(record: BenchmarkRecord, root: str | Path) -> Path:
    """Write under ``root/benchmarks/<kind>/<database>/``; a taken name gets ``-2``, ``-3``...
    Each file is created exactly once, complete (temporary file, fsync, link), never
    overwritten; a failed write leaves nothing and names the file and the cause."""
    folder = record_dir(record, Path(root))
    stem = record_stem(record)
    text = redact(record.to_json())
    for n in range(1, 10_000):
        path = folder / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
        try:
            return write_new(path, text)
        except FileExistsError:
            continue
    raise RecordError(f"{folder}: too many records named {stem}")


def load_record(path: str | Path) -> BenchmarkRecord:
    path = Path(path)
    try:
        return BenchmarkRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RecordError(f"{path}: cannot read the record: {exc}") from exc
    except ValueError as exc:
        raise RecordError(f"{path}: not a benchmark record: {validation_summary(exc)}") from exc


def iter_records(folder: str | Path) -> Iterator[tuple[Path, BenchmarkRecord]]:
    """Every record under ``folder`` (searched recursively), oldest first: by recorded_at,
    then file name. A folder that does not exist holds none."""
    folder = Path(folder)
    if not folder.is_dir():
        return iter(())
    found = [(path, load_record(path)) for path in folder.rglob("*.json")
             if path.is_file() and not path.name.startswith(TEMP_PREFIX)]
    found.sort(key=lambda item: (_utc(item[1].recorded_at), _name_order(item[0].name), str(item[0])))
    return iter(found)


def _name_order(name: str) -> tuple[str, int]:
    """``x.json`` before ``x-2.json`` before ``x-10.json``: the order they were written in."""
    match = re.fullmatch(r"(.*?)(?:-(\d+))?\.json", name)
    if match is None:
        return name, 1
    return match.group(1), int(match.group(2) or 1)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
