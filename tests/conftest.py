"""Shared fixtures: the Chinook file (``NL2SQL_CHINOOK``, else the user cache, else the pinned
download) and a demo project written by ``init_demo`` into a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="session")
def chinook_path() -> Path:
    """The verified Chinook database; a missing or wrong file fails loudly, never skips."""
    from nl2sql_assets.datasources.chinook import resolve_chinook

    return resolve_chinook()


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory, chinook_path: Path) -> Path:
    """One demo project per session, for tests to copy (generating its data takes about a second)."""
    from nl2sql_assets.demo import init_demo

    return init_demo(tmp_path_factory.mktemp("demo-template") / "demo", chinook=chinook_path).root


@pytest.fixture
def demo_project(tmp_path: Path, demo_template: Path) -> Path:
    """A private copy of the demo project (its warehouse and benchmarks are the test's own)."""
    import shutil

    target = tmp_path / "demo"
    shutil.copytree(demo_template, target)
    return target
