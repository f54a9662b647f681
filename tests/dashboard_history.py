"""A generated history of runs for the dashboard's scale checks: benchmark records written as
``eval publish`` writes them, for a few configs over many days, each run a thousand case runs
whose verdicts drift from run to run (so pairs of runs have flips both ways)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nl2sql_assets.evaluation.history.records import records_from_report, write_record
from nl2sql_assets.evaluation.reporting.report import build_report
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    ConfigMeta,
    DatabaseRef,
    RunMeta,
    RunStamp,
    SuiteRef,
)

CONFIGS = ("gpt-large", "gpt-small", "local-model")
REASONS = ("wrong_rows: 3 rows differ", "refused: policy rule no_pii", "sql_error: no such column",
           "timeout: past 5 s", "empty_result")
DOMAINS = ("sales", "catalog", "people", "ops")
DIFFICULTIES = ("easy", "medium", "hard")


def write_history(folder: Path, runs: int = 100, case_runs: int = 1000, seed: int = 7) -> list[Path]:
    """``runs`` records (configs in turn, one a day) of ``case_runs`` case runs each (cases under two
    roles) in ``folder``; the same arguments write the same records."""
    rng = random.Random(seed)
    cases = case_runs // 2
    skill = {c: 0.55 + 0.15 * n for n, c in enumerate(CONFIGS)}
    start = datetime(2026, 6, 1, 9, tzinfo=UTC)
    written = []
    for n in range(runs):
        config = CONFIGS[n % len(CONFIGS)]
        at = start + timedelta(days=n // len(CONFIGS), minutes=n % len(CONFIGS))
        records = []
        for i in range(cases):
            for role in ("analyst", "viewer"):
                passed = rng.random() < skill[config] + 0.002 * (n // len(CONFIGS)) - 0.1 * (i % 3 == 2)
                reason = "" if passed else REASONS[(i + n) % len(REASONS)]
                verdict = "pass" if passed else "fail"
                records.append(CaseRecord(
                    suite="generated", case_id=f"g{i:04d}", role=role, config=config, mode="full",
                    expected="allowed", status=verdict, execution_status=verdict,
                    lenient_status="pass" if passed or rng.random() < 0.2 else "fail", reason=reason,
                    sql=f"SELECT col_{i % 7} FROM t_{i % 11} WHERE k > {(i + n) % 4}",
                    domain=DOMAINS[i % len(DOMAINS)], difficulty=DIFFICULTIES[i % len(DIFFICULTIES)],
                    tags=["join"] if i % 5 == 0 else [], cost_usd=0.0004 + 0.0002 * CONFIGS.index(config),
                    latency_s=0.5 + 0.001 * i))
        stamp = RunStamp(started_at=at, finished_at=at + timedelta(minutes=1), package_version="0.1.0",
                         git_commit=f"{n:040x}", git_dirty=False)
        meta = RunMeta(mode="full", suites=[SuiteRef(name="generated", path="suites/generated.yaml", digest="g1")],
                       roles=["analyst", "viewer"], passes=1, run_stamp=stamp,
                       database=DatabaseRef(datasource_id="gen", engine="sqlite", schema_fingerprint="fp"),
                       configs={config: ConfigMeta()})
        for record in records_from_report(build_report(records, meta), note=f"generated run {n}"):
            written.append(write_record(record, folder))
    return written
