"""``Project.engine.ask(...)`` in a script: every HTTP session the engine opened is closed by the time
the interpreter exits, so nothing is left for aiohttp to report as an unclosed client session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import atexit, sys, yaml
from pathlib import Path

def report() -> None:  # registered first, so it runs after every handler the package registers
    from nl2sql_assets.llm import openai_compat
    still = [loop for loop, held in openai_compat._sessions.items() if not held.session.closed]
    print(f"open sessions at exit: {len(still)}", flush=True)

atexit.register(report)
from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
from nl2sql_assets.evaluation.suites import load_suite

project_file, suite, api = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
cases = [c for c in load_suite(suite).cases if c.id == "chinook_010"]
server = FlakyLLMServer(cases, EventBus(), behaviour="ok").start()
data = yaml.safe_load(project_file.read_text())
llm = server.llm_config().model_dump(mode="json", exclude_none=True)
llm["default"]["api"] = api
data["llm"] = llm
project_file.write_text(yaml.safe_dump(data))
from nl2sql_assets import Project

project = Project.load(project_file)
print("answered:", project.engine.ask(cases[0].question, role="admin").status, flush=True)
"""


@pytest.mark.parametrize("api", ["openai-compatible", "litellm"])
def test_a_script_that_asks_the_engine_leaves_no_session_open(demo_project: Path, tmp_path: Path, api: str) -> None:
    script = tmp_path / "ask.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", str(script),
                           str(demo_project / "nl2sql.yaml"), str(demo_project / "suites" / "chinook.yaml"), api],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
    assert done.returncode == 0, done.stderr
    assert "answered: success" in done.stdout
    assert "open sessions at exit: 0" in done.stdout
    assert "Unclosed client session" not in done.stderr and "ClientSession.__del__" not in done.stderr
