#!/usr/bin/env python
"""Benchmark: the building blocks of a run, each timed on its own (min / median / max over repeats).

Speed targets are checked here, on demand, not by timed unit tests:

    python scripts/bench_building_blocks.py              # everything, 5 repeats
    python scripts/bench_building_blocks.py --repeat 9 --only sqlgen,compare

Blocks: SQL generation and plan validation on every Chinook plan, suite load and write
(Chinook, a synthetic 50-case and 10,000-case suite), strict and lenient row comparison on
3,000 rows, answer faithfulness on 5,000 rows, the sqlite and duckdb adapters on typical
queries, the demo data generator, ``import nl2sql_assets.definitions`` in a fresh process
(target under 2 s) and building the Dagster Definitions of a project.
"""

from __future__ import annotations

import os

# Before anything imports litellm: never fetch its cost map over the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMPORT_TARGET_S = 2.0
ROOT = Path(__file__).resolve().parent.parent
GROUPS = ("imports", "defs", "demo", "suite", "sqlgen", "validate", "compare", "faithfulness", "adapters")


@dataclass
class Row:
    group: str
    what: str
    unit: str  # what one sample is: "per plan", "per call", ...
    samples: list[float]  # seconds
    note: str = ""


def timed(fn: Callable[[], Any], repeat: int, per: int = 1) -> list[float]:
    """``repeat`` samples of ``fn()``'s wall time, each divided by ``per`` (items done per call)."""
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) / per)
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}" if seconds < 1 else f"{seconds * 1000:.0f}"


def print_rows(rows: Sequence[Row]) -> None:
    header = ["block", "unit", "n", "min ms", "median ms", "max ms", "note"]
    table = [
        [f"{r.group}: {r.what}", r.unit, str(len(r.samples)), _ms(min(r.samples)), _ms(statistics.median(r.samples)),
         _ms(max(r.samples)), r.note]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *table, strict=False)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False))
    print(line)
    print("-" * len(line))
    for cells in table:
        print("  ".join(c.rjust(w) if 2 <= i <= 5 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=False))))


# ---------------------------------------------------------------- the blocks


def bench_imports(repeat: int) -> list[Row]:
    """``import nl2sql_assets.definitions`` in a fresh interpreter: the code location's load time."""
    code = (
        "import time; t = time.perf_counter(); import nl2sql_assets.definitions; "
        "print(time.perf_counter() - t)"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    inside, whole, bare = [], [], []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True)
        whole.append(time.perf_counter() - started)
        inside.append(float(out.stdout.strip().splitlines()[-1]))
    verdict = "met" if statistics.median(inside) < IMPORT_TARGET_S else "MISSED"
    litellm = subprocess.run(
        [sys.executable, "-c", "import sys, nl2sql_assets.definitions; print('litellm' in sys.modules)"],
        check=True, env=env, capture_output=True, text=True,
    ).stdout.strip()
    return [
        Row("imports", "import nl2sql_assets.definitions", "per import", inside,
            f"target < {IMPORT_TARGET_S:.0f} s: {verdict}; litellm imported: {litellm}"),
        Row("imports", "  the same, whole process", "per process", whole, "interpreter start + import + exit"),
        Row("imports", "  bare interpreter (python -c pass)", "per process", bare),
    ]


def bench_defs(config: Path, repeat: int) -> list[Row]:
    started = time.perf_counter()
    from nl2sql_assets.defs.factory import build_defs

    imported = time.perf_counter() - started
    first = timed(lambda: build_defs(config), 1)
    again = timed(lambda: build_defs(config), repeat)
    return [
        Row("defs", "import nl2sql_assets.defs.factory", "once", [imported], "dagster and the asset modules"),
        Row("defs", "build_defs(nl2sql.yaml), first", "per build", first),
        Row("defs", "build_defs(nl2sql.yaml), again", "per build", again),
    ]


def bench_demo(chinook: Path, tmp: Path, repeat: int) -> list[Row]:
    from nl2sql_assets import demo

    counter = iter(range(10**6))

    def write() -> None:
        demo.write_demo_databases(tmp / f"demo-{next(counter)}", chinook=chinook)

    return [Row("demo", "write_demo_databases (support + webanalytics)", "per write", timed(write, repeat))]


def _synthetic(cases: Sequence[Any], n: int, rows: int | None) -> Any:
    """``n`` cases cycled from ``cases`` with fresh ids (and ``rows`` rows each, when given)."""
    from nl2sql_assets.evaluation.suites import EvalSuite

    out = []
    for i in range(n):
        base = cases[i % len(cases)]
        update: dict[str, Any] = {"id": f"{base.id}_{i:05d}"}
        if rows is not None and base.rows is not None:
            update["rows"] = [{"Country": f"Country {j}", "n": j, "avg": j / 7} for j in range(rows)]
        out.append(base.model_copy(update=update))
    return EvalSuite(cases=out)


def bench_suite(tmp: Path, repeat: int, huge_repeat: int) -> list[Row]:
    from nl2sql_assets.evaluation.suites import load_suite, write_suite

    chinook = load_suite(ROOT / "suites" / "chinook.yaml")
    answerable = [c for c in chinook.cases if c.rows is not None]
    suites = {
        f"chinook.yaml ({len(chinook.cases)} cases)": (chinook, repeat),
        "synthetic 50 cases, 12 rows each": (_synthetic(answerable, 50, 12), repeat),
        "synthetic 10,000 cases": (_synthetic(chinook.cases, 10_000, None), huge_repeat),
    }
    rows = []
    for i, (label, (suite, reps)) in enumerate(suites.items()):
        path = tmp / f"suite-{i}.yaml"
        write_samples = timed(lambda s=suite, p=path: write_suite(s, p), reps)
        size = path.stat().st_size
        load_samples = timed(lambda p=path: load_suite(p), reps)
        loaded = load_suite(path)
        assert len(loaded.cases) == len(suite.cases)
        rows.append(Row("suite", f"load {label}", "per load", load_samples, f"{size / 1024:.0f} KiB"))
        rows.append(Row("suite", f"write {label}", "per write", write_samples))
    return rows


def _chinook_plans() -> list[Any]:
    from nl2sql_assets.evaluation.suites import load_suite

    return [c for c in load_suite(ROOT / "suites" / "chinook.yaml").cases if c.plan is not None]


def bench_sqlgen(repeat: int) -> list[Row]:
    from nl2sql_assets.engine.sqlgen import generate_sql

    plans = [c.plan for c in _chinook_plans()]
    rows = []
    for dialect in ("sqlite", "duckdb"):
        for p in plans:  # warm: first calls build caches
            generate_sql(p, dialect)  # type: ignore[arg-type]

        def all_plans(d: str = dialect) -> None:
            for p in plans:
                generate_sql(p, d)  # type: ignore[arg-type]

        rows.append(Row("sqlgen", f"generate_sql, {dialect}", "per plan", timed(all_plans, repeat, len(plans)),
                        f"mean over the {len(plans)} Chinook plans"))
    slowest = max(plans, key=lambda p: min(timed(lambda q=p: generate_sql(q, "duckdb"), 5)))  # type: ignore[arg-type]
    rows.append(Row("sqlgen", "generate_sql, duckdb, slowest plan", "per plan",
                    timed(lambda: generate_sql(slowest, "duckdb"), repeat)))
    return rows


def bench_validate(config_path: Path, repeat: int) -> list[Row]:
    from nl2sql_assets.config import load_config
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.engine.validator import validate_plan

    config = load_config(config_path)
    cases = _chinook_plans()
    with DatasourceRegistry(config) as registry:
        snapshot = registry.snapshot("chinook")
    roles = sorted(config.policies.roles)
    jobs = [(c.plan, role, config.policies.role(role).access("chinook")) for c in cases for role in roles]

    def all_jobs() -> None:
        for plan, role, access in jobs:
            validate_plan(plan, snapshot, access, role=role, row_budget=config.settings.row_budget)

    all_jobs()
    return [Row("validate", "validate_plan", "per plan and role", timed(all_jobs, repeat, len(jobs)),
                f"{len(cases)} plans x {len(roles)} roles")]


def _table(n: int, seed: int) -> list[list[Any]]:
    rnd = random.Random(seed)
    return [[i, f"name{i % 50}", round(rnd.random() * 1000, 2)] for i in range(n)]


def bench_compare(repeat: int) -> list[Row]:
    from nl2sql_assets.evaluation.judging.comparison import compare_results, compare_results_lenient

    gold = _table(3000, 1)
    rnd = random.Random(2)
    shuffled = [list(r) for r in gold]
    rnd.shuffle(shuffled)
    reordered = [[c, a, b] for a, b, c in shuffled]
    noisy = [[str(a), b, c + rnd.choice([-0.004, 0.004])] for a, b, c in shuffled]
    chain_gold = [[round(rnd.random() * 100, 2), rnd.choice("abc")] for _ in range(3000)]
    chain_got = [[v + rnd.choice([-0.004, 0.004]), t] for v, t in chain_gold]
    rnd.shuffle(chain_got)
    variants: list[tuple[str, list[list[Any]], list[list[Any]], bool, bool, bool]] = [
        # (label, gold, got, order_matters, strict verdict, lenient verdict)
        ("ordered (order matters)", gold, [list(r) for r in gold], True, True, True),
        ("shuffled", gold, shuffled, False, True, True),
        ("reordered columns, shuffled", gold, reordered, False, False, True),
        ("text keys, amounts off < half a cent", gold, noisy, False, True, True),
        ("tolerance chains (matching path)", chain_gold, chain_got, False, True, True),
    ]
    rows = []
    for label, g, h, order, strict_ok, lenient_ok in variants:
        assert compare_results(g, h, order) is strict_ok, label
        assert compare_results_lenient(g, h, order) is lenient_ok, label
        rows.append(Row("compare", f"compare_results, 3,000 rows, {label}", "per call",
                        timed(lambda g=g, h=h, o=order: compare_results(g, h, o), repeat),
                        "pass" if strict_ok else "fail (as it should)"))
        rows.append(Row("compare", f"compare_results_lenient, 3,000 rows, {label}", "per call",
                        timed(lambda g=g, h=h, o=order: compare_results_lenient(g, h, o), repeat), "pass"))
    return rows


def bench_faithfulness(repeat: int) -> list[Row]:
    from nl2sql_assets.evaluation.judging.faithfulness import check_faithfulness

    rnd = random.Random(5)
    columns = ["CustomerId", "Country", "Total"]
    rows = [[i, f"Country {i % 24}", round(rnd.random() * 100, 2)] for i in range(5000)]
    answer = (
        f"There are 5,000 invoices. **Country 3** leads with a total of {rows[3][2]}; "
        f"**Country 7** follows at {rows[7][2]}, and the smallest is {min(r[2] for r in rows)}. "
        "About 12% of them come from **Country 11**."
    )
    verdict = check_faithfulness(answer, columns, rows, "Which country spends the most?")
    return [Row("faithfulness", "check_faithfulness, 5,000 rows", "per call",
                timed(lambda: check_faithfulness(answer, columns, rows, "Which country spends the most?"), repeat),
                f"faithful={verdict.faithful}, checked={verdict.checked}")]


DUCKDB_QUERIES: dict[str, list[str]] = {
    "support": [
        "SELECT status, COUNT(*) AS n FROM tickets GROUP BY status ORDER BY n DESC",
        "SELECT a.team, AVG(t.satisfaction_score) AS score FROM tickets t JOIN agents a ON a.agent_id = t.agent_id "
        "GROUP BY a.team ORDER BY score DESC",
        "SELECT c.country, COUNT(*) AS n FROM tickets t JOIN customers c ON c.customer_id = t.customer_id "
        "GROUP BY c.country ORDER BY n DESC LIMIT 5",
        "SELECT t.ticket_id, COUNT(m.message_id) AS messages FROM tickets t JOIN ticket_messages m "
        "ON m.ticket_id = t.ticket_id GROUP BY t.ticket_id ORDER BY messages DESC LIMIT 10",
        "SELECT date_trunc('month', created_at) AS month, COUNT(*) AS n FROM tickets GROUP BY month ORDER BY month",
    ],
    "webanalytics": [
        "SELECT d.device_type, COUNT(*) AS sessions FROM sessions s JOIN devices d ON d.device_id = s.device_id "
        "GROUP BY d.device_type ORDER BY sessions DESC",
        "SELECT r.source, SUM(c.amount) AS revenue FROM conversions c JOIN sessions s ON s.session_id = c.session_id "
        "JOIN referrers r ON r.referrer_id = s.referrer_id GROUP BY r.source ORDER BY revenue DESC",
        "SELECT path, AVG(duration_s) AS avg_s FROM page_views GROUP BY path ORDER BY avg_s DESC LIMIT 10",
        "SELECT country, COUNT(*) AS n FROM sessions GROUP BY country ORDER BY n DESC LIMIT 5",
        "SELECT kind, COUNT(*) AS n, SUM(amount) AS total FROM conversions GROUP BY kind ORDER BY kind",
    ],
}


def bench_adapters(config_path: Path, repeat: int) -> list[Row]:
    from nl2sql_assets.config import load_config
    from nl2sql_assets.datasources.registry import DatasourceRegistry, open_adapter

    config = load_config(config_path)
    gold_sql = [c.sql for c in _chinook_plans() if c.sql]
    rows = []
    with DatasourceRegistry(config) as registry:
        for ds_id in ("chinook", "support"):
            cfg = registry.config(ds_id)
            assert cfg is not None
            rows.append(Row("adapters", f"open {cfg.engine} ({ds_id}) and close", "per open",
                            timed(lambda c=cfg: open_adapter(c).close(), repeat)))
        lite = registry.get("chinook")
        for sql in gold_sql:
            lite.execute(sql)
        rows.append(Row("adapters", f"sqlite execute, the {len(gold_sql)} Chinook gold queries", "per query",
                        timed(lambda: [lite.execute(s) for s in gold_sql], repeat, len(gold_sql))))
        rows.append(Row("adapters", "sqlite introspect (schema snapshot), chinook", "per call",
                        timed(lite.introspect, repeat)))
        for ds_id, queries in DUCKDB_QUERIES.items():
            duck = registry.get(ds_id)
            for sql in queries:
                duck.execute(sql)
            rows.append(Row("adapters", f"duckdb execute, {len(queries)} typical {ds_id} queries", "per query",
                            timed(lambda d=duck, q=queries: [d.execute(s) for s in q], repeat, len(queries))))
        rows.append(Row("adapters", "duckdb introspect (schema snapshot), support", "per call",
                        timed(registry.get("support").introspect, repeat)))
    return rows


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="samples per block (default 5; 3 at most for slow ones)")
    parser.add_argument("--huge-repeat", type=int, default=1,
                        help="samples of the 10,000-case suite (default 1: about 30 s each, load and write)")
    parser.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated blocks (default all: {','.join(GROUPS)})")
    parser.add_argument("--chinook", type=Path, default=None, help="chinook.sqlite (default: $NL2SQL_CHINOOK)")
    args = parser.parse_args(argv)
    only = {g.strip() for g in args.only.split(",") if g.strip()}
    unknown = only - set(GROUPS)
    if unknown:
        parser.error(f"unknown block(s) {sorted(unknown)}; known: {', '.join(GROUPS)}")
    repeat = max(1, args.repeat)
    slow = max(1, min(repeat, 3))

    from nl2sql_assets.datasources.chinook import resolve_chinook
    from nl2sql_assets.demo import init_demo

    chinook = resolve_chinook(args.chinook)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-blocks-") as tmp_name:
        tmp = Path(tmp_name)
        project = init_demo(tmp / "project", chinook=chinook)
        steps: list[tuple[str, Callable[[], list[Row]]]] = [
            ("imports", lambda: bench_imports(slow)),
            ("sqlgen", lambda: bench_sqlgen(repeat)),
            ("validate", lambda: bench_validate(project.config, repeat)),
            ("suite", lambda: bench_suite(tmp, repeat, max(1, args.huge_repeat))),
            ("compare", lambda: bench_compare(repeat)),
            ("faithfulness", lambda: bench_faithfulness(repeat)),
            ("adapters", lambda: bench_adapters(project.config, repeat)),
            ("demo", lambda: bench_demo(chinook, tmp, slow)),
            ("defs", lambda: bench_defs(project.config, slow)),
        ]
        for name, step in steps:
            if name in only:
                started = time.perf_counter()
                rows += step()
                print(f"  {name}: measured in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print(f"\nBuilding blocks ({os.cpu_count()} CPU(s); wall time; n samples each)\n")
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
