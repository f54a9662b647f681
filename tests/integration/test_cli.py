"""``nl2sql-assets`` as a user runs it: init, eval run and its exit codes, regenerate, publish,
configs and the Dagster pipeline, on a demo project made by ``init_demo``.

Most calls go through ``cli.main`` in-process (fast, and stdout/stderr are captured); one goes
through the installed console script in a subprocess. Exit codes of ``eval run``: 0 ok,
1 a regression, 2 a usage or baseline problem, 3 the cost cap stopped the run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets import paths
from nl2sql_assets.cli import main
from nl2sql_assets.config import PriceRow, load_config
from nl2sql_assets.evaluation.history.records import iter_records, load_record
from nl2sql_assets.evaluation.reporting.board import load_report
from nl2sql_assets.evaluation.running import gold_llm
from nl2sql_assets.evaluation.running.modes import resolve_config
from nl2sql_assets.evaluation.suites import EvalCase, load_suite, suite_digest
from nl2sql_assets.project import Project
from nl2sql_assets.yamlio import dump_yaml

REPO = paths.repo_root() or Path(__file__).resolve().parents[2]
COMMITTED = REPO / "benchmarks"
README_TEXT = "# A repo\n\nIntro.\n\n## Results\n\n<!-- results:start -->\n<!-- results:end -->\n\nThe end.\n"


def _committed_plans_records() -> list[Path]:
    """The committed mode plans records of the shipped suite as it is now: a changed suite starts a
    new series (the gate says "not comparable" until a run of it is recorded)."""
    digest = suite_digest(paths.chinook_suite_path())
    return sorted(p for p in (COMMITTED / "plans" / "chinook").glob("*.json")
                  if digest in {d.digest for d in load_record(p).datasets})


def _run(argv: list[Any]) -> tuple[int, str, str]:
    """``main(argv)`` with stdout and stderr captured (usable outside a test's capsys)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    def run(*argv: Any) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture(autouse=True)
def _no_ci_no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's shell: no CI variable (CI runners set one) and no provider key."""
    monkeypatch.delenv("CI", raising=False)
    for name in list(os.environ):
        if name.upper().endswith("_API_KEY"):
            monkeypatch.delenv(name)


@dataclass(frozen=True)
class Baseline:
    demo: Path  # a demo project, shared by the module's tests: never written to but by this fixture
    config: Path
    report: Path  # the first full mode plans run's report (default --out)
    first_run: tuple[int, str, str]
    root: Path  # a repo-like folder where that report was published: root/benchmarks is a baseline
    committed: list[Path]

    @property
    def benchmarks(self) -> Path:
        return self.root / "benchmarks"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Baseline:
    """One full mode plans run on a demo (gated against the committed record when the repo has
    one, as CI does), published into a scratch repo to serve as a self-made baseline."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CI", raising=False)
        demo = tmp_path_factory.mktemp("cli") / "demo"
        shutil.copytree(demo_template, demo)
        committed = _committed_plans_records()
        argv: list[Any] = ["--config", demo / "nl2sql.yaml", "eval", "run", "--mode", "plans"]
        if committed:
            argv += ["--baseline", COMMITTED]
        first = _run(argv)
        root = demo.parent / "scratch-repo"
        root.mkdir()
        (root / "README.md").write_text(README_TEXT, encoding="utf-8")
        code, _, err = _run(["eval", "publish", demo / "eval_plans.json", "--note", "baseline", "--root", root])
        assert code == 0, err
    return Baseline(demo, demo / "nl2sql.yaml", demo / "eval_plans.json", first, root, committed)


# ================================================================ init


def test_init_writes_a_project_refuses_a_second_and_force_overwrites(
    tmp_path: Path, chinook_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    target = tmp_path / "mydemo"
    code, out, err = cli("init", "--demo", target, "--chinook", chinook_path)
    assert code == 0, err
    assert f"demo project written to {target}" in out
    for name in ("nl2sql.yaml", "evals.yaml", "suites/chinook.yaml", "data/chinook.sqlite",
                 "data/support.duckdb", "data/webanalytics.duckdb"):
        assert (target / name).is_file(), name
    assert (target / "benchmarks").is_dir()
    config = load_config(target / "nl2sql.yaml")
    assert [d.id for d in config.datasources] == ["chinook", "support", "webanalytics"]

    (target / "nl2sql.yaml").write_text("# my own edits\n" + (target / "nl2sql.yaml").read_text())
    code, out, err = cli("init", "--demo", target, "--chinook", chinook_path)
    assert code == 2
    assert f"{target} already holds a project" in err and "--force" in err
    assert (target / "nl2sql.yaml").read_text().startswith("# my own edits")  # left alone

    code, out, err = cli("init", "--demo", target, "--chinook", chinook_path, "--force")
    assert code == 0, err
    assert not (target / "nl2sql.yaml").read_text().startswith("# my own edits")


# ================================================================ eval run: exit 0


def test_eval_run_plans_exits_0_against_the_committed_and_a_self_made_baseline(
    baseline: Baseline, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = baseline.first_run
    assert code == 0, err
    assert "plans: execution accuracy 100.0% (150/150" in out  # 47 x 3 roles, and 3 clarify questions x 3
    assert f"report: {baseline.report}" in out
    report = load_report(baseline.report)  # eval_plans.json next to nl2sql.yaml
    assert (report.mode, report.accuracy, len(report.configs["plans"].results)) == ("plans", 1.0, 187)
    if baseline.committed:  # CI's gate: the newest committed mode plans record
        assert "gate [plans/execution]: lost 0 [], gained 0 []" in out and "gate: ok" in out

    out_file = tmp_path / "reports" / "again.json"
    code, out, err = cli("--config", baseline.config, "eval", "run", "--mode", "plans",
                         "--baseline", baseline.benchmarks, "--out", out_file)
    assert code == 0, err
    assert "gate [plans/execution]: lost 0 [], gained 0 [], McNemar p=1" in out
    assert "gate: ok" in out and err == ""
    assert load_report(out_file).configs["plans"].accuracy.execution.passed == 150


def test_the_console_script_runs_the_gate(baseline: Baseline, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "nl2sql-assets"
    exe = str(script) if script.is_file() else shutil.which("nl2sql-assets")
    assert exe, "the nl2sql-assets console script is not installed"
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.upper().endswith("_API_KEY")}
    out_file = tmp_path / "sub.json"
    proc = subprocess.run(
        [exe, "--config", str(baseline.config), "eval", "run", "--mode", "plans", "--cases", "chinook_010",
         "--baseline", str(baseline.benchmarks), "--out", str(out_file)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "plans: execution accuracy 100.0% (3/3" in proc.stdout
    assert "gate: ok" in proc.stdout
    assert load_report(out_file).mode == "plans"


# ================================================================ eval run: exit 1


_GOLD_PLAN = gold_llm.ANSWERS["PlanModel"]


def _plan_selecting_city(case: EvalCase, role: str | None, server: gold_llm.GoldLLMServer) -> dict[str, Any]:
    """The gold plan, except chinook_001 ("customers in each country") groups by city instead."""
    plan = _GOLD_PLAN(case, role, server)
    if case.id == "chinook_001":
        plan = json.loads(json.dumps(plan).replace('"name": "Country"', '"name": "City"'))
    return plan


def test_a_broken_plan_is_a_regression_exit_1(
    baseline: Baseline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., tuple[int, str, str]]
) -> None:
    suite = baseline.demo / "suites" / "chinook.yaml"
    before = suite.read_bytes()
    # The suite file stays as it is (its digest is part of comparability): the gold server
    # serves the wrong plan instead.
    monkeypatch.setitem(gold_llm.ANSWERS, "PlanModel", _plan_selecting_city)
    out_file = tmp_path / "broken.json"
    code, out, err = cli("--config", baseline.config, "eval", "run", "--mode", "plans",
                         "--cases", "chinook_001", "chinook_010", "--baseline", baseline.benchmarks,
                         "--out", out_file)
    assert code == 1, err
    assert "plans: execution accuracy 66.7% (4/6" in out
    # the one-line summary gives the lenient reading beside the strict one, each with its interval
    assert re.search(r"plans: execution accuracy 66\.7% \(4/6, 95% CI [^)]+\); lenient \d+\.\d% \(\d/6, 95% CI "
                     r"[^)]+\); overall", out), out
    assert "gate [plans/execution]: lost 2 ['chinook_001@admin', 'chinook_001@analyst'], gained 0 []" in out
    assert "REGRESSION: config plans (execution): 2 case(s) went from pass to fail" in err
    assert "chinook_001@admin, chinook_001@analyst" in err
    assert "chinook_001@viewer" not in err and "chinook_010" not in err  # still refused; untouched
    assert suite.read_bytes() == before
    records = {(r.case_id, r.role): r for r in load_report(out_file).configs["plans"].results}
    broken = records[("chinook_001", "admin")]
    assert broken.status == "fail" and "City" in (broken.sql or "")
    assert broken.reason.startswith("result_match: ")


# ================================================================ eval run: exit 2


def _record_copy(baseline: Baseline, folder: Path, **changes: Any) -> Path:
    """A scratch copy of the self-made record with some fields changed (the original is never edited)."""
    source = next(baseline.benchmarks.rglob("*.json"))
    data = json.loads(source.read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    kind = data["kind"]
    target = folder / "benchmarks" / kind / "chinook" / source.name
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(data), encoding="utf-8")
    load_record(target)  # still a valid record
    return folder / "benchmarks"


def _empty_folder(path: Path) -> Path:
    path.mkdir()
    return path


def _json_file(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


EXIT_2_CASES: dict[str, tuple[Callable[[Baseline, Path, pytest.MonkeyPatch], list[Any]], str]] = {
    "missing-baseline": (
        lambda b, t, mp: ["--cases", "chinook_010", "--baseline", t / "no-such-folder"],
        "no such file or folder"),
    "empty-benchmarks-folder": (
        lambda b, t, mp: ["--cases", "chinook_010", "--baseline", _empty_folder(t / "benchmarks")],
        "benchmarks/ holds no record of mode plans. Run without --baseline"),
    "no-record-for-the-mode": (
        lambda b, t, mp: ["--cases", "chinook_010", "--baseline", _record_copy(b, t, kind="full")],
        "benchmarks/ holds no record of mode plans"),
    "no-record-for-the-config": (
        lambda b, t, mp: ["--cases", "chinook_010", "--baseline", _record_copy(b, t, **{"config.name": "other"})],
        "holds no record of mode plans for config plans (it has other)"),
    "no-record-for-the-database": (
        lambda b, t, mp: ["--cases", "chinook_010", "--baseline",
                          _record_copy(b, t, **{"database.datasource_id": "support"})],
        "no baseline record for mode plans, database chinook, config plans"),
    "incomparable-suite-digest": (
        lambda b, t, mp: ["--cases", "chinook_010", "--baseline", _record_copy(b, t, **{"dataset.0.digest": "0" * 64})],
        "not comparable: another suite digest"),
    "baseline-of-the-wrong-shape": (
        lambda b, t, mp: ["--cases", "chinook_010", "--baseline", _json_file(t / "base.json", {"scoreboard": {}})],
        "base.json: not a benchmark record: kind: field required"),
    "out-is-a-folder": (lambda b, t, mp: ["--cases", "chinook_010", "--out", t], "--out"),
    "unknown-case": (lambda b, t, mp: ["--cases", "no_such_case"], "'no_such_case' match no approved case"),
    "llm-with-plans": (lambda b, t, mp: ["--llm", "gpt-5.4"], "--llm applies to mode full only"),
}


REFUSED_BEFORE_THE_RUN = {"missing-baseline", "empty-benchmarks-folder", "no-record-for-the-mode",
                          "no-record-for-the-config", "out-is-a-folder", "unknown-case", "llm-with-plans"}


@pytest.mark.parametrize("name", list(EXIT_2_CASES))
def test_usage_and_baseline_problems_exit_2(
    name: str, baseline: Baseline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    cli: Callable[..., tuple[int, str, str]]
) -> None:
    make_args, message = EXIT_2_CASES[name]
    out_file = tmp_path / "report.json"
    code, out, err = cli("--config", baseline.config, "eval", "run", "--mode", "plans", "--out", out_file,
                         *make_args(baseline, tmp_path, monkeypatch))
    assert code == 2, (out, err)
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err  # one line, not a dump
    if name in REFUSED_BEFORE_THE_RUN:  # nothing was asked (a paid run must not be wasted on a typo)
        assert not out_file.exists() and "execution accuracy" not in out
    if name.startswith(("empty-", "no-record-for-the-mode", "no-record-for-the-config")):
        assert "no baseline yet" in err and "eval publish" in err


@pytest.mark.parametrize("value", ["1", "true", "false", ""])
def test_mode_full_refuses_to_run_when_ci_is_set_whatever_its_value(
    value: str, baseline: Baseline, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., tuple[int, str, str]]
) -> None:
    monkeypatch.setenv("CI", value)
    # The unknown case makes sure nothing could be asked if the CI check were ever skipped.
    code, _, err = cli("--config", baseline.config, "eval", "run", "--mode", "full", "--llm", "gpt-5.4",
                       "--max-cost", "1", "--cases", "no_such_case")
    assert code == 2
    assert "mode full spends money and never runs in CI" in err


@pytest.mark.parametrize(
    ("llm", "message"),
    [
        ("no-such-preset", "--llm no-such-preset: not a preset"),
        ("openai/model-nobody-prices", "no price for model 'openai/model-nobody-prices'"),
    ],
)
def test_a_bad_llm_or_an_unpriced_model_exits_2_before_any_call(
    llm: str, message: str, baseline: Baseline, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, _, err = cli("--config", baseline.config, "eval", "run", "--mode", "full", "--llm", llm,
                         "--max-cost", "1", "--out", tmp_path / "r.json")
    assert code == 2
    assert message in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("r.")) == []  # no report, no records


def test_two_llm_configs_of_one_name_exit_2_before_any_call(
    baseline: Baseline, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, _, err = cli("--config", baseline.config, "eval", "run", "--mode", "full", "--llm", "mine=gpt-5.4",
                       "--llm", "mine=claude-planner", "--max-cost", "1", "--out", tmp_path / "r.json")
    assert code == 2
    assert "a config named 'mine' is given twice" in err
    assert not (tmp_path / "r.json").exists()


def test_a_bad_config_path_and_a_packaged_suite_exit_2(
    tmp_path: Path, baseline: Baseline, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, _, err = cli("--config", tmp_path / "nowhere" / "nl2sql.yaml", "eval", "run", "--mode", "plans")
    assert code == 2
    assert f"{tmp_path / 'nowhere' / 'nl2sql.yaml'}: config file not found" in err

    packaged = paths.chinook_suite_path()
    before = packaged.read_bytes()
    code, _, err = cli("--config", baseline.config, "eval", "regenerate", packaged)
    assert code == 2
    assert "ships with the package" in err and "--allow-packaged" in err
    assert packaged.read_bytes() == before


def test_a_missing_or_corrupt_database_exits_2_in_one_line(
    demo_project: Path, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """A project whose Chinook file is damaged or gone: a one-line error naming the datasource
    and the file, exit 2, no traceback and no report."""
    data = demo_project / "data" / "chinook.sqlite"
    with data.open("r+b") as fh:
        fh.write(b"not a database!!")  # the SQLite header
    out_file = tmp_path / "r.json"
    code, _, err = cli("--config", demo_project / "nl2sql.yaml", "eval", "run", "--mode", "plans",
                       "--cases", "chinook_001", "--out", out_file)
    assert code == 2, err
    assert "datasource 'chinook'" in err and str(data) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out_file.exists()

    data.unlink()
    code, _, err = cli("--config", demo_project / "nl2sql.yaml", "eval", "run", "--mode", "plans",
                       "--cases", "chinook_001", "--out", out_file)
    assert code == 2, err
    assert "datasource 'chinook'" in err and "not found" in err and len(err.strip().splitlines()) == 1, err
    assert "`nl2sql-assets data`" in err  # the next step


def test_errors_name_the_file_the_line_and_the_next_step(
    demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., tuple[int, str, str]]
) -> None:
    # outside any project, without --config: where a project is, and how to name or make one
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("eval", "run", "--mode", "plans")
    assert code == 2 and "config file not found" in err
    assert "--config PATH" in err and "nl2sql-assets init --demo DIR" in err
    # a case naming a datasource the project does not configure: the suite file and the line
    suite = demo_project / "suites" / "typo.yaml"
    text = (demo_project / "suites" / "chinook.yaml").read_text(encoding="utf-8")
    suite.write_text(text.replace("datasources: [chinook]", "datasources: [chinok]", 1), encoding="utf-8")
    line = 1 + next(i for i, row in enumerate(suite.read_text(encoding="utf-8").splitlines())
                    if "datasources: [chinok]" in row)
    code, _, err = cli("--config", demo_project / "nl2sql.yaml", "eval", "run", "--mode", "plans", "--suite", suite,
                       "--out", tmp_path / "r.json")
    assert code == 2, err
    assert f"{suite}, line {line}: case 'chinook_001': datasource 'chinok' is not configured" in err
    assert "known: chinook, support, webanalytics" in err


def test_a_project_folder_as_config_reads_its_nl2sql_yaml(
    baseline: Baseline, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    out_file = tmp_path / "r.json"
    code, out, err = cli("--config", baseline.demo, "eval", "run", "--mode", "plans", "--cases", "chinook_010",
                         "--out", out_file)
    assert code == 0, err
    assert "plans: execution accuracy 100.0% (3/3" in out


def test_selectors_repeat_and_take_several_values(
    baseline: Baseline, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """``--cases a --cases b`` runs both (the second flag must not silently replace the first),
    and ``--suite``, like ``--cases``, takes several values after one flag."""
    out_file = tmp_path / "r.json"
    code, _, err = cli("--config", baseline.config, "eval", "run", "--mode", "plans", "--out", out_file,
                       "--cases", "chinook_001", "--cases", "chinook_010", "--roles", "admin", "--roles", "viewer")
    assert code == 0, err
    runs = {(r.case_id, r.role) for r in load_report(out_file).configs["plans"].results}
    assert runs == {(c, r) for c in ("chinook_001", "chinook_010") for r in ("admin", "viewer")}

    other = tmp_path / "other.yaml"
    shutil.copy(baseline.demo / "suites" / "chinook.yaml", other)
    code, _, err = cli("--config", baseline.config, "eval", "run", "--mode", "plans", "--out", out_file,
                       "--suite", baseline.demo / "suites" / "chinook.yaml", other, "--cases", "chinook_010")
    assert code == 0, err
    report = load_report(out_file)
    assert sorted(s.name for s in report.suites) == ["chinook", "other"]
    assert len(report.configs["plans"].results) == 6


# ================================================================ eval run: exit 3

USAGE = {"prompt_tokens": 2000, "completion_tokens": 100, "cached_tokens": 500, "reasoning_tokens": 40}
PRICE = {"input": 1.0, "cached_input": 0.1, "cache_write": 1.25, "output": 4.0, "source": "test"}
PER_CALL = (1500 * 1.0 + 500 * 0.1 + 100 * 4.0) / 1_000_000


def test_mode_full_stopped_at_the_cost_cap_exits_3(
    demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """``--llm NAME=FILE`` pointing at a gold server; the cap lets the first case run, then stops."""
    PriceRow.model_validate(PRICE)
    project = Project.load(demo_project / "nl2sql.yaml")
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    # The gold server learns each run's case from the project's bus; cli.main loads its own
    # Project, so hand it this one.
    monkeypatch.setattr(Project, "load", classmethod(lambda cls, path="nl2sql.yaml": project))
    with gold_llm.GoldLLMServer(cases, project.bus, usage=USAGE, synthesizer="rows") as server:
        section = server.llm_config().model_dump(mode="json", exclude_none=True)
        section["prices"] = {"gold-plans": PRICE}
        llm_file = tmp_path / "fake.yaml"
        llm_file.write_text(dump_yaml(section), encoding="utf-8")
        out_file = tmp_path / "full.json"
        code, out, err = cli("--config", demo_project / "nl2sql.yaml", "eval", "run", "--mode", "full",
                             "--llm", f"fake={llm_file}", "--cases", "chinook_010", "chinook_037",
                             "--max-cost", "0.0001", "--out", out_file)
        requests = server.requests
    project.close()
    assert code == 3, err
    assert f"stopped at the cost cap: spent ${4 * PER_CALL:.4f}" in err
    data = json.loads(out_file.read_text(encoding="utf-8"))
    assert data["stopped"] == "max_cost"
    board = data["configs"]["fake"]
    assert (board["completed_cases"], board["planned_cases"]) == (1, 6)
    assert board["results"] == [] and data["records_file"] == "full.records.jsonl"  # a summary
    streamed = (tmp_path / "full.records.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(streamed) == 1 and json.loads(streamed[0])["status"] == "pass"
    assert requests == 4  # resolver, decomposer, planner, synthesizer of the one case run
    assert data["spent"] == pytest.approx(4 * PER_CALL)
    assert "fake: execution accuracy 100.0% (1/1" in out


def test_a_run_stopped_by_the_cap_that_also_missed_a_gate_exits_1_and_says_both(
    demo_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """A known failure in what ran is the verdict, partial or not: exit 1, not 3, with both facts."""
    project = Project.load(demo_project / "nl2sql.yaml")
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    monkeypatch.setattr(Project, "load", classmethod(lambda cls, path="nl2sql.yaml": project))
    with gold_llm.GoldLLMServer(cases, project.bus, usage=USAGE, synthesizer="rows") as server:
        section = server.llm_config().model_dump(mode="json", exclude_none=True)
        section["prices"] = {"gold-plans": PRICE}
        llm_file = tmp_path / "fake.yaml"
        llm_file.write_text(dump_yaml(section), encoding="utf-8")
        code, _, err = cli("--config", demo_project / "nl2sql.yaml", "eval", "run", "--mode", "full",
                           "--llm", f"fake={llm_file}", "--cases", "chinook_010", "chinook_037",
                           "--max-cost", "0.0001", "--max-cost-per-case", "0.00000001",
                           "--out", tmp_path / "full.json")
    project.close()
    assert code == 1, err
    assert "stopped at the cost cap" in err and "the report is partial" in err
    assert "THRESHOLD: max_cost_per_case" in err and "exit 1: a regression (or a missed threshold)" in err


# ================================================================ eval regenerate


def test_regenerate_exits_0_on_a_fresh_copy_and_1_when_a_case_sql_fails(
    demo_project: Path, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    suite = demo_project / "suites" / "chinook.yaml"
    before = suite.read_bytes()
    code, out, err = cli("--config", demo_project / "nl2sql.yaml", "eval", "regenerate", suite)
    assert code == 0, err
    assert "0 failed (file unchanged)" in out
    assert suite.read_bytes() == before

    text = suite.read_text(encoding="utf-8")
    start = text.index("- id: chinook_010")
    sql_at = text.index("FROM Track t", start)
    broken = tmp_path / "broken.yaml"
    broken.write_text(text[:sql_at] + "FROM NoSuchTable t" + text[sql_at + len("FROM Track t"):], encoding="utf-8")
    code, out, err = cli("--config", demo_project / "nl2sql.yaml", "eval", "regenerate", broken)
    assert code == 1
    assert "1 failed" in out
    assert "chinook_010:" in err and "NoSuchTable" in err


# ================================================================ eval publish


def test_publish_writes_a_record_the_pages_and_never_overwrites(
    baseline: Baseline, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text(README_TEXT, encoding="utf-8")
    report = load_report(baseline.report)
    stamp = report.run_stamp
    sha = stamp.git_commit[:7] if stamp.git_commit and stamp.git_commit != "unknown" else "unknown"
    expected = root / "benchmarks" / "plans" / "chinook" / f"{stamp.started_at:%Y-%m-%d}_{sha}_plans.json"

    code, out, err = cli("eval", "publish", baseline.report, "--note", "first cut", "--root", root)
    assert code == 0, err
    assert f"recorded {expected}" in out
    assert expected.is_file()
    record = load_record(expected)
    assert (record.kind, record.note, record.config.name) == ("plans", "first cut", "plans")
    assert record.recorded_at == stamp.started_at  # the run's stamp, not the publishing time
    assert record.metrics.execution.rate == 1.0 and len(record.scoreboard.results) == 187  # 37 of probes, 9 clarify
    page = (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "first cut" in page and expected.name in page
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# A repo\n\nIntro.\n\n## Results\n\n<!-- results:start -->")
    assert readme.endswith("<!-- results:end -->\n\nThe end.\n")
    block = readme.split("<!-- results:start -->")[1].split("<!-- results:end -->")[0]
    assert "| plans | chinook | plans |" in block and "100.0%" in block
    first_bytes = expected.read_bytes()

    assert f"updated {root / 'docs' / 'benchmarks.md'}" in out
    assert f"updated {root / 'README.md'} (its results block)" in out

    # The same report again, even with another note: refused, nothing written.
    pages = (root / "docs" / "benchmarks.md").read_bytes()
    code, out, err = cli("eval", "publish", baseline.report, "--note", "again", "--root", root)
    assert code == 2
    assert f"already recorded as {expected.relative_to(root)}; nothing was written" in err
    assert [p.name for p, _ in iter_records(root / "benchmarks")] == [expected.name]
    assert (root / "docs" / "benchmarks.md").read_bytes() == pages

    # Another run of the same day and config takes the next name; the first record is untouched.
    later = report.model_copy(update={"run_stamp": stamp.model_copy(
        update={"started_at": stamp.started_at + timedelta(seconds=1)})})
    other = tmp_path / "eval_plans_later.json"
    later.save(other)
    code, out, err = cli("eval", "publish", other, "--note", "again", "--root", root)
    assert code == 0, err
    second = expected.with_name(expected.stem + "-2.json")
    assert f"recorded {second}" in out
    assert expected.read_bytes() == first_bytes  # never overwritten
    assert load_record(second).note == "again"
    assert [p.name for p, _ in iter_records(root / "benchmarks")] == [expected.name, second.name]
    assert "again" in (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")


def test_publish_in_a_project_without_a_readme_names_only_what_it_wrote(
    baseline: Baseline, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = tmp_path / "demo-like"
    root.mkdir()
    code, out, err = cli("eval", "publish", baseline.report, "--root", root)
    assert code == 0, err
    assert "README" not in out + err and not (root / "README.md").exists()
    lines = out.splitlines()
    assert lines[0].startswith(f"recorded {root / 'benchmarks' / 'plans'}")
    assert lines[1:] == [f"updated {root / 'docs' / 'benchmarks.md'}"]


def test_a_record_carries_the_engine_s_commit_and_the_project_s_apart(
    demo_project: Path, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """Spec 000: ``git_commit`` is the engine's (found from the installed package), whatever folder
    the run is made in; the project folder's own commit is ``project_git_commit``."""
    from nl2sql_assets.paths import git_info

    engine_commit, _ = git_info()  # this editable checkout's HEAD
    assert engine_commit != "unknown"
    argv = ["--config", demo_project / "nl2sql.yaml", "eval", "run", "--mode", "plans", "--cases", "chinook_010"]
    code, _, err = cli(*argv)
    assert code == 0, err
    stamp = load_report(demo_project / "eval_plans.json").run_stamp
    assert (stamp.git_commit, stamp.project_git_commit) == (engine_commit, "unknown")  # a demo folder outside git

    git = shutil.which("git")
    assert git is not None
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    for step in (["init", "-q"], ["add", "nl2sql.yaml", "evals.yaml", "suites"], ["commit", "-q", "-m", "demo"]):
        subprocess.run([git, *step], cwd=demo_project, env=env, check=True, capture_output=True)
    head = subprocess.run([git, "rev-parse", "HEAD"], cwd=demo_project, capture_output=True, text=True,
                          check=True).stdout.strip()
    code, _, err = cli(*argv)
    assert code == 0, err
    stamp = load_report(demo_project / "eval_plans.json").run_stamp
    assert (stamp.git_commit, stamp.project_git_commit, stamp.project_git_dirty) == (engine_commit, head, False)


# ================================================================ configs and the Dagster pipeline



def test_configs_add_registers_a_partition_and_writes_no_secret(
    demo_project: Path, dagster_home: Path, monkeypatch: pytest.MonkeyPatch,
    cli: Callable[..., tuple[int, str, str]]
) -> None:
    config_path = demo_project / "nl2sql.yaml"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-on-disk")
    code, out, err = cli("--config", config_path, "configs", "add", "my.cfg", "--llm", "gpt-5.4")
    assert code == 0, err
    assert "config 'my.cfg' (full) registered" in out
    written = demo_project / "configs" / "my.cfg.yaml"
    assert f"wrote {written}: the project's configuration, meant to be committed" in out
    text = written.read_text(encoding="utf-8")
    assert "openai/gpt-5.4" in text
    assert "sk-test-never-on-disk" not in text  # the key stays a reference to the environment
    assert "${env:OPENAI_API_KEY" in text
    mode, llm = resolve_config("my.cfg", load_config(config_path))
    assert mode == "full" and llm is not None and llm.default is not None
    assert (llm.default.model, llm.default.api_key) == ("openai/gpt-5.4", "sk-test-never-on-disk")

    code, out, err = cli("--config", config_path, "configs", "add", "my.cfg", "--llm", "gpt-5.4")
    assert code == 0 and "was already registered" in out
    code, out, err = cli("--config", config_path, "configs", "add", "bad|name")
    assert code == 2
    assert "invalid config name 'bad|name'" in err
    code, out, err = cli("--config", config_path, "configs", "list")
    assert code == 0
    assert "my.cfg" in out.split() and "bad|name" not in out
    for reserved in ("plans", "retrieval", "default"):  # an llm section under these names would never run
        code, out, err = cli("--config", config_path, "configs", "add", reserved, "--llm", "gpt-5.4")
        assert code == 2 and "is reserved" in err
        assert not (demo_project / "configs" / f"{reserved}.yaml").exists()


def test_pipeline_run_without_chinook_says_what_to_do_and_starts_no_run(
    demo_project: Path, dagster_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    cli: Callable[..., tuple[int, str, str]]
) -> None:
    import dagster as dg

    from nl2sql_assets.datasources import chinook

    (demo_project / "data" / "chinook.sqlite").unlink()
    monkeypatch.delenv("NL2SQL_CHINOOK", raising=False)
    monkeypatch.setenv("NL2SQL_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(chinook, "CHINOOK_URL", "http://127.0.0.1:9/Chinook_Sqlite.sqlite")  # nothing listens
    monkeypatch.setenv("NL2SQL_COMMAND", "bash scripts/main")
    code, out, err = cli("--config", demo_project / "nl2sql.yaml", "pipeline", "run")
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) <= 4, err
    assert "downloading it once from http://127.0.0.1:9/" in lines[0]
    assert "error: no Chinook database: NL2SQL_CHINOOK is not set, none is cached at" in err
    assert "bash scripts/main --chinook /path/to/Chinook_Sqlite.sqlite" in err
    assert "NL2SQL_CHINOOK=/path/to/Chinook_Sqlite.sqlite bash scripts/main" in err
    assert "Traceback" not in err
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        assert instance.get_runs() == []  # nothing for the UI to show as failed


def test_pipeline_run_materialises_the_key_free_evaluation(
    demo_project: Path, dagster_home: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    # The repository's committed records, each of a CLI run of all three suites: Dagster gates
    # each suite's board alone, against that suite's cases in them.
    shutil.rmtree(demo_project / "benchmarks")
    shutil.copytree(Path(__file__).resolve().parents[2] / "benchmarks", demo_project / "benchmarks")
    code, out, err = cli("--config", demo_project / "nl2sql.yaml", "pipeline", "run")
    assert code == 0, out + err
    # each suite's line says what its cases measure, in words a reader takes at face value
    assert "scoreboard chinook/plans: execution accuracy 100.0% (141/141, 95% CI " in out
    assert re.search(r"scoreboard chinook/plans: [^\n]*; lenient 100\.0% \(141/141", out), out
    assert re.search(r"scoreboard chinook_policy/plans: no question runs;[^\n]* policy precision 100\.0%, recall "
                     r"100\.0% \(TP \d+, FP 0, FN 0", out), out
    assert "scoreboard chinook_clarify/retrieval: no case of this suite runs in mode retrieval" in out, out
    assert "n/a" not in "\n".join(line for line in out.splitlines() if line.startswith("scoreboard ")), out
    for suite in ("chinook", "chinook_policy", "chinook_clarify"):
        for config in ("plans", "retrieval"):
            assert f"check passed: {suite}/scoreboards[{config}]:regression_gate" in out
    assert "FAILED" not in out
    # it ends with where to read the run: the reports, and the UI holding the runs
    assert f"next: the reports across configs are {demo_project / 'warehouse' / 'reports'}" in out
    assert "nl2sql-assets ui" in out.splitlines()[-1]
    assert f"results dashboards in a browser: {demo_project / 'warehouse' / 'dashboards' / '<suite>.html'}" in out
    assert sorted(p.name for p in (demo_project / "warehouse" / "dashboards").glob("*.html")) == [
        "chinook.html", "chinook_clarify.html", "chinook_policy.html"]

