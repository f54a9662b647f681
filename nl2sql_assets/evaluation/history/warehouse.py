"""The results warehouse: one JSON Lines file of case records per (suite, config, pass), queried with DuckDB.

Case runs write their own records here (rather than through an IO manager), so a
scoreboard reads every pass of its config with one query and history is plain SQL. The
warehouse is the one owner of its paths (``warehouse/`` beside nl2sql.yaml):

    case_records/suite=<suite>/config=<config>/pass=<n>.jsonl
    case_records/suite=<suite>/config=<config>/pass=<n>.meta.json   (the run's RunMeta)
    spend/<budget>.jsonl                                              (the spend ledger)
    feedback/ratings.jsonl                                            (people's good/bad marks on case runs)
    reports/<suite>/<config>.json, reports/<suite>/_all.json          (scoreboards, the suite report)
    snapshots/<datasource>.json, schema_index/<datasource>.json       (schemas and their embeddings)
    eval_schema_index/<datasource>.json                               (evaluation runs' own index copies)
    regenerated/<suite>.yaml                                          (regenerate's copy, for the drift check)
    cache/steps/<step>-<name>.json                                    (dataset steps' inputs, for reuse)

Files are written atomically (temporary file, then rename), so a reader never sees half a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nl2sql_assets.atomic import atomic_write, atomic_write_chunks
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.evaluation.running.results import CaseRecord, RunMeta
from nl2sql_assets.evaluation.running.spend import LedgerState, call_entry
from nl2sql_assets.paths import schema_index_in, suite_cache_in, warehouse_dir
from nl2sql_assets.redact import redact

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.history.reuse import StepRecords
    from nl2sql_assets.evaluation.reporting.streamed import RecordStream


class Warehouse:
    """Case records and the spend ledger under one folder (git-ignored)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def location(self) -> str:
        """Where the records are, for messages (see boards.StoredPasses)."""
        return str(self.root)

    @classmethod
    def for_project(cls, project_root: str | Path) -> Warehouse:
        """A project's warehouse: ``warehouse/`` beside its nl2sql.yaml."""
        return cls(warehouse_dir(project_root))

    @property
    def schema_index_dir(self) -> Path:
        """Where each datasource's schema index is kept (the engine's retriever reads them)."""
        return schema_index_in(self.root)

    @property
    def eval_index_dir(self) -> Path:
        """The evaluation runs' own copies of the schema indexes (see running.isolation): a run
        never reads or writes the serving engine's folder above."""
        return self.root / "eval_schema_index"

    @property
    def suite_cache_dir(self) -> Path:
        """Parsed suites by file digest (``suites.cache``): a big suite is YAML-parsed once."""
        return suite_cache_in(self.root)

    @property
    def step_records(self) -> StepRecords:
        """What each dataset step computed, by its inputs (``history.reuse``): a step whose
        inputs are unchanged reuses its stored output."""
        from nl2sql_assets.evaluation.history.reuse import StepRecords

        return StepRecords(self.root / "cache" / "steps")

    # ------------------------------------------------------------ case records

    def partition_dir(self, suite: str, config: str) -> Path:
        return self.root / "case_records" / f"suite={suite}" / f"config={config}"

    def write_pass(self, suite: str, config: str, pass_index: int, records: list[CaseRecord],
                   meta: RunMeta | dict[str, Any]) -> Path:
        """Replace the records of one (suite, config, pass) and the RunMeta they were run with;
        returns the JSONL path."""
        path = self.write_pass_lines(suite, config, pass_index,
                                     (redact(r.model_dump_json()) + "\n" for r in records))
        self.write_pass_meta(suite, config, pass_index, meta)
        return path

    def write_pass_lines(self, suite: str, config: str, pass_index: int, lines: Iterable[str]) -> Path:
        """Replace the records file of one (suite, config, pass) with ``lines`` (each a record's
        redacted JSON and a newline), written as they come: the file appears whole, atomically,
        and the writer holds one line at a time (the cluster's merge step streams its shards
        through it). The caller writes the pass's RunMeta after (``write_pass_meta``)."""
        path = self.partition_dir(suite, config) / f"pass={pass_index}.jsonl"
        return atomic_write_chunks(path, (line.encode("utf-8") for line in lines))

    def pass_stream(self, suite: str, config: str, pass_index: int) -> RecordStream:
        """A stream of one (suite, config, pass)'s records, written as each case run finishes
        (``<pass>.jsonl.partial``, which no reader globs); its ``finish`` replaces the pass's
        records file, then ``write_pass_meta`` its RunMeta. Nothing of the pass is held in memory."""
        from nl2sql_assets.evaluation.reporting.streamed import RecordStream

        return RecordStream(self.partition_dir(suite, config) / f"pass={pass_index}.jsonl")

    def write_pass_meta(self, suite: str, config: str, pass_index: int, meta: RunMeta | dict[str, Any]) -> Path:
        """The RunMeta a pass was run with, beside its records (``write_pass`` writes both)."""
        data = meta.model_dump(mode="json") if isinstance(meta, RunMeta) else meta
        path = self.partition_dir(suite, config) / f"pass={pass_index}.meta.json"
        return atomic_write(path, redact(json.dumps(data, indent=1, sort_keys=True)))

    def passes(self, suite: str, config: str) -> list[int]:
        folder = self.partition_dir(suite, config)
        if not folder.is_dir():
            return []
        return sorted(int(p.stem.split("=", 1)[1]) for p in folder.glob("pass=*.jsonl"))

    def configs(self, suite: str) -> list[str]:
        folder = self.root / "case_records" / f"suite={suite}"
        if not folder.is_dir():
            return []
        return sorted(p.name.split("=", 1)[1] for p in folder.iterdir() if p.is_dir() and p.name.startswith("config="))

    def read_records(self, suite: str, config: str) -> list[CaseRecord]:
        """Every stored pass's records, pass by pass."""
        return [r for n in self.passes(suite, config) for r in self.read_pass(suite, config, n)[0]]

    def read_pass(self, suite: str, config: str, pass_index: int) -> tuple[list[CaseRecord], dict[str, Any] | None]:
        """One pass's records and the RunMeta it was stored with (None when it has none)."""
        folder = self.partition_dir(suite, config)
        with (folder / f"pass={pass_index}.jsonl").open(encoding="utf-8") as fh:
            records = [CaseRecord.model_validate_json(line) for line in fh if line.strip()]
        meta_path = folder / f"pass={pass_index}.meta.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else None
        return records, meta

    # ------------------------------------------------------------ what the runs stand on

    def snapshot_path(self, datasource_id: str) -> Path:
        return self.root / "snapshots" / f"{datasource_id}.json"

    def write_snapshot(self, snapshot: SchemaSnapshot) -> Path:
        """Store a datasource's schema snapshot (what the schema_snapshots asset shows)."""
        path = self.snapshot_path(snapshot.datasource_id)
        atomic_write(path, snapshot.model_dump_json(indent=1))
        return path

    def regenerated_suite_path(self, suite: str) -> Path:
        """The copy of a suite that regenerate writes for the drift check (the file itself is
        changed only by ``nl2sql-assets eval regenerate``)."""
        return self.root / "regenerated" / f"{suite}.yaml"

    # ------------------------------------------------------------ boards

    def scoreboard_path(self, suite: str, config: str) -> Path:
        """Where a config's scoreboard report is stored (the gate and the records read it)."""
        return self.root / "reports" / suite / f"{config}.json"

    def suite_report_path(self, suite: str) -> Path:
        """Where the suite's report across configs is stored."""
        return self.root / "reports" / suite / "_all.json"

    def scoreboards(self, suite: str) -> list[str]:
        """The configs with a stored scoreboard for ``suite``."""
        folder = self.root / "reports" / suite
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if not p.stem.startswith("_"))

    def read_metas(self, suite: str, config: str) -> list[dict[str, Any]]:
        metas = (self.read_pass(suite, config, n)[1] for n in self.passes(suite, config))
        return [m for m in metas if m is not None]

    def connect(self) -> Any:
        """An in-memory DuckDB connection with a ``case_records`` view over every JSONL file."""
        import duckdb

        con = duckdb.connect(":memory:", config={"threads": 1})
        pattern = (self.root / "case_records" / "**" / "*.jsonl").as_posix()
        if any((self.root / "case_records").glob("**/*.jsonl")):
            # A view cannot take a prepared parameter: the path is quoted as an SQL string literal.
            literal = "'" + pattern.replace("'", "''") + "'"
            con.execute(
                f"CREATE VIEW case_records AS SELECT * FROM read_json_auto({literal}, hive_partitioning = true, "
                "union_by_name = true, format = 'newline_delimited')"
            )
        else:
            con.execute(
                "CREATE VIEW case_records AS SELECT NULL::VARCHAR AS suite, NULL::VARCHAR AS config, "
                "NULL::INTEGER AS pass_index, NULL::VARCHAR AS case_id, NULL::VARCHAR AS role, "
                "NULL::VARCHAR AS status, NULL::VARCHAR AS execution_status, NULL::DOUBLE AS cost_usd, "
                "NULL::DOUBLE AS latency_s WHERE false"
            )
        return con

    def summary(self, suite: str | None = None) -> list[dict[str, Any]]:
        """Per suite, config and pass: runs, passed, execution passed, cost and mean latency."""
        con = self.connect()
        try:
            where = "WHERE suite = ?" if suite else ""
            rows = con.execute(
                f"""SELECT suite, config, pass_index, count(*) AS runs,
                           count(*) FILTER (WHERE status = 'pass') AS passed,
                           count(*) FILTER (WHERE execution_status = 'pass') AS execution_passed,
                           coalesce(sum(cost_usd), 0) AS cost_usd, avg(latency_s) AS mean_latency_s
                    FROM case_records {where}
                    GROUP BY ALL ORDER BY suite, config, pass_index""",
                [suite] if suite else [],
            ).fetchall()
            cols = ["suite", "config", "pass_index", "runs", "passed", "execution_passed", "cost_usd",
                    "mean_latency_s"]
            return [dict(zip(cols, r, strict=True)) for r in rows]
        finally:
            con.close()

    # ------------------------------------------------------------ feedback

    @property
    def ratings_path(self) -> Path:
        """People's marks on stored case runs, one JSON object per line (see history.feedback)."""
        return self.root / "feedback" / "ratings.jsonl"

    # ------------------------------------------------------------ spend ledger

    def ledger(self, budget: str) -> SpendLedger:
        return SpendLedger(self.root / "spend" / f"{budget}.jsonl")


class SpendLedger:
    """Dollars spent under one budget (a backfill), shared by every run that draws on it.

    Runs in other processes append to the same file under an exclusive lock, so every decision
    sees everyone's spending; the rules are ``running.spend``'s (a case reserves the most
    expensive case so far, each model call is checked against the dearest call of its node and
    spent when it is known, the case settles when it ends). The file is append-only, so each
    decision folds in only the lines added since the last one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._state = LedgerState()
        self._read = 0  # bytes of the file folded into _state

    @contextlib.contextmanager
    def _locked(self) -> Iterator[LedgerState]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self._catch_up()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _catch_up(self) -> LedgerState:
        if not self.path.exists():
            return self._state
        with self.path.open("rb") as fh:
            fh.seek(self._read)
            for line in fh:
                if line.strip():
                    self._state.apply(json.loads(line))
                self._read += len(line)
        return self._state

    def totals(self) -> dict[str, float]:
        with self._locked() as state:
            return state.totals()

    def reserve(self, entry_id: str, cap: float) -> Literal["go", "wait", "stop"]:
        """Ask to start one case under ``cap``.

        ``go``: room is reserved (the most expensive case so far). ``wait``: cases in flight
        may free room, or no case has finished yet so nothing is known about cost: ask again.
        ``stop``: even with nothing in flight the next case could pass the cap.
        The very first case always goes.
        """
        with self._locked() as state:
            decision, hold = state.decide_case(cap)
            if decision == "go":
                self._append({"kind": "reserve", "id": entry_id, "usd": hold})
            return decision

    def spend(self, entry_id: str, usd: float, **info: Any) -> None:
        with self._locked():
            self._append({"kind": "spend", "id": entry_id, "usd": usd, **info})

    def reserve_call(self, entry_id: str, node: str, cap: float) -> Literal["go", "wait", "stop"]:
        """May the next model call of case ``entry_id``'s node ``node`` go out (``go``/``stop``)."""
        with self._locked() as state:
            return state.decide_call(entry_id, node, cap)

    def spend_call(self, entry_id: str, node: str, usd: float) -> None:
        with self._locked():
            self._append(call_entry(entry_id, node, usd))

    def _append(self, entry: dict[str, Any]) -> None:
        """Append under the lock, and fold the line in at once (it is the file's last line)."""
        line = (redact(json.dumps(entry, sort_keys=True)) + "\n").encode("utf-8")
        with self.path.open("ab") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self._state.apply(json.loads(line))
        self._read += len(line)
