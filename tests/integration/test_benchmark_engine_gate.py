"""An imported Spider-format sample runs and gates: ``bench import --approve`` takes the gold as
reviewed, an engine over HTTP is evaluated on it in mode full, the run is published, and later runs
are gated against that record."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.reporting import load_report
from nl2sql_assets.evaluation.suites import load_suite
from tests.engine_servers import RecordingEngine
from tests.unit.test_bench_import import SPIDER_QUESTIONS, _spider_folder, databases  # noqa: F401 (a fixture)

# Mode full runs here against local servers; CI's ``CI`` variable would refuse it.
pytestmark = pytest.mark.usefixtures("outside_ci")


def _run(project: Path, url: str, out: Path, *extra: str) -> int:
    return main(["--config", str(project), "eval", "run", "--mode", "full", "--engine", f"gold={url}",
                 "--out", str(out), *extra])


def test_an_imported_spider_sample_runs_and_gates(tmp_path: Path, databases: dict[str, Path],  # noqa: F811
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = _spider_folder(tmp_path / "spider", databases)
    project = tmp_path / "project"
    assert main(["bench", "import", "spider", str(folder), "--out", str(project), "--approve"]) == 0
    suite = load_suite(project / "suites" / "spider_dev.yaml")
    # every case has rows (the one with two columns of one name too), so every case is approved
    assert [c.status for c in suite.cases] == ["approved"] * 5
    assert all(c.origin == "imported" and c.benchmark is not None for c in suite.cases)

    answers = {question: sql for _, question, sql in SPIDER_QUESTIONS}
    engine = RecordingEngine(answers)  # SQL only, executed here on the benchmark's databases
    url = f"http://127.0.0.1:{engine.server_address[1]}"
    try:
        first = tmp_path / "first.json"
        assert _run(project, url, first) == 0, capsys.readouterr()
        report = load_report(first).model_dump(mode="json")  # the summary and its records file
        results = report["configs"]["gold"]["results"]
        assert [(r["case_id"], r["status"]) for r in results] == [
            ("spider_dev_0000", "pass"), ("spider_dev_0001", "pass"), ("spider_dev_0002", "pass"),
            ("spider_dev_0003", "pass"), ("spider_dev_0004", "pass")]
        assert main(["--config", str(project), "eval", "publish", str(first), "--root", str(project)]) == 0
        capsys.readouterr()

        again = tmp_path / "again.json"
        assert _run(project, url, again, "--baseline", str(project / "benchmarks")) == 0
        assert "gate: ok" in capsys.readouterr().out

        # the engine gets three of the four wrong: more than the two flips the gate allows
        for _, question, _ in SPIDER_QUESTIONS[:3]:
            engine.answers[question] = "SELECT 1"
        worse = tmp_path / "worse.json"
        code = _run(project, url, worse, "--baseline", str(project / "benchmarks"))
        printed = capsys.readouterr()
        assert code == 1, printed
        assert "REGRESSION" in printed.err
    finally:
        engine.shutdown()
        engine.server_close()
