"""Files are written whole or not at all: records, pages, reports and suites, under a full disk,
concurrent publishes, a kill -9 and a bad ``--out``."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets import atomic
from nl2sql_assets.atomic import (
    TEMP_PREFIX,
    WriteFailed,
    atomic_write,
    atomic_write_chunks,
    check_writable,
    remove_stale_temps,
    write_new,
)
from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.history.publish import publish, render_pages
from nl2sql_assets.evaluation.history.records import iter_records, load_record
from nl2sql_assets.evaluation.reporting.board import save_report
from nl2sql_assets.evaluation.suites import load_suite, write_suite
from tests.unit.test_records import report


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(f"{TEMP_PREFIX}*"))


# ---------------------------------------------------------------- the writer itself


def test_write_new_creates_once_and_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "record.json"
    assert write_new(path, "first") == path and path.read_text() == "first"
    with pytest.raises(FileExistsError):
        write_new(path, "second")
    assert path.read_text() == "first" and _temps(tmp_path) == []


def test_atomic_write_replaces_and_keeps_the_files_mode(tmp_path: Path) -> None:
    path = tmp_path / "page.md"
    atomic_write(path, "one")
    os.chmod(path, 0o640)
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two" and path.stat().st_mode & 0o777 == 0o640 and _temps(tmp_path) == []


def test_atomic_write_chunks_replaces_whole_or_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "pass=1.jsonl"
    atomic_write_chunks(path, (f"line {n}\n".encode() for n in range(3)))
    assert path.read_text() == "line 0\nline 1\nline 2\n"

    def broken():
        yield b"new line\n"
        raise OSError(5, "Input/output error")

    with pytest.raises(WriteFailed, match=r"pass=1\.jsonl.*Input/output error"):
        atomic_write_chunks(path, broken())
    assert path.read_text() == "line 0\nline 1\nline 2\n" and _temps(tmp_path) == []


@pytest.mark.parametrize("writer", [atomic_write, write_new], ids=["replace", "create"])
def test_a_failed_write_names_the_file_and_the_cause_and_leaves_nothing(
    writer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.json"
    if writer is atomic_write:
        path.write_text("old")

    def half_then_full(fh: Any, data: bytes) -> None:
        fh.write(data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "_write_all", half_then_full)
    with pytest.raises(WriteFailed) as caught:
        writer(path, "x" * 1000)
    assert str(caught.value).startswith(f"{path}: cannot write: [Errno 28] No space left on device")
    assert isinstance(caught.value, OSError)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out.json"] if writer is atomic_write else [])
    if writer is atomic_write:
        assert path.read_text() == "old"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporary_files_are_removed_by_a_later_write(tmp_path: Path) -> None:
    host = atomic._HOST
    dead = tmp_path / f"{TEMP_PREFIX}{_dead_pid()}-{host}-0000abcd-page.md.tmp"
    live = tmp_path / f"{TEMP_PREFIX}{os.getppid()}-{host}-0000abcd-page.md.tmp"
    elsewhere = tmp_path / f"{TEMP_PREFIX}1-ffffffff-0000abcd-page.md.tmp"  # another host: by age only
    old = tmp_path / f"{TEMP_PREFIX}1-ffffffff-0000abce-page.md.tmp"
    unrelated = tmp_path / ".page.md.tmp"
    for p in (dead, live, elsewhere, old, unrelated):
        p.write_text("partial")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    atomic_write(tmp_path / "page.md", "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["page.md", live.name, elsewhere.name, unrelated.name])
    assert remove_stale_temps(tmp_path) == []


# ---------------------------------------------------------------- records and pages


def _big_report(total: int = 300) -> Any:
    return report(passed=total // 2, total=total)


def test_a_full_disk_leaves_no_record_a_clear_message_and_later_publishes_work(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    saved = save_report(_big_report(), tmp_path / "eval_plans.json")
    record = root / "benchmarks" / "plans" / "chinook" / "2026-04-01_abcdef0_plans.json"
    # A file size limit of 16 KiB: the record (about 60 KiB) cannot be written whole.
    command = f"ulimit -f 16 && exec {sys.executable} -m nl2sql_assets.cli eval publish {saved} --root {root}"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"error: {record}: cannot write: [Errno 27] File too large" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p for p in root.rglob("*") if p.is_file()) == []  # no partial record, no temporary file

    # With room again, publishing and gating against the folder work.
    assert main(["eval", "publish", str(saved), "--root", str(root)]) == 0
    assert [p for p, _ in iter_records(root / "benchmarks")] == [record]
    assert load_record(record).metrics.execution.total == 300


def _publish_one(root: str, day: int, barrier: Any) -> None:
    barrier.wait()
    publish([report(day=day)], note=f"run {day}", root=Path(root))


def test_twenty_concurrent_publishes_keep_every_record_and_a_complete_page(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("# x\n\n<!-- results:start -->\n<!-- results:end -->\n", encoding="utf-8")
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(20)
    workers = [ctx.Process(target=_publish_one, args=(str(root), day, barrier)) for day in range(1, 21)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0] * 20
    records = list(iter_records(root / "benchmarks"))
    assert len(records) == 20 and {r.note for _, r in records} == {f"run {d}" for d in range(1, 21)}
    page = (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert sum(f"]({'../' + p.relative_to(root).as_posix()})" in page for p, _ in records) == 20
    assert (page, (root / "README.md").read_text(encoding="utf-8")) == render_pages(root)
    assert _temps(root) == []


# ---------------------------------------------------------------- eval run's --out, and regenerate under kill -9


def test_a_bad_out_path_is_refused_before_the_run_starts(
    demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from nl2sql_assets.evaluation import running

    started: list[Any] = []
    monkeypatch.setattr(running, "run_cases", lambda *a, **k: started.append(a))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code = main(["--config", str(demo_project), "eval", "run", "--mode", "plans", "--out",
                 str(blocker / "report.json")])
    assert code == 2 and started == []
    err = capsys.readouterr().err
    assert f"error: {blocker / 'report.json'}: cannot be written: [Errno " in err
    with pytest.raises(WriteFailed, match="is a folder"):
        check_writable(tmp_path)
    assert check_writable(tmp_path / "new" / "report.json") and _temps(tmp_path) == []


_SLOW_REGENERATE = """
import os, sys, time
real = os.fsync
def slow(fd):
    time.sleep(30)  # a long fsync: the parent kills the process while the temporary file exists
    real(fd)
os.fsync = slow
from nl2sql_assets.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_kill_9_during_regenerate_leaves_the_suite_intact_and_no_temporary_after_the_next_run(
    demo_project: Path
) -> None:
    suite_path = demo_project / "suites" / "chinook.yaml"
    suite = load_suite(suite_path)
    stale = suite.model_copy(update={"cases": [c.model_copy(update={"rows": [{"x": 1}]}) if i == 0 else c
                                               for i, c in enumerate(suite.cases)]})
    write_suite(stale, suite_path, header=suite.header)
    before = suite_path.read_bytes()
    names = sorted(p.name for p in suite_path.parent.iterdir())
    argv = ["--config", str(demo_project), "eval", "regenerate", str(suite_path)]
    for _ in range(2):
        child = subprocess.Popen([sys.executable, "-c", _SLOW_REGENERATE, *argv], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not _temps(suite_path.parent) and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        assert _temps(suite_path.parent), "the child never started writing"
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert suite_path.read_bytes() == before  # the old file, whole
        load_suite(suite_path, allow_stale_rows=True)

    assert main(argv) == 0
    assert sorted(p.name for p in suite_path.parent.iterdir()) == names  # the stray temporary files are gone
    assert load_suite(suite_path).cases[0].rows == suite.cases[0].rows
