"""The README's first run works as written: its block of commands, run one after the other in a fresh
folder as a newcomer would (Chinook named by its path, no DAGSTER_HOME set), each exits 0 and does what
its comment says. Only ``ui`` is left out (it runs until stopped: tests/integration/test_signals.py)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def first_run_commands() -> list[str]:
    """The command lines of the README's 'First run' block, comments dropped."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## First run", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the First run section has no bash block"
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_first_run_starts_from_init_demo_and_ends_in_the_ui() -> None:
    commands = first_run_commands()
    assert commands[0].startswith("nl2sql-assets init --demo ")
    assert commands[-1] == "nl2sql-assets ui"


@pytest.mark.slow
def test_the_readme_first_run_works_as_written(tmp_path: Path, chinook_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    cwd = tmp_path
    outputs: list[str] = []
    for line in first_run_commands():
        words = shlex.split(line.replace("/path/to/Chinook_Sqlite.sqlite", str(chinook_path)))
        if words[0] == "cd":
            cwd = cwd / words[1]
            continue
        assert words[0] == "nl2sql-assets", line
        if words[1:] == ["ui"]:
            continue  # runs until stopped
        done = subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", *words[1:]], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout + done.stderr)
    demo = tmp_path / "my-demo"
    runs = [out for line, out in zip([c for c in first_run_commands() if c.startswith("nl2sql-assets")
                                      and c != "nl2sql-assets ui"], outputs, strict=True) if "eval run" in line]
    assert len(runs) == 2
    for out in runs:  # the three suites, every case once per role, and the board in one line
        assert "plans: execution accuracy 100.0% (150/150" in out and "; lenient 100.0% (150/150" in out
        assert "on neighbours 100.0%" in out
    assert (demo / ".dagster_home" / "dagster.yaml").is_file()  # the folder ran Dagster on its own
    assert (demo / "warehouse" / "dashboard.html").is_file()
    assert ".dagster_home/" in (demo / ".gitignore").read_text(encoding="utf-8").splitlines()
