"""Mode full against providers on a bad day (``flaky_llm``: real HTTP, litellm in between): every
token counted, a usage-less provider estimated and flagged, the cap held within one case, an
outage stopped early and kept apart from the model's failures, never read as a regression."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.config import ApiKind, LLMConfig, PriceRow, ProjectConfig
from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.evaluation.reporting import EvalReport
from nl2sql_assets.evaluation.reporting.gate import compare
from nl2sql_assets.evaluation.running.flaky_llm import Behaviour, FlakyLLMServer
from tests.unit.test_runner import run_eval, small_cases, small_project

MODEL = "fake-provider"
PRICE = PriceRow(input=2.0, cached_input=0.5, cache_write=2.5, output=8.0, source="test")
SECRET = "sk-live-0123456789abcdefghijklmnop"  # the 402's message echoes it


def _usd(prompt: int, completion: int) -> float:
    return (prompt * PRICE.input + completion * PRICE.output) / 1_000_000


@pytest.fixture
def project(tmp_path: Path, chinook_path: Path) -> ProjectConfig:
    """One case run at a time: the breaker's counts and the cap's one-case promise are exact then
    (concurrent runs are held to ``max_concurrency`` cases' worth: tests/unit/test_cap_loop.py)."""
    config = small_project(tmp_path, chinook_path)
    config.settings.max_concurrency = 1
    return config


class Provider:
    def __init__(self, chinook: Path, api: ApiKind) -> None:
        self.chinook = chinook
        self.api = api
        self.servers: list[FlakyLLMServer] = []

    def __call__(self, behaviour: Behaviour, **kw: Any) -> tuple[EventBus, FlakyLLMServer, LLMConfig]:
        bus = kw.pop("bus", None) or EventBus()
        server = FlakyLLMServer(small_cases(self.chinook), bus, behaviour=behaviour, synthesizer="rows",
                                hang_s=kw.pop("hang_s", 1.5), warmup_s=kw.pop("warmup_s", 0.0),
                                delay_s=kw.pop("delay_s", 0.0)).start()
        self.servers.append(server)
        base = server.llm_config()
        assert base.default is not None
        default = base.default.model_copy(update={"model": f"openai/{MODEL}", "timeout_s": kw.pop("timeout_s", 5),
                                                  "max_retries": kw.pop("max_retries", 2),
                                                  "api": self.api})
        return bus, server, base.model_copy(update={"default": default, "prices": {MODEL: PRICE}})


@pytest.fixture(params=["litellm", "openai-compatible"])
def provider(chinook_path: Path, request: pytest.FixtureRequest) -> Iterator[Provider]:
    """A fake provider, reached through litellm or through the lean OpenAI-compatible client:
    every fault must read the same on both paths."""
    made = Provider(chinook_path, request.param)
    yield made
    for server in made.servers:
        server.stop()


def _full(project: ProjectConfig, bus: EventBus, llm: LLMConfig, cap: float = 10.0) -> EvalReport:
    return run_eval(project, mode="full", llm=llm, bus=bus, max_cost_usd=cap, curated=False)


def _cap_held(report: EvalReport, cap: float) -> None:
    board = report.first_board
    assert board is not None
    costs = [r.cost_usd for r in board.results if r.cost_usd is not None]
    assert report.stopped == "max_cost"
    assert report.spent > 0
    assert report.spent - max(costs) <= cap  # passed by at most one case


# ---------------------------------------------------------------- what is counted


def test_a_well_behaved_provider_is_priced_on_its_measured_tokens(project: ProjectConfig, provider: Provider) -> None:
    bus, server, llm = provider("ok")
    report = _full(project, bus, llm)
    board = report.first_board
    assert board is not None and report.stopped is None and not report.incomplete
    assert board.cost.token_source == "measured" and board.cost.estimated_calls == 0
    assert report.spent == pytest.approx(_usd(server.billed_prompt_tokens, server.billed_completion_tokens))
    assert board.cost.total_usd == pytest.approx(report.spent)  # the board's total is what was spent
    assert all(r.token_source == "measured" and r.cost_usd for r in board.results)


def test_a_429_then_ok_is_billed_once_and_measured(project: ProjectConfig, provider: Provider) -> None:
    bus, server, llm = provider("rate_limit_once")
    report = _full(project, bus, llm)
    board = report.first_board
    assert board is not None and not report.incomplete and report.env_errors == {}
    assert server.received >= 2 * server.requests  # every call was refused once, then answered
    assert board.cost.token_source == "measured"
    assert report.spent == pytest.approx(_usd(server.billed_prompt_tokens, server.billed_completion_tokens))
    assert board.accuracy.execution.passed == board.accuracy.execution.total > 0


def test_a_usage_less_provider_is_estimated_flagged_and_close(project: ProjectConfig, provider: Provider) -> None:
    bus, server, llm = provider("no_usage")
    report = _full(project, bus, llm)
    board = report.first_board
    assert board is not None
    assert board.cost.token_source == "estimated" and board.cost.unknown_cost_calls == 0
    assert board.cost.estimated_calls == server.requests  # every call, counted exactly
    billed = _usd(server.billed_prompt_tokens, server.billed_completion_tokens)
    # Our tokenizer is not the provider's: close, not equal.
    assert report.spent == pytest.approx(billed, rel=0.25)
    assert report.spent != pytest.approx(billed, rel=1e-6)
    assert all(r.cost_usd is not None and r.cost_usd > 0 for r in board.results if r.token_source)


@pytest.mark.parametrize("behaviour", ["ok", "rate_limit_once", "no_usage", "malformed"])
def test_the_cap_holds_within_one_case(project: ProjectConfig, provider: Provider, behaviour: Behaviour) -> None:
    bus, _, llm = provider(behaviour)
    _cap_held(_full(project, bus, llm, cap=0.02), 0.02)


# ---------------------------------------------------------------- outages apart from failures


@pytest.mark.parametrize(("behaviour", "kind", "status"), [
    ("quota", "quota", "402"), ("server_error", "server", "500"), ("timeout", "timeout", None)])
def test_an_outage_stops_the_run_and_is_not_the_models_failure(project: ProjectConfig, provider: Provider,
                                                               behaviour: Behaviour, kind: str,
                                                               status: str | None) -> None:
    bus, server, llm = provider(behaviour, max_retries=1, timeout_s=0.5, hang_s=1.0)
    report = _full(project, bus, llm)
    board = report.first_board
    assert board is not None
    assert report.incomplete and report.stopped == "env_errors"
    assert report.env_errors == {kind: 5} and board.env_errors == {kind: 5}  # the breaker's default: 5 in a row
    assert len(board.results) == 5  # 14 planned, stopped after the fifth
    assert {r.error_code for r in board.results} == {"PROVIDER_ERROR"}
    # Left out of every accuracy: no verdict on the model.
    assert board.accuracy.execution.total == 0 and board.accuracy.overall.total == 0
    assert report.breaker is not None
    assert "config 'default'" in report.breaker and f"openai/{MODEL}" in report.breaker
    assert server.base_url in report.breaker
    if status:
        assert f"HTTP {status}" in report.breaker
    assert SECRET not in report.model_dump_json()
    # An outage is never compared, so never a regression.
    bus_ok, _, llm_ok = provider("ok")
    baseline = _full(project, bus_ok, llm_ok)
    result = compare(report, [baseline])
    assert not result.ok and result.regressions == [] and result.compared == []
    assert result.series_break is not None and "incomplete" in result.series_break


def test_the_breaker_counts_each_config_apart(project: ProjectConfig, provider: Provider) -> None:
    bus, _, good = provider("ok")
    _, _, down = provider("quota", bus=bus, max_retries=0)
    report = run_eval(project, mode="full", llm={"good": good, "down": down}, bus=bus, max_cost_usd=10,
                      curated=False)
    # The configs take turns case by case: the good one's successes do not reset the other's streak.
    assert report.stopped == "env_errors" and report.incomplete
    assert report.configs["down"].env_errors == {"quota": 5} and report.configs["good"].env_errors == {}
    assert len(report.configs["good"].results) == 5
    assert report.configs["good"].accuracy.execution.passed == report.configs["good"].accuracy.execution.total
    assert report.breaker is not None and "config 'down'" in report.breaker


def test_a_malformed_answer_is_the_models_failure(project: ProjectConfig, provider: Provider) -> None:
    bus, _, llm = provider("malformed")
    report = _full(project, bus, llm)
    board = report.first_board
    assert board is not None
    assert not report.incomplete and report.env_errors == {} and report.stopped is None
    assert board.accuracy.execution.total > 0 and board.accuracy.execution.passed == 0
    assert {r.error_code for r in board.results if r.kind == "answer"} == {"LLM_ERROR"}
    assert board.cost.token_source == "measured" and report.spent > 0  # bad answers are billed too


# ---------------------------------------------------------------- latency without warm-up


def test_a_slow_first_connection_is_warm_up_not_latency(project: ProjectConfig, provider: Provider) -> None:
    bus, _, llm = provider("ok", warmup_s=2.0)
    report = _full(project, bus, llm)
    board = report.first_board
    assert board is not None
    first = board.results[0]
    assert first.warmup and first.latency_s >= 2.0  # the first case run waited for the warm-up
    assert [r.warmup for r in board.results[1:]] == [False] * (len(board.results) - 1)
    lat = board.latency
    assert lat.warmup_runs == 1 and lat.warmup_max >= 2.0
    # The figures after warm-up: the 2 s is in none of them.
    assert lat.p50 < 1.0 and lat.p95 < 1.0 and lat.max < 2.0
    assert lat.by_node["resolver"].max < 2.0
    # The gold SQL alone, beside each question case: milliseconds, far under the engine's time.
    timed = [r for r in board.results if r.oracle_latency_s is not None]
    assert timed and all(0 < r.oracle_latency_s < r.latency_s for r in timed)
    assert lat.oracle_p50 is not None and lat.oracle_p50 < lat.p50


# ---------------------------------------------------------------- the command line


def test_an_outage_exits_4_from_the_command_line_and_is_not_published_unless_asked(
        demo_project: Path, chinook_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from nl2sql_assets.cli import main
    from nl2sql_assets.evaluation.history.records import iter_records
    from nl2sql_assets.evaluation.suites import load_suite

    monkeypatch.delenv("CI", raising=False)
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    project_file = demo_project / "nl2sql.yaml"  # one case run at a time: the breaker's count is exact
    project_yaml = yaml.safe_load(project_file.read_text())
    project_yaml.setdefault("settings", {})["max_concurrency"] = 1
    project_file.write_text(yaml.safe_dump(project_yaml))

    def run(behaviour: Behaviour, out: Path, *extra: str) -> int:
        with FlakyLLMServer(cases, EventBus(), behaviour=behaviour) as server:
            llm_file = demo_project / f"{behaviour}.yaml"
            llm_file.write_text(yaml.safe_dump({
                "default": {"model": f"openai/{MODEL}", "api_base": server.base_url, "api_key": "x",
                            "max_retries": 1},
                "prices": {MODEL: PRICE.model_dump()}}))
            return main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--llm",
                         f"default={llm_file}", "--max-cost", "1", "--cases", "chinook_001", "chinook_002",
                         "--out", str(out), *extra])

    baseline = demo_project / "eval_ok.json"
    assert run("ok", baseline) == 0
    capsys.readouterr()
    out = demo_project / "eval_full.json"
    code = run("quota", out, "--baseline", str(baseline))
    err = capsys.readouterr().err
    assert code == 4, err
    assert "INCOMPLETE" in err and "5 quota" in err
    assert "circuit breaker" in err and "HTTP 402" in err and SECRET not in err
    assert "REGRESSION" not in err  # an outage is never read as one
    report = EvalReport.load(out)  # the report is kept
    assert report.incomplete and report.stopped == "env_errors"
    # Not recorded unless asked for explicitly.
    assert main(["eval", "publish", str(out), "--root", str(demo_project)]) == 2
    assert "incomplete" in capsys.readouterr().err
    assert list(iter_records(demo_project / "benchmarks")) == []
    assert main(["eval", "publish", str(out), "--root", str(demo_project), "--allow-incomplete"]) == 0
    [(_, record)] = list(iter_records(demo_project / "benchmarks"))
    assert record.incomplete


def test_a_run_of_nothing_but_outages_has_no_rate_anywhere(demo_project: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Every case run an outage: no accuracy was measured, so the report, the board, the printed
    line, the record, the results page and the Dagster metadata say so (null, n/a, no point),
    never 0."""
    import json

    import yaml

    from nl2sql_assets.cli import main
    from nl2sql_assets.defs.thresholds import board_metadata
    from nl2sql_assets.evaluation.history.records import iter_records
    from nl2sql_assets.evaluation.reporting import headline_metrics
    from nl2sql_assets.evaluation.suites import load_suite

    monkeypatch.delenv("CI", raising=False)
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    with FlakyLLMServer(cases, EventBus(), behaviour="quota") as server:
        llm_file = demo_project / "quota.yaml"
        llm_file.write_text(yaml.safe_dump({
            "default": {"model": f"openai/{MODEL}", "api_base": server.base_url, "api_key": "x", "max_retries": 0},
            "prices": {MODEL: PRICE.model_dump()}}))
        out = demo_project / "eval_full.json"
        code = main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--llm", f"default={llm_file}",
                     "--max-cost", "1", "--cases", "chinook_001", "chinook_002", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 4, printed.err
    assert "execution accuracy" not in printed.out or "n/a" in printed.out
    assert "0.0%" not in printed.out
    data = json.loads(out.read_text())
    assert data["accuracy"] is None and data["accuracy_generated"] is None
    report = EvalReport.load(out)
    board = report.first_board
    assert board is not None and board.accuracy.execution.total == 0
    assert board.accuracy.execution.rate is None and board.accuracy.overall.rate is None
    assert "accuracy" not in headline_metrics(board, "full")  # a rate over nothing is absent
    assert "execution_success" not in board_metadata(report)
    assert main(["eval", "publish", str(out), "--root", str(demo_project), "--allow-incomplete"]) == 0
    [(_, record)] = list(iter_records(demo_project / "benchmarks"))
    assert record.metrics.execution.rate is None and record.metrics.execution_lenient.rate is None
    page = (demo_project / "docs" / "benchmarks.md").read_text()
    assert "n/a" in page and "0.0% (" not in page


def test_environment_errors_have_their_own_column_per_role(project: ProjectConfig, provider: Provider) -> None:
    bus, _, llm = provider("quota", max_retries=0)
    report = _full(project, bus, llm)
    board = report.first_board
    assert board is not None
    outages = sum(1 for r in board.results if r.env_error is not None)
    assert outages == 5
    assert board.summary.total["env_error"] == outages and board.summary.total["fail"] == 0
    assert sum(counts["env_error"] for counts in board.summary.roles.values()) == outages
    assert all(counts["fail"] == 0 for counts in board.summary.roles.values())
    from nl2sql_assets.evaluation.reporting import to_markdown

    assert f"0 fail, 0 error, {outages} environment error" in to_markdown(board)


def test_execution_success_is_held_at_1_by_default(demo_project: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Spec 003's default: a run whose questions' SQL did not run fails (exit 1), unless evals.yaml or
    the flag says otherwise; a probe-only run is exempt."""
    import yaml

    from nl2sql_assets.cli import main
    from nl2sql_assets.evaluation.suites import load_suite

    monkeypatch.delenv("CI", raising=False)
    evals_file = demo_project / "evals.yaml"
    evals = yaml.safe_load(evals_file.read_text())
    evals.pop("thresholds", None)  # nothing said: the default holds
    evals_file.write_text(yaml.safe_dump(evals))
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    with FlakyLLMServer(cases, EventBus(), behaviour="malformed") as server:
        llm_file = demo_project / "malformed.yaml"
        llm_file.write_text(yaml.safe_dump({
            "default": {"model": f"openai/{MODEL}", "api_base": server.base_url, "api_key": "x", "max_retries": 0},
            "prices": {MODEL: PRICE.model_dump()}}))

        def run(*extra: str) -> int:
            return main(["--config", str(demo_project), "eval", "run", "--mode", "full", "--llm",
                         f"default={llm_file}", "--max-cost", "1", "--cases", "chinook_001", "chinook_002",
                         "--roles", "admin", "--out", str(demo_project / "eval_full.json"), *extra])

        assert run() == 1
        err = capsys.readouterr().err
        assert "THRESHOLD: min_execution_success >= 100.0% [default]: MISSED, measured 0.0%" in err
        assert run("--min-execution-success", "0") == 0  # the flag lowers it
        capsys.readouterr()
        evals["thresholds"] = {"min_execution_success": None}  # evals.yaml turns it off
        evals_file.write_text(yaml.safe_dump(evals))
        assert run() == 0
