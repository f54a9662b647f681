"""Engines a team writes: the README's HTTP engine run as written (SQL only, one leak the policy
catches), engines named in nl2sql.yaml with a secret header, and a Python engine found by entry point."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nl2sql_assets import Project
from nl2sql_assets.cli import main
from nl2sql_assets.engines.kinds import EngineConfigError
from nl2sql_assets.evaluation.reporting import load_report
from nl2sql_assets.evaluation.running.results import CaseRecord
from tests.engine_servers import RecordingEngine
from tests.processes import start, stop

# Mode full runs here against local servers; CI's ``CI`` variable would refuse it.
pytestmark = pytest.mark.usefixtures("outside_ci")

ROOT = Path(__file__).resolve().parents[2]


def _readme_engine() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Evaluate your own engine", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def readme_engine(tmp_path: Path) -> Iterator[str]:
    code = _readme_engine()
    assert len(code.strip().splitlines()) <= 25, "the README's example stays small"
    script = tmp_path / "my_engine.py"
    script.write_text(code, encoding="utf-8")
    port = _free_port()
    proc = start([sys.executable, str(script), str(port)], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
        yield url
    finally:
        stop(proc)


def _by_key(records: list[CaseRecord]) -> dict[tuple[str, str], CaseRecord]:
    return {(r.case_id, r.role): r for r in records}


def test_the_readme_engine_runs_and_its_leak_is_caught(demo_project: Path, readme_engine: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = demo_project / "mine.json"
    code = main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--engine", f"mine={readme_engine}",
                 "--cases", "chinook_010", "chinook_007", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed  # no threshold of the demo reads outcomes; the board does
    assert "mine: execution accuracy 66.7% (4/6" in printed.out
    report = load_report(out).model_dump(mode="json")  # the summary and its records file
    records = {(r["case_id"], r["role"]): r for r in report["configs"]["mine"]["results"]}
    for role in ("admin", "analyst", "viewer"):  # SQL only: executed here, the rows are the gold ones
        assert records[("chinook_010", role)]["status"] == "pass", records[("chinook_010", role)]["reason"]
    assert records[("chinook_007", "admin")]["status"] == "pass"
    for role in ("analyst", "viewer"):  # the engine answered what the role may not read: its leak
        leak = records[("chinook_007", role)]
        assert leak["status"] == "fail" and leak["error_code"] == "ENGINE_LEAK"
        assert leak["row_count"] is None and leak["policy_rule"]
        assert "a leak the final-SQL check caught" in leak["error_message"]
        assert "expected SECURITY_VIOLATION" in leak["reason"]


def test_an_engine_named_in_nl2sql_yaml_with_a_secret_header(demo_project: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from nl2sql_assets.evaluation.suites import load_suite

    suite = load_suite(demo_project / "suites" / "chinook.yaml")
    answers = {c.question: c.sql for c in suite.cases if c.id in ("chinook_010", "chinook_002") and c.sql}
    engine = RecordingEngine(answers)
    try:
        path = demo_project / "nl2sql.yaml"
        data = yaml.safe_load(path.read_text())
        data["engines"] = {"vendor": {"kind": "http", "url": f"http://127.0.0.1:{engine.server_address[1]}",
                                      "headers": {"Authorization": "Bearer ${env:VENDOR_TOKEN}"},
                                      "timeout_s": 10, "reports_cost": True}}
        path.write_text(yaml.safe_dump(data))
        monkeypatch.setenv("VENDOR_TOKEN", "s3cret-token-123")
        with Project.load(path) as project:
            from nl2sql_assets.evaluation.running import RunRequest
            from nl2sql_assets.evaluation.running.modes import discover_configs

            assert "vendor" in discover_configs(project.config)  # a Dagster partition of the config dimension
            request = RunRequest.for_config("vendor", project.config, cases=["chinook_010", "chinook_002"],
                                            max_cost_usd=1.0)
            report = project.evals.run_request(request)
        board = report.configs["vendor"]
        statuses = {(r.case_id, r.role): (r.status, r.error_code) for r in board.results}
        assert statuses.pop(("chinook_002", "viewer")) == ("fail", "ENGINE_LEAK")  # viewers may not read Invoice
        assert set(statuses.values()) == {("pass", None)} and len(statuses) == 5
        assert board.cost.total_usd == pytest.approx(0.006)  # what the engine reported, six replies
        assert all(r.usage["engine"].input_tokens == 10 for r in board.results)
        assert {h["Authorization"] for h in engine.headers_seen} == {"Bearer s3cret-token-123"}
        assert "s3cret-token-123" not in json.dumps(report.model_dump(mode="json"), default=str)
        recorded = report.request.model_dump(mode="json")["engines"]["vendor"]
        assert recorded["headers"] == {"Authorization": "<redacted>"}
    finally:
        engine.shutdown()
        engine.server_close()


ENGINE_MODULE = '''
from nl2sql_assets.engines import EngineReply


class Lookup:
    """Answers from a table of questions; every reply SQL only."""

    def __init__(self, answers):
        self.answers = answers

    def ask(self, question, role, datasource=None, conversation=None):
        sql = self.answers.get(question)
        if sql is None:
            return EngineReply(status="unanswerable")
        return EngineReply(status="answered", sql=sql, cost_usd=0.0)


class NotAnEngine:
    def answer(self, question):
        return None
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package installed the way pip leaves one: its module and a dist-info with entry points."""
    site = tmp_path / "site"
    (site / "toy_engines-0.1.dist-info").mkdir(parents=True)
    (site / "toy_engines.py").write_text(ENGINE_MODULE)
    (site / "toy_engines-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-engines\n"
                                                               "Version: 0.1\n")
    (site / "toy_engines-0.1.dist-info" / "entry_points.txt").write_text(textwrap.dedent("""\
        [nl2sql.engines]
        lookup = toy_engines:Lookup
        not_an_engine = toy_engines:NotAnEngine
        """))
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_python_engine_by_entry_point(demo_project: Path, installed: Path) -> None:
    from nl2sql_assets.evaluation.suites import load_suite

    suite = load_suite(demo_project / "suites" / "chinook.yaml")
    answers = {c.question: c.sql for c in suite.cases if c.id in ("chinook_010", "chinook_007") and c.sql}
    with Project.load(demo_project / "nl2sql.yaml") as project:
        report = project.evals.run(mode="full", cases=["chinook_010", "chinook_007", "chinook_012"],
                                   engines={"toy": {"kind": "python", "entry_point": "lookup",
                                                    "options": {"answers": answers}}})
        records = _by_key(report.configs["toy"].results)
        assert records[("chinook_010", "viewer")].status == "pass"
        assert records[("chinook_012", "admin")].status == "pass"  # unanswerable, as the engine said
        assert records[("chinook_007", "viewer")].error_code == "ENGINE_LEAK"
        assert records[("chinook_007", "admin")].models == {"engine": "python:lookup"}

        with pytest.raises(EngineConfigError, match=r"'not_an_engine' \(toy_engines.NotAnEngine\) has no ask method"):
            project.evals.run(mode="full", cases=["chinook_010"],
                              engines={"bad": {"kind": "python", "entry_point": "not_an_engine"}})
        with pytest.raises(EngineConfigError, match=r"no engine entry point 'missing' in group nl2sql.engines "
                                                    r"\(installed: \['lookup', 'not_an_engine'\]\)"):
            project.evals.run(mode="full", cases=["chinook_010"],
                              engines={"bad": {"kind": "python", "entry_point": "missing"}})
        with pytest.raises(EngineConfigError, match=r"engines.bad.kind: unknown engine kind 'grpc'"):
            project.evals.run(mode="full", cases=["chinook_010"], engines={"bad": {"kind": "grpc"}})


def test_the_openapi_file_names_the_reply_fields_the_runtime_reads() -> None:
    spec = yaml.safe_load((ROOT / "docs" / "engine-api.openapi.yaml").read_text())
    text = json.dumps(spec)
    for field in ("status", "sql", "rows", "answer", "error_code", "usage", "cost_usd"):
        assert f'"{field}"' in text
