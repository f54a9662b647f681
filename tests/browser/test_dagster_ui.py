"""The Dagster UI in a real (headless) Chromium: the evals graph is drawn, a user launches the key-free
``plans`` evaluation by clicking Materialize on case_runs and then on the scoreboard, and reads the
scoreboard's execution accuracy off the asset page.

Runs are launched by clicking through the UI's partition dialog; only the waiting for a run to finish
asks the UI's own GraphQL endpoint, which is what the Runs page polls too.
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
                self.dismiss_community_dialog()
                return False
            return True

        self.wait(attempt, timeout, f"nothing clickable at {xpath}")

    def dismiss_community_dialog(self) -> None:
        """The first-visit 'Join the Dagster community' dialog covers the page; skip it."""
        for button in self.visible("//*[@role='dialog'][contains(., 'Join the Dagster community')]"
                                   "//button[normalize-space(.)='Skip']"):
            button.click()

    def screenshot(self, name: str) -> list[Path]:
        paths = [d / name for d in self.screenshot_dirs]
        for path in paths:
            self.driver.save_screenshot(str(path))
        return paths


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
    page.screenshot(f"launch_dialog_{asset.split('/')[0]}.png")
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


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_plans_evaluation_launched_from_the_ui_scores_full_execution_accuracy(
    dagster_ui: DagsterUI, chrome: Any, screenshot_dirs: list[Path]
) -> None:
    page = Page(chrome, dagster_ui.base_url, screenshot_dirs)
    timings = {"dagster_dev_to_ui_s": dagster_ui.startup_s}
    launched: set[str] = set()
    try:
        # Same-origin page first, so the first-visit community dialog can be marked as seen.
        page.open("/server_info")
        chrome.execute_script("window.localStorage.setItem('communityNux', '\"1\"');")

        # 1. The evals group's graph draws the case_runs and scoreboards nodes.
        page.open("/locations/nl2sql/asset-groups/evals")
        for asset in ("case_runs/chinook", "scoreboards/chinook"):
            page.wait(lambda d, a=asset: page.visible(f"//a[starts-with(@href, '/assets/{a}?')]"),
                      message=f"the {asset} node in the evals graph")
        page.screenshot("asset_graph.png")

        # 2. Launch case_runs for (plans, pass 1), then the plans scoreboard, from the UI.
        clicked = time.monotonic()
        case_run = materialize_one_partition(page, "case_runs/chinook", ["plans", "1"], launched)
        run = wait_for_run(dagster_ui, case_run)
        assert {t["key"]: t["value"] for t in run["tags"]}["dagster/partition"] == "plans|1"
        timings["case_runs_click_to_success_s"] = time.monotonic() - clicked

        scoreboard_clicked = time.monotonic()
        scoreboard_run = materialize_one_partition(page, "scoreboards/chinook", ["plans"], launched)
        run = wait_for_run(dagster_ui, scoreboard_run)
        assert {t["key"]: t["value"] for t in run["tags"]}["dagster/partition"] == "plans"
        finished = time.monotonic()
        timings["scoreboard_click_to_success_s"] = finished - scoreboard_clicked
        timings["materialize_click_to_finished_scoreboard_s"] = finished - clicked
        timings["dagster_dev_to_finished_evaluation_s"] = finished - dagster_ui.started_at

        # 3. The scoreboard page shows the plans partition's metadata: every case passed.
        page.open("/assets/scoreboards/chinook?partition=plans")
        accuracy = metadata_value(page, "execution_accuracy")
        passes = metadata_value(page, "passes")
        page.screenshot("scoreboard_plans.png")
        assert float(accuracy) == 1.0, f"execution_accuracy shown as {accuracy!r}"
        assert passes == "1"

        page.open("/locations/nl2sql/asset-groups/evals")
        for asset in ("case_runs/chinook", "scoreboards/chinook"):
            filled = f"//a[@href='/assets/{asset}?view=partitions'][contains(., '% filled')]"
            page.wait(lambda d, f=filled: any(not e.text.startswith("0%") for e in page.visible(f)),
                      timeout=30, message=f"the {asset} node to show a filled partition")
        page.screenshot("asset_graph_after.png")
    except Exception:
        page.screenshot("failure.png")
        print(f"\n[browser] dagster dev log tail:\n{dagster_ui.log_tail()}")
        raise
    finally:
        report = {k: round(v, 2) for k, v in timings.items()}
        print("\n[browser] timings: " + ", ".join(f"{k}={v:.1f}s" for k, v in report.items()))
        (screenshot_dirs[0] / "timings.json").write_text(json.dumps(report, indent=2) + "\n")


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
