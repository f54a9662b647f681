"""Shared pieces of the ``bench_*.py`` scripts: child processes measured from outside (wall, CPU,
peak RSS), min/median/max, a synthetic suite of any size, and a source tree to measure.

Each figure comes from a fresh child process, so imports, caches and memory of one measurement
never leak into the next. ``--tree DIR`` (any script) runs the children on another checkout of
the package (``git worktree add /tmp/before main``): before and after side by side, on one machine,
minutes apart.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


@dataclass
class ChildRun:
    """One child process: wall seconds, CPU seconds (user + system; its waited-for children
    included), peak RSS (MiB), its output."""

    wall_s: float
    cpu_s: float
    rss_mib: float
    rc: int
    stdout: str
    stderr: str
    rss_all_mib: float = float("nan")  # the sum of the peaks of it and its child processes (workers)

    def json_line(self) -> dict[str, Any]:
        """The last line of stdout that is a JSON object (what a ``--child`` run prints)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(f"the child printed no JSON (rc {self.rc}):\n{self.stdout[-2000:]}\n{self.stderr[-4000:]}")


def child_env(tree: Path | None) -> dict[str, str]:
    """The environment of a child: offline litellm prices; ``tree`` first on the import path."""
    env = dict(os.environ)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_child(args: Sequence[str], tree: Path | None, cwd: Path | None = None) -> ChildRun:
    """Run ``args``; CPU from ``wait4``, peak RSS from polling ``VmHWM`` of it and its children.

    ``ru_maxrss`` is useless here: Linux carries the parent's high-water mark across fork and
    exec, so every child of a big benchmark process would report the parent's size."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        # ``python -m`` and ``-c`` put the working folder first on the import path: run in the
        # measured tree, or a checkout's package would shadow the other one's.
        where = cwd if cwd is not None else (tree if tree is not None else REPO)
        proc = subprocess.Popen(list(args), env=child_env(tree), cwd=where, stdout=out, stderr=err, text=True)
        peaks: dict[int, float] = {}
        stop = threading.Event()
        poller = threading.Thread(target=_poll_rss, args=(proc.pid, list(args), peaks, stop), daemon=True)
        poller.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        stop.set()
        poller.join()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return ChildRun(wall, usage.ru_utime + usage.ru_stime, peaks.get(proc.pid, float("nan")), proc.returncode,
                        out.read(), err.read(), sum(peaks.values()) if peaks else float("nan"))


def _poll_rss(pid: int, args: list[str], peaks: dict[int, float], stop: threading.Event) -> None:
    """Keep each process's ``VmHWM`` (MiB): ``pid`` once it runs ``args``, and its descendants."""
    want = "\0".join(args)
    while not stop.is_set():
        for p in [pid, *_descendants(pid)]:
            try:
                if p == pid and not Path(f"/proc/{p}/cmdline").read_text().startswith(want):
                    continue  # not exec'd yet: still the parent's memory
                for line in Path(f"/proc/{p}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks[p] = max(peaks.get(p, 0.0), int(line.split()[1]) / 1024)
            except OSError:
                continue
        stop.wait(0.05)


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        kids = [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return out
    for kid in kids:
        out += [kid, *_descendants(kid)]
    return out


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def spread(values: Sequence[float], fmt: str = "{:.3f}") -> str:
    """``min / median / max`` of the values."""
    vals = [v for v in values if v == v]  # drop NaN
    if not vals:
        return "-"
    return " / ".join(fmt.format(v) for v in (min(vals), statistics.median(vals), max(vals)))


def load_average() -> str:
    """The machine's load now (the figures of a loaded machine are read with it)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def rss_now_mib() -> float:
    """This process's resident memory now (VmRSS), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    print(f"\n{title}")
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False))
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=False))))


# ---------------------------------------------------------------- a synthetic suite


def synthetic_suite(case_runs: int, out: Path, source: Path | None = None) -> int:
    """Write a suite of copies of the Chinook suite's cases (ids and paraphrase groups renamed per
    copy) with at least ``case_runs`` mode-plans case runs; returns the number of cases written."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    source = source or REPO / "suites" / "chinook.yaml"
    data = yaml.load(source.read_text(encoding="utf-8"), Loader=loader)
    base = [c for c in data["cases"] if c.get("status", "approved") == "approved"]
    per_copy = sum(_plans_runs(c) for c in base)
    copies = max(1, -(-case_runs // per_copy))
    cases: list[dict[str, Any]] = []
    for k in range(copies):
        for case in base:
            copy = dict(case)
            copy["id"] = f"{case['id']}_x{k:04d}"
            if case.get("paraphrase_group"):
                copy["paraphrase_group"] = f"{case['paraphrase_group']}_x{k:04d}"
            cases.append(copy)
    text = yaml.dump({"version": 1, "cases": cases}, Dumper=dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False)
    out.write_text("# A synthetic suite: copies of the Chinook suite's cases (scripts/benchlib.py).\n" + text,
                   encoding="utf-8")
    return len(cases)


def _plans_runs(case: dict[str, Any]) -> int:
    """Case runs mode plans makes of a case: one per role whose outcome is not clarify."""
    if case.get("kind", "answer") not in ("answer", "probe"):
        return 0
    outcome = case.get("outcome") or {}
    return sum(1 for v in outcome.values() if v != "clarify") or 1
