"""Shared fixtures: the Chinook file (``NL2SQL_CHINOOK``, checked before anything is collected),
a demo project written by ``init_demo`` into a temporary folder, and the wide test bed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

CHINOOK_VARIABLE = "NL2SQL_CHINOOK"


def chinook_problem(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why the tests cannot run, or None: ``NL2SQL_CHINOOK`` must name the pinned Chinook file."""
    from nl2sql_assets.datasources.chinook import CHINOOK_SHA256, sha256_file

    value = environ.get(CHINOOK_VARIABLE)
    usage = f"{CHINOOK_VARIABLE}=/path/to/Chinook_Sqlite.sqlite pytest"
    if not value:
        return f"the tests need Chinook: set {CHINOOK_VARIABLE} to Chinook_Sqlite.sqlite ({usage})"
    path = Path(value).expanduser()
    if not path.is_file():
        return f"{CHINOOK_VARIABLE}={value}: no such file ({usage})"
    actual = sha256_file(path)
    if actual != CHINOOK_SHA256:
        return (f"{CHINOOK_VARIABLE}={value} is not the pinned Chinook database "
                f"(SHA-256 expected {CHINOOK_SHA256}, got {actual})")
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Stop before collecting anything, with one message, when Chinook is not given."""
    problem = chinook_problem()
    if problem is not None:
        raise pytest.UsageError(problem)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(SharedPlacesInTurn(), "nl2sql-xdist-scheduling")


#: test folders whose tests share something outside their own temporary folders (the servers'
#: scratch places, which ``neighbours prune`` sweeps; the Celery broker and workers; the browser and
#: the Dagster UI): their tests run on one pytest-xdist worker, one after another
SERIAL_GROUPS = ("servers", "cluster", "browser")


class SharedPlacesInTurn:
    """pytest-xdist scheduling (``scripts/test`` runs two workers): a test file is one unit of
    work, a ``SERIAL_GROUPS`` folder is one unit as a whole. (Its ``xdist_group`` marks name the
    unit through the test's id, which pytest 9 no longer lets a plugin change.)"""

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        from xdist.scheduler import LoadScopeScheduling

        class ByFileOrSharedFolder(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                path = nodeid.split("::", 1)[0]
                parts = path.split("/")
                if len(parts) > 2 and parts[0] == "tests" and parts[1] in SERIAL_GROUPS:
                    return "/".join(parts[:2])
                return path

        return ByFileOrSharedFolder(config, log)


@pytest.fixture(scope="session")
def chinook_path() -> Path:
    """The verified Chinook database, from ``NL2SQL_CHINOOK`` (the only way tests find it)."""
    return Path(os.environ[CHINOOK_VARIABLE]).expanduser()


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory, chinook_path: Path) -> Path:
    """One demo project per session, for tests to copy (generating its data takes about a second),
    its neighbour databases and gold audits made once (about three seconds) so each copy reads them back."""
    from nl2sql_assets.demo import init_demo

    root = init_demo(tmp_path_factory.mktemp("demo-template") / "demo", chinook=chinook_path).root
    make_neighbours(root)
    return root


def make_neighbours(root: Path) -> None:
    """The project's neighbour sets and its suites' gold audits, as a run would make them."""
    from nl2sql_assets.evaluation.neighbours.audit import audit_suite
    from nl2sql_assets.evaluation.neighbours.store import project_sets, project_suites
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.project import load_project_config

    config = load_project_config(root / "nl2sql.yaml")
    settings = config.evals_config.neighbours
    assert settings is not None  # the demo grades on neighbours
    suites = project_suites(config)
    sets = project_sets(config, suites, settings, neighbours_dir(root))
    for name, suite in suites:
        audit_suite(config, name, suite, settings, sets=sets)  # kept: each run of each pass reads it back


@pytest.fixture(scope="session")
def wide_bed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The full wide test bed (1,200 tables), built once per session (about two seconds)."""
    from nl2sql_assets.testbed.wide import build_wide

    return build_wide(tmp_path_factory.mktemp("wide") / "bed")


@pytest.fixture
def demo_project(tmp_path: Path, demo_template: Path) -> Path:
    """A private copy of the demo project (its warehouse and benchmarks are the test's own)."""
    import shutil

    target = tmp_path / "demo"
    shutil.copytree(demo_template, target)
    return target


@pytest.fixture
def outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mode full refuses to run where ``CI`` is set (it may spend money); tests that run it
    against local fake servers say so with this fixture, and CI runs them as anywhere else."""
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh Dagster instance folder holding the project's own dagster.yaml, as DAGSTER_HOME."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(Path(__file__).resolve().parents[1] / "scripts" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def _signals_as_found() -> Iterator[None]:
    """Each test leaves the process's stopping signals as it found them: an in-process Dagster run
    maps SIGTERM to SIGINT's handler and leaves it so, and every process a later test starts would
    inherit it (``nl2sql_assets.signals``)."""
    from nl2sql_assets.signals import dispositions_kept

    with dispositions_kept():
        yield
