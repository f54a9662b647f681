"""The Dagster UI in a real (headless) Chromium, as a user meets it: the lineage titles every node by
what it is (no two alike, groups by stage), the user launches the key-free ``plans`` evaluation by
clicking Materialize on the case runs and then on the scoreboard, twice, reads the scoreboard's
headline, sees the history plotted over time, and after a doctored baseline reads the gate's failure
with the lost cases listed.

Runs are launched by clicking through the UI's partition dialog; waiting for a run to finish, and
checking what a chart was drawn from, ask the UI's own GraphQL endpoint (what its pages poll too).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import DagsterUI

PAGE_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 150.0
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}
ASSET_MATERIALIZATIONS = """
query History($path: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetMaterializations(limit: 20) { timestamp metadataEntries { label } } }
  }
}
"""
SENSOR_TICKS = """
query Ticks($name: String!) {
  sensorOrError(sensorSelector: {repositoryLocationName: "nl2sql", repositoryName: "__repository__",
                                 sensorName: $name}) {
    __typename
    ... on Sensor { sensorState { ticks(limit: 5) { status timestamp } } }
  }
}
"""
SCOREBOARD_BY_CONFIG = """
query ByConfig($path: [String!]!, $partitions: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetMaterializations(partitions: $partitions) { partition metadataEntries {
      label ... on FloatMetadataEntry { floatValue } } } }
  }
}
"""
RUN_ORIGINS = """
query RunOrigins {
  runsOrError(limit: 25) {
    ... on Runs { results { jobName repositoryOrigin { repositoryLocationName repositoryName } } }
  }
}
"""
JOB_RUNS = """
query JobRuns($job: String!) {
  pipelineOrError(params: {pipelineName: $job, repositoryName: "__repository__", repositoryLocationName: "nl2sql"}) {
    __typename
    ... on Pipeline { runs(limit: 10) { runId status } }
  }
}
"""
RECENT_RUNS = """
query RecentRuns {
  runsOrError(limit: 25) {
    __typename
    ... on Runs { results { runId status jobName tags { key value } } }
    ... on PythonError { message }
  }
}
"""


class Page:
    """A thin page object over the Selenium driver: explicit waits only, stale nodes re-found."""

    def __init__(self, driver: Any, base_url: str, screenshot_dirs: list[Path]) -> None:
        from selenium.common.exceptions import StaleElementReferenceException

        self.driver = driver
        self.base_url = base_url
        self.screenshot_dirs = screenshot_dirs
        self._ignored = (StaleElementReferenceException,)

    def wait(self, condition: Callable[[Any], Any], timeout: float = PAGE_TIMEOUT_S, message: str = "") -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout, poll_frequency=0.25,
                             ignored_exceptions=self._ignored).until(condition, message)

    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def body_text(self) -> str:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.TAG_NAME, "body").text

    def visible(self, xpath: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return [e for e in self.driver.find_elements(By.XPATH, xpath) if e.is_displayed()]

    def click(self, xpath: str, timeout: float = PAGE_TIMEOUT_S) -> None:
        """Click the first visible match once it takes the click (React re-renders replace nodes)."""
        from selenium.common.exceptions import (
            ElementClickInterceptedException,
            ElementNotInteractableException,
        )

        def attempt(_driver: Any) -> bool:
            found = self.visible(xpath)
            if not found:
                return False
            try:
                found[0].click()
            except (ElementClickInterceptedException, ElementNotInteractableException):
                return False
            return True

        self.wait(attempt, timeout, f"nothing clickable at {xpath}")

    def screenshot(self, name: str) -> list[Path]:
        paths = [d / name for d in self.screenshot_dirs]
        for path in paths:
            self.driver.save_screenshot(str(path))
        return paths


def zoom_out_until(page: Page, condition: Callable[[], bool], what: str, steps: int = 4) -> None:
    """A lineage opens zoomed in on its middle and draws only the nodes in view: zoom out one step
    at a time until ``condition`` holds (a step too far draws nodes without their names)."""
    from selenium.common.exceptions import TimeoutException

    for step in range(steps + 1):
        try:
            page.wait(lambda d: condition(), timeout=5.0)
            return
        except TimeoutException:
            if step == steps:
                break
            page.click("//button[.//*[@aria-label='zoom_out']]")
    page.screenshot("failure_zoom.png")
    raise AssertionError(f"not shown after zooming out {steps} steps: {what}")


def pick_partition(page: Page, selector_index: int, key: str) -> None:
    """Open one dimension's partition selector in the launch dialog, tick ``key``, close the list."""
    from selenium.webdriver.common.by import By

    selectors = "//*[@role='dialog']//*[contains(@class, 'TagSelector_tagSelectorContainer')]"
    page.wait(lambda d: len(d.find_elements(By.XPATH, selectors)) > selector_index,
              message="partition selectors in the launch dialog")
    page.click(f"({selectors})[{selector_index + 1}]")
    page.click(f"//*[@role='menuitem'][.//*[@title='{key}']]")
    # Clicking the dialog's title closes the open list without closing the dialog (Escape would).
    page.click("//*[@role='dialog']//*[contains(@class, 'dialogHeaderText')]")
    page.wait(lambda d: not page.visible("//*[@role='menuitem']"), message="the partition list to close")


def materialize_one_partition(page: Page, asset: str, keys: list[str], seen: set[str]) -> str:
    """On the asset's page: Materialize…, one key per partition dimension, launch. Returns the
    8-character run id prefix from the 'Launched run' toast (one not in ``seen``)."""
    page.open(f"/assets/{asset}")
    page.click("//button[normalize-space(.)='Materialize…']")
    page.wait(lambda d: f"Launch runs to materialize {asset.replace('/', ' / ')}" in page.body_text(),
              message=f"the launch dialog of {asset}")
    for index, key in enumerate(keys):
        pick_partition(page, index, key)
    launch = "//*[@role='dialog']//button[normalize-space(.)='Launch 1 run']"
    page.wait(lambda d: page.visible(launch), message="'Launch 1 run' (exactly one partition selected)")
    page.screenshot(f"launch_dialog_{asset.replace('/', '_')}.png")
    page.click(launch)
    new = page.wait(lambda d: set(re.findall(r"Launched run ([0-9a-f]{8})", page.body_text())) - seen,
                    message="the 'Launched run' toast")
    (prefix,) = new
    seen.add(prefix)
    return prefix


def wait_for_run(ui: DagsterUI, prefix: str, timeout: float = RUN_TIMEOUT_S) -> dict:
    """Poll the UI's GraphQL endpoint until the run launched from the page is finished."""
    deadline = time.monotonic() + timeout
    run: dict | None = None
    while time.monotonic() < deadline:
        data = ui.graphql(RECENT_RUNS)["runsOrError"]
        assert data["__typename"] == "Runs", data
        run = next((r for r in data["results"] if r["runId"].startswith(prefix)), None)
        if run is not None and run["status"] in TERMINAL:
            break
        time.sleep(0.5)
    assert run is not None, f"run {prefix} never appeared\n{ui.log_tail()}"
    assert run["status"] in TERMINAL, (f"run {run['runId']} still {run['status']} after {timeout:.0f} s\n"
                                       f"{ui.log_tail()}")
    assert run["status"] == "SUCCESS", f"run {run['runId']} ended {run['status']}\n{ui.log_tail()}"
    return run


def metadata_value(page: Page, key: str) -> str:
    """The Value cell of one row of the asset page's metadata table, as rendered."""
    row = f"//tr[td[normalize-space(.)='{key}']]"
    page.wait(lambda d: page.visible(row), message=f"metadata row {key}")
    return page.visible(f"{row}/td[last()]")[0].text.strip()


def node_titles(page: Page) -> list[str]:
    """The titles of the asset nodes drawn on a group's lineage (its own assets), as drawn (a title
    cut in the middle reads with an ellipsis)."""
    full = "//div[contains(@class, 'AssetNode_assetName')]//div[@data-tooltip]"
    minimal = "//div[contains(@class, 'AssetNode_minimalName')]"  # a wide group opens zoomed out
    return [e.text.strip() for e in page.visible(full) or page.visible(minimal)]


def wait_for_runs(ui: DagsterUI, where: Callable[[dict], bool], timeout: float, what: str) -> dict:
    """The first finished run ``where`` accepts, polled from the UI's GraphQL endpoint."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = ui.graphql(RECENT_RUNS)["runsOrError"]
        found = [r for r in data["results"] if where(r) and r["status"] in TERMINAL]
        if found:
            return found[0]
        time.sleep(1.0)
    raise AssertionError(f"no finished run of {what} after {timeout:.0f} s\n{ui.log_tail()}")


def doctor_a_baseline(project: Path) -> list[str]:
    """Record the stored retrieval scoreboard as a baseline in which every case passed; returns
    the cases that fail now (what the gate must list as lost)."""
    from nl2sql_assets.evaluation.history.records import records_from_report, write_record
    from nl2sql_assets.evaluation.reporting import case_key, load_report

    report = load_report(project / "warehouse" / "reports" / "chinook" / "retrieval.json")
    (record,) = records_from_report(report, note="doctored: every case passed")
    board = record.scoreboard
    lost = sorted(case_key(r) for r in board.results if r.status != "pass")
    passed = [r.model_copy(update={"status": "pass"}) for r in board.results]
    write_record(record.model_copy(update={"scoreboard": board.model_copy(update={"results": passed}),
                                           "run_digest": None}), project)
    return lost


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(720)
def test_lineage_plans_evaluation_history_and_a_gate_failure_in_the_ui(
    dagster_ui: DagsterUI, chrome: Any, screenshot_dirs: list[Path]
) -> None:
    from nl2sql_assets.defs.factory import build_defs
    from nl2sql_assets.defs.keys import TITLE_MAX

    page = Page(chrome, dagster_ui.base_url, screenshot_dirs)
    timings = {"dagster_dev_to_ui_s": dagster_ui.startup_s}
    launched: set[str] = set()
    graph = build_defs(dagster_ui.project / "nl2sql.yaml").resolve_asset_graph()
    expected = {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}
    groups = sorted(set(expected.values()))
    try:
        # 0. No first-visit community dialog over the lineage: the project's instance settings
        # (scripts/dagster.yaml, nux: enabled: false) turn it off, in a browser that never saw Dagster.
        assert dagster_ui.graphql("query { shouldShowNux }")["shouldShowNux"] is False

        # 1. The lineage: a group per suite and per datasource, every group drawn open, and each
        # node titled by its stage, whole (the lineage cuts a title longer than 18 characters).
        page.open("/asset-groups?expanded=" + ",".join(f"global@global:{g}" for g in groups))
        minimal = "//div[contains(@class, 'AssetNode_minimalName')]"
        page.wait(lambda d: page.visible(minimal), message="the global lineage drawn")
        zoom_out_until(page, lambda: len(page.visible(minimal)) == len(expected),
                       f"{len(expected)} nodes in the global lineage")
        drawn = sorted(e.text.strip() for e in page.visible(minimal))
        assert drawn == sorted(k.split("/")[-1] for k in expected), drawn  # no title cut (no "…")
        for group in groups:
            assert page.visible(f"//*[normalize-space(text())='{group}']"), f"group {group} not shown"
        assert not page.visible("//*[@role='dialog']"), "a dialog covers the lineage"
        page.screenshot("lineage_global.png")
        # A group page opens at a zoom that draws every node in full, and only those in view: a
        # window tall enough for the tallest group (a suite's chain) shows them all.
        chrome.set_window_size(1600, 1600)
        for group in groups:
            page.open(f"/locations/nl2sql/asset-groups/{group}")
            mine = sorted(k.split("/")[-1] for k, g in expected.items() if g == group)
            page.wait(lambda d, m=mine: sorted(node_titles(page)) == m,
                      message=f"the {group} group's nodes titled {mine}")
            titles = node_titles(page)
            assert len(titles) == len(set(titles))  # no two nodes of a group share a title
            assert all(len(t) <= TITLE_MAX and "…" not in t for t in titles), titles
            page.screenshot(f"lineage_{group}.png")
        chrome.set_window_size(1600, 1000)
        assert {"chinook", "chinook_db", "datasets"} <= set(groups)
        assert sorted(k for k, g in expected.items() if g == "chinook_db") == [
            "chinook/neighbours", "chinook/schema_index", "chinook/schema_snapshot"]

        # 1b. The pipeline's runs (scripts/main's, made before the UI started) are filed under their
        # jobs, as a run launched from the UI is: on the job's page and in the jobs list.
        piped = dagster_ui.graphql(JOB_RUNS, {"job": "datasets_case_runs_job"})["pipelineOrError"]["runs"]
        assert len(piped) == 1 and piped[0]["status"] == "SUCCESS", piped
        page.open("/locations/nl2sql/jobs/datasets_case_runs_job/runs")
        page.wait(lambda d: piped[0]["runId"][:8] in page.body_text(),
                  message="the pipeline's run on its job page")
        page.screenshot("job_runs_pipeline.png")
        # ... and on the Overview timeline, which files a run by the job origin it was created with.
        origins = {(r["jobName"], (r["repositoryOrigin"] or {}).get("repositoryLocationName"))
                   for r in dagster_ui.graphql(RUN_ORIGINS)["runsOrError"]["results"]}
        assert origins == {("datasets_case_runs_job", "nl2sql"), ("scoreboards_job", "nl2sql")}, origins
        page.open("/overview/activity/timeline")
        for job in ("datasets_case_runs_job", "scoreboards_job"):
            page.wait(lambda d, j=job: page.visible(f"//*[normalize-space(text())='{j}']"),
                      message=f"the pipeline's {job} on the Overview timeline")
        page.screenshot("timeline_pipeline.png")
        # ... and in the jobs list, with its latest run's time (and a run bar) beside the job.
        page.open("/jobs")
        for job in ("datasets_case_runs_job", "scoreboards_job"):
            page.wait(lambda d, j=job: re.search(rf"^{j}\n[^\n]* ago$", page.body_text(), re.MULTILINE),
                      message=f"the pipeline's latest {job} run in the jobs list")
        assert not re.search(r"^datasets_job\n[^\n]* ago$", page.body_text(), re.MULTILINE)  # it has no run
        page.screenshot("jobs_list_pipeline.png")

        # 2. Launch case runs (plans, pass 1), then the plans scoreboard, from the UI.
        clicked = time.monotonic()
        run = wait_for_run(dagster_ui, materialize_one_partition(page, "chinook/case_runs", ["plans", "1"], launched))
        assert {t["key"]: t["value"] for t in run["tags"]}["dagster/partition"] == "plans|1"
        timings["case_runs_click_to_success_s"] = time.monotonic() - clicked
        scoreboard_clicked = time.monotonic()
        run = wait_for_run(dagster_ui, materialize_one_partition(page, "chinook/scoreboards", ["plans"], launched))
        assert {t["key"]: t["value"] for t in run["tags"]}["dagster/partition"] == "plans"
        finished = time.monotonic()
        timings["scoreboard_click_to_success_s"] = finished - scoreboard_clicked
        timings["materialize_click_to_finished_scoreboard_s"] = finished - clicked

        # 3. The scoreboard page: every case passed, and the headline is formatted.
        page.open("/assets/chinook/scoreboards?partition=plans")
        assert float(metadata_value(page, "accuracy")) == 1.0
        assert metadata_value(page, "passes") == "1"
        page.wait(lambda d: "100.0% (97.3%–100.0%)" in page.body_text() and "$0.0000" in page.body_text(),
                  message="the headline table with percentages and dollars")
        # numbers as a person reads them: no raw float anywhere in the metadata
        assert re.fullmatch(r"\d+(\.\d{1,2})?", metadata_value(page, "latency_p95_s"))
        raw = re.findall(r"\b\d+\.\d{5,}\b", page.body_text())
        assert not raw, f"unrounded numbers in the scoreboard's metadata: {raw}"
        page.screenshot("scoreboard_plans.png")

        # 4. A second pass and a second scoreboard. The scoreboard's Plots, by partition: one chart
        # per measure with the configs side by side (accuracy: plans and retrieval on one chart).
        wait_for_run(dagster_ui, materialize_one_partition(page, "chinook/case_runs", ["plans", "2"], launched))
        wait_for_run(dagster_ui, materialize_one_partition(page, "chinook/scoreboards", ["plans"], launched))
        by_config = dagster_ui.graphql(SCOREBOARD_BY_CONFIG, {"path": ["chinook", "scoreboards"],
                                                              "partitions": ["plans", "retrieval"]})
        accuracy = {m["partition"]: next(e["floatValue"] for e in m["metadataEntries"] if e["label"] == "accuracy")
                    for m in by_config["assetOrError"]["assetMaterializations"]}
        assert set(accuracy) == {"plans", "retrieval"} and accuracy["plans"] == 1.0
        page.open("/assets/chinook/scoreboards")
        page.click("//button[normalize-space(.)='Plots']")
        for label in ("accuracy", "cost_per_case_usd", "latency_p95_s"):
            page.wait(lambda d, x=label: page.visible(f"//*[normalize-space(text())='{x}']"),
                      message=f"the {label} plot")
        assert not page.visible("//*[normalize-space(text())='accuracy_low']")  # the interval is no chart of its own
        assert page.visible("//button[normalize-space(.)='Partitions']")  # x: the configs (the default view)
        assert len(page.visible("//canvas")) >= 3
        page.screenshot("scoreboard_plots_by_config.png")

        # The history: a point per scoreboard run (the pipeline's retrieval board, then two plans
        # boards), each drawing every point so far: one chart per measure, every config a series.
        events = dagster_ui.graphql(ASSET_MATERIALIZATIONS, {"path": ["chinook", "scoreboard_history"]})
        points = [{e["label"] for e in m["metadataEntries"]} for m in events["assetOrError"]["assetMaterializations"]]
        assert len(points) == 3 and all({"config", "charts", "latest", "point"} <= p for p in points)
        page.open("/assets/chinook/scoreboard_history")
        page.click("//tr[td[normalize-space(.)='charts']]//*[normalize-space(text())='[Show Markdown]']")
        images = "//*[@role='dialog']//img"
        page.wait(lambda d: len(page.visible(images)) >= 4 and all(
            d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img)
            for img in page.visible(images)), message="the history's charts drawn in the dialog")
        titles = [img.get_attribute("alt") for img in page.visible(images)]
        assert titles[0] == "accuracy (strict), with its 95% Wilson interval" and "lenient accuracy" in titles
        assert "pass^k (cases passed in every pass)" in titles  # plans has two passes now
        page.screenshot("history_charts.png")

        # 5. A doctored baseline (every retrieval case passed) lands in benchmarks/ after the
        # sensor's first tick: the sensor runs the gate once, and the check lists the lost cases.
        page.wait(lambda d: dagster_ui.graphql(SENSOR_TICKS, {"name": "new_baseline_sensor"})
                  ["sensorOrError"]["sensorState"]["ticks"], timeout=90, message="new_baseline_sensor's first tick")
        assert not [r for r in dagster_ui.graphql(RECENT_RUNS)["runsOrError"]["results"]
                    if r["jobName"] == "regression_gate_job"]  # its first tick started nothing
        lost = doctor_a_baseline(dagster_ui.project)
        assert lost
        gate = wait_for_runs(dagster_ui, lambda r: r["jobName"] == "regression_gate_job", 120,
                             "regression_gate_job from new_baseline_sensor")
        assert gate["status"] == "SUCCESS"  # the check failed, the run did its job
        page.open("/assets/chinook/scoreboards?view=checks&checkDetail=regression_gate_all_configs")
        page.wait(lambda d: "regressed" in page.body_text() and lost[0] in page.body_text(),
                  message=f"the failed gate listing lost case {lost[0]}")
        text = page.body_text()
        assert "Failed" in text and f"{len(lost)} case(s) went from pass to fail" in text
        page.screenshot("gate_failure.png")

        # 6. The terminal: one line when the UI was ready, then nothing below WARNING, the runs
        # launched from the UI included; no warning about dg or dagster.yaml, no sensor chatter.
        log = dagster_ui.log_path.read_text(encoding="utf-8", errors="replace")
        assert f"Dagster UI ready: {dagster_ui.base_url}" in log, log[:2000]
        quiet = re.findall(r"^.* - (?:DEBUG|INFO) - .*$", log, flags=re.MULTILINE)
        assert not quiet, f"lines below WARNING in the terminal: {quiet[:5]}"
        for noise in ("SupersessionWarning", "dagster.yaml", "Checking for new runs for sensor", "skipped"):
            assert noise not in log, f"{noise!r} in the dagster dev log:\n{log[-3000:]}"
    except Exception:
        page.screenshot("failure.png")
        print(f"\n[browser] dagster dev log tail:\n{dagster_ui.log_tail()}")
        raise
    finally:
        report = {k: round(v, 2) for k, v in timings.items()}
        print("\n[browser] timings: " + ", ".join(f"{k}={v:.1f}s" for k, v in report.items()))
        (screenshot_dirs[0] / "timings.json").write_text(json.dumps(report, indent=2) + "\n")


def test_the_browser_test_starts_the_ui_as_the_readme_and_env_script_say() -> None:
    from nl2sql_assets import ui
    from tests.browser.conftest import REPO_ROOT, SUPERSESSION_FILTER, UI_COMMAND

    assert SUPERSESSION_FILTER == ui.SUPERSESSION_FILTER
    assert SUPERSESSION_FILTER in (REPO_ROOT / "scripts" / "_env.sh").read_text(encoding="utf-8")
    assert " ".join(UI_COMMAND) in (REPO_ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("required", "outcome"), [(None, pytest.skip.Exception), ("1", pytest.fail.Exception)])
def test_a_missing_chromium_skips_unless_ci_requires_the_browser(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, required: str | None, outcome: type[BaseException]
) -> None:
    from tests.browser import conftest

    monkeypatch.setattr(conftest, "CHROMIUM", tmp_path / "no-chromium")
    if required is None:
        monkeypatch.delenv("NL2SQL_REQUIRE_BROWSER", raising=False)
    else:
        monkeypatch.setenv("NL2SQL_REQUIRE_BROWSER", required)
    with pytest.raises(outcome, match="no-chromium is not installed"):
        conftest.require_browser()
