"""An engine evaluated over HTTP: ``nl2sql-assets serve`` in a separate process (the built-in
engine on the gold LLM, no key) is run in mode full through ``--engine`` and gets the same
verdicts as the built-in engine asked in process; the cap, outages and the CLI around it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nl2sql_assets import Project
from nl2sql_assets.cli import main
from nl2sql_assets.config import PriceRow
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running.gold_llm import GOLD_MODEL, GoldLLMServer
from nl2sql_assets.evaluation.running.results import CaseRecord
from nl2sql_assets.evaluation.suites import load_suite
from tests.processes import start, stop

# Mode full runs here against local servers; CI's ``CI`` variable would refuse it.
pytestmark = pytest.mark.usefixtures("outside_ci")

# chinook_010: every role allowed; chinook_007: admin allowed, the others refused;
# chinook_012: unanswerable for everyone; chinook_002 and chinook_014: allowed with alternatives.
CASES = ["chinook_010", "chinook_007", "chinook_012", "chinook_002", "chinook_014"]


@pytest.fixture
def served(demo_project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL of ``nl2sql-assets serve --gold`` running in its own process on the demo project."""
    for name in list(os.environ):
        if name.upper().endswith("_API_KEY"):
            monkeypatch.delenv(name)
    proc = start(
        [sys.executable, "-m", "nl2sql_assets.cli", "--config", str(demo_project), "serve", "--port", "0",
         "--gold", "suites/chinook.yaml"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"(http://[\d.]+:\d+)/ask", line)
        assert found, f"serve printed {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
        yield found.group(1)
    finally:
        stop(proc, grace_s=30)


def _verdicts(records: list[CaseRecord]) -> dict[tuple[str, str], tuple[object, ...]]:
    return {(r.case_id, r.role): (r.status, r.execution_status, r.result_status, r.error_code, r.rows_sha256,
                                  r.scores["outcome"].passed, r.scores["result_match"].passed)
            for r in records}


def test_an_engine_over_http_gets_the_verdicts_it_gets_in_process(demo_project: Path, served: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    project = Project.load(demo_project / "nl2sql.yaml")
    suite = load_suite(demo_project / "suites" / "chinook.yaml")
    with project, GoldLLMServer(suite.cases, project.bus, synthesizer="rows",
                                curated=project.config.curated) as gold:
        section = gold.llm_config().model_copy(update={"prices": {GOLD_MODEL.split("/", 1)[-1]: PriceRow(
            input=1.0, cached_input=0.5, cache_write=1.0, output=2.0, source="test table")}})
        local = project.evals.run(mode="full", llm={"builtin": section}, cases=CASES, max_cost_usd=5)
        remote = project.evals.run(mode="full", engines={"served": {"kind": "http", "url": served}}, cases=CASES)

    assert list(remote.configs) == ["served"]
    here, there = local.configs["builtin"].results, remote.configs["served"].results
    assert len(here) == len(there) == 15
    assert _verdicts(there) == _verdicts(here)
    # the verdicts are real ones: passes, refusals and unanswerables, nothing failed for the environment
    statuses = {(r.case_id, r.role): r.error_code for r in there}
    assert statuses[("chinook_007", "viewer")] == "SECURITY_VIOLATION"
    assert statuses[("chinook_012", "admin")] == "QUESTION_NOT_ANSWERABLE"
    assert all(r.status == "pass" for r in there), [(r.case_id, r.role, r.reason) for r in there if r.status != "pass"]
    assert remote.env_errors == {} and not remote.incomplete
    # the engine reported no cost: none is invented, and the run was not capped
    assert remote.max_cost_usd is None
    assert all(r.cost_usd == 0 and r.unknown_cost_calls == 1 for r in there)
    # ... and the run says so plainly: the engine's cost is unknown, not "calls that could not be priced"
    said = [r.getMessage() for r in caplog.records if "'served'" in r.getMessage()]
    assert said == ["config 'served' is an outside engine: 15 of its replies carried no cost, so what it cost is "
                    "unknown (an engine's cost is counted only from what it reports: cost_usd in each reply, and "
                    "reports_cost: true in its entry)"]
    assert there[0].models == {"engine": f"http:{served}"}
    assert remote.request.engines == {"served": {"kind": "http", "url": served}}


def test_a_cap_against_an_engine_that_reports_no_cost_is_refused(demo_project: Path, served: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    with Project.load(demo_project / "nl2sql.yaml") as project, pytest.raises(
            RunRefused, match=r"cannot be held against engine\(s\) 'served': they report no cost"):
        project.evals.run(mode="full", engines={"served": {"kind": "http", "url": served}}, cases=CASES,
                          max_cost_usd=1.0)
    code = main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--engine", f"served={served}",
                 "--cases", "chinook_010", "--max-cost", "1"])
    assert code == 3
    assert "report no cost" in capsys.readouterr().err


def test_eval_run_engine_on_the_command_line(demo_project: Path, served: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = demo_project / "engine.json"
    code = main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--engine", f"served={served}",
                 "--cases", "chinook_010", "chinook_007", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert re.search(r"^served: ", printed, re.M), printed
    assert out.is_file()


def test_an_engine_that_is_down_is_an_outage_not_a_wrong_answer(demo_project: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--engine",
                 f"down=http://127.0.0.1:{port}", "--cases", "chinook_010", "--out", str(demo_project / "d.json")])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "INCOMPLETE" in err and "transport" in err


def test_the_breaker_names_an_engine_that_is_down_by_its_address(demo_project: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    code = main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--engine", f"down={url}",
                 "--out", str(demo_project / "d.json")])
    err = capsys.readouterr().err
    assert code == 4, err
    breaker = next(line for line in err.splitlines() if line.startswith("circuit breaker: "))
    assert "stopped after 5 case runs in a row" in breaker and "config 'down'" in breaker
    assert f"engine at {url}" in breaker and "http:http" not in breaker, breaker
