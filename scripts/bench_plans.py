#!/usr/bin/env python
"""Benchmark: mode plans over the whole Chinook suite, end to end, in-process.

Targets (issue 12, quiet 2-core machine): the Chinook suite's case runs finish in under 1.5 s after
imports, at most 6 ms of CPU per case run; the CLI ``eval run --mode plans`` in under 3 s end to
end; ``pipeline run --configs plans`` at most 1.15x the CLI eval. Timed unit tests are flaky on shared machines, so the figure lives here, printed on
demand:

    python scripts/bench_plans.py                      # sweep concurrency 1, 2, 4, 8; 3 runs each
    python scripts/bench_plans.py --concurrency 4 --repeat 5 --profile
    python scripts/bench_plans.py --concurrency config --end-to-end --tree /tmp/before   # another checkout
    python scripts/bench_plans.py --concurrency config --litellm-switches   # litellm's per-call extras, each off

Each run is ``Project.load(...).evals.run(mode="plans")`` on a fresh demo project (the real
pipeline, over HTTP to the local gold server: the lean OpenAI-compatible wire, or litellm with
``--api litellm``). One extra instrumented run splits the
wall time into litellm, the HTTP round trip, validation, SQL generation, execution, scoring and
the rest; timing wrappers are monkeypatched in for that run only. ``--end-to-end`` adds fresh
processes timed from outside (wall, CPU, peak RSS): ``import litellm``, ``import
nl2sql_assets.definitions``, the CLI ``eval run --mode plans`` and ``pipeline run --configs plans``.
Exits 1 when a case fails.
"""

from __future__ import annotations

import os

# Before anything imports litellm: never fetch its cost map over the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import contextlib
import cProfile
import functools
import pstats
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TARGET_S = 1.5
TARGET_CPU_MS = 6.0  # per case run
TARGET_CLI_S = 3.0
REPO = str(Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import load_average, print_table, python, run_child, spread  # noqa: E402

DEFAULT_SWEEP = (1, 2, 4, 8)


# ---------------------------------------------------------------- imports, timed


def import_everything() -> dict[str, float]:
    """Import what a plans run needs, litellm first; seconds per group."""
    out: dict[str, float] = {}
    started = time.perf_counter()
    from nl2sql_assets.llm import client

    client._lib()  # import litellm the way the product does (offline cost map, quiet)
    out["litellm (via nl2sql_assets.llm.client)"] = time.perf_counter() - started

    started = time.perf_counter()
    import nl2sql_assets.datasources.chinook
    import nl2sql_assets.datasources.duckdb_adapter
    import nl2sql_assets.datasources.registry
    import nl2sql_assets.datasources.sqlite
    import nl2sql_assets.demo
    import nl2sql_assets.engine.pipeline
    import nl2sql_assets.evaluation.history.records
    import nl2sql_assets.evaluation.judging.scorers
    import nl2sql_assets.evaluation.reporting.report
    import nl2sql_assets.evaluation.running.gold_llm
    import nl2sql_assets.evaluation.running.runner
    import nl2sql_assets.llm.prices
    import nl2sql_assets.project  # noqa: F401

    out["nl2sql_assets (engine, evaluation, datasources)"] = time.perf_counter() - started
    return out


# ---------------------------------------------------------------- timing wrappers


@dataclass
class Timers:
    """Seconds and call counts per bucket; thread-safe (the executor and gold server use threads)."""

    totals: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            self.totals[name] = self.totals.get(name, 0.0) + seconds
            self.counts[name] = self.counts.get(name, 0) + 1

    def get(self, name: str) -> float:
        return self.totals.get(name, 0.0)


def _sync_timer(timers: Timers, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timers.add(name, time.perf_counter() - started)

    return wrapper


def _async_timer(timers: Timers, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            timers.add(name, time.perf_counter() - started)

    return wrapper


@contextlib.contextmanager
def instrumented(timers: Timers) -> Iterator[None]:
    """Wrap, for the duration of the block, the functions at the names the pipeline calls them by.

    - ``litellm.acompletion``: the client looks it up on the module at each call.
    - ``httpx.AsyncClient.send`` / ``aiohttp.ClientSession._request``: the HTTP round trip as
      the client sees it (litellm's openai route sends through an httpx client, the lean wire
      through aiohttp), the response body's read left out.
    - the gold server's request handler: server-side handling time.
    - ``pipeline.validate_plan`` / ``pipeline.generate_sql`` / ``pipeline.check_sql``: imported by
      name into the pipeline.
    - ``SqliteAdapter.execute`` / ``DuckDBAdapter.execute``: ``executor.execute`` calls the method.
    - ``runner.score_run``, ``reporting.build_report`` (imported by name inside the project's
      ``run_request``) and the gold server's ``start`` / ``stop``.
    """
    import aiohttp
    import httpx

    from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter
    from nl2sql_assets.datasources.sqlite import SqliteAdapter
    from nl2sql_assets.engine import pipeline
    from nl2sql_assets.evaluation import reporting
    from nl2sql_assets.evaluation.running import gold_llm, runner
    from nl2sql_assets.llm import openai_compat
    from nl2sql_assets.llm.client import _lib

    litellm = _lib()
    patches: list[tuple[Any, str, Callable[..., Any]]] = [
        (litellm, "acompletion", _async_timer(timers, "acompletion", litellm.acompletion)),
        (openai_compat, "acompletion", _async_timer(timers, "acompletion", openai_compat.acompletion)),
        (httpx.AsyncClient, "send", _async_timer(timers, "http", httpx.AsyncClient.send)),
        (aiohttp.ClientSession, "_request", _async_timer(timers, "http", aiohttp.ClientSession._request)),
        *_server_timer(timers, gold_llm),
        (pipeline, "validate_plan", _sync_timer(timers, "validation", pipeline.validate_plan)),
        (pipeline, "generate_sql", _sync_timer(timers, "sqlgen", pipeline.generate_sql)),
        (pipeline, "check_sql", _sync_timer(timers, "policy", pipeline.check_sql)),
        (SqliteAdapter, "execute", _sync_timer(timers, "execution", SqliteAdapter.execute)),
        (DuckDBAdapter, "execute", _sync_timer(timers, "execution", DuckDBAdapter.execute)),
        (runner, "score_run", _sync_timer(timers, "scoring", runner.score_run)),
        (gold_llm.GoldLLMServer, "start", _sync_timer(timers, "gold", gold_llm.GoldLLMServer.start)),
        (gold_llm.GoldLLMServer, "stop", _sync_timer(timers, "gold", gold_llm.GoldLLMServer.stop)),
        (reporting, "build_report", _sync_timer(timers, "report", reporting.build_report)),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    try:
        for owner, name, wrapper in patches:
            setattr(owner, name, wrapper)
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _server_timer(timers: Timers, gold_llm: Any) -> list[tuple[Any, str, Callable[..., Any]]]:
    """The gold server's handling of one request: its aiohttp handler, or (a checkout from before
    it served from one event loop, ``--tree``) its ``http.server`` handler's ``do_POST``."""
    if hasattr(gold_llm, "_Handler"):
        return [(gold_llm._Handler, "do_POST", _sync_timer(timers, "server", gold_llm._Handler.do_POST))]
    server = gold_llm.GoldLLMServer
    return [(server, "_handle", _async_timer(timers, "server", server._handle))]


# ---------------------------------------------------------------- litellm's switches


def _litellm_switches() -> dict[str, Callable[[Any], list[tuple[Any, str, Any]]]]:
    """What litellm does per call that we do not use, each as the patches that switch it off
    (owner, attribute, replacement), for measuring. The product already switches off litellm's
    cost calculator (``client._skip_cost_calculator``): the first row puts it back."""
    from litellm.litellm_core_utils import litellm_logging

    from nl2sql_assets.llm.client import SWITCHED_OFF

    async def _none_async(*_args: Any, **_kwargs: Any) -> None:
        return None

    def _cost(lib: Any) -> list[tuple[Any, str, Any]]:  # its own cost calculator (we price calls ourselves)
        return [(litellm_logging.Logging, "_response_cost_calculator", lambda *_a, **_k: None),
                (litellm_logging.Logging, "response_cost_calculator", lambda *_a, **_k: None),
                (litellm_logging.Logging, "_response_cost_calculator_async", _none_async)]

    def _async_logging(lib: Any) -> list[tuple[Any, str, Any]]:  # success logging on its logging worker
        return [(lib.utils, "_client_async_logging_helper", _none_async)]

    def _sync_logging(lib: Any) -> list[tuple[Any, str, Any]]:  # success handler in a background thread
        return [(litellm_logging.Logging, "success_handler", lambda *_a, **_k: None)]

    def _scrubbing(lib: Any) -> list[tuple[Any, str, Any]]:  # removing key-like params before logging
        return [(lib.utils, "remove_sensitive_keys_from_dict", lambda d: dict(d))]

    def _message_logging(lib: Any) -> list[tuple[Any, str, Any]]:  # documented: no messages in its logs
        return [(lib, "turn_off_message_logging", True)]

    def _as_litellm_ships(lib: Any) -> list[tuple[Any, str, Any]]:  # the product's switches undone
        return [(owner, name, original) for (owner, name), original in SWITCHED_OFF.items()]

    switches = {"nothing (cost calculator back on, as litellm ships)": _as_litellm_ships, "cost calculator": _cost, "async success logging": _async_logging,
                "sync success handler (thread)": _sync_logging, "scrubbing for logs": _scrubbing,
                "message logging (turn_off_message_logging)": _message_logging}
    each = [_cost, _async_logging, _sync_logging, _scrubbing, _message_logging]
    switches["all of the above"] = lambda lib: [p for make in each for p in make(lib)]
    return switches


@contextlib.contextmanager
def patched(patches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


def measure_litellm_switches(config_path: Path, concurrency: int | None, repeat: int) -> None:
    """CPU per case run on the litellm wire with each switch off, interleaved with the product's
    setting (and with litellm as it ships)."""
    from nl2sql_assets.evaluation.running import gold_llm
    from nl2sql_assets.llm.client import _lib

    lib = _lib()
    switches = {"none (litellm as the product sets it)": lambda _lib: [], **_litellm_switches()}
    outs: dict[str, list[RunOutcome]] = {name: [] for name in switches}
    os.environ[gold_llm.GOLD_API_ENV] = "litellm"
    try:
        run_once(config_path, concurrency)  # warm
        for _ in range(repeat):
            for name, make in switches.items():
                with patched(make(lib)):
                    outs[name].append(run_once(config_path, concurrency))
    finally:
        os.environ.pop(gold_llm.GOLD_API_ENV, None)
    base = statistics.median(o.cpu_s / o.cases * 1000 for o in outs["none (litellm as the product sets it)"])
    rows = []
    for name, runs in outs.items():
        per_case = [o.cpu_s / o.cases * 1000 for o in runs]
        rows.append([name, spread(per_case, "{:.1f}"), f"{statistics.median(per_case) - base:+.1f}",
                     spread([o.wall_s for o in runs], "{:.2f}"),
                     f"{sum(o.passed for o in runs)}/{sum(o.cases for o in runs)}"])
    print_table(f"litellm wire, one switch off at a time ({repeat} run(s) each, interleaved; max_concurrency "
                f"{concurrency if concurrency is not None else 'as configured'})",
                ["switched off", "CPU ms/case run min/med/max", "vs product (median)", "wall s", "passed"], rows)


# ---------------------------------------------------------------- one run


@dataclass
class RunOutcome:
    wall_s: float
    cpu_s: float  # this process, every thread: less sensitive than wall to other work on the machine
    main_cpu_s: float  # the calling thread: the event loop the case runs share
    cases: int
    passed: int
    failures: list[str]
    node_timings: dict[str, float]


def run_once(config_path: Path, concurrency: int | None) -> RunOutcome:
    """``Project.load(...).evals.run(mode="plans")`` on a fresh project, timed as a whole."""
    from nl2sql_assets.project import Project

    started, cpu_started, main_started = time.perf_counter(), time.process_time(), time.thread_time()
    project = Project.load(config_path)
    try:
        if concurrency is not None:
            project.config.settings.max_concurrency = concurrency
        report = project.evals.run(mode="plans")
    finally:
        project.close()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    main_cpu = time.thread_time() - main_started
    board = report.first_board
    records = list(board.results) if board is not None else []
    scored = [r for r in records if r.status != "skip"]
    nodes: dict[str, float] = {}
    for r in records:
        for node, seconds in r.timings.items():
            nodes[node] = nodes.get(node, 0.0) + seconds
    failures = [f"{r.case_id}@{r.role}: {r.status} ({r.reason})" for r in scored if r.status != "pass"]
    return RunOutcome(wall, cpu, main_cpu, len(scored), len(scored) - len(failures), failures, nodes)


# ---------------------------------------------------------------- printing


def _fmt_s(seconds: float) -> str:
    return f"{seconds:7.3f}"


def breakdown_rows(timers: Timers, wall: float, additive: bool) -> list[list[str]]:
    """One row per bucket. ``additive`` (one case run at a time): the buckets and the rest add up
    to the wall time, so shares are printed; otherwise calls overlap and only sums are."""
    acompletion, http, server = timers.get("acompletion"), timers.get("http"), timers.get("server")
    buckets: list[tuple[str, float, str | None]] = [  # (label, seconds, timer whose calls to count)
        ("litellm client-side (acompletion - HTTP)", acompletion - http, "acompletion"),
        ("HTTP round trip (client view)", http, "http"),
        ("  of which gold server handling", server, "server"),
        ("  of which network, event loop + GIL waits", http - server, None),
        ("validation (validate_plan)", timers.get("validation"), "validation"),
        ("SQL generation (generate_sql)", timers.get("sqlgen"), "sqlgen"),
        ("policy check on the SQL (check_sql)", timers.get("policy"), "policy"),
        ("execution (adapter execute)", timers.get("execution"), "execution"),
        ("scoring (score_run)", timers.get("scoring"), "scoring"),
        ("report (build_report)", timers.get("report"), "report"),
        ("gold server start + stop", timers.get("gold"), "gold"),
    ]
    rest = wall - sum(seconds for label, seconds, _ in buckets if not label.startswith(" "))
    if additive:
        buckets.append(("rest (engine glue, event loop, litellm logging, setup)", rest, None))
    rows = []
    for label, seconds, key in buckets:
        n = timers.counts.get(key, 0) if key else 0
        share = f"{seconds / wall * 100:5.1f}%" if additive else "-"
        rows.append([label, _fmt_s(seconds), share, str(n) if n else "", f"{seconds / n * 1000:.3f}" if n else ""])
    rows.append(["total wall", _fmt_s(wall), "100.0%" if additive else "-", "", ""])
    return rows


#: Frames that only wrap the whole run (entry points, the event loop): left out of the cumulative view.
_WRAPPERS = re.compile(
    r"asyncio/|bench_plans\.py|nl2sql_assets/project\.py|runner\.py.*\b(a?run_cases|answer|_ask)\b|loops\.py.*\b(concurrently|go)\b"
    r"|pipeline\.py.*\b(aask|_run|_generated)\b|method 'run' of '_contextvars|threading\.py"
)


def profile_once(config_path: Path, concurrency: int | None, top: int) -> None:
    """cProfile one run. Only the main thread is profiled (the event loop, most of litellm,
    validation, generation, scoring): litellm's own ``completion()`` step runs in the loop's
    default executor threads, and the gold server and the database work in theirs."""
    profiler = cProfile.Profile()
    profiler.enable()
    run_once(config_path, concurrency)
    profiler.disable()
    stats = pstats.Stats(profiler)
    entries = []  # (tottime, cumtime, calls, "file:line(function)")
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        name = func if filename == "~" else f"{_short_path(filename)}:{line}({func})"
        entries.append((tottime, cumtime, ncalls, name))
    views = [
        ("own time (tottime)", sorted(entries, key=lambda e: -e[0])),
        ("cumulative time, run-wide wrappers left out", sorted(
            (e for e in entries if not _WRAPPERS.search(e[3])), key=lambda e: -e[1])),
    ]
    for title, ordered in views:
        print(f"\ncProfile top-{top} by {title} (main thread, max_concurrency {concurrency}):")
        print(f"{'calls':>9}  {'tottime':>8}  {'cumtime':>8}  function   (a coroutine counts once per resume)")
        for tottime, cumtime, ncalls, name in ordered[:top]:
            print(f"{ncalls:>9}  {tottime:8.3f}  {cumtime:8.3f}  {name}")


def _short_path(filename: str) -> str:
    """``site-packages/litellm/main.py`` → ``litellm/main.py``; the repo's own files from the package."""
    for marker in ("site-packages/", "/lib/python3", f"{REPO}/"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "/lib/python3" and "/" in tail else tail
    return filename


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per concurrency (default 3)")
    parser.add_argument(
        "--concurrency",
        default=",".join(map(str, DEFAULT_SWEEP)),
        help="comma-separated max_concurrency values to measure (default 1,2,4,8); 'config' = the project's",
    )
    parser.add_argument("--breakdown-concurrency", type=int, default=1,
                        help="concurrency of the instrumented run (default 1: the buckets then add up to the wall)")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile top-10 of one run")
    parser.add_argument("--top", type=int, default=10, help="rows of the profile (default 10)")
    parser.add_argument("--chinook", type=Path, default=None, help="chinook.sqlite (default: $NL2SQL_CHINOOK)")
    parser.add_argument("--api", default="auto",
                        help="comma-separated wires to the gold server, measured interleaved: auto (the lean "
                             "OpenAI-compatible client), litellm (default auto)")
    parser.add_argument("--litellm-switches", action="store_true",
                        help="also measure the litellm wire with each of litellm's per-call extras switched off "
                             "(cost calculator, logging, scrubbing), one at a time")
    parser.add_argument("--end-to-end", action="store_true",
                        help="also time fresh processes: imports, the CLI eval run, pipeline run")
    parser.add_argument("--floor", action="store_true",
                        help="also time, in fresh processes, what any Dagster pipeline command pays before its "
                             "own work: import dagster, the instance, the project's definitions, two trivial runs")
    parser.add_argument("--tree", type=Path, default=None,
                        help="measure the package in this checkout instead (re-runs this script on it)")
    return parser.parse_args(argv)


def end_to_end(config: Path, repeat: int) -> None:
    """Fresh processes timed from outside: imports, the CLI eval run, ``pipeline run``."""
    tree = Path(os.environ["PYTHONPATH"]) if os.environ.get("PYTHONPATH") else None  # --tree
    imports = {
        "import litellm": "import litellm",
        "import dagster (pipeline run only)": "import dagster",
        "import nl2sql_assets.definitions": "import nl2sql_assets.definitions",
        "nl2sql-assets --help": "import sys; sys.argv=['nl2sql-assets','--help']\nfrom nl2sql_assets.cli import main\n"
                                "try: main()\nexcept SystemExit: pass",
    }
    rows = []
    for label, code in imports.items():
        runs = [run_child(python("-c", code), tree) for _ in range(repeat)]
        rows.append([label, spread([r.wall_s for r in runs]), spread([r.cpu_s for r in runs]),
                     spread([r.rss_mib for r in runs], "{:.0f}"), ""])
    cli = [run_child(python("-m", "nl2sql_assets.cli", "--config", str(config), "eval", "run", "--mode", "plans",
                            "--out", str(config.parent / f"eval_plans_{i}.json")), tree) for i in range(repeat)]
    rows.append(["CLI eval run --mode plans", spread([r.wall_s for r in cli]), spread([r.cpu_s for r in cli]),
                 spread([r.rss_mib for r in cli], "{:.0f}"), f"rc {sorted({r.rc for r in cli})}"])
    pipe = [run_child(python("-m", "nl2sql_assets.cli", "--config", str(config), "pipeline", "run", "--configs",
                             "plans"), tree) for _ in range(repeat)]
    ratio = statistics.median(r.wall_s for r in pipe) / statistics.median(r.wall_s for r in cli)
    cpu_ratio = statistics.median(r.cpu_s for r in pipe) / statistics.median(r.cpu_s for r in cli)
    rows.append(["pipeline run --configs plans", spread([r.wall_s for r in pipe]), spread([r.cpu_s for r in pipe]),
                 spread([r.rss_mib for r in pipe], "{:.0f}"), f"{ratio:.2f}x the CLI eval's wall ({cpu_ratio:.2f}x its CPU); rc {sorted({r.rc for r in pipe})}"])
    print_table(f"End to end, fresh processes ({repeat} each; min / median / max; CLI target under {TARGET_CLI_S} s)",
                ["what", "wall s", "CPU s", "peak RSS MiB", "note"], rows)
    for r in (*cli, *pipe):
        if r.rc not in (0, 1):
            print(r.stderr[-3000:])


# What ``pipeline run`` pays for Dagster whatever its assets do: each step a fresh process, the
# one before plus one more thing. ``DAGSTER_HOME`` is the benchmark's (its dagster.yaml).
_FLOOR_STEPS = {
    "interpreter (python -c pass)": "pass",
    "+ import dagster": "import dagster",
    "+ the instance (DagsterInstance.get)": "import dagster\ndagster.DagsterInstance.get()",
    "+ the project's definitions (build_defs)": (
        "import sys, dagster\ninstance = dagster.DagsterInstance.get()\n"
        "from nl2sql_assets.defs.factory import build_defs\nbuild_defs(sys.argv[1])"),
    "+ two runs of one trivial asset (in-process, on the instance)": (
        "import sys, dagster\ninstance = dagster.DagsterInstance.get()\n"
        "from nl2sql_assets.defs.factory import build_defs\nbuild_defs(sys.argv[1])\n"
        "@dagster.asset\ndef noop() -> None:\n    pass\n"
        "job = dagster.Definitions(assets=[noop], executor=dagster.in_process_executor)"
        ".resolve_implicit_global_asset_job_def()\n"
        "for _ in range(2):\n    assert job.execute_in_process(instance=instance).success"),
}


def dagster_floor(config: Path, repeat: int) -> None:
    """The floor of a Dagster command on this machine: fresh processes timed from outside."""
    tree = Path(os.environ["PYTHONPATH"]) if os.environ.get("PYTHONPATH") else None  # --tree
    rows = []
    for label, code in _FLOOR_STEPS.items():
        runs = [run_child(python("-c", code, str(config)), tree) for _ in range(repeat)]
        bad = [r for r in runs if r.rc != 0]
        rows.append([label, spread([r.wall_s for r in runs]), spread([r.cpu_s for r in runs]),
                     f"rc {bad[0].rc}: {bad[0].stderr[-200:]}" if bad else ""])
    print_table(f"Dagster's floor, fresh processes ({repeat} each; min / median / max; "
                f"DAGSTER_HOME={os.environ.get('DAGSTER_HOME', '(unset)')})",
                ["what", "wall s", "CPU s", "note"], rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.tree is not None:  # the same script, on the other checkout's package
        argv_rest = [a for a in (argv if argv is not None else sys.argv[1:])]
        i = argv_rest.index("--tree")
        del argv_rest[i:i + 2]
        env = dict(os.environ, PYTHONPATH=str(args.tree.resolve()))
        os.execve(sys.executable, [sys.executable, __file__, *argv_rest], env)
    print(f"{load_average()}; package: {Path(sys.modules[__name__].__file__ or '').name} on "
          f"{os.environ.get('PYTHONPATH') or REPO}")
    process_started = time.perf_counter()
    import_times = import_everything()
    print_table("Imports (seconds, this process)", ["module", "seconds"],
                [[k, _fmt_s(v)] for k, v in import_times.items()]
                + [["total", _fmt_s(sum(import_times.values()))]])

    from nl2sql_assets.datasources.chinook import resolve_chinook
    from nl2sql_assets.demo import init_demo

    values: list[int | None] = []
    for part in args.concurrency.split(","):
        part = part.strip()
        values.append(None if part == "config" else int(part))

    with tempfile.TemporaryDirectory(prefix="bench-plans-") as tmp:
        started = time.perf_counter()
        demo = init_demo(Path(tmp) / "project", chinook=resolve_chinook(args.chinook))
        print(f"\nDemo project built in {time.perf_counter() - started:.2f} s at {demo.root}")
        from nl2sql_assets.config import load_config

        config_value = load_config(demo.config).settings.max_concurrency

        # The first run pays one-off costs (litellm's first call, opening databases, snapshots).
        first = run_once(demo.config, None)
        print(f"First run after imports (max_concurrency {config_value}, as configured): "
              f"{first.wall_s:.3f} s for {first.cases} case runs; "
              f"{first.passed}/{first.cases} passed; "
              f"{'under' if first.wall_s < TARGET_S else 'OVER'} the {TARGET_S} s target")

        from nl2sql_assets.evaluation.running import gold_llm

        apis = [a.strip() for a in args.api.split(",")]
        by_api: dict[tuple[str, int], list[RunOutcome]] = {}
        for value in values:
            c = config_value if value is None else value
            for _ in range(args.repeat):  # the wires interleaved: both see the same machine load
                for api in apis:
                    os.environ[gold_llm.GOLD_API_ENV] = api  # worker processes read it too
                    by_api.setdefault((api, c), []).append(run_once(demo.config, c))
        os.environ.pop(gold_llm.GOLD_API_ENV, None)
        results: dict[int, list[RunOutcome]] = {}
        for (_api, c), outs in by_api.items():
            results.setdefault(c, []).extend(outs)

        rows = []
        for (api, c), outs in by_api.items():
            walls = [o.wall_s for o in outs]
            n = outs[0].cases
            med = statistics.median(walls)
            rows.append([
                api, f"{c}{' (configured)' if c == config_value else ''}", str(n), _fmt_s(min(walls)),
                _fmt_s(med), _fmt_s(max(walls)), f"{med / n * 1000:.1f}",
                spread([o.cpu_s for o in outs]), spread([o.cpu_s / n * 1000 for o in outs], "{:.1f}"),
                _fmt_s(statistics.median(o.main_cpu_s for o in outs)),
                f"{sum(o.passed for o in outs)}/{sum(o.cases for o in outs)}",
            ])
        print_table(f"Mode plans, whole Chinook suite ({args.repeat} run(s) each; fresh Project each run)",
                    ["api", "max_concurrency", "case runs", "wall min", "median", "max", "ms/case run",
                     "CPU s min/med/max", "CPU ms/case run", "main-thread cpu", "passed"], rows)
        print(f"Peak RSS of this process so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; "
              f"targets: wall under {TARGET_S} s, CPU at most {TARGET_CPU_MS:.0f} ms per case run")
        best = min(results, key=lambda c: statistics.median(o.wall_s for o in results[c]))
        best_med = statistics.median(o.wall_s for o in results[best])
        print(f"\nBest: max_concurrency {best} (median {best_med:.3f} s, "
              f"{best_med / results[best][0].cases * 1000:.1f} ms per case run); "
              f"target {TARGET_S} s: {'met' if best_med < TARGET_S else 'MISSED'}")

        # One instrumented run: where the time goes.
        timers = Timers()
        with instrumented(timers):
            traced = run_once(demo.config, args.breakdown_concurrency)
        print_table(
            f"Where the time goes (one instrumented run, max_concurrency {args.breakdown_concurrency}, "
            f"{traced.cases} case runs, {timers.counts.get('acompletion', 0)} LLM calls)",
            ["bucket", "seconds", "share", "calls", "ms/call"],
            breakdown_rows(timers, traced.wall_s, additive=args.breakdown_concurrency == 1),
        )
        if args.breakdown_concurrency > 1:
            print("  (calls overlap at this concurrency: each bucket sums its calls' wall time, waits for the "
                  "GIL included, so shares are not given)")
        print(f"  CPU of that run: {traced.cpu_s:.3f} s in all, {traced.main_cpu_s:.3f} s on the event loop's "
              f"thread, {traced.cpu_s - traced.main_cpu_s:.3f} s in others (litellm's completion() step in "
              "executor threads, the gold server, database work)")
        node_rows = [[node, _fmt_s(s), f"{s / traced.cases * 1000:.2f}"]
                     for node, s in sorted(traced.node_timings.items(), key=lambda kv: -kv[1])]
        print_table("Per-node timings recorded in the case records (QueryResult.timings, summed)",
                    ["node", "seconds", "ms/case run"], node_rows)

        if args.profile:
            profile_once(demo.config, best, args.top)
        if args.litellm_switches:
            measure_litellm_switches(demo.config, values[0], args.repeat)
        if args.end_to_end:
            end_to_end(demo.config, args.repeat)
        if args.floor:
            dagster_floor(demo.config, args.repeat)

        all_outs = [first, traced, *(o for outs in results.values() for o in outs)]
        failures = sorted({f for o in all_outs for f in o.failures})
        accuracy = sum(o.passed for o in all_outs) / max(1, sum(o.cases for o in all_outs))
        print(f"\nAccuracy over every run: {accuracy * 100:.1f}% "
              f"({sum(o.passed for o in all_outs)}/{sum(o.cases for o in all_outs)} case runs passed)")
        for f in failures:
            print(f"  FAILED {f}")
    print(f"\nBenchmark process total: {time.perf_counter() - process_started:.1f} s; {load_average()}")
    return 1 if failures else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    sys.exit(130)

