"""The tests find Chinook through NL2SQL_CHINOOK only: without it pytest stops at once, with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import chinook_problem

ROOT = Path(__file__).resolve().parents[2]


def _pytest(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_without_the_variable_pytest_stops_before_collecting_with_one_message() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NL2SQL_CHINOOK"}
    done = _pytest(env)
    assert done.returncode == 4  # pytest's usage error: nothing was collected or run
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines == ["ERROR: the tests need Chinook: set NL2SQL_CHINOOK to Chinook_Sqlite.sqlite "
                     "(NL2SQL_CHINOOK=/path/to/Chinook_Sqlite.sqlite pytest)"]


@pytest.mark.parametrize(("value", "message"), [
    (None, "set NL2SQL_CHINOOK to Chinook_Sqlite.sqlite"),
    ("/no/such/chinook.sqlite", "NL2SQL_CHINOOK=/no/such/chinook.sqlite: no such file"),
    ("{pyproject}", "is not the pinned Chinook database (SHA-256 expected"),
])
def test_what_is_wrong_with_the_variable_is_named(value: str | None, message: str) -> None:
    environ = {} if value is None else {"NL2SQL_CHINOOK": value.format(pyproject=ROOT / "pyproject.toml")}
    problem = chinook_problem(environ)
    assert problem is not None and message in problem


def test_the_given_file_is_accepted(chinook_path: Path) -> None:
    assert chinook_problem({"NL2SQL_CHINOOK": str(chinook_path)}) is None


def test_no_test_reads_the_variable_or_a_machine_path_itself() -> None:
    """Only tests/conftest.py reads NL2SQL_CHINOOK; every test gets the file from its fixture."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if (path.name == "conftest.py" and path.parent.name == "tests") or path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ('environ.get("NL2SQL_CHINOOK"', 'environ["NL2SQL_CHINOOK"]', "getenv(\"NL2SQL_CHINOOK\"",
                       "shared/datasets", "setdefault(\"NL2SQL_CHINOOK\""):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []
