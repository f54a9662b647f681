"""Case runs sharded over worker processes: the records are those of a one-process run (apart
from timings), in the same order, each announced once; a mode that spends never shards."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.config import load_config
from nl2sql_assets.evaluation.running import shards
from nl2sql_assets.evaluation.running.modes import get_mode
from nl2sql_assets.evaluation.running.request import RunRequest
from nl2sql_assets.evaluation.running.runner import run_shard_worker
from nl2sql_assets.project import Project
from tests.processes import children, kill_all, start, still_alive, stop

CASES = ["chinook_001", "chinook_002", "chinook_010", "chinook_037", "chinook_probe_01", "chinook_probe_02"]


#: What depends on the clock: the timings, and the warm-up flag (a case run that started before
#: its process's first one finished; each worker process pays its own one-time costs).
TIMING_FIELDS = ("latency_s", "timings", "oracle_latency_s", "warmup")


def _without_timings(record: Any) -> dict[str, Any]:
    data = record.model_dump(mode="json", exclude=set(TIMING_FIELDS))
    if data.get("generated"):
        for name in TIMING_FIELDS:
            data["generated"].pop(name, None)
    return data


def _run(project_dir: Path, workers: int) -> tuple[Any, list[str]]:
    seen: list[str] = []
    with Project.load(project_dir / "nl2sql.yaml") as project:
        report = project.evals.run(mode="plans", cases=CASES, workers=workers,
                                   on_case=lambda config, record, spent: seen.append(f"{record.case_id}@{record.role}"))
    return report, seen


def test_records_sharded_over_two_processes_are_those_of_one(demo_project: Path, monkeypatch: Any) -> None:
    started: list[int] = []
    real_init = shards.Workers.__init__

    def counting_init(self: shards.Workers, *args: Any) -> None:
        real_init(self, *args)
        started.extend(p.pid for p in self.procs)

    monkeypatch.setattr(shards.Workers, "__init__", counting_init)
    one, seen_one = _run(demo_project, 1)
    assert started == []
    two, seen_two = _run(demo_project, 2)
    assert len(started) == 1  # shard 1 ran in its own process
    records_one = one.configs["plans"].results
    records_two = two.configs["plans"].results
    assert len(records_one) >= 10 and all(r.status == "pass" for r in records_one)
    assert [_without_timings(r) for r in records_two] == [_without_timings(r) for r in records_one]
    assert sorted(seen_two) == sorted(seen_one) and len(set(seen_two)) == len(seen_two)  # each counted once
    board = two.configs["plans"]
    assert board.completed_cases == board.planned_cases == len(records_one)
    assert two.request is not None and two.request.workers == 2


def test_what_shards_and_what_does_not() -> None:
    plans, full = get_mode("plans"), get_mode("full")
    request = RunRequest(mode="plans")
    big = 10 * shards.MIN_JOBS_PER_SHARD
    assert shards.shard_count(request, plans, big, custom_scorers=False, budget=None) == min(2, shards.default_workers())
    assert shards.shard_count(request, plans, 100, custom_scorers=False, budget=None) == 1  # too small by default
    assert shards.shard_count(RunRequest(mode="plans", workers=2), plans, 100, custom_scorers=False, budget=None) == 2
    assert shards.shard_count(RunRequest(mode="full", workers=2), full, big, custom_scorers=False, budget=None) == 1
    assert shards.shard_count(RunRequest(mode="plans", workers=2), plans, big, custom_scorers=True, budget=None) == 1
    shard = RunRequest(mode="plans", workers=2, shard=(1, 2))
    assert shards.shard_count(shard, plans, big, custom_scorers=False, budget=None) == 1  # a shard never re-shards
    dealt = shards.deal([f"c{i}" for i in range(7)], 3)
    assert [s.case_ids for s in dealt] == [["c0", "c3", "c6"], ["c1", "c4"], ["c2", "c5"]]
    assert [s.case_ids for s in shards.cut([f"c{i}" for i in range(5)], 2, others=["x", "c1"])] == [
        ["c0", "c1", "x"], ["c2", "c3"], ["c4"]]


def test_a_failing_worker_is_an_error_that_says_why(demo_project: Path) -> None:
    config = load_config(demo_project / "nl2sql.yaml")
    request = RunRequest(mode="plans", suites=[demo_project / "suites" / "missing.yaml"])
    with shards.started(config, request, 2, run_shard_worker) as workers, pytest.raises(shards.ShardError, match=r"missing\.yaml"):
        assert workers is not None
        asyncio.run(workers.collect(lambda *args: None, []))


def test_a_streamed_run_over_two_processes_writes_the_records_and_boards_of_one(demo_project: Path,
                                                                                 tmp_path: Path) -> None:
    from nl2sql_assets.evaluation.reporting.streamed import read_records

    one, _ = _run(demo_project, 1)
    with Project.load(demo_project / "nl2sql.yaml") as project:
        streamed = project.evals.run_streamed(RunRequest(mode="plans", cases=CASES, workers=2),
                                              tmp_path / "records.jsonl")
    stored = list(read_records(tmp_path / "records.jsonl"))
    records_one = one.configs["plans"].results
    assert [_without_timings(r) for r in stored] == [_without_timings(r) for r in records_one]  # the run's order
    board, board_one = streamed.configs["plans"], one.configs["plans"]
    assert board.results == []  # the boards were built from the file, holding no record
    assert board.accuracy == board_one.accuracy and board.summary == board_one.summary
    assert board.scores == board_one.scores and board.completed_cases == board_one.completed_cases


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is chosen on Linux only (elsewhere: spawn)")
def test_a_one_thread_process_forks_its_workers_and_a_threaded_one_spawns_them() -> None:
    alone = subprocess.run([sys.executable, "-c", "from nl2sql_assets.evaluation.running.shards import start_method; "
                            "print(start_method())"], capture_output=True, text=True, timeout=60, check=True)
    assert alone.stdout.strip() == "fork"
    release = threading.Event()
    helper = threading.Thread(target=release.wait, daemon=True)
    helper.start()
    try:
        assert shards.start_method() == "spawn"  # a thread's locks could be copied half-held
    finally:
        release.set()
        helper.join()


def test_the_command_forks_a_worker_whose_records_are_those_of_one_process(demo_project: Path,
                                                                          tmp_path: Path) -> None:
    """``eval run`` from the command line is one thread when its run starts: its worker is
    forked (no imports paid again), and the records are those of one process."""
    from nl2sql_assets.evaluation.reporting.streamed import read_records
    from nl2sql_assets.evaluation.running.results import CaseRecord

    outcomes = {}
    for workers in (1, 2):
        out = tmp_path / f"workers{workers}.json"
        done = subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", "--config", str(demo_project), "eval", "run",
                               "--mode", "plans", "--cases", *CASES, "--workers", str(workers), "--out", str(out)],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(out.read_text(encoding="utf-8"))
        records = [CaseRecord.model_validate(r) for r in read_records(out.parent / report["records_file"])]
        outcomes[workers] = (report["settings"], records)
    (one_settings, one), (two_settings, two) = outcomes[1], outcomes[2]
    assert one_settings["processes"] == 1 and "worker_start" not in one_settings
    assert set(shards.LAYOUT_SETTINGS) <= set(two_settings)
    expected_start = "fork" if sys.platform.startswith("linux") else "spawn"
    assert two_settings["processes"] == 2 and two_settings["worker_start"] == expected_start
    assert len(one) >= 10 and all(r.status == "pass" for r in one)
    assert [_without_timings(r) for r in two] == [_without_timings(r) for r in one]



@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_run_killed_outright_leaves_no_worker_behind(demo_project: Path, tmp_path: Path) -> None:
    """SIGKILL to ``eval run`` (no handler, no clean-up): its worker process ends too, rather than
    living on as an orphan waiting for ever on its queue."""
    run = start([sys.executable, "-m", "nl2sql_assets.cli", "--config", str(demo_project), "eval", "run", "--mode",
                 "plans", "--workers", "2", "--passes", "30", "--out", str(tmp_path / "r.json")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not workers and run.poll() is None and time.monotonic() < deadline:
            workers = children(run.pid)
            time.sleep(0.01)
        assert workers, "the run started no worker process"
        run.kill()
        run.wait(timeout=30)
        assert still_alive(workers) == []
    finally:
        stop(run)
        kill_all(workers)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("to", ["terminal", "run"])
def test_ctrl_c_stops_a_run_in_one_line_and_keeps_the_case_records_finished(demo_project: Path, tmp_path: Path,
                                                                           to: str) -> None:
    """Ctrl-C in a terminal reaches the run and its worker alike (``terminal``: the process group);
    ``kill -INT`` the run alone: either way exit 130, one line naming the records kept, no
    traceback, no worker left."""
    from nl2sql_assets.evaluation.reporting.streamed import read_records

    out = tmp_path / "r.json"
    partial = tmp_path / "r.records.jsonl.partial"
    run = start([sys.executable, "-m", "nl2sql_assets.cli", "--config", str(demo_project), "eval", "run", "--mode",
                 "plans", "--workers", "2", "--passes", "30", "--out", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while run.poll() is None and time.monotonic() < deadline and not (
                workers and partial.is_file() and partial.stat().st_size > 0):
            workers = workers or children(run.pid)
            time.sleep(0.01)
        assert workers and partial.is_file(), "the run wrote no record before the deadline"
        if to == "terminal":
            os.killpg(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 130, err
        assert "interrupted (Ctrl-C): the run stopped" in err and str(partial) in err
        assert "Traceback" not in err
        assert not out.exists()  # no report of a run that did not end
        kept = list(read_records(partial))
        assert kept and all(r.status == "pass" for r in kept)
        assert still_alive(workers) == []
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=30)
        kill_all(workers)
