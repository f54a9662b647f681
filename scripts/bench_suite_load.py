#!/usr/bin/env python
"""Benchmark: loading a suite of 10,000 cases (target: under 1 s and under 300 MB).

    python scripts/bench_suite_load.py                  # 10,000 cases, 5 repeats
    python scripts/bench_suite_load.py --cases 2000 --repeat 3 --tree /tmp/before

Each repeat is a fresh process that imports the suite loader, then loads the file once; the
figures are that load's wall and CPU seconds, the process's peak RSS, and its growth over the
RSS after imports. Where the loader keeps a parsed-suite cache (``cache_dir``), the cold load
(cache empty: YAML parsed, then the cache written) and the warm load (a cache hit) are measured
apart. JSON of the same data, parsed with ``json.loads``, is the floor.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import load_average, print_table, python, rss_now_mib, run_child, spread, synthetic_suite


def _hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(path: Path, cache_dir: Path | None, as_json: bool) -> None:
    """One load in this process; prints a JSON line of figures."""
    if as_json:
        after_import = rss_now_mib()
        started, cpu = time.perf_counter(), time.process_time()
        data = json.loads(path.read_text(encoding="utf-8"))
        n = len(data["cases"])
    else:
        from nl2sql_assets.evaluation.suites import load_suite

        after_import = rss_now_mib()
        kwargs = {"cache_dir": cache_dir} if cache_dir is not None else {}
        started, cpu = time.perf_counter(), time.process_time()
        suite = load_suite(path, **kwargs)
        n = len(suite.cases)
    wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    peak = _hwm_mib()  # not ru_maxrss: Linux carries the parent's across exec
    print(json.dumps({"wall_s": wall, "cpu_s": cpu_s, "peak_mib": peak, "growth_mib": peak - after_import,
                      "cases": n}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in the synthetic suite (default 10,000)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=None, help="measure the package in this checkout instead")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.cache_dir, args.json)
        return 0

    print(f"Suite load benchmark; {load_average()}; tree: {args.tree or 'this checkout'}")
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        folder = Path(tmp)
        suite = folder / "big.yaml"
        written = _write_suite(suite, args.cases)
        print(f"Synthetic suite: {written} cases, {suite.stat().st_size / 1e6:.1f} MB of YAML")
        as_json = folder / "big.json"
        import yaml

        as_json.write_text(json.dumps(yaml.load(suite.read_text(), Loader=yaml.CSafeLoader)), encoding="utf-8")

        has_cache = _has_cache(args.tree)
        variants: list[tuple[str, list[str], bool]] = [("YAML, no cache", [], False)]
        if has_cache:
            variants += [("YAML, cache cold (parse + write)", ["--cache-dir"], True),
                         ("cache warm (hit)", ["--cache-dir"], False)]
        variants.append(("json.loads of the same data (floor)", ["--json"], False))
        rows = []
        for label, extra, cold in variants:
            runs = []
            for n in range(args.repeat):
                cache = folder / (f"cache-cold-{n}" if cold else "cache-warm")
                cmd = python(str(Path(__file__).resolve()), "--child", str(as_json if "--json" in extra else suite))
                if "--cache-dir" in extra:
                    cmd += ["--cache-dir", str(cache)]
                if "--json" in extra:
                    cmd.append("--json")
                if label.startswith("cache warm") and n == 0:
                    run_child(cmd, args.tree)  # fill the cache first
                result = run_child(cmd, args.tree)
                runs.append(result.json_line())
            rows.append([label, spread([r["wall_s"] for r in runs]), spread([r["cpu_s"] for r in runs]),
                         spread([r["peak_mib"] for r in runs], "{:.0f}"),
                         spread([r["growth_mib"] for r in runs], "{:.0f}")])
        print_table(f"Loading {written} cases ({args.repeat} fresh processes each; min / median / max)",
                    ["how", "wall s", "CPU s", "peak RSS MiB", "growth MiB"], rows)
        if not has_cache:
            print("  (this tree's load_suite keeps no cache)")
    print(f"\n{load_average()}")
    return 0


def _write_suite(path: Path, cases: int) -> int:
    """A suite of exactly ``cases`` cases (copies of Chinook's)."""
    import yaml

    synthetic_suite(cases * 4, path)  # more than enough copies, then cut
    data = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    data["cases"] = data["cases"][:cases]
    path.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return len(data["cases"])


def _has_cache(tree: Path | None) -> bool:
    """Whether the measured tree's ``load_suite`` takes ``cache_dir``."""
    if tree is None:
        from nl2sql_assets.evaluation.suites import load_suite

        return "cache_dir" in inspect.signature(load_suite).parameters
    return "cache_dir" in (tree / "nl2sql_assets" / "evaluation" / "suites" / "loader.py").read_text()


if __name__ == "__main__":
    sys.exit(main())
