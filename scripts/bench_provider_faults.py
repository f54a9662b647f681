#!/usr/bin/env python
"""Benchmark: what a mode full run reports against providers on a bad day, side by side.

Each row is a real ``nl2sql-assets eval run --mode full`` (a subprocess: its exit code is the
command line's) on the demo project's Chinook suite, against a local OpenAI-compatible server
(``evaluation.running.flaky_llm``) that bills every answered request by its own tokenizer,
whether it reports usage or not. Printed per row: case runs done, dollars reported and billed,
the estimate's error, where the token counts came from, why the run stopped, the exit code and
the wall time (min / median / max over ``--repeat``).

    python scripts/bench_provider_faults.py               # the closing note's table (~3 min)
    python scripts/bench_provider_faults.py --cases chinook --repeat 3   # the whole suite, slower
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "fake-provider"
PRICE = {"input": 2.0, "cached_input": 0.5, "cache_write": 2.5, "output": 8.0, "source": "bench table"}


@dataclass
class Scenario:
    label: str
    behaviour: str
    cap: float
    max_retries: int = 2


@dataclass
class Outcome:
    scenario: Scenario
    walls: list[float]
    code: int
    done: int
    planned: int
    spent: float
    billed: float
    source: str
    stopped: str
    estimated_calls: int
    env_errors: dict[str, int]
    breaker: str


def _usd(prompt: int, completion: int) -> float:
    return (prompt * PRICE["input"] + completion * PRICE["output"]) / 1_000_000


def _write_llm(path: Path, base_url: str, max_retries: int) -> None:
    import yaml

    section = {"default": {"model": f"openai/{MODEL}", "api_base": base_url, "api_key": "bench", "temperature": 0,
                           "timeout_s": 2, "max_retries": max_retries},
               "prices": {MODEL: PRICE}}
    path.write_text(yaml.safe_dump(section), encoding="utf-8")


def run(project: Path, scenario: Scenario, cases: list[str], repeat: int) -> Outcome:
    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
    from nl2sql_assets.evaluation.suites import load_suite

    suite = load_suite(project / "suites" / "chinook.yaml")
    walls: list[float] = []
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.upper().endswith("_API_KEY")}
    cli = shutil.which("nl2sql-assets") or "nl2sql-assets"
    for _ in range(repeat):
        with FlakyLLMServer(suite.cases, EventBus(), behaviour=scenario.behaviour, synthesizer="rows",  # type: ignore[arg-type]
                            hang_s=3.0) as server:
            llm_file = project / f"bench_{scenario.behaviour}.yaml"
            _write_llm(llm_file, server.base_url, scenario.max_retries)
            out = project / f"bench_{scenario.behaviour}_{scenario.cap:g}.json"
            argv = [cli, "--config", str(project), "eval", "run", "--mode", "full", "--llm", f"default={llm_file}",
                    "--max-cost", str(scenario.cap), "--out", str(out)]
            if cases:
                argv += ["--cases", *cases]
            started = time.perf_counter()
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
            walls.append(time.perf_counter() - started)
            if not out.exists():
                sys.stderr.write(proc.stdout + proc.stderr)
                raise SystemExit(f"{scenario.label}: no report (exit {proc.returncode})")
            billed = _usd(server.billed_prompt_tokens, server.billed_completion_tokens)
    report = json.loads(out.read_text(encoding="utf-8"))
    board = next(iter(report["configs"].values()))
    return Outcome(scenario, walls, proc.returncode, board["completed_cases"], board["planned_cases"],
                   report["spent"], billed, board["cost"]["token_source"] or "-", report["stopped"] or "-",
                   board["cost"]["estimated_calls"], report["env_errors"], report.get("breaker") or "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", default=[f"chinook_{i:03d}" for i in range(1, 11)],
                        help="case ids or tags (default: chinook_001 to chinook_010, 30 case runs)")
    parser.add_argument("--cap", type=float, default=0.3, help="the low cap of the cap rows, in dollars")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--chinook", default=os.environ.get("NL2SQL_CHINOOK"), help="the Chinook file")
    args = parser.parse_args()
    from nl2sql_assets.demo import init_demo

    scenarios = [
        Scenario("well-behaved", "ok", 50.0),
        Scenario("429 before every answer", "rate_limit_once", 50.0),
        Scenario("no usage block", "no_usage", 50.0),
        Scenario("flaky + no usage", "flaky_no_usage", 50.0),
        Scenario("well-behaved, low cap", "ok", args.cap),
        Scenario("flaky + no usage, low cap", "flaky_no_usage", args.cap),
        Scenario("402 Insufficient Balance", "quota", 50.0),
        Scenario("500 on every call", "server_error", 50.0, max_retries=1),
        Scenario("malformed JSON answers", "malformed", 50.0),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        project = init_demo(Path(tmp) / "demo", chinook=Path(args.chinook) if args.chinook else None).root
        outcomes = [run(project, s, args.cases, args.repeat) for s in scenarios]
    print("| provider | cap $ | case runs | spent $ | billed $ | error | tokens | stopped | exit | wall s min/med/max |")
    print("|---|---:|---:|---:|---:|---:|---|---|---:|---|")
    for o in outcomes:
        error = f"{(o.spent - o.billed) / o.billed:+.1%}" if o.billed else "-"
        walls = f"{min(o.walls):.1f} / {statistics.median(o.walls):.1f} / {max(o.walls):.1f}"
        print(f"| {o.scenario.label} | {o.scenario.cap:g} | {o.done}/{o.planned} | {o.spent:.4f} | {o.billed:.4f} | "
              f"{error} | {o.source} ({o.estimated_calls} est.) | {o.stopped} | {o.code} | {walls} |")
    for o in outcomes:
        if o.breaker:
            print(f"\n{o.scenario.label}: env errors {o.env_errors}; breaker: {o.breaker}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
