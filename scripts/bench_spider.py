#!/usr/bin/env python
"""Benchmark: Spider's dev set end to end, and what the official grader says of the same pairs.

    python scripts/bench_spider.py --spider DIR --predictions FILE [--rows 30] [--seed 1]
        [--peer DIR --peer-python PATH] [--keep DIR]

``DIR`` holds Spider's ``dev.json`` and ``tables.json``; ``FILE`` one predicted SQL per line in
dev.json's order (Spider's text format). Spider's databases are not needed: the schema list gives
schema-only SQLite files (for the final-SQL check) and files with generated rows
(``public_benchmarks/synthetic.py``, the gold SQL's literals used as values) on which both
graders run. Printed, with the time each step took:

* the final-SQL check on every gold query, for a role allowed everything (refused: must be 0);
* ``bench import spider``: seconds for the questions and for them four times over (linearity),
  Spider's hardness of every case;
* ``eval grade``: strict and lenient, per hardness, pairs per second;
* the HTTP engine path: ``eval run --mode full`` on an engine that answers each case with its
  prediction, its verdicts case by case against ``eval grade``'s;
* with ``--peer`` (a test-suite-sql-eval checkout, or its git directory) and ``--peer-python``
  (an interpreter with sqlparse, tqdm and nltk): its execution match with ``--keep_distinct`` and
  its hardness, against ours, every disagreement listed. The peer's two files are copied into a
  temporary folder and run there; nltk's tokenizer data is not needed (a regular expression
  stands in for word_tokenize, on the SQL text only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PEER_DRIVER = r'''
import json, re, sys, time
sys.path.insert(0, sys.argv[1])
import process_sql
process_sql.word_tokenize = lambda s: re.findall(r"[A-Za-z0-9_\.\$@#]+|\S", s)
from exec_eval import eval_exec_match
from process_sql import Schema, get_schema, get_sql
from evaluation import Evaluator
pairs = json.load(open(sys.argv[2]))
started = time.perf_counter()
verdicts = [eval_exec_match(db=db, p_str=pred, g_str=gold, plug_value=False, keep_distinct=True,
                            progress_bar_for_each_datapoint=False) for db, pred, gold in pairs]
seconds = time.perf_counter() - started
evaluator, hardness = Evaluator(), []
for db, _, gold in pairs:
    try:
        hardness.append(evaluator.eval_hardness(get_sql(Schema(get_schema(db)), gold)))
    except Exception:
        hardness.append(None)
json.dump({"seconds": seconds, "verdicts": verdicts, "hardness": hardness}, open(sys.argv[3], "w"))
'''


class PredictionEngine(ThreadingHTTPServer):
    """An outside engine over HTTP: each case answered with its prediction, as SQL only."""

    def __init__(self, predictions: dict[str, str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sql = predictions.get((request.get("context") or {}).get("case_id"))
                body = json.dumps({"status": "answered", "sql": sql}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


def _cli(*argv: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # mode full runs here on a local engine only
    done = subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", *argv], capture_output=True, text=True, env=env)
    return time.perf_counter() - started, done


def _peer_files(peer: Path, target: Path) -> None:
    names = ("exec_eval.py", "parse.py", "process_sql.py", "evaluation.py")
    for name in names:
        if (peer / name).is_file():
            shutil.copy(peer / name, target / name)
        else:  # a bare git directory (fetch's mirror)
            text = subprocess.run(["git", "--git-dir", str(peer), "show", f"HEAD:{name}"], check=True,
                                  capture_output=True, text=True).stdout
            (target / name).write_text(text)
    (target / "tmp").mkdir(exist_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--spider", type=Path, required=True)
    parser.add_argument("--predictions", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--peer", type=Path, default=None)
    parser.add_argument("--peer-python", default=None)
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it (default: a temporary folder)")
    args = parser.parse_args()

    from nl2sql_assets.config import DatasourceConfig
    from nl2sql_assets.datasources.sqlite import SqliteAdapter
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.policy import check_sql
    from nl2sql_assets.public_benchmarks.synthetic import build_databases

    questions = json.loads((args.spider / "dev.json").read_text(encoding="utf-8"))
    predicted = args.predictions.read_text(encoding="utf-8").split("\n")[:len(questions)]
    db_ids = {q["db_id"] for q in questions}
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-spider-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        # -- the final-SQL check on the gold, schema-only databases
        started = time.perf_counter()
        empty = build_databases(args.spider / "tables.json", work / "schema_only", db_ids=db_ids)
        snapshots = {db: SqliteAdapter(DatasourceConfig(id=db, engine="sqlite", path=p)).introspect()
                     for db, p in empty.items()}
        refused = [(q["db_id"], q["query"], d) for q in questions
                   if not (d := check_sql(q["query"], dialect="sqlite", schema=snapshots[q["db_id"]], access=None,
                                          role="everything")).allowed]
        print(f"final-SQL check, role allowed everything: {len(refused)} of {len(questions)} gold queries refused "
              f"({time.perf_counter() - started:.1f} s with building {len(empty)} schema-only databases)")
        for db, sql, decision in refused[:10]:
            print(f"  {db}: {sql}\n    {decision.rule} ({decision.fault}): {decision.detail}")

        # -- generated databases, import (and four times over), hardness
        folder = work / "spider"
        folder.mkdir(exist_ok=True)
        for name in ("dev.json", "tables.json"):
            shutil.copy(args.spider / name, folder / name)
        (folder / "dev_x4.json").write_text(json.dumps(questions * 4))
        build_databases(folder / "tables.json", folder, rows=args.rows, seed=args.seed, questions=folder / "dev.json",
                        db_ids=db_ids)
        project = work / "project"
        shutil.rmtree(project, ignore_errors=True)
        seconds, done = _cli("bench", "import", "spider", str(folder), "--out", str(project), "--approve")
        if done.returncode != 0:
            print(done.stdout, done.stderr, file=sys.stderr)
            return 1
        x4 = work / "project_x4"
        shutil.rmtree(x4, ignore_errors=True)
        seconds_x4, _ = _cli("bench", "import", "spider", str(folder), "--questions", "dev_x4.json", "--split", "dev",
                             "--out", str(x4))
        suite_path = project / "suites" / "spider_dev.yaml"
        suite = load_suite(suite_path)
        labels = Counter(c.benchmark.difficulty if c.benchmark else None for c in suite.cases)
        no_rows = [c.id for c in suite.cases if c.rows is None]
        print(f"bench import: {len(questions)} questions in {seconds:.2f} s, {4 * len(questions)} in "
              f"{seconds_x4:.2f} s (whole commands); rows for {len(questions) - len(no_rows)}; hardness "
              + ", ".join(f"{k} {v}" for k, v in sorted(labels.items(), key=lambda kv: str(kv[0]))))

        # -- eval grade
        ids = [c.id for c in suite.cases]
        predictions = {case_id: sql.strip() for case_id, sql in zip(ids, predicted, strict=True)}
        pred_file = work / "predictions.json"
        pred_file.write_text(json.dumps(predictions))
        seconds, done = _cli("--config", str(project), "eval", "grade", str(pred_file), "--suite", str(suite_path),
                             "--out", str(work / "grade.json"))
        print(f"eval grade (whole command, {seconds:.2f} s):\n  " + done.stdout.strip().replace("\n", "\n  "))
        graded = {c["case_id"]: c for c in json.loads((work / "grade.json").read_text())["cases"]}

        # -- the HTTP engine path
        engine = PredictionEngine(predictions)
        try:
            seconds, done = _cli("--config", str(project), "eval", "run", "--mode", "full", "--suite", str(suite_path),
                                 "--engine", f"predictions={engine.url}", "--out", str(work / "run.json"))
        finally:
            engine.shutdown()
        if not (work / "run.json").is_file():
            print(done.stdout, done.stderr, file=sys.stderr)
            return 1
        from nl2sql_assets.evaluation.reporting import load_report

        records = {r.case_id: r for r in load_report(work / "run.json").configs["predictions"].results}
        differ = []
        for case_id, g in graded.items():
            record = records[case_id]
            strict = record.execution_status == "pass"
            lenient = bool(record.scores["result_match"].detail.get("lenient", {}).get("passed"))
            if (strict, lenient) != (g["strict"]["passed"], g["lenient"]["passed"]):
                differ.append((case_id, strict, lenient, g, record.error_code))
        leaks = sum(1 for r in records.values() if r.error_code == "ENGINE_LEAK")
        print(f"HTTP engine path (eval run --mode full, {seconds:.1f} s): {len(records)} case runs; verdicts that "
              f"differ from eval grade: {len(differ)}; ENGINE_LEAK: {leaks}")
        for case_id, strict, lenient, g, code in differ[:10]:
            print(f"  {case_id}: run {strict}/{lenient} ({code}), grade {g['strict']['passed']}/"
                  f"{g['lenient']['passed']} ({g['strict']['reason']})")

        # -- the official grader on the same pairs and databases
        if args.peer is None or args.peer_python is None:
            print("official grader: not run (give --peer and --peer-python)")
            return 0
        peer_dir = work / "peer"
        peer_dir.mkdir(exist_ok=True)
        _peer_files(args.peer, peer_dir)
        (peer_dir / "driver.py").write_text(PEER_DRIVER)
        pairs = [[str(folder / "database" / q["db_id"] / f"{q['db_id']}.sqlite"), predictions[i], q["query"]]
                 for i, q in zip(ids, questions, strict=True)]
        (work / "pairs.json").write_text(json.dumps(pairs))
        subprocess.run([args.peer_python, str(peer_dir / "driver.py"), str(peer_dir), str(work / "pairs.json"),
                        str(work / "peer.json")], check=True, cwd=peer_dir)
        peer = json.loads((work / "peer.json").read_text())
        lenient_agree = strict_agree = 0
        disagreements = []
        for case_id, verdict in zip(ids, peer["verdicts"], strict=True):
            g = graded[case_id]
            strict_agree += g["strict"]["passed"] == bool(verdict)
            if g["lenient"]["passed"] == bool(verdict):
                lenient_agree += 1
            else:
                disagreements.append((case_id, bool(verdict), g))
        print(f"official exec match (--keep_distinct, {peer['seconds']:.1f} s, one process): "
              f"{sum(map(bool, peer['verdicts']))} of {len(ids)} match; lenient agrees on {lenient_agree}, strict on "
              f"{strict_agree}")
        for case_id, verdict, g in disagreements:
            index = ids.index(case_id)
            print(f"  {case_id} official {verdict}, lenient {g['lenient']['passed']} ({g['lenient']['reason']}: "
                  f"{g['lenient']['message'][:120]})\n    gold: {questions[index]['query']}\n    pred: "
                  f"{predictions[case_id]}")
        ours = [c.benchmark.difficulty if c.benchmark else None for c in suite.cases]
        same = sum(a == b for a, b in zip(ours, peer["hardness"], strict=True))
        print(f"hardness: ours equals the official evaluator's on {same} of {len(ids)} "
              f"(official: {dict(Counter(peer['hardness']))})")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
