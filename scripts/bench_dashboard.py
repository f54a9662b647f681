#!/usr/bin/env python
"""Benchmark: the results dashboard at scale.

    python scripts/bench_dashboard.py                 # 100 runs x 1,000 case runs
    python scripts/bench_dashboard.py --runs 200 --case-runs 2000

Writes a generated history of benchmark records (tests/dashboard_history.py), then prints the time
to read it into the page's data, to render the page, the page's size (target: under 10 MB), and
the time headless Chromium takes from the start of loading the page to the end of its first
drawing (``data-drawn-ms``; target: under 3 s), median of three loads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def drawn_ms(page: Path, loads: int = 3) -> list[float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        out = []
        for _ in range(loads):
            driver.get(page.as_uri())
            body = WebDriverWait(driver, 60).until(lambda d: d.find_element("tag name", "body")
                                                   if d.find_element("tag name", "body").get_attribute("data-drawn-ms")
                                                   else None)
            out.append(float(body.get_attribute("data-drawn-ms")))
        return out
    finally:
        driver.quit()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--case-runs", type=int, default=1000)
    args = parser.parse_args()
    from nl2sql_assets.evaluation.history.dashboard import build_dashboard, render_html
    from tests.dashboard_history import write_history

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "history"
        started = time.perf_counter()
        write_history(folder, runs=args.runs, case_runs=args.case_runs)
        print(f"history: {args.runs} records x {args.case_runs} case runs written in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        data = build_dashboard([folder], [])
        print(f"read into the page's data: {time.perf_counter() - started:.2f} s "
              f"({len(data.runs)} runs, {len(data.cases)} cases, {len(data.sql)} distinct SQL)")
        started = time.perf_counter()
        html = render_html(data)
        size = len(html.encode("utf-8"))
        import plotly.offline

        bundle = len(plotly.offline.get_plotlyjs().encode("utf-8"))
        print(f"rendered: {time.perf_counter() - started:.3f} s, {size / 1e6:.2f} MB (target under 10 MB; "
              f"the Plotly bundle {bundle / 1e6:.2f} MB of it)")
        page = Path(tmp) / "dashboard.html"
        page.write_text(html, encoding="utf-8")
        times = drawn_ms(page)
        print(f"headless Chromium, load to first drawing: median {statistics.median(times):.0f} ms "
              f"(each: {', '.join(f'{t:.0f}' for t in times)}; target under 3,000 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
