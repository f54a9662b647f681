"""`dagster definitions validate` loads the repository's own code location from a clean process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate_passes_at_the_repo_root(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(ROOT / "scripts" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    env.pop("NL2SQL_PROJECT", None)
    dagster = Path(sys.executable).with_name("dagster")
    for extra in ([], ["-w", "workspace.yaml"]):
        proc = subprocess.run([str(dagster), "definitions", "validate", *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Validation successful for code location nl2sql" in proc.stdout + proc.stderr


def test_importing_the_definitions_module_stays_light():
    """litellm and onnxruntime are imported where they are used, never by the definitions."""
    code = ("import sys, nl2sql_assets.definitions as d; d.defs(); "
            "print(sorted(m for m in ('litellm', 'onnxruntime') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
