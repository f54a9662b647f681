#!/usr/bin/env python
"""Benchmark: 10,000 case runs of mode plans, in-process and through the CLI (target: under 60 s
and under 1 GB, memory growing linearly).

    python scripts/bench_scale.py                          # 10,000 case runs, in-process and CLI, once each
    python scripts/bench_scale.py --case-runs 2000 --repeat 3 --tree /tmp/before
    python scripts/bench_scale.py --workers 1,2            # where the tree has worker processes
    python scripts/bench_scale.py --case-runs 3000 --skip inprocess --skip cli --dagster   # the case_runs asset

The suite is synthetic: copies of the Chinook suite's cases (``benchlib.synthetic_suite``) on the
demo project. Each measurement is a fresh process: in-process means ``Project.load(...).evals.run``
timed after imports (``evals.run_streamed`` where the tree has it: records to a temporary file,
boards built from it; RSS sampled every 1,000 case runs, to see the growth), CLI means
``nl2sql-assets eval run --mode plans --out ...`` timed from outside, imports included. With
``--dagster``, the Dagster path too: the project's suites set to the synthetic one, ``datasets_job``
once (not measured), then ``case_runs_job`` for partition ``plans|1`` (in-process executor, a test
instance in a temporary folder) in a fresh process timed from outside: its peak RSS is the asset's.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import load_average, print_table, python, rss_now_mib, run_child, spread, synthetic_suite


def child(config: Path, suite: Path, workers: int | None) -> None:
    """One in-process run; prints a JSON line of figures."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from nl2sql_assets.project import Project

    samples: list[tuple[int, float]] = []
    done = 0

    def on_case(config_name: str, record: Any, spent: float) -> None:
        nonlocal done
        done += 1
        if done % 1000 == 0:
            samples.append((done, rss_now_mib()))

    kwargs: dict[str, Any] = {}
    if workers is not None:
        kwargs["workers"] = workers
    started, cpu = time.perf_counter(), time.process_time()
    with Project.load(config) as project, tempfile.TemporaryDirectory(prefix="bench-scale-records-") as tmp:
        if hasattr(project.evals, "run_streamed"):  # records streamed to a file, boards built from it
            from nl2sql_assets.evaluation.running import RunRequest

            request = RunRequest(suites=[suite], mode="plans", **kwargs)
            report = project.evals.run_streamed(request, Path(tmp) / "records.jsonl", on_case=on_case)
        else:  # an older tree: records held in memory
            report = project.evals.run(suites=[suite], mode="plans", on_case=on_case, **kwargs)
    wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the worker processes' CPU
    board = report.first_board
    total = board.summary.total if board is not None else {}
    print(json.dumps({
        "wall_s": wall, "cpu_s": cpu_s + children.ru_utime + children.ru_stime,
        "case_runs": sum(total.values()) - total.get("skip", 0), "passed": total.get("pass", 0), "rss": samples,
    }))


def dagster_child(project: Path, job: str, home: Path) -> None:
    """One Dagster job of the project in this process (``--dagster``); prints a JSON line."""
    import warnings

    warnings.filterwarnings("ignore")
    import dagster as dg

    from nl2sql_assets.defs.factory import build_defs
    from nl2sql_assets.defs.partitions import config_pass_key, register_configs

    defs = build_defs(project / "nl2sql.yaml")
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        register_configs(instance, ["plans"])
        started, cpu = time.perf_counter(), time.process_time()
        result = defs.resolve_job_def(job).execute_in_process(
            instance=instance, partition_key=config_pass_key("plans", 1) if job == "case_runs_job" else None,
            raise_on_error=False, run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
        wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    counts = {}
    for event in result.get_asset_materialization_events():
        meta = event.step_materialization_data.materialization.metadata
        if "passed" in meta:
            counts = {k: meta[k].value for k in ("passed", "failed", "errors")}
    print(json.dumps({"ok": result.success, "wall_s": wall, "cpu_s": cpu_s, **counts}))


def dagster_rows(demo_root: Path, suite: Path, tree: Path | None, repeat: int, tmp: Path) -> list[list[str]]:
    """``case_runs_job`` on the synthetic suite, ``repeat`` fresh processes (``--dagster``)."""
    evals = demo_root / "evals.yaml"
    text = evals.read_text(encoding="utf-8")
    evals.write_text(text.replace("- suites/chinook.yaml", f"- suites/{suite.name}"), encoding="utf-8")
    home = tmp / "dagster_home"
    home.mkdir(exist_ok=True)
    script = str(Path(__file__).resolve())
    setup = run_child(python(script, "--dagster-child", str(demo_root), "datasets_job", str(home)), tree)
    if not setup.json_line()["ok"]:
        raise RuntimeError(f"datasets_job failed:\n{setup.stderr[-4000:]}")
    runs = [run_child(python(script, "--dagster-child", str(demo_root), "case_runs_job", str(home)), tree)
            for _ in range(repeat)]
    lines = [r.json_line() for r in runs]
    n = lines[0].get("passed", 0) + lines[0].get("failed", 0) + lines[0].get("errors", 0)
    return [["Dagster case_runs_job, one partition (process, imports included)", str(n),
             spread([r.wall_s for r in runs], "{:.1f}"), spread([r.cpu_s for r in runs], "{:.1f}"),
             spread([r.cpu_s / max(n, 1) * 1000 for r in runs], "{:.1f}"),
             spread([r.rss_mib for r in runs], "{:.0f}") + f" (all processes {runs[-1].rss_all_mib:.0f})",
             f"{lines[0].get('passed')}/{n}" + ("" if all(x["ok"] for x in lines) else " (a run FAILED)")]]


def neighbour_rows(root: Path, config: Path, suite: Path, tree: Path | None, tmp: Path) -> list[list[str]]:
    """``eval run --mode plans`` on the synthetic suite: without neighbours, with them built for the
    first time (the kept sets, their audit and every witness search), and with them stored; each a
    fresh process timed from outside (``--neighbours``). Copies of one case share their gold: one
    neighbour problem, one audit and one search, however many copies."""
    import shutil

    base = python("-m", "nl2sql_assets.cli", "--config", str(config), "eval", "run", "--mode", "plans", "--suite",
                  str(suite), "--out", str(tmp / "eval_neighbours.json"))
    shutil.rmtree(root / "warehouse" / "neighbours", ignore_errors=True)
    plain = run_child([*base, "--no-neighbours"], tree)
    first = run_child(base, tree)
    stored = run_child(base, tree)
    out = []
    for label, run in (("CLI eval run --no-neighbours", plain), ("CLI eval run, neighbours built first", first),
                       ("CLI eval run, neighbours stored", stored)):
        ratio = run.wall_s / plain.wall_s
        out.append([f"{label} ({ratio:.2f}x)", "-", f"{run.wall_s:.1f}", f"{run.cpu_s:.1f}", "-",
                    f"{run.rss_mib:.0f}", f"exit {run.rc}"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case-runs", type=int, default=10_000, help="at least this many case runs (default 10,000)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tree", type=Path, default=None, help="measure the package in this checkout instead")
    parser.add_argument("--skip", choices=["inprocess", "cli"], action="append", default=[])
    parser.add_argument("--workers", default=None,
                        help="comma-separated worker counts to measure (a tree with worker processes)")
    parser.add_argument("--chinook", type=Path, default=None)
    parser.add_argument("--child", nargs=2, type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-workers", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--neighbours", action="store_true",
                        help="the CLI run without neighbours, then with them built for the first time, then read "
                             "back (evals.yaml's neighbours: of the demo, the witness search on)")
    parser.add_argument("--dagster", action="store_true",
                        help="also measure the Dagster case_runs asset on the synthetic suite (peak RSS)")
    parser.add_argument("--dagster-child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child[0], args.child[1], args.child_workers)
        return 0
    if args.dagster_child is not None:
        project, job, home = args.dagster_child
        dagster_child(Path(project), job, Path(home))
        return 0

    from nl2sql_assets.datasources.chinook import resolve_chinook
    from nl2sql_assets.demo import init_demo

    print(f"Scale benchmark; {load_average()}; tree: {args.tree or 'this checkout'}")
    workers: list[int | None] = [int(w) for w in args.workers.split(",")] if args.workers else [None]
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        demo = init_demo(Path(tmp) / "project", chinook=resolve_chinook(args.chinook))
        suite = demo.root / "suites" / "synthetic.yaml"
        cases = synthetic_suite(args.case_runs, suite)
        print(f"Synthetic suite: {cases} cases, {suite.stat().st_size / 1e6:.1f} MB")
        rows = []
        for w in workers:
            label = "" if w is None else f", workers {w}"
            if "inprocess" not in args.skip:
                runs = []
                for _ in range(args.repeat):
                    cmd = python(str(Path(__file__).resolve()), "--child", str(demo.config), str(suite))
                    if w is not None:
                        cmd += ["--child-workers", str(w)]
                    result = run_child(cmd, args.tree)
                    runs.append({**result.json_line(), "peak_mib": result.rss_mib, "all_mib": result.rss_all_mib,
                                 "proc_cpu_s": result.cpu_s})
                n = runs[0]["case_runs"]
                failed |= any(r["passed"] != r["case_runs"] for r in runs)
                rows.append([f"in-process, after imports{label}", str(n), spread([r["wall_s"] for r in runs], "{:.1f}"),
                             spread([r["cpu_s"] for r in runs], "{:.1f}"),
                             spread([r["cpu_s"] / n * 1000 for r in runs], "{:.1f}"),
                             spread([r["peak_mib"] for r in runs], "{:.0f}") + f" (all processes {runs[-1]['all_mib']:.0f})",
                             f"{runs[0]['passed']}/{n}"])
                growth = ", ".join(f"{k // 1000}k: {v:.0f}" for k, v in runs[-1]["rss"])
                print(f"  in-process RSS (MiB) every 1,000 case runs{label}: {growth}")
            if "cli" not in args.skip:
                runs_cli = []
                for i in range(args.repeat):
                    out = Path(tmp) / f"eval_{i}.json"
                    cmd = python("-m", "nl2sql_assets.cli", "--config", str(demo.config), "eval", "run", "--mode",
                                 "plans", "--suite", str(suite), "--out", str(out))
                    if w is not None:
                        cmd += ["--workers", str(w)]
                    result = run_child(cmd, args.tree)
                    if result.rc not in (0, 1):
                        print(result.stdout[-2000:], result.stderr[-4000:])
                        return 1
                    size = sum(p.stat().st_size for p in Path(tmp).glob(f"eval_{i}*")) / 1e6
                    runs_cli.append((result, size))
                n = rows[-1][1] if rows else "?"
                rows.append([f"CLI eval run, imports included{label}", n,
                             spread([r.wall_s for r, _ in runs_cli], "{:.1f}"),
                             spread([r.cpu_s for r, _ in runs_cli], "{:.1f}"),
                             spread([r.cpu_s / int(n) * 1000 for r, _ in runs_cli], "{:.1f}") if n != "?" else "-",
                             spread([r.rss_mib for r, _ in runs_cli], "{:.0f}")
                             + f" (all processes {runs_cli[-1][0].rss_all_mib:.0f})",
                             f"output {runs_cli[-1][1]:.1f} MB"])
        if args.neighbours:
            rows += neighbour_rows(demo.root, demo.config, suite, args.tree, Path(tmp))
        if args.dagster:
            rows += dagster_rows(demo.root, suite, args.tree, args.repeat, Path(tmp))
        print_table(f"Mode plans at scale ({args.repeat} fresh process(es) each; min / median / max)",
                    ["how", "case runs", "wall s", "CPU s", "CPU ms/case run", "peak RSS MiB", "passed / output"],
                    rows)
    print(f"\n{load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
