#!/usr/bin/env python
"""Benchmark: evaluating on Postgres and MariaDB/MySQL beside the SQLite demo, whole commands.

    python scripts/bench_servers.py [--repeat 5] [--predictions 1000] [--servers postgres,mysql]

Makes the demo three times (files; ``init --demo --database`` on each server, under a namespace
prefix of its own, dropped at the end) and measures, each figure over ``--repeat`` fresh child
processes (min / median / max):

* ``eval run --mode plans`` on the Chinook suites (target: a server within 1.5x of SQLite);
* ``eval grade`` of ``--predictions`` predictions (the suite's gold SQL cycled, each text distinct
  by a trailing comment, one in ten wrong), the whole command (target: within 2x);
* a statement that runs for minutes, stopped at a 1 s timeout: seconds past the timeout (target: +1 s);
* a 12-million-row result cut at the row limit, the whole command's peak memory (target: 700 MiB);
* the connections a grade with two workers holds on the server (pooled per worker: at most
  ``pool_size`` each);
* with ``--neighbours``: ``eval run --mode plans`` on the Chinook suite graded on neighbours (the demo's
  10 of 24 and a witness search of 32), building them the first time and reading them back, each
  server against the SQLite demo (targets: 3x building, 2x stored).

Needs ``NL2SQL_CHINOOK`` and the servers (``NL2SQL_TEST_POSTGRES`` / ``NL2SQL_TEST_MYSQL``, default
the machine's own). Prints one line per figure and a JSON summary last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.benchlib import run_child  # noqa: E402

URLS = {
    "postgres": os.environ.get("NL2SQL_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test"),
    "mysql": os.environ.get("NL2SQL_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test"),
}
LONG = {
    "postgres": "SELECT COUNT(*) FROM generate_series(1, 100000000000) AS g(n)",
    "mysql": "SELECT COUNT(*) FROM nl2sql_bench a, nl2sql_bench b, nl2sql_bench c, nl2sql_bench d, nl2sql_bench e, "
             "nl2sql_bench f, nl2sql_bench g, nl2sql_bench h, nl2sql_bench i, nl2sql_bench j, nl2sql_bench k, "
             "nl2sql_bench l, nl2sql_bench m, nl2sql_bench n, nl2sql_bench o, nl2sql_bench p, nl2sql_bench q, "
             "nl2sql_bench r, nl2sql_bench s, nl2sql_bench t, nl2sql_bench u, nl2sql_bench v, nl2sql_bench w",
}
HUGE = {
    "postgres": "SELECT n, n * 2 AS twice, 'row ' || n AS label FROM generate_series(1, 12000000) AS g(n)",
    "mysql": "SELECT a.n, CONCAT('row ', b.n) AS label FROM nl2sql_bench a, nl2sql_bench b, nl2sql_bench c, "
             "nl2sql_bench d, nl2sql_bench e, nl2sql_bench f, nl2sql_bench g, nl2sql_bench h, nl2sql_bench i, "
             "nl2sql_bench j, nl2sql_bench k, nl2sql_bench l, nl2sql_bench m, nl2sql_bench n, nl2sql_bench o, "
             "nl2sql_bench p, nl2sql_bench q, nl2sql_bench r, nl2sql_bench s, nl2sql_bench t, nl2sql_bench u, "
             "nl2sql_bench v, nl2sql_bench w, nl2sql_bench x",  # 2**24 rows
}
#: one child: the adapter of the datasource of a project, one statement, the seconds and the cut
STATEMENT = r'''
import json, sys, time
from nl2sql_assets.project import load_project_config
from nl2sql_assets.datasources.registry import open_adapter
config = load_project_config(sys.argv[1])
adapter = open_adapter(config.datasource("chinook"))
started = time.perf_counter()
try:
    out = adapter.execute(sys.argv[2], timeout_s=float(sys.argv[3]))
    result = {"rows": len(out.rows), "truncated": out.truncated}
except Exception as exc:
    result = {"error": type(exc).__name__}
result["seconds"] = time.perf_counter() - started
adapter.close()
print(json.dumps(result))
'''


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def _cli(*args: Any) -> list[str]:
    return [sys.executable, "-m", "nl2sql_assets.cli", *map(str, args)]


def _timed(args: list[str], repeat: int, cwd: Path) -> dict[str, float]:
    walls = []
    for _ in range(repeat):
        run = run_child(args, None, cwd=cwd)
        if run.rc != 0:
            raise RuntimeError(f"{' '.join(args)} exited {run.rc}:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        walls.append(run.wall_s)
    return _stats(walls)


def _copies(suite: Path, n: int, target: Path) -> Path:
    """A suite of ``n`` gradable cases: the suite's answerable cases cycled, each copy its own id."""
    from nl2sql_assets.evaluation.suites import load_suite, write_suite

    original = load_suite(suite)
    cases = [c for c in original.cases if c.sql and c.rows is not None and c.status == "approved"]
    copies = [cases[i % len(cases)].model_copy(update={"id": f"{cases[i % len(cases)].id}_{i:05d}",
                                                       "paraphrase_group": None, "follows": None})
              for i in range(n)]
    write_suite(original.model_copy(update={"cases": copies}), target, header="# bench copies\n")
    return target


def _grade_inputs(project: Path, n: int, folder: Path) -> tuple[Path, Path]:
    suite = _copies(project / "suites" / "chinook.yaml", n, folder / "copies.yaml")
    from nl2sql_assets.evaluation.suites import load_suite

    predictions = {}
    for i, case in enumerate(load_suite(suite).cases):
        predictions[case.id] = "SELECT 1 AS wrong" if i % 10 == 0 else f"{case.sql.rstrip().rstrip(';')} -- {i}"
    path = folder / "predictions.json"
    path.write_text(json.dumps(predictions), encoding="utf-8")
    return suite, path


def _connections(engine: str, url: str, stop: threading.Event, peak: list[int]) -> None:
    """Polls the server for the connections nl2sql-assets holds; the highest count in ``peak``."""
    from tests.servers.conftest import Server

    server = Server(engine, url)
    query = ("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'nl2sql-assets'" if engine == "postgres"
             else "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB LIKE 'b%_chinook'")
    while not stop.is_set():
        with contextlib.suppress(Exception):
            peak[0] = max(peak[0], int(server.execute(query)[0][0]))
        time.sleep(0.05)


def _neighbour_figures(projects: dict[str, Path], servers: list[str], folder: Path, summary: dict[str, Any]) -> None:
    """``eval run --mode plans`` on the Chinook suite with neighbours: building them (and every witness
    search) the first time, then reading them back; each server against the SQLite demo (targets:
    3x building, 2x stored)."""
    for engine, root in projects.items():
        command = _cli("--config", root / "nl2sql.yaml", "eval", "run", "--mode", "plans", "--suite",
                       root / "suites" / "chinook.yaml", "--out", folder / f"{engine}-neighbours.json")
        first = run_child(command, None, cwd=root)
        stored = [run_child(command, None, cwd=root) for _ in range(3)]
        line = next((x for x in first.stdout.splitlines() if "on neighbours" in x), "")
        summary.setdefault(engine, {})["neighbours"] = {
            "build_s": round(first.wall_s, 2), "stored_s": round(statistics.median(r.wall_s for r in stored), 2),
            "robust": line.split("on neighbours", 1)[1].split(";")[0].strip() if line else None}
        figures = summary[engine]["neighbours"]
        print(f"{engine}: plans on Chinook with neighbours: built {figures['build_s']:.1f} s, stored "
              f"{figures['stored_s']:.2f} s; on neighbours {figures['robust']}")
    base = summary["sqlite"]["neighbours"]
    for engine in servers:
        figures = summary[engine]["neighbours"]
        figures["build_ratio"] = round(figures["build_s"] / base["build_s"], 2)
        figures["stored_ratio"] = round(figures["stored_s"] / base["stored_s"], 2)
        print(f"{engine}: neighbours built {figures['build_ratio']}x SQLite (target 3x), stored "
              f"{figures['stored_ratio']}x (target 2x)")


def _held_out(path: Path, engine: str, root: Path, summary: dict[str, Any]) -> None:
    """The held-out near misses and equivalents of the Chinook gold, written for SQLite, translated to
    the server's SQL (as the demo's suites are) and graded against the server suite's gold on its kept
    neighbours and the witness search (targets: 90% of the near misses the original passes caught, no
    equivalent overturned)."""
    import yaml

    from nl2sql_assets.demo.translate import translate_sql
    from nl2sql_assets.evaluation.neighbours import GoldQuery
    from nl2sql_assets.evaluation.neighbours.store import project_sets, project_suites
    from nl2sql_assets.evaluation.neighbours.verdict import neighbour_verdict
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.project import load_project_config

    config = load_project_config(root / "nl2sql.yaml")
    settings = config.evals_config.neighbours
    assert settings is not None
    suite = load_suite(root / "suites" / "chinook.yaml")
    kept = project_sets(config, project_suites(config, [("chinook", suite)]), settings, neighbours_dir(root),
                        datasources=["chinook"])["chinook"]
    search = kept.witness_search(settings.witness)
    golds = {c.id: GoldQuery(c.id, c.sql, c.order_matters, tuple(c.alt_sql)) for c in suite.cases if c.sql}
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    fold = engine == "postgres"
    passing = caught = 0
    for item in data.get("near", []):
        sql = translate_sql(item["sql"], "sqlite", engine, fold_names=fold)
        verdict = neighbour_verdict(golds[item["case"]], sql, kept.source, kept.paths, engine, witness=search)
        if verdict.passed_original:
            passing += 1
            caught += not verdict.passed
            if verdict.passed:
                print(f"  {engine}: missed {item['case']} ({item.get('kind', '')}): {' '.join(sql.split())[:120]}")
    bad = [item["case"] for item in data.get("equivalent", [])
           if not neighbour_verdict(golds[item["case"]], translate_sql(item["sql"], "sqlite", engine, fold_names=fold),
                                    kept.source, kept.paths, engine, witness=search).passed]
    summary[engine]["held_out"] = {"passing": passing, "caught": caught, "equivalents_overturned": bad}
    print(f"{engine}: held-out near misses translated: {passing} pass on the server; caught {caught} "
          f"({caught / max(passing, 1):.1%}; target 90%); equivalents overturned: {len(bad)} {bad}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--predictions", type=int, default=1000)
    parser.add_argument("--servers", default="postgres,mysql")
    parser.add_argument("--held-out", default=None, metavar="FILE",
                        help="with --neighbours: near misses and equivalents of the Chinook gold (bench_neighbours.py's "
                             "format), translated to each server's SQL and graded on its kept set and witness search")
    parser.add_argument("--neighbours", action="store_true",
                        help="also: eval run --mode plans on the Chinook suite with the demo's neighbours (10 of 24 "
                             "and a witness search of 32), building them the first time and reading them back")
    args = parser.parse_args()
    chinook = os.environ.get("NL2SQL_CHINOOK")
    if not chinook:
        print("set NL2SQL_CHINOOK to Chinook_Sqlite.sqlite", file=sys.stderr)
        return 2
    from nl2sql_assets.demo import init_demo
    from tests.servers.conftest import Server

    servers = [s for s in args.servers.split(",") if s]
    folder = Path(tempfile.mkdtemp(prefix="nl2sql-bench-servers-"))
    prefix = f"b{uuid.uuid4().hex[:8]}_"
    summary: dict[str, Any] = {"repeat": args.repeat, "predictions": args.predictions}
    try:
        projects = {"sqlite": init_demo(folder / "sqlite", chinook=Path(chinook)).root}
        for engine in servers:
            projects[engine] = init_demo(folder / engine, chinook=Path(chinook), database=URLS[engine],
                                         namespace_prefix=prefix).root
        for engine, root in projects.items():
            plans = _timed(_cli("--config", root / "nl2sql.yaml", "eval", "run", "--mode", "plans", "--no-neighbours",
                                "--out", folder / f"{engine}-plans.json"), args.repeat, root)
            suite, predictions = _grade_inputs(root, args.predictions, folder / engine)
            grade = _timed(_cli("--config", root / "nl2sql.yaml", "eval", "grade", predictions, "--suite", suite,
                                "--no-neighbours", "--out", folder / f"{engine}-grade.json"), args.repeat, root)
            summary[engine] = {"plans_s": plans, "grade_s": grade}
            print(f"{engine}: eval run --mode plans {plans['median']:.2f} s (min {plans['min']:.2f}, max "
                  f"{plans['max']:.2f}); eval grade of {args.predictions} {grade['median']:.2f} s")
        if args.neighbours:
            _neighbour_figures(projects, servers, folder, summary)
            if args.held_out:
                for engine in servers:
                    _held_out(Path(args.held_out), engine, projects[engine], summary)
        base = summary["sqlite"]
        for engine in servers:
            ours = summary[engine]
            ours["plans_ratio"] = round(ours["plans_s"]["median"] / base["plans_s"]["median"], 2)
            ours["grade_ratio"] = round(ours["grade_s"]["median"] / base["grade_s"]["median"], 2)
            print(f"{engine}: plans {ours['plans_ratio']}x SQLite (target 1.5x), grade {ours['grade_ratio']}x "
                  "(target 2x)")
            root = projects[engine]
            server = Server(engine, URLS[engine])
            if engine == "mysql":
                server.execute(f"CREATE TABLE `{prefix}chinook`.nl2sql_bench (n INT)",
                               f"INSERT INTO `{prefix}chinook`.nl2sql_bench VALUES (1), (2)")
            else:
                server.execute(f'CREATE TABLE "{prefix}chinook".nl2sql_bench (n INT)')
            stopped = []
            for _ in range(args.repeat):
                run = run_child([sys.executable, "-c", STATEMENT, str(root / "nl2sql.yaml"), LONG[engine], "1"], None)
                stopped.append(run.json_line()["seconds"] - 1.0)
            cut = run_child([sys.executable, "-c", STATEMENT, str(root / "nl2sql.yaml"), HUGE[engine], "300"], None)
            huge = cut.json_line()
            ours["past_timeout_s"] = _stats(stopped)
            ours["huge"] = {**huge, "rss_mib": round(cut.rss_mib, 1), "seconds": round(huge["seconds"], 2)}
            print(f"{engine}: a 1 s timeout stops a long statement {ours['past_timeout_s']['median']:+.2f} s past it "
                  f"(max {ours['past_timeout_s']['max']:+.2f}); a huge result cut at {huge.get('rows')} rows "
                  f"(truncated {huge.get('truncated')}) in {huge['seconds']:.2f} s, peak {cut.rss_mib:.0f} MiB "
                  "for the whole process (target 700)")
            stop, peak = threading.Event(), [0]
            poller = threading.Thread(target=_connections, args=(engine, URLS[engine], stop, peak), daemon=True)
            poller.start()
            suite, predictions = folder / engine / "copies.yaml", folder / engine / "predictions.json"
            run_child(_cli("--config", root / "nl2sql.yaml", "eval", "grade", predictions, "--suite", suite,
                           "--workers", 2, "--no-neighbours", "--out", folder / f"{engine}-grade2.json"), None, cwd=root)
            stop.set()
            poller.join()
            ours["grade_connections_peak"] = peak[0]
            print(f"{engine}: eval grade on 2 workers held at most {peak[0]} connection(s) (pool_size 2 each)")
    finally:
        for engine in servers:
            server = Server(engine, URLS[engine])
            for ds in ("chinook", "support", "webanalytics"):
                with contextlib.suppress(Exception):
                    server.drop(f"{prefix}{ds}")
        from tests.servers.conftest import drop_neighbours

        drop_neighbours(folder)  # every neighbour namespace the runs made on the servers
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
