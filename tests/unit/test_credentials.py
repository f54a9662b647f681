"""A paid run without its key is refused at once: the known providers' variables are read
directly, litellm (seconds to import) is asked only about the providers it alone knows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nl2sql_assets.config import LLMConfig
from nl2sql_assets.llm.providers import missing_credentials

NODES = ["planner", "synthesizer"]


@pytest.mark.parametrize(("section", "environ", "missing"), [
    # (the llm section, the environment) -> the variables reported missing
    ({"default": {"model": "openai/gpt-5.4"}}, {}, ["OPENAI_API_KEY"]),
    ({"default": {"model": "openai/gpt-5.4"}}, {"OPENAI_API_KEY": "sk-x"}, []),
    ({"default": {"model": "openai/gpt-5.4", "api_key": "sk-inline"}}, {}, []),
    ({"default": {"model": "anthropic/claude-haiku-4-5"}}, {"OPENAI_API_KEY": "sk-x"}, ["ANTHROPIC_API_KEY"]),
    # one node on another provider: only that node's key is missing
    ({"default": {"model": "openai/gpt-5.4"}, "nodes": {"planner": {"model": "anthropic/claude-sonnet-5"}}},
     {"OPENAI_API_KEY": "sk-x"}, ["ANTHROPIC_API_KEY"]),
])
def test_a_known_provider_s_key_is_read_from_the_environment(section: dict, environ: dict[str, str],
                                                             missing: list[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    lines = missing_credentials({"default": LLMConfig.model_validate(section)}, NODES)
    assert [v for v in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY") if any(v in line for line in lines)] == missing


def test_the_refusal_of_a_run_without_its_key_imports_no_litellm(demo_project: Path) -> None:
    """The refusal comes before the heavy imports (litellm alone takes seconds)."""
    script = ("import sys\nfrom nl2sql_assets.cli import main\n"
              f"code = main(['--config', {str(demo_project / 'nl2sql.yaml')!r}, 'eval', 'run', '--out', "
              f"{str(demo_project / 'x.json')!r}])\n"
              "print(code, 'litellm' in sys.modules)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("CI", "OPENAI_API_KEY")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["2", "False"], done.stdout + done.stderr
    assert "no API key for mode full" in done.stderr and "OPENAI_API_KEY" in done.stderr
