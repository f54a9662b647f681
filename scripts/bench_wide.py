#!/usr/bin/env python
"""Benchmark: routing and schema retrieval at warehouse width, on the wide test bed.

    python scripts/bench_wide.py                 # 100, 400 and 1,200 tables
    python scripts/bench_wide.py --sizes 1200    # one size

For each size, in a fresh process (so memory is that size's alone): building the bed (SQLite and
DuckDB files), the six schema snapshots, the six indexes (every table, column and key embedded by
the local ONNX model, 2 threads), the peak resident memory, and per question of the wide routing
suite the router's ranking over the six datasources and the retriever's search of one datasource
(p50 and p95 over the 108 and 96 questions, after one warm-up question), with the recall they
give. Growth per table is printed beside each figure, so near-linear growth reads as a flat column.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(total: int) -> dict[str, float]:
    """One size, in this process: what the table prints."""
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.evaluation.judging.scorers.retrieval_recall import recall_detail
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import wide_routing_suite_path
    from nl2sql_assets.project import Project
    from nl2sql_assets.retrieval.embedder import default_embedder
    from nl2sql_assets.retrieval.index import IndexStore
    from nl2sql_assets.retrieval.retriever import SchemaRetriever
    from nl2sql_assets.retrieval.routing import DatasourceRouter
    from nl2sql_assets.testbed.wide import build_wide

    out: dict[str, float] = {"tables": total}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        bed = build_wide(Path(tmp) / "bed", total_tables=total)
        out["build_s"] = time.perf_counter() - started
        project = Project.load(bed.config)
        embedder = default_embedder()
        embedder.load()  # the model's load is not the index's cost
        with DatasourceRegistry(project.config) as registry:
            started = time.perf_counter()
            snapshots = {ds: registry.snapshot(ds) for ds in registry.ids}
            out["snapshot_s"] = time.perf_counter() - started
            out["columns"] = sum(s.column_count for s in snapshots.values())
            store = IndexStore(project.config, embedder=embedder)  # in memory: built, never loaded
            started = time.perf_counter()
            indexes = {ds: store.get(s) for ds, s in snapshots.items()}
            out["index_s"] = time.perf_counter() - started
            out["entries"] = sum(len(i.entries) for i in indexes.values())
            router = DatasourceRouter(project.config, registry, store=store)
            retriever = SchemaRetriever(project.config, store=store)
            suite = load_suite(wide_routing_suite_path())
            router(suite.cases[0].question)  # warm-up
            route_times, search_times, top1, recalls = [], [], 0, []
            for case in suite.cases:
                started = time.perf_counter()
                ranked = router(case.question)
                route_times.append(time.perf_counter() - started)
                top1 += ranked[0] in case.datasources
                if case.kind != "answer":
                    continue
                snapshot = snapshots[case.datasources[0]]
                started = time.perf_counter()
                sent = retriever(case.question, snapshot)
                search_times.append(time.perf_counter() - started)
                recalls.append(recall_detail(case.tables, case.columns, sent).table_recall)
    out["route_p50_ms"] = 1000 * statistics.median(route_times)
    out["route_p95_ms"] = 1000 * _percentile(route_times, 0.95)
    out["search_p50_ms"] = 1000 * statistics.median(search_times)
    out["search_p95_ms"] = 1000 * _percentile(search_times, 0.95)
    out["top1"] = top1 / len(route_times)
    out["table_recall"] = sum(recalls) / len(recalls)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 400, 1200])
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child)))
        return 0
    results = []
    for total in args.sizes:
        proc = subprocess.run([sys.executable, __file__, "--child", str(total)], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return proc.returncode
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"wide test bed: {os.cpu_count()} cores, ONNX all-MiniLM-L6-v2 int8 on 2 threads")
    header = ("tables", "columns", "entries", "build s", "snapshots s", "index s", "ms/entry", "peak MiB",
              "route p50/p95 ms", "search p50/p95 ms", "top-1", "table recall")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for r in results:
        print(" | ".join([
            f"{int(r['tables'])}", f"{int(r['columns'])}", f"{int(r['entries'])}", f"{r['build_s']:.2f}",
            f"{r['snapshot_s']:.2f}", f"{r['index_s']:.1f}", f"{1000 * r['index_s'] / r['entries']:.2f}",
            f"{r['peak_rss_mib']:.0f}", f"{r['route_p50_ms']:.2f} / {r['route_p95_ms']:.2f}",
            f"{r['search_p50_ms']:.2f} / {r['search_p95_ms']:.2f}", f"{100 * r['top1']:.1f}%",
            f"{100 * r['table_recall']:.1f}%"]))
    if len(results) > 1:
        first, last = results[0], results[-1]
        scale = last["tables"] / first["tables"]
        print(f"\n{first['tables']:.0f} -> {last['tables']:.0f} tables ({scale:.0f}x): index build "
              f"{last['index_s'] / first['index_s']:.1f}x, entries {last['entries'] / first['entries']:.1f}x, "
              f"routing p50 {last['route_p50_ms'] / first['route_p50_ms']:.1f}x, search p50 "
              f"{last['search_p50_ms'] / first['search_p50_ms']:.1f}x, peak memory "
              f"{last['peak_rss_mib'] / first['peak_rss_mib']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
