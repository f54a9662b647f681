"""An API key is never stored: a gateway that echoes the Authorization header, end to end.

The gateway repeats the key into routing reasons, answers and error texts. After a mode-full
run through the Python API (report, publish: records and pages) and one through Dagster
(case runs in the warehouse, the instance's databases and logs), the bytes of every file under
the project folder and the Dagster home are searched for the key.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import dagster as dg
import pytest

from nl2sql_assets import Project
from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from nl2sql_assets.evaluation.history.publish import publish
from nl2sql_assets.evaluation.reporting.board import save_report
from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
from nl2sql_assets.evaluation.suites import load_suite
from tests.hostile_llm import EchoGateway

CASES = ["chinook_010", "chinook_007", "chinook_012"]  # allowed, refused for two roles, unanswerable


def _files_holding(folder: Path, needle: bytes) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def test_an_echoed_key_reaches_no_file_of_the_project_or_of_dagster(
    demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"gw-{secrets.token_hex(12)}"  # new to this process, shaped like no provider key
    monkeypatch.setenv("NL2SQL_GATEWAY", key)  # a variable whose name says nothing about keys
    (demo_project / "README.md").write_text("# demo\n", encoding="utf-8")
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    project = Project.load(demo_project / "nl2sql.yaml")
    with project, GoldLLMServer(cases, project.bus, synthesizer="rows") as gold, EchoGateway(gold.base_url) as gw:
        configs = demo_project / "configs"
        configs.mkdir()
        (configs / "echo.yaml").write_text(
            "default:\n  model: openai/echo-model\n  api_base: " + gw.base_url + "\n"
            "  api_key: ${env:NL2SQL_GATEWAY}\n  temperature: 0\n  timeout_s: 10\n  max_retries: 1\n"
            "prices:\n  echo-model: {input: 1.0, output: 1.0, source: test}\n", encoding="utf-8")

        # The Python API: a run, its report, and publish (records and pages).
        from nl2sql_assets.llm.presets import load_llm_file

        llm = load_llm_file(configs / "echo.yaml")
        assert llm.default is not None and llm.default.api_key == key
        report = project.evals.run(mode="full", llm={"echo": llm}, cases=CASES, max_cost_usd=1.0)
        save_report(report, demo_project / "eval_full.json")
        # The gateway's 401 is an outage (auth), so the run is incomplete: recorded only when asked.
        assert report.incomplete and report.env_errors == {"auth": 1}
        publish([report], note="echo", root=demo_project, allow_incomplete=True)

        # Dagster: the case runs of config "echo" write the warehouse and the instance's storage.
        home = tmp_path / "dagster_home"
        home.mkdir()
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            defs = build_defs(demo_project / "nl2sql.yaml")
            register_configs(instance, ["echo"])
            result = defs.resolve_job_def("case_runs_job").execute_in_process(
                instance=instance, partition_key=config_pass_key("echo", 1), raise_on_error=False)
            assert result.success
        seen = [h for h, _ in gw.requests]

    # The key was really sent, and really echoed back into what the engine keeps.
    assert seen and all({k.lower(): v for k, v in h.items()}["authorization"] == f"Bearer {key}" for h in seen)
    board = report.configs["echo"]
    texts = " ".join(f"{r.error_message} {r.answer} {r.reason}" for r in board.results)
    assert "[REDACTED]" in texts and key not in texts
    warehouse = demo_project / "warehouse"
    assert any(b"[REDACTED]" in p.read_bytes() for p in warehouse.rglob("*.jsonl"))
    assert list((demo_project / "benchmarks").rglob("*.json"))
    # ... and no file holds it: project, report, records, pages, warehouse, Dagster storage and logs.
    needle = key.encode()
    assert _files_holding(demo_project, needle) == []
    assert _files_holding(home, needle) == []
