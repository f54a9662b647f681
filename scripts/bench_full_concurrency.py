#!/usr/bin/env python
"""Benchmark: mode full on a model that takes 200 ms a call, ``max_concurrency`` 8 against 1.

Target: at least 6.8x faster at 8 (the floor litellm's ``acompletion`` reaches on 40 bare calls,
PERF_NOTES.md), with the cap still held (tests/integration/test_full_concurrency.py checks that).
The model is the gold LLM server over real HTTP on 127.0.0.1, each request held ``--delay``
seconds (a model's latency; the server answers on threads, so requests overlap) and priced like
a paid model, so the cap's reservations run as in a paid run. The gold server reports canned
usage: ``flaky_llm``'s provider tokenizes every request to bill it, CPU that a real provider
spends on its own machines but that here would share this process's cores and GIL.

    python scripts/bench_full_concurrency.py                 # 40 cases x 3 roles, 3 runs each
    python scripts/bench_full_concurrency.py --cases 8 --repeat 1 --delay 0.2
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer

TARGET_SPEEDUP = 6.8
MODEL = "fake-provider"


class SlowGold(GoldLLMServer):
    """The gold server with a model's latency: each request waits ``delay_s``; counts how many
    it held at once."""

    def __init__(self, *args: Any, delay_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delay_s = delay_s
        self.in_flight = self.most_in_flight = 0
        self._flight_lock = threading.Lock()

    def respond(self, raw: bytes, run_id: str | None) -> tuple[int, dict[str, Any]]:
        with self._flight_lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.delay_s)
            return super().respond(raw, run_id)
        finally:
            with self._flight_lock:
                self.in_flight -= 1


def run_once(config_path: Path, case_ids: list[str], concurrency: int, delay_s: float) -> tuple[float, float, int, int, float]:
    """(wall s, CPU s, case runs, passed, most requests in flight) of one mode full run."""
    from nl2sql_assets import Project
    from nl2sql_assets.config import PriceRow
    from nl2sql_assets.evaluation.suites import load_suite

    project = Project.load(config_path)
    cases = load_suite(config_path.parent / "suites" / "chinook.yaml").cases
    price = PriceRow(input=2.0, cached_input=0.5, cache_write=2.5, output=8.0, source="bench")
    with project, SlowGold(cases, project.bus, synthesizer="rows", delay_s=delay_s) as server:
        base = server.llm_config()
        assert base.default is not None
        default = base.default.model_copy(update={"model": f"openai/{MODEL}", "timeout_s": 30, "max_retries": 2})
        llm = base.model_copy(update={"default": default, "prices": {MODEL: price}})
        project.config.settings.max_concurrency = concurrency
        started, cpu = time.perf_counter(), time.process_time()
        report = project.evals.run(mode="full", llm={"default": llm}, cases=case_ids, max_cost_usd=100.0,
                                   curated=False)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        board = report.first_board
        assert board is not None
        done = [r for r in board.results if r.status != "skip"]
        return wall, cpu, len(done), sum(r.status == "pass" for r in done), server.most_in_flight


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=40, help="answerable Chinook cases (x3 roles; default 40)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per concurrency (default 3)")
    parser.add_argument("--delay", type=float, default=0.2, help="the model's seconds per call (default 0.2)")
    parser.add_argument("--concurrency", default="1,8", help="values to compare, the first is the base (default 1,8)")
    parser.add_argument("--chinook", type=Path, default=None, help="chinook.sqlite (default: $NL2SQL_CHINOOK)")
    args = parser.parse_args(argv)
    for name in list(os.environ):
        if name.upper().endswith("_API_KEY"):
            del os.environ[name]

    from nl2sql_assets.datasources.chinook import resolve_chinook
    from nl2sql_assets.demo import init_demo
    from nl2sql_assets.evaluation.suites import load_suite

    values = [int(v) for v in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-full-") as tmp:
        demo = init_demo(Path(tmp) / "project", chinook=resolve_chinook(args.chinook))
        suite = load_suite(demo.suites_dir / "chinook.yaml")
        ids = [c.id for c in suite.cases if c.status == "approved" and c.kind == "answer"
               and "clarify" not in c.outcome.values()][: args.cases]
        run_once(demo.config, ids[:1], 1, 0.0)  # warm up: imports, databases
        walls: dict[int, list[float]] = {}
        rows = []
        for _ in range(args.repeat):  # interleaved: every value sees the same machine load
            for c in values:
                wall, cpu, n, passed, most = run_once(demo.config, ids, c, args.delay)
                walls.setdefault(c, []).append(wall)
                rows.append((c, wall, cpu, n, passed, most))
    print(f"\nMode full, {len(ids)} cases, a {args.delay * 1000:.0f} ms model, {args.repeat} run(s) each")
    print("max_concurrency  case runs  wall min / median / max (s)  cpu median (s)  most calls in flight  passed")
    base = statistics.median(walls[values[0]])
    for c in values:
        mine = [r for r in rows if r[0] == c]
        w = sorted(r[1] for r in mine)
        print(f"{c:>15}  {mine[0][3]:>9}  {w[0]:6.2f} / {statistics.median(w):6.2f} / {w[-1]:6.2f}"
              f"  {statistics.median(r[2] for r in mine):14.2f}  {max(r[5] for r in mine):>20}"
              f"  {sum(r[4] for r in mine)}/{sum(r[3] for r in mine)}")
    failed = False
    for c in values[1:]:
        speedup = base / statistics.median(walls[c])
        met = speedup >= TARGET_SPEEDUP
        failed |= not met
        print(f"speed-up {c} vs {values[0]}: {speedup:.2f}x (target {TARGET_SPEEDUP}x: {'met' if met else 'MISSED'})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
