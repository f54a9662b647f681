"""Fixtures for the browser tests: a demo project with its datasets and a retrieval scoreboard
already materialised, a ``dagster dev`` serving it on a free local port (started as the README says:
quiet log level, the supersession warning silenced as ``scripts/_env.sh`` does), and a headless
Chromium driven by Selenium.

Without Chromium the tests skip, unless ``NL2SQL_REQUIRE_BROWSER=1`` (CI) turns that into a failure,
so a CI image that lost its browser cannot pass silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = REPO_ROOT / "artifacts" / "browser"
UI_START_TIMEOUT_S = 90.0
# What scripts/_env.sh adds to PYTHONWARNINGS, and the README's start command.
SUPERSESSION_FILTER = "ignore:Function `dev_command` is superseded:FutureWarning"
UI_COMMAND = ("nl2sql-assets", "ui")
CHROME_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
    "--window-size=1600,1000",
)


def _missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def require_browser() -> None:
    """Skip when the browser is missing; fail instead when ``NL2SQL_REQUIRE_BROWSER=1``."""
    reason = _missing_browser()
    if reason is None:
        return
    if os.environ.get("NL2SQL_REQUIRE_BROWSER") == "1":
        pytest.fail(f"NL2SQL_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(f"browser test needs Chromium: {reason}")


@pytest.fixture(scope="session")
def browser_available() -> None:
    require_browser()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DagsterUI:
    """A running ``dagster dev``: its address, its log and how long it took to answer."""

    base_url: str
    log_path: Path
    started_at: float
    startup_s: float
    project: Path
    home: Path
    timings: dict[str, float] = field(default_factory=dict)

    def graphql(self, query: str, variables: dict[str, Any] | None = None, timeout: float = 30.0) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.base_url}/graphql", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise AssertionError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no dagster dev log)"
        return "\n".join(text.splitlines()[-lines:])


@pytest.fixture
def prepared_project(browser_available: None, tmp_path: Path, demo_project: Path,
                     monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The demo project plus a Dagster home with configs ``plans`` and ``retrieval`` registered, the
    datasets materialised and a ``retrieval`` scoreboard (pass 1), made as ``scripts/main`` makes
    them (``pipeline run --configs retrieval``), so the browser part has the ``plans`` evaluation
    left to do, a retrieval board to gate, and runs of the pipeline to find on their job pages."""
    import dagster as dg

    from nl2sql_assets.defs.keyfree import run_keyfree
    from nl2sql_assets.defs.partitions import register_configs

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "scripts" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the file's storage lives in $DAGSTER_HOME (base_dir)
    config = demo_project / "nl2sql.yaml"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        register_configs(instance, ["plans", "retrieval"])
        run = run_keyfree(config, instance, configs=("retrieval",))
        assert run.ok, f"the pipeline failed before the UI was even started: {run.runs}"
    return config, home


def _stop(process: subprocess.Popen, grace_s: float = 15.0) -> float:
    """Ctrl-C the whole process group (what a user does), then kill whatever is left."""
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    # Code servers and run workers share the group; none of them may outlive the test.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    return time.monotonic() - started


@pytest.fixture
def dagster_ui(tmp_path: Path, prepared_project: tuple[Path, Path]) -> Iterator[DagsterUI]:
    """The README's ``nl2sql-assets ui`` (``dagster dev`` on the project, the terminal at WARNING)
    on a free port, from the repo root."""
    config, home = prepared_project
    port = free_port()
    env = dict(os.environ, DAGSTER_HOME=str(home))
    log_path = tmp_path / "dagster_dev.log"
    command = [str(Path(sys.executable).with_name(UI_COMMAND[0])), "--config", str(config), *UI_COMMAND[1:],
               "--port", str(port)]
    base_url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    ui: DagsterUI | None = None
    try:
        deadline = started + UI_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise AssertionError(f"dagster dev exited with {process.returncode}:\n"
                                     f"{log_path.read_text(errors='replace')[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/server_info", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"dagster dev did not answer /server_info within {UI_START_TIMEOUT_S:.0f} s:\n"
                                     f"{log_path.read_text(errors='replace')[-4000:]}")
            time.sleep(0.25)
        ui = DagsterUI(base_url=base_url, log_path=log_path, started_at=started,
                       startup_s=time.monotonic() - started, project=config.parent, home=home)
        yield ui
    finally:
        stop_s = _stop(process)
        if ui is not None:
            ui.timings["shutdown_s"] = stop_s
        print(f"\n[browser] dagster dev stopped in {stop_s:.1f} s (log: {log_path})")


@pytest.fixture
def chrome(browser_available: None, tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium with a fresh profile; closed even when the test fails."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    profile = tempfile.mkdtemp(prefix="chrome-profile-", dir=tmp_path)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # the requests a page makes
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def screenshot_dirs(tmp_path: Path) -> list[Path]:
    """Screenshots go to the git-ignored artifacts/browser/ and to the test's own tmp dir."""
    dirs = [ARTIFACTS, tmp_path / "screenshots"]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs
