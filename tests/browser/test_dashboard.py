"""The results dashboard in a real (headless) Chromium: opened from a file, every view drawn with
the counts the data gives, a filter changing them, and no request leaving the page; on the
repository's own records and on a generated history of 100 runs x 1,000 case runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.evaluation.history.dashboard import DashboardData, build_dashboard, render_html

REPO = Path(__file__).resolve().parents[2]
MAX_PAGE_BYTES = 10_000_000


def selected(data: DashboardData, suite: str = "", role: str = "") -> tuple[list, list[int]]:
    """What the page selects under a filter, as its script does."""
    runs = [r for r in data.runs if not suite or r.suite == suite]
    cases = [n for n, c in enumerate(data.cases) if (not suite or c.suite == suite) and (not role or c.role == role)]
    return runs, cases


def expected_pair(runs: list, cases: list[int]) -> tuple[int, int]:
    """The page's default pair (the newest run, and the one before it of its suite and config) and
    its flips: pass to fail, fail to pass."""
    b = runs[-1]
    same = [r for r in runs if (r.suite, r.config) == (b.suite, b.config)]
    a = same[-2] if len(same) > 1 else runs[max(0, len(runs) - 2)]
    lost = sum(1 for n in cases if a.strict[n] == "p" and b.strict[n] == "f")
    gained = sum(1 for n in cases if a.strict[n] == "f" and b.strict[n] == "p")
    return lost, gained


def drawn_runs(runs: list, cases: list[int]) -> int:
    return sum(1 for r in runs if any(r.strict[n] in "pf" for n in cases))


def open_page(chrome: Any, path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    chrome.get_log("performance")  # what earlier pages asked for is not this page's
    chrome.get(path.as_uri())
    WebDriverWait(chrome, 60).until(lambda d: d.find_element("tag name", "body").get_attribute("data-drawn"))


def text(chrome: Any, element_id: str) -> str:
    return chrome.find_element("id", element_id).text.strip()


def requests_made(chrome: Any) -> list[str]:
    """Every request the page sent (Chromium's network log), and every one its policy blocked."""
    urls = []
    for entry in chrome.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls + chrome.execute_script("return window.blockedRequests")


def choose(chrome: Any, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    before = chrome.find_element("tag name", "body").get_attribute("data-drawn")
    Select(chrome.find_element("id", select_id)).select_by_value(value)
    if select_id.startswith("filter-"):
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(chrome, 30).until(
            lambda d: d.find_element("tag name", "body").get_attribute("data-drawn") != before)


def check_views(chrome: Any, data: DashboardData, suite: str = "", role: str = "") -> None:
    runs, cases = selected(data, suite, role)
    assert text(chrome, "runs-count") == f"{len(runs)} run(s), {len(cases)} case(s) selected"
    assert text(chrome, "time-count") == f"{drawn_runs(runs, cases)} run(s) drawn"
    assert chrome.find_elements("css selector", "#time-chart .main-svg")
    lost, gained = expected_pair(runs, cases)
    assert text(chrome, "pair-summary").startswith(
        f"{lost} case(s) went from pass to fail, {gained} from fail to pass; McNemar p = ")
    assert len(chrome.find_elements("css selector", "#pair-lost details.case")) == lost
    assert len(chrome.find_elements("css selector", "#pair-gained details.case")) == gained
    pairs = {(r.suite, r.config) for r in runs}
    assert len(chrome.find_elements("css selector", "#cost-table tr.cost-row")) == len(pairs)
    latest = {(r.suite, r.config): r for r in runs}  # oldest first: the last of each pair stays
    spent = any((r.cost_usd > 0 or r.unpriced_calls > 0) and any(r.strict[n] == "p" for n in cases)
                for r in latest.values())
    # a chart only where there is something to see; else one sentence in its place
    if spent:
        assert chrome.find_elements("css selector", "#cost-chart .main-svg")
    else:
        assert not chrome.find_elements("css selector", "#cost-chart .main-svg")
        assert text(chrome, "cost-chart").startswith("Nothing was spent in these runs")
    failures = sum(1 for n in cases if runs[-1].strict[n] == "f")
    for dim in ("domain", "difficulty"):
        assert bool(chrome.find_elements("css selector", f"#reasons-{dim} .main-svg")) == (failures > 0)
    if not failures:
        assert text(chrome, "reasons-domain") == "No case failed in run B: no reason to chart."
    overturned = sum(1 for r in runs if r.robust for n in cases if r.strict[n] == "p" and r.robust[n] == "f")
    assert text(chrome, "neighbours-count") == f"{overturned} pass(es) overturned on a neighbour database"
    flags = [f for f in data.audit if not suite or f.suite == suite]
    assert text(chrome, "audit-count") == f"{len(flags)} finding(s) on the gold of the runs' suites"
    assert len(chrome.find_elements("css selector", "#audit-table tr.audit-row")) == len(flags)


@pytest.mark.browser
def test_the_dashboard_of_the_repositorys_records(chrome: Any, tmp_path: Path, screenshot_dirs: list[Path]):
    data = build_dashboard([REPO / "benchmarks"], [], [REPO / "suites" / "chinook.yaml"])
    page = tmp_path / "dashboard.html"
    page.write_text(render_html(data), encoding="utf-8")
    assert render_html(data) == page.read_text(encoding="utf-8")  # the same data, the same bytes
    chrome.set_window_size(1400, 1800)
    open_page(chrome, page)
    check_views(chrome, data)
    # a case's details: its question and gold SQL from the suite
    first = chrome.find_elements("css selector", "details.case")
    if first:
        first[0].click()
        assert "question:" in first[0].text
    for path in screenshot_dirs:
        chrome.save_screenshot(str(path / "dashboard_records.png"))
    choose(chrome, "filter-suite", "chinook")
    check_views(chrome, data, suite="chinook")
    assert requests_made(chrome) == [page.as_uri()]  # the page itself, nothing more


@pytest.fixture(scope="session")
def generated_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.dashboard_history import write_history

    folder = tmp_path_factory.mktemp("history")
    write_history(folder, runs=100, case_runs=1000)
    return folder


@pytest.mark.browser
@pytest.mark.slow
def test_the_dashboard_of_a_hundred_runs_of_a_thousand_case_runs(chrome: Any, tmp_path: Path, generated_history: Path,
                                                                  screenshot_dirs: list[Path]):
    data = build_dashboard([generated_history], [])
    assert (len(data.runs), len(data.cases)) == (100, 1000)
    html = render_html(data)
    assert len(html.encode("utf-8")) < MAX_PAGE_BYTES
    page = tmp_path / "dashboard.html"
    page.write_text(html, encoding="utf-8")
    chrome.set_window_size(1400, 1800)
    open_page(chrome, page)
    check_views(chrome, data)
    for path in screenshot_dirs:
        chrome.save_screenshot(str(path / "dashboard_generated.png"))
    choose(chrome, "filter-role", "analyst")  # half the cases: every count recounted
    check_views(chrome, data, role="analyst")
    assert requests_made(chrome) == [page.as_uri()]
