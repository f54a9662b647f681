"""The demo project: ``init --demo`` scaffolding (config files, suites, data), the repository
root's own config files, and ``ensure_demo_data`` for a project whose demo files are missing."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nl2sql_assets.config import DatasourceConfig, ProjectConfig
from nl2sql_assets.datasources.chinook import CHINOOK_SHA256, resolve_chinook, sha256_file
from nl2sql_assets.datasources.chinook_questions import CHINOOK_QUESTIONS
from nl2sql_assets.demo.catalog import (
    DEMO_FILES,
    DESCRIPTIONS,
    SUPPORT_QUESTIONS,
    SUPPORT_TABLES,
    WEBANALYTICS_QUESTIONS,
    WEBANALYTICS_TABLES,
    DemoError,
)
from nl2sql_assets.demo.customers import ChinookCustomer, read_chinook_customers
from nl2sql_assets.demo.files import WRITERS, copy_chinook, write_demo_databases
from nl2sql_assets.demo.policy import DEMO_POLICIES
from nl2sql_assets.paths import packaged_suites_dir, repo_root
from nl2sql_assets.yamlio import dump_yaml

if TYPE_CHECKING:
    from nl2sql_assets.demo.servers import ServerDemo

YAML_HEADER = """\
# nl2sql-assets project: the demo datasources (Chinook, support, webanalytics), who may read what,
# and the model the reference engine calls. Paths are relative to this file.
# Written by nl2sql_assets.demo.render_project_yaml (`nl2sql-assets init --demo DIR`).
"""
EVALS_HEADER = """\
# Evaluation settings: the suites to run, the scorers, the cost cap of mode full, the gate and
# the thresholds every board must meet. Suite paths are relative to nl2sql.yaml's folder.
# min_execution_success is 1.0 unless set here (every question's SQL must run; a probe-only run
# is exempt; null turns it off); the other thresholds are off unless set. clarify: true asks the
# roles whose outcome is clarify in every run (the CLI's --clarify), Dagster's partitions too.
# neighbours: every pass of a mode that runs SQL is graded on up to `count` neighbour databases
# too (small databases of each datasource's schema, kept because they tell near-miss SQL apart
# from the gold; built once under warehouse/neighbours/); boards show the neighbour-robust rate
# beside the original's, and gate: verdict: neighbours would gate on it.
"""


def project_config_data(data_dir: str = "data", servers: dict[str, DatasourceConfig] | None = None
                        ) -> dict[str, Any]:
    """``nl2sql.yaml`` of the demo as data (what ``render_project_yaml`` writes): its datasources
    are the files under ``data_dir``, or, given ``servers`` (id -> datasource), on a server."""
    questions = {
        "chinook": list(CHINOOK_QUESTIONS),
        "support": SUPPORT_QUESTIONS,
        "webanalytics": WEBANALYTICS_QUESTIONS,
    }
    datasources = []
    for ds_id, (engine, filename) in DEMO_FILES.items():
        where: dict[str, Any] = {"engine": engine, "path": f"{data_dir}/{filename}"}
        if servers is not None:
            where = servers[ds_id].model_dump(mode="json", include={"engine", "url", "url_env", "schemas", "database"},
                                              exclude_defaults=True)
            where["engine"] = servers[ds_id].engine
        datasources.append(
            {
                "id": ds_id,
                **where,
                "description": DESCRIPTIONS[ds_id],
                "row_limit": 1000,
                "timeout_s": 10,
                "sample_questions": list(questions[ds_id]),
            }
        )
    return {
        "datasources": datasources,
        "policies": copy.deepcopy(DEMO_POLICIES),
        "llm": {"default": {"model": "openai/gpt-4o-mini", "api_key": "${env:OPENAI_API_KEY:-}"}},
        "evals": {"file": "evals.yaml"},
    }


def evals_config_data(suites_dir: str = "suites") -> dict[str, Any]:
    from nl2sql_assets.config import DEFAULT_SCORERS

    return {
        # the 47 gold questions, the policy probes and the questions to ask back about, each its own suite
        "suites": [f"{suites_dir}/chinook.yaml", f"{suites_dir}/chinook_policy.yaml",
                   f"{suites_dir}/chinook_clarify.yaml"],
        "scorers": list(DEFAULT_SCORERS),
        "curated": True,
        "clarify": True,  # chinook_clarify.yaml's questions are asked in every run, as with --clarify
        "max_cost_usd": 5.0,
        "gate": {"max_regressions": 2, "alpha": 0.05, "max_cost_increase": 0.2, "verdict": "original"},
        "neighbours": {"count": 10, "seed": 1},
        # Every question's SQL must run (the default, said here to be seen; probe-only runs are exempt),
        # and every policy probe must be refused (a run without probes does not measure it).
        "thresholds": {"min_execution_success": 1.0, "min_policy_recall": 1.0},
    }


def render_project_yaml(data_dir: str = "data", servers: dict[str, DatasourceConfig] | None = None) -> str:
    """The text of the demo's ``nl2sql.yaml``; the repository root's file is this text too."""
    data = project_config_data(data_dir, servers)
    sections = [dump_yaml({key: value}, width=100) for key, value in data.items()]
    return YAML_HEADER + "\n" + "\n".join(sections)


def render_evals_yaml(suites_dir: str = "suites") -> str:
    return EVALS_HEADER + "\n" + dump_yaml(evals_config_data(suites_dir), width=100)


def render_project_files(data_dir: str = "data", suites_dir: str = "suites",
                         servers: dict[str, DatasourceConfig] | None = None) -> dict[str, str]:
    """File name -> text for both config files."""
    return {"nl2sql.yaml": render_project_yaml(data_dir, servers), "evals.yaml": render_evals_yaml(suites_dir)}


def write_root_project(root: Path | None = None) -> list[Path]:
    """Rewrite the repository root's ``nl2sql.yaml`` and ``evals.yaml`` from the renderers."""
    root = root if root is not None else repo_root()
    if root is None:
        raise DemoError("not in a checkout: there is no repository root to write to")
    written = []
    for name, text in render_project_files().items():
        path = Path(root) / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


# ================================================================ init and ensure


@dataclass(frozen=True)
class DemoProject:
    """Where ``init_demo`` put things."""

    root: Path
    config: Path
    evals: Path
    suites_dir: Path
    benchmarks_dir: Path
    data_dir: Path
    datasources: dict[str, Path]
    #: the demo on a server (``init --demo DIR --database URL``): what was copied and translated
    server: ServerDemo | None = None


def init_demo(
    target: Path, *, chinook: Path | None = None, data_dir_name: str = "data", force: bool = False,
    database: str | None = None, namespace_prefix: str | None = None,
) -> DemoProject:
    """Write a working demo project into ``target``: config files, the shipped suites, an empty
    ``benchmarks/`` and the three databases. A folder that already holds ``nl2sql.yaml`` is refused
    unless ``force``. ``database``: a Postgres or MySQL URL: the three databases are copied into
    that server, the suites translated into its dialect and their rows regenerated there
    (``demo.servers``), each datasource into the namespace ``namespace_prefix`` + its id (default
    ``nl2sql_``); ``force`` then also replaces the demo's schemas or databases there."""
    target = Path(target).expanduser().resolve()
    config_path = target / "nl2sql.yaml"
    if config_path.exists() and not force:
        raise DemoError(f"{target} already holds a project ({config_path}); pass --force to overwrite it")
    if database is not None:
        return _init_server_demo(target, database, chinook=chinook, force=force, prefix=namespace_prefix)
    source = resolve_chinook(chinook)

    target.mkdir(parents=True, exist_ok=True)
    suites_dir = target / "suites"
    suites_dir.mkdir(exist_ok=True)
    packaged = packaged_suites_dir()
    if packaged.is_dir() and packaged.resolve() != suites_dir.resolve():
        for suite in sorted(packaged.glob("*.yaml")):
            shutil.copyfile(suite, suites_dir / suite.name)
    benchmarks = target / "benchmarks"
    benchmarks.mkdir(exist_ok=True)

    data_dir = target / data_dir_name
    paths = {"chinook": copy_chinook(source, data_dir / DEMO_FILES["chinook"][1])}
    paths.update(write_demo_databases(data_dir, chinook=source))

    files = render_project_files(data_dir=data_dir_name)
    for name, text in files.items():
        tmp = target / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target / name)
    return DemoProject(
        root=target,
        config=config_path,
        evals=target / "evals.yaml",
        suites_dir=suites_dir,
        benchmarks_dir=benchmarks,
        data_dir=data_dir,
        datasources=paths,
    )


def _init_server_demo(target: Path, url: str, *, chinook: Path | None, force: bool,
                      prefix: str | None) -> DemoProject:
    from nl2sql_assets.demo.servers import (
        NAMESPACE_PREFIX,
        build_demo_files,
        engine_for_url,
        load_server_demo,
        move_suites,
    )

    engine_for_url(url)  # a URL of no server engine is refused before anything is made
    folder, files = build_demo_files(chinook)
    try:
        server = load_server_demo(url, files, force=force, prefix=prefix or NAMESPACE_PREFIX)
        target.mkdir(parents=True, exist_ok=True)
        suites_dir = target / "suites"
        suites_dir.mkdir(exist_ok=True)
        benchmarks = target / "benchmarks"
        benchmarks.mkdir(exist_ok=True)
        for name, text in render_project_files(servers=server.datasources).items():
            tmp = target / f".{name}.tmp"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target / name)
        move_suites(server, packaged_suites_dir(), suites_dir, files, url)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return DemoProject(root=target, config=target / "nl2sql.yaml", evals=target / "evals.yaml",
                       suites_dir=suites_dir, benchmarks_dir=benchmarks, data_dir=target, datasources={},
                       server=server)


def _is_demo(ds: DatasourceConfig) -> bool:
    spec = DEMO_FILES.get(ds.id)
    return spec is not None and spec[0] == ds.engine and ds.path is not None and Path(ds.path).name == spec[1]


# Demo files found right in this process, by what was checked and the file's identity (device,
# inode, size, modification and change times): checking an unchanged file again (the pipeline
# checks in its preflight, then in its demo_datasets asset) costs one stat. Any write to the file,
# or its replacement, changes its identity and it is checked in full again.
_checked: dict[tuple[str, str], tuple[int, ...]] = {}


def _identity(path: Path) -> tuple[int, ...] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _checked_already(what: str, path: Path) -> bool:
    identity = _identity(path)
    return identity is not None and _checked.get((what, str(path))) == identity


def _remember_checked(what: str, path: Path) -> None:
    identity = _identity(path)
    if identity is not None:
        _checked[(what, str(path))] = identity


def _duckdb_ok(ds: DatasourceConfig, tables: Sequence[str]) -> bool:
    """The file opens and holds the demo's tables (checked through the adapter, same DuckDB settings)."""
    from nl2sql_assets.datasources.base import DatasourceError
    from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter

    try:
        adapter = DuckDBAdapter(ds)
    except DatasourceError:
        return False
    try:
        return set(tables) <= set(adapter.introspect().table_names)
    except DatasourceError:
        return False
    finally:
        adapter.close()


def ensure_demo_data(config: ProjectConfig, *, chinook: Path | None = None,
                     on_download: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Make sure every demo datasource of ``config`` has its file: Chinook copied in (again, when the
    file there has another hash), ``support`` and ``webanalytics`` generated when missing or broken.
    Good files are left alone. Datasources that are not the demo's (by id, engine and file name) are
    never touched. Returns id -> path of the demo datasources. ``on_download(url)`` is told before
    Chinook is downloaded (see ``resolve_chinook``)."""
    demo = {ds.id: ds for ds in config.datasources if _is_demo(ds)}
    out: dict[str, Path] = {}
    source: Path | None = None

    def chinook_source() -> Path:
        nonlocal source
        if source is None:
            source = resolve_chinook(chinook, on_download=on_download)
        return source

    if "chinook" in demo:
        path = Path(demo["chinook"].path)
        if not _checked_already(CHINOOK_SHA256, path):
            if not path.is_file() or sha256_file(path) != CHINOOK_SHA256:
                copy_chinook(chinook_source(), path)
            _remember_checked(CHINOOK_SHA256, path)
        source = source or path
        out["chinook"] = path
    expected = {"support": SUPPORT_TABLES, "webanalytics": WEBANALYTICS_TABLES}
    customers: list[ChinookCustomer] | None = None
    for ds_id in ("support", "webanalytics"):
        if ds_id not in demo:
            continue
        ds = demo[ds_id]
        path = Path(ds.path)
        what = ds.model_dump_json() + repr(expected[ds_id])  # the same settings and tables checked
        if not _checked_already(what, path):
            if not (path.is_file() and _duckdb_ok(ds, expected[ds_id])):
                if customers is None:
                    customers = read_chinook_customers(chinook_source())
                WRITERS[ds_id](path, customers)
            _remember_checked(what, path)
        out[ds_id] = path
    return out
