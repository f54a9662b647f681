#!/usr/bin/env python
"""Benchmark: prediction grading (``eval grade``) in pairs per second, beside test-suite-sql-eval.

    python scripts/bench_grade.py [--pairs 10000] [--repeat 3] [--workers N]
        [--peer DIR] [--peer-python PATH] [--peer-repeat 1]

Builds a Spider-format folder from Chinook (``NL2SQL_CHINOOK``) whose questions cycle over the
reviewed SQL of suites/chinook.yaml, imports it with ``bench import spider`` (timed apart) and
grades one prediction per question: the gold SQL, an alternative, the gold wrapped in a
subquery, cut to one row, counted, or an error, and every prediction text distinct (a
trailing comment) so no cache sees a statement twice. ``ours`` is ``grade()`` (pool start-up
included, suite already loaded); ``cli`` is the whole ``nl2sql-assets eval grade`` command
(interpreter start, suite load, report). The peer is test-suite-sql-eval's ``eval_exec_match``
with its command-line defaults (no value plugging, DISTINCT removed), one pair after another,
timed around its loop only, on the same pairs and the same database file: give ``--peer`` its
checkout (a folder holding exec_eval.py and parse.py, or a git directory) and ``--peer-python``
an interpreter with sqlparse and tqdm. The peer is never a dependency of this project: its two
files are copied into a temporary folder and run there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PEER_DRIVER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from exec_eval import eval_exec_match
pairs = json.load(open(sys.argv[2]))
started = time.perf_counter()
verdicts = [eval_exec_match(db=db, p_str=pred, g_str=gold, plug_value=False, keep_distinct=False,
                            progress_bar_for_each_datapoint=False) for db, pred, gold in pairs]
elapsed = time.perf_counter() - started
json.dump({"seconds": elapsed, "verdicts": verdicts}, open(sys.argv[3], "w"))
'''


def _predictions(gold: list[tuple[str, list[str]]], n: int) -> tuple[list[dict], list[str]]:
    """n questions cycling over the gold SQL, and one prediction each (a mix of right and wrong)."""
    entries, preds = [], []
    for i in range(n):
        sql, alts = gold[i % len(gold)]
        entries.append({"db_id": "chinook", "question": f"question {i} about case {i % len(gold)}", "query": sql})
        kind = i % 10
        if kind < 4:
            pred = sql
        elif kind < 6:
            pred = alts[0] if alts and kind == 4 else f"SELECT * FROM ({sql})"
        elif kind == 6:
            pred = f"SELECT * FROM ({sql}) LIMIT 1"
        elif kind < 9:
            pred = f"SELECT COUNT(*) FROM ({sql})"
        else:
            pred = f"SELECT missing_column_{i} FROM Artist"
        preds.append(f"{' '.join(pred.split())} -- prediction {i}")
    return entries, preds


def _peer_files(peer: Path, target: Path) -> None:
    if (peer / "exec_eval.py").is_file():
        for name in ("exec_eval.py", "parse.py"):
            shutil.copy(peer / name, target / name)
        return
    for name in ("exec_eval.py", "parse.py"):  # a bare git directory (fetch's mirror)
        text = subprocess.run(["git", "--git-dir", str(peer), "show", f"HEAD:{name}"], check=True,
                              capture_output=True, text=True).stdout
        (target / name).write_text(text)


def _spread(values: list[float]) -> str:
    return f"min {min(values):,.0f} / median {statistics.median(values):,.0f} / max {max(values):,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--peer", type=Path, default=None)
    parser.add_argument("--peer-python", default=None)
    parser.add_argument("--peer-repeat", type=int, default=1)
    args = parser.parse_args()

    from nl2sql_assets.config import load_config
    from nl2sql_assets.evaluation.grading import gradable_cases, grade
    from nl2sql_assets.evaluation.suites.loader import load_suite
    from nl2sql_assets.paths import chinook_suite_path
    from nl2sql_assets.public_benchmarks import import_benchmark

    chinook = os.environ.get("NL2SQL_CHINOOK")
    if not chinook or not Path(chinook).is_file():
        print("set NL2SQL_CHINOOK to the Chinook SQLite file", file=sys.stderr)
        return 2
    source = load_suite(chinook_suite_path())
    gold = [(c.sql, list(c.alt_sql)) for c in source.cases if c.kind == "answer" and c.sql and c.status == "approved"]
    entries, preds = _predictions(gold, args.pairs)

    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        folder = Path(tmp) / "spider"
        db = folder / "database" / "chinook" / "chinook.sqlite"
        db.parent.mkdir(parents=True)
        shutil.copy(chinook, db)
        (folder / "tables.json").write_text(json.dumps([{"db_id": "chinook"}]))
        (folder / "dev.json").write_text(json.dumps(entries))
        started = time.perf_counter()
        imported = import_benchmark("spider", folder, Path(tmp) / "project")
        print(f"import: {imported.cases} questions over {len(gold)} distinct gold queries, rows for "
              f"{imported.with_rows}, in {time.perf_counter() - started:.1f} s (once, not counted below)")
        config = load_config(imported.config)
        suite = load_suite(imported.suite)
        cases = gradable_cases(suite)
        predictions = {c.id: p for c, p in zip(cases, preds, strict=True)}
        pred_file = Path(tmp) / "predictions.json"
        pred_file.write_text(json.dumps(predictions))
        configs = {ds.id: ds for ds in config.datasources}

        ours: list[float] = []
        report = None
        for _ in range(args.repeat):
            started = time.perf_counter()
            report = grade(suite, predictions, configs, workers=args.workers, cases=cases)
            ours.append(len(cases) / (time.perf_counter() - started))
        assert report is not None
        cli: list[float] = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", "--config", str(imported.config), "eval",
                            "grade", str(pred_file), "--suite", str(imported.suite)]
                           + (["--workers", str(args.workers)] if args.workers else []),
                           check=True, capture_output=True)
            cli.append(len(cases) / (time.perf_counter() - started))
        print(f"ours ({report.workers} workers): {_spread(ours)} pairs/s; strict {report.execution.passed}, "
              f"lenient {report.execution_lenient.passed} of {report.graded}")
        print(f"ours, whole CLI command: {_spread(cli)} pairs/s")

        if args.peer is None or args.peer_python is None:
            print("peer: not run (give --peer and --peer-python)")
            return 0
        peer_dir = Path(tmp) / "peer"
        peer_dir.mkdir()
        _peer_files(args.peer, peer_dir)
        (peer_dir / "driver.py").write_text(PEER_DRIVER)
        pairs_file = Path(tmp) / "pairs.json"
        pairs_file.write_text(json.dumps([[str(db), p, c.sql] for c, p in zip(cases, preds, strict=True)]))
        peer: list[float] = []
        verdicts: list[int] = []
        for _ in range(args.peer_repeat):
            out = Path(tmp) / "peer_out.json"
            subprocess.run([args.peer_python, str(peer_dir / "driver.py"), str(peer_dir), str(pairs_file), str(out)],
                           check=True, cwd=peer_dir)
            result = json.loads(out.read_text())
            peer.append(len(cases) / result["seconds"])
            verdicts = result["verdicts"]
        ours_strict = {g.case_id: g.strict.passed for g in report.cases}
        ours_lenient = {g.case_id: g.lenient.passed for g in report.cases}
        peer_only = sum(1 for c, v in zip(cases, verdicts, strict=True) if v and not ours_lenient[c.id])
        ours_only = sum(1 for c, v in zip(cases, verdicts, strict=True) if not v and ours_strict[c.id])
        print(f"peer test-suite-sql-eval exec (1 process): {_spread(peer)} pairs/s; {sum(verdicts)} matches")
        print(f"speed-up (medians): {statistics.median(ours) / statistics.median(peer):.1f}x grade(), "
              f"{statistics.median(cli) / statistics.median(peer):.1f}x whole command")
        print(f"verdicts: peer match where ours (lenient) has none on {peer_only} pairs; ours (strict) match where the peer has none "
              f"on {ours_only}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
