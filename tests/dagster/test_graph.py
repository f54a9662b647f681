"""The asset graph materialised in-process on a demo project: datasets, suites, case runs for
config ``plans`` over two passes, the scoreboard with pass^k and determinism, and the gate."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.partitions import config_pass_key, register_configs


def _run(defs: dg.Definitions, job: str, instance: dg.DagsterInstance, partition=None, run_config=None):
    return defs.resolve_job_def(job).execute_in_process(
        instance=instance, partition_key=partition, run_config=run_config, raise_on_error=False
    )


def _checks_of(result, asset: str) -> list:
    """The check evaluations of one asset (each suite has its own checks)."""
    return [e for e in result.get_asset_check_evaluations() if e.asset_key == dg.AssetKey.from_user_string(asset)]


def _materialized(result) -> dict[str, dict]:
    mats = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    return {"/".join(m.asset_key.path): {k: v.value for k, v in m.metadata.items()} for m in mats}


def test_datasets_job_materialises_snapshots_suites_and_regenerated_rows(demo_project: Path, instance):
    defs = build_defs(demo_project / "nl2sql.yaml")
    result = _run(defs, "datasets_job", instance)
    assert result.success
    mats = _materialized(result)
    assert {"demo_datasets", "chinook/schema_snapshot", "support/schema_snapshot",
            "webanalytics/schema_snapshot", "chinook/suite", "chinook/regenerated_rows",
            "chinook_policy/suite", "chinook_policy/regenerated_rows",
            "chinook_clarify/suite", "chinook_clarify/regenerated_rows"} <= set(mats)

    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.evaluation.suites import suite_digest
    from nl2sql_assets.project import Project

    project = Project.load(demo_project / "nl2sql.yaml")
    with DatasourceRegistry(project.config) as registry:
        assert mats["chinook/schema_snapshot"]["fingerprint"] == registry.snapshot("chinook").fingerprint()
        assert mats["chinook/schema_snapshot"]["tables"] == 11
    assert mats["chinook/suite"]["digest"] == suite_digest(demo_project / "suites" / "chinook.yaml")
    # Spec 000's 47 gold questions; the policy probes and the questions to ask back about are
    # suites of their own, each with its own assets.
    assert mats["chinook/suite"]["approved"] == 47
    assert mats["chinook_policy/suite"]["approved"] == 29
    assert mats["chinook_clarify/suite"]["approved"] == 3
    assert mats["chinook/regenerated_rows"]["failed"] == 0
    assert mats["chinook/regenerated_rows"]["matches_suite_file"] is True
    checks = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {(f"{suite}/regenerated_rows", "suite_file_is_regenerated"): True
                      for suite in ("chinook", "chinook_policy", "chinook_clarify")}


def test_drift_check_fails_when_a_committed_row_is_stale(demo_project: Path, instance):
    suite = demo_project / "suites" / "chinook.yaml"
    text = suite.read_text(encoding="utf-8")
    # chinook_001 counts customers per country; USA has 13 of them. Make the committed row lie.
    assert "customer_count: 13}" in text
    suite.write_text(text.replace("customer_count: 13}", "customer_count: 12}", 1), encoding="utf-8")
    defs = build_defs(demo_project / "nl2sql.yaml")
    result = _run(defs, "datasets_job", instance)
    (evaluation,) = _checks_of(result, "chinook/regenerated_rows")
    assert evaluation.passed is False
    assert evaluation.metadata["stale_cases"].value == ["chinook_001"]


def test_plans_two_passes_give_a_scoreboard_with_pass_k_and_determinism(demo_project: Path, instance):
    defs = build_defs(demo_project / "nl2sql.yaml")
    register_configs(instance, ["plans"])
    assert _run(defs, "datasets_job", instance).success
    for p in (1, 2):
        result = _run(defs, "case_runs_job", instance, config_pass_key("plans", p))
        assert result.success
        mats = _materialized(result)
        meta = mats["chinook/case_runs"]
        assert (meta["failed"], meta["errors"]) == (0, 0)
        assert meta["passed"] == 141  # 47 cases x 3 roles
        # Each suite its own partition: 37 role runs of 29 policy probes; 3 questions to ask back
        # about, for 3 roles (evals.yaml's clarify: true asks them).
        assert (mats["chinook_policy/case_runs"]["passed"], mats["chinook_policy/case_runs"]["failed"]) == (37, 0)
        assert (mats["chinook_clarify/case_runs"]["passed"], mats["chinook_clarify/case_runs"]["failed"]) == (9, 0)
    result = _run(defs, "scoreboards_job", instance, "plans")
    assert result.success
    (thresholds,) = [e for e in _checks_of(result, "chinook_policy/scoreboards") if e.check_name == "thresholds"]
    assert thresholds.passed and thresholds.metadata["measured[min_policy_recall]"].value == 1.0
    assert all(e.passed for e in result.get_asset_check_evaluations())
    boards = _materialized(result)
    board = boards["chinook/scoreboards"]
    assert board["passes"] == 2
    assert board["accuracy"] == 1.0  # execution accuracy, the mode executing SQL
    # the interval in the headline's cell, not as two more plotted numbers
    assert "accuracy_low" not in board and "accuracy_high" not in board
    assert _headline(board)["execution accuracy (95% CI)"] == "100.0% (98.7%–100.0%)"
    assert board["lenient_accuracy"] == 1.0
    assert board["pass_k"] == 1.0
    assert board["determinism"] == 1.0
    assert board["cost_per_case_usd"] == 0.0 and board["latency_p95_s"] > 0
    assert "execution" in board["board"].lower()
    # What the board adds beside accuracy: execution success, coverage; the probes' board has the
    # policy's precision and recall.
    assert board["execution_success"] == 1.0 and board["execution_success[chinook]"] == 1.0
    assert (board["query_count"], board["probe_count"], board["unique_case_count"]) == (47, 0, 47)
    probes = boards["chinook_policy/scoreboards"]
    assert (probes["policy_precision"], probes["policy_recall"], probes["policy_false_negatives"]) == (1.0, 1.0, 0)
    assert (probes["query_count"], probes["probe_count"]) == (0, 29)
    assert "| chinook |" in board["domains"] and "plan cache" in board["isolation"]
    # The table shows the same numbers formatted: percentages with their interval, dollars, seconds.
    headline = {r["measure"]: r["value"] for r in (rec.data for rec in board["headline"].records)}
    assert headline["execution accuracy (95% CI)"] == "100.0% (98.7%–100.0%)"  # 282 runs
    assert headline["pass^2 (cases passed in all 2 passes)"] == "100.0% (97.3%–100.0%)"  # 141 cases
    assert headline["cost per case"] == "$0.0000"
    assert headline["latency p95 (after warm-up)"].endswith(" s")
    # The warehouse answers the same question in SQL.
    from nl2sql_assets.evaluation.history.warehouse import Warehouse

    rows = Warehouse(demo_project / "warehouse").summary("chinook")
    assert [(r["config"], r["pass_index"], r["runs"], r["execution_passed"]) for r in rows] == [
        ("plans", 1, 141, 141), ("plans", 2, 141, 141)]


def test_gate_check_fails_on_a_regression_and_stops_benchmark_records(demo_project: Path, instance, monkeypatch):
    defs = build_defs(demo_project / "nl2sql.yaml")
    register_configs(instance, ["plans"])
    assert _run(defs, "datasets_job", instance).success
    assert _run(defs, "case_runs_job", instance, config_pass_key("plans", 1)).success
    # Record the healthy run as the baseline.
    recorded = _run(defs, "benchmark_records_job", instance, "plans",
                    run_config={"ops": {"chinook__benchmark_records": {"config": {"record": True,
                                                                                   "note": "baseline"}}}})
    assert recorded.success
    records = sorted((demo_project / "benchmarks" / "plans" / "chinook").glob("*.json"))
    assert len(records) == 1

    # Break the engine: the generator now drops every ORDER BY ... LIMIT, so top-N answers go wrong.
    from nl2sql_assets.engine import sqlgen

    real = sqlgen.generate_sql

    def broken(plan, dialect):
        return real(plan.model_copy(update={"limit": None, "offset": None, "order_by": []}), dialect)

    monkeypatch.setattr(sqlgen, "generate_sql", broken)
    import nl2sql_assets.engine.pipeline as pipeline

    monkeypatch.setattr(pipeline, "generate_sql", broken, raising=False)
    assert _run(defs, "case_runs_job", instance, config_pass_key("plans", 1)).success

    result = _run(defs, "benchmark_records_job", instance, "plans",
                  run_config={"ops": {"chinook__benchmark_records": {"config": {"record": True, "note": "x"}}}})
    assert not result.success
    (gate,) = [e for e in _checks_of(result, "chinook/scoreboards") if e.check_name == "regression_gate"]
    assert gate.passed is False
    lost = gate.metadata["lost"].value
    assert lost["plans/execution"], lost
    assert all("@" in key for key in lost["plans/execution"])
    assert gate.metadata["lost_count"].value == len(lost["plans/execution"])
    # benchmark_records did not run: still exactly one record.
    assert "chinook/benchmark_records" not in _materialized(result)
    assert sorted((demo_project / "benchmarks" / "plans" / "chinook").glob("*.json")) == records

    # Materialised on its own (no blocking check in that run), the records asset gates itself.
    records_asset = defs.resolve_assets_def(dg.AssetKey(["chinook", "benchmark_records"]))
    alone = dg.materialize([records_asset], partition_key="plans", instance=instance, raise_on_error=False,
                           run_config={"ops": {"chinook__benchmark_records": {"config": {"record": True,
                                                                                          "note": "x"}}}})
    assert not alone.success
    assert sorted((demo_project / "benchmarks" / "plans" / "chinook").glob("*.json")) == records


def test_scoreboard_report_file_is_a_loadable_eval_report(demo_project: Path, instance):
    defs = build_defs(demo_project / "nl2sql.yaml")
    register_configs(instance, ["plans"])
    assert _run(defs, "datasets_job", instance).success
    assert _run(defs, "case_runs_job", instance, config_pass_key("plans", 1)).success
    assert _run(defs, "scoreboards_job", instance, "plans").success
    data = json.loads((demo_project / "warehouse" / "reports" / "chinook" / "plans.json").read_text())
    from nl2sql_assets.evaluation.reporting.board import EvalReport

    report = EvalReport.model_validate(data)
    assert report.mode == "plans" and report.accuracy == 1.0


def test_schema_index_then_a_retrieval_partition_and_its_scoreboard(demo_project: Path, instance):
    defs = build_defs(demo_project / "nl2sql.yaml")
    keys = {"/".join(k.path) for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"chinook/schema_index", "support/schema_index", "webanalytics/schema_index"} <= keys
    case_runs = defs.resolve_asset_graph().get(dg.AssetKey(["chinook", "case_runs"]))
    assert dg.AssetKey(["chinook", "schema_index"]) in case_runs.parent_keys

    # datasets_job builds the indexes; a second materialisation reuses them untouched.
    first = _materialized(_run(defs, "datasets_job", instance))
    index = first["chinook/schema_index"]
    assert (index["dimensions"], index["reused"]) == (384, False)
    assert index["entries"] == 1 + 12 + 11 + 64 + 11  # description, questions, tables, columns, keys
    path = demo_project / "warehouse" / "schema_index" / "chinook.json"
    assert index["path"] == str(path) and path.is_file()
    stamp = path.stat().st_mtime_ns
    again = _run(defs, "datasets_job", instance)
    assert _materialized(again)["chinook/schema_index"]["reused"] is True and path.stat().st_mtime_ns == stamp

    register_configs(instance, ["retrieval"])
    result = _run(defs, "case_runs_job", instance, config_pass_key("retrieval", 1))
    assert result.success
    meta = _materialized(result)["chinook/case_runs"]
    assert meta["mode"] == "retrieval" and meta["errors"] == 0 and meta["cost_usd"] == 0.0
    assert meta["passed"] + meta["failed"] == 93  # 43 answerable cases x their allowed roles
    assert meta["table_recall"] > 0.8 and 0.0 <= meta["column_recall"] <= 1.0

    # A mode that executes nothing has no lenient accuracy: absent, never 0; its headline accuracy
    # (one key in every mode, so configs share a chart) is the share of case runs that passed.
    assert "lenient_accuracy" not in meta and meta["accuracy"] == round(meta["passed"] / 93, 3)  # 38.7% shown
    # The policy probes and the questions to ask back about have nothing to retrieve: their
    # partitions are empty, say why, and show no rate.
    probes = _materialized(result)["chinook_policy/case_runs"]
    assert (probes["passed"], probes["failed"], probes["left_out[probe]"]) == (0, 0, 37)
    assert probes["nothing_to_run"] == "mode retrieval: it does not run 37 probe case run(s)"
    clarify = _materialized(result)["chinook_clarify/case_runs"]
    assert clarify["nothing_to_run"] == "mode retrieval: no selected case is answerable by a role allowed to read it"
    assert "accuracy" not in probes and "accuracy" not in clarify

    result = _run(defs, "scoreboards_job", instance, "retrieval")
    assert result.success
    board = _materialized(result)["chinook/scoreboards"]
    assert board["case_runs"] == 93 and board["table_recall"] == meta["table_recall"]
    assert {"lenient_accuracy", "pass_k", "determinism"}.isdisjoint(board)
    assert board["accuracy"] == meta["accuracy"]
    assert _headline(board)["case runs that passed (95% CI)"].startswith(f"{board['accuracy'] * 100:.1f}% (")
    assert "Retrieval: table recall" in board["board"] and "Routing: top-1" in board["board"]
    from nl2sql_assets.evaluation.reporting.board import EvalReport

    report = EvalReport.model_validate_json(
        (demo_project / "warehouse" / "reports" / "chinook" / "retrieval.json").read_text(encoding="utf-8"))
    assert report.mode == "retrieval" and report.settings["k_tables"] == 8


def _headline(board: dict) -> dict[str, str]:
    """The scoreboard's headline table: measure -> its formatted cell."""
    return {r.data["measure"]: r.data["value"] for r in board["headline"].records}


def history_charts(metadata: dict) -> dict[str, dict[str, str]]:
    """The history point's charts as the UI draws them: chart title -> {config: its legend's value},
    read from the SVG images inside the Markdown."""
    import base64
    import re
    import xml.etree.ElementTree as ET

    ns = "{http://www.w3.org/2000/svg}"
    out = {}
    for data in re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", metadata["charts"]):
        svg = ET.fromstring(base64.b64decode(data))
        texts = svg.findall(f"{ns}text")
        legend = {}
        for text in texts:
            value = text.find(f"{ns}tspan")
            if value is not None:
                legend[(text.text or "").strip()] = value.text
        out[texts[0].text] = legend
    return out


def test_the_scoreboard_history_plots_each_config_over_time(demo_project: Path, instance):
    """Each scoreboard run adds one point for the config it materialised (another config's old value
    is not recorded again: that drew false steps) and draws every point so far: one chart per
    measure with every config as a series; the table beside it shows every stored board. A measure
    that does not apply to a config's mode is absent from its chart (never 0)."""
    defs = build_defs(demo_project / "nl2sql.yaml")
    register_configs(instance, ["plans", "retrieval"])
    assert _run(defs, "datasets_job", instance).success
    for config in ("plans", "retrieval"):
        assert _run(defs, "case_runs_job", instance, config_pass_key(config, 1)).success
    first = _materialized(_run(defs, "scoreboards_job", instance, "plans"))["chinook/scoreboard_history"]
    assert len(first["latest"].records) == 1
    point = first["point"]["plans"]
    assert point["accuracy"] == 1.0 and point["lenient_accuracy"] == 1.0
    assert "pass_k" not in point  # one pass: no pass^k yet
    charts = history_charts(first)
    accuracy = "accuracy (strict), with its 95% Wilson interval"
    assert charts[accuracy] == {"plans": "100.0%"} and charts["lenient accuracy"] == {"plans": "100.0%"}
    assert not [title for title in charts if title.startswith("pass^k")]

    second = _materialized(_run(defs, "scoreboards_job", instance, "retrieval"))["chinook/scoreboard_history"]
    assert len(second["latest"].records) == 2  # the table: every stored board
    assert list(second["point"]) == ["retrieval"]  # the new point: retrieval's only
    retrieval = second["point"]["retrieval"]
    assert 0 < retrieval["accuracy"] < 1
    assert retrieval["accuracy_low"] < retrieval["accuracy"] < retrieval["accuracy_high"]
    assert "lenient_accuracy" not in retrieval and retrieval["cost_per_case_usd"] == 0.0
    charts = history_charts(second)
    # both configs on one accuracy chart; lenient accuracy is plans' only, never a retrieval 0
    assert charts[accuracy] == {"plans": "100.0%", "retrieval": f"{retrieval['accuracy'] * 100:.1f}%"}
    assert charts["lenient accuracy"] == {"plans": "100.0%"}
    assert set(charts["cost per case"]) == {"plans", "retrieval"}
    rows = {r.data["config"]: r.data for r in second["latest"].records}
    assert rows["plans"]["accuracy (95% CI)"] == "100.0% (97.3%–100.0%)"
    assert rows["retrieval"]["lenient"] == "—" and rows["retrieval"]["cost per case"] == "$0.0000"

    # The suite's dashboard, rebuilt with the scoreboards: one page holding both configs' boards.
    import json
    import re

    dash = _materialized(_run(defs, "scoreboards_job", instance, "retrieval"))["chinook/dashboard"]
    page = Path(dash["path"]).read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="dashboard-data">(.*?)</script>', page,
                                re.DOTALL).group(1))
    stored = {r["config"]: r for r in data["runs"] if r["source"] == "warehouse"}
    assert set(stored) == {"plans", "retrieval"} and {r["suite"] for r in data["runs"]} == {"chinook"}
    assert stored["retrieval"]["strict"].count("p") == round(retrieval["accuracy"] * 93)
    assert dash["runs"] == len(data["runs"]) and dash["open"].startswith("file://")
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.DOTALL)  # the page around its scripts
    assert not re.search(r"\b(src|href)=", markup)  # it loads nothing (the browser test watches the network)

    # Three materialisations in the instance, each one config's point.
    history = instance.fetch_materializations(dg.AssetKey(["chinook", "scoreboard_history"]), limit=10).records
    assert [list(r.asset_materialization.metadata["point"].value) for r in history] == [
        ["retrieval"], ["retrieval"], ["plans"]]


def test_a_failed_run_stops_the_key_free_pipeline_before_the_runs_that_depend_on_it(demo_project: Path,
                                                                                      instance):
    from nl2sql_assets.defs.keyfree import run_keyfree

    (demo_project / "suites" / "chinook.yaml").write_text("cases: [\n", encoding="utf-8")  # broken YAML
    run = run_keyfree(demo_project / "nl2sql.yaml", instance)
    assert not run.ok and run.stopped_after == "datasets_case_runs_job[plans|1]"
    assert run.runs == {"datasets_case_runs_job[plans|1]": False}
    assert len(instance.get_runs()) == 1  # no scoreboards failing after it
    # The datasets and the first case runs share that run: the case runs were skipped, not failed.
    failed = {e.step_key for e in instance.all_logs(instance.get_runs()[0].run_id, of_type=dg.DagsterEventType.STEP_FAILURE)}
    assert "chinook__case_runs" not in failed and failed
    assert instance.get_latest_materialization_event(dg.AssetKey(["chinook", "case_runs"])) is None


def test_a_provider_outage_fails_the_partition_with_the_breakers_message(demo_project: Path, instance,
                                                                         monkeypatch):
    import yaml

    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
    from nl2sql_assets.evaluation.suites import load_suite

    monkeypatch.delenv("CI", raising=False)
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    project_file = demo_project / "nl2sql.yaml"  # one case run at a time: the breaker's count is exact
    project_yaml = yaml.safe_load(project_file.read_text())
    project_yaml.setdefault("settings", {})["max_concurrency"] = 1
    project_file.write_text(yaml.safe_dump(project_yaml))
    defs = build_defs(demo_project / "nl2sql.yaml")
    assert _run(defs, "datasets_job", instance).success
    with FlakyLLMServer(cases, EventBus(), behaviour="quota") as server:
        (demo_project / "configs").mkdir(exist_ok=True)
        (demo_project / "configs" / "flaky.yaml").write_text(yaml.safe_dump({
            "default": {"model": "openai/fake-provider", "api_base": server.base_url, "api_key": "x",
                        "max_retries": 0},
            "prices": {"fake-provider": {"input": 1.0, "output": 2.0, "source": "test"}}}))
        defs = build_defs(demo_project / "nl2sql.yaml")
        register_configs(instance, ["flaky"])
        result = _run(defs, "case_runs_job", instance, config_pass_key("flaky", 1))
    assert not result.success
    failures = {e.step_key: e for e in result.all_events if e.event_type_value == "STEP_FAILURE"}
    assert "chinook__case_runs" in failures  # (and each other suite whose questions ask the model)
    failure = failures["chinook__case_runs"]
    message = str(failure.event_specific_data.error_display_string)
    assert "incomplete" in message and "5 quota" in message
    assert "HTTP 402" in message and "openai/fake-provider" in message
    assert "sk-live" not in message
    assert "chinook/case_runs" not in _materialized(result)  # nothing stored as the model's numbers


def test_the_key_free_pipeline_streams_the_case_records_in_two_runs(demo_project: Path, instance, monkeypatch):
    from nl2sql_assets.defs.keyfree import run_keyfree
    from nl2sql_assets.project import Evals

    held = []
    run_cases = Evals.run_cases

    def spy(self, request, **kwargs):
        runs = run_cases(self, request, **kwargs)
        held.append((len(runs.records), len(runs.order)))
        return runs

    monkeypatch.setattr(Evals, "run_cases", spy)
    run = run_keyfree(demo_project / "nl2sql.yaml", instance, configs=("plans",))
    assert run.ok, run.runs
    assert run.runs == {"datasets_case_runs_job[plans|1]": True, "scoreboards_job[plans]": True}
    # the case runs' run says what it uses: mode plans, no paid model
    (case_run,) = [r for r in instance.get_runs() if r.job_name == "datasets_case_runs_job"]
    assert (case_run.tags["nl2sql/mode"], case_run.tags["nl2sql/llm"]) == ("plans", "false")
    # each run is filed as a UI launch is: its job in the code location (the job page, the jobs list
    # and the Overview timeline find runs by this origin), the partition tags as the UI sets them
    for made in instance.get_runs():
        origin = made.remote_job_origin
        assert origin is not None, f"{made.job_name} has no job origin"
        assert (origin.location_name, origin.repository_origin.repository_name, origin.job_name) == (
            "nl2sql", "__repository__", made.job_name)
        assert made.tags[".dagster/repository"] == "__repository__@nl2sql"
    assert case_run.tags["dagster/partition"] == "plans|1"
    assert run.checks == {  # the regenerated rows' check is unpartitioned; every suite has its checks
        check: True for suite in ("chinook", "chinook_policy", "chinook_clarify")
        for check in (f"{suite}/regenerated_rows:suite_file_is_regenerated",
                      f"{suite}/scoreboards[plans]:regression_gate", f"{suite}/scoreboards[plans]:thresholds")}
    # The case_runs asset kept no record: each went to the warehouse as it finished.
    assert sorted(held) == [(0, 9), (0, 37), (0, 141)]  # the three suites' partitions
    folder = demo_project / "warehouse" / "case_records" / "suite=chinook" / "config=plans"
    assert sorted(p.name for p in folder.iterdir()) == ["pass=1.jsonl", "pass=1.meta.json"]  # no .partial left
    stored = [json.loads(line) for line in (folder / "pass=1.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(stored) == 141 and all(r["config"] == "plans" and r["pass_index"] == 1 for r in stored)
    assert run.boards["chinook/plans"].configs["plans"].accuracy.execution.total == 141
    # One run holds the datasets (unpartitioned, as from datasets_job) and the partition's case runs.
    case_runs = instance.get_latest_materialization_event(dg.AssetKey(["chinook", "case_runs"]))
    datasets = instance.get_latest_materialization_event(dg.AssetKey("demo_datasets"))
    assert case_runs.run_id == datasets.run_id
    assert case_runs.dagster_event.partition == "plans|1" and datasets.dagster_event.partition is None
    meta = case_runs.asset_materialization.metadata
    assert (meta["passed"].value, meta["failed"].value, meta["errors"].value) == (141, 0, 0)
