"""``bench import``: a Spider- or BIRD-format folder becomes a project of its own.

The project folder gets an ``nl2sql.yaml`` with one SQLite datasource per database the questions
use (read in place from the benchmark folder, never copied), one role that may read all of them,
and the suite ``suites/<benchmark>_<split>.yaml``: one draft case per question, in the
questions file's order, ``origin: imported``, the benchmark, split, db_id and the benchmark's own
difficulty label under ``benchmark`` (BIRD's field; Spider's hardness, computed from the gold SQL by
Spider's rules), BIRD's evidence as the case's ``context``. Rows come from
``regenerate`` (the same read-only adapters as every suite), drafts included; a question whose
gold SQL does not run keeps no rows and is listed. The suite is named after the benchmark and
split, so every record of a run of it names the benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.config import ConfigError, DatasourceConfig, load_config
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.suites.drafts import refuse_draft_target
from nl2sql_assets.evaluation.suites.model import BenchmarkSource, EvalCase, EvalSuite
from nl2sql_assets.evaluation.suites.regenerate import RegenerateFailure, rows_of_cases
from nl2sql_assets.evaluation.suites.writer import write_suite
from nl2sql_assets.public_benchmarks.formats import BenchmarkEntry, BenchmarkFolder, read_folder
from nl2sql_assets.public_benchmarks.hardness import spider_hardness
from nl2sql_assets.yamlio import dump_yaml

#: the one role of an imported project: it reads every database of the benchmark
ROLE = "benchmark"
#: the first line of an nl2sql.yaml this importer wrote (another one is never overwritten)
MARKER = "# nl2sql-assets benchmark project"

# The benchmarks' difficulty labels, read as ours (Spider's evaluator calls its hardest "extra").
_DIFFICULTY = {"simple": "easy", "moderate": "medium", "challenging": "hard",
               "easy": "easy", "medium": "medium", "hard": "hard", "extra": "hard"}


class BenchImportReport(BaseModel):
    """What one import wrote: the project files, how many cases, and the gold SQL that did not run."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    split: str
    config: Path
    suite: Path
    cases: int
    databases: int
    with_rows: int
    failed: list[RegenerateFailure] = Field(default_factory=list)


def order_matters(sql: str) -> bool:
    """Row order counts when the gold SQL sorts: the rule of Spider's own execution grader."""
    return "order by" in " ".join(sql.lower().split())


def _case(folder: BenchmarkFolder, index: int, entry: BenchmarkEntry) -> EvalCase:
    name, split = folder.format.name, folder.split
    label = entry.difficulty.strip().lower() if entry.difficulty else None
    if label is None and name == "spider":  # Spider's levels are its evaluator's, from the gold SQL
        label = spider_hardness(entry.sql)
    return EvalCase(
        id=f"{name}_{split}_{index:04d}",
        question=entry.question.strip(),
        context=entry.evidence.strip() if entry.evidence and entry.evidence.strip() else None,
        datasources=[entry.db_id],
        status="draft",
        origin="imported",
        difficulty=_DIFFICULTY.get(label) if label else None,  # type: ignore[arg-type]
        outcome={ROLE: "allowed"},
        order_matters=folder.format.name == "spider" and order_matters(entry.sql),
        sql=entry.sql.strip(),
        benchmark=BenchmarkSource(name=name, split=split, db_id=entry.db_id, index=index,
                                  question_id=entry.question_id, difficulty=label),
    )


def _config_data(folder: BenchmarkFolder, suite_rel: str, row_limit: int, timeout_s: float) -> dict[str, Any]:
    datasources = [
        DatasourceConfig(id=db_id, engine="sqlite", path=path.resolve(), row_limit=row_limit, timeout_s=timeout_s,
                         description=f"{folder.format.name} database {db_id}").model_dump(mode="json",
                                                                                          exclude_defaults=True)
        for db_id, path in sorted(folder.databases.items())
    ]
    role = {"description": f"Reads every {folder.format.name} database.",
            "datasources": {db_id: {"allow": ["*"]} for db_id in sorted(folder.databases)}}
    return {"datasources": datasources,
            "policies": {"default_role": ROLE, "roles": {ROLE: role}},
            "evals": {"suites": [suite_rel]}}


def import_benchmark(name: str, root: str | Path, out: str | Path, *, questions: str | None = None,
                     split: str | None = None, limit: int | None = None, row_limit: int = 10_000,
                     timeout_s: float = 30.0, approve: bool = False) -> BenchImportReport:
    """Read the folder, write the project at ``out`` (``nl2sql.yaml`` and the suite) and its rows.

    ``approve`` takes the benchmark's gold as reviewed: each case whose gold SQL gave rows is
    written ``approved`` (so ``eval run`` and the gate take it); a case without rows stays a draft.

    An ``nl2sql.yaml`` at ``out`` that an earlier import did not write is refused, and so is a
    suite holding approved cases (drafts never overwrite reviewed work)."""
    folder = read_folder(name, root, questions=questions, split=split, limit=limit)
    out = Path(out)
    config_path = out / "nl2sql.yaml"
    if config_path.exists() and not config_path.read_text(encoding="utf-8-sig").startswith(MARKER):
        raise RunRefused(f"{config_path}: a project file that no benchmark import wrote; import into a new folder")
    suite_rel = f"suites/{folder.format.name}_{folder.split}.yaml"
    suite_path = out / suite_rel
    refuse_draft_target(None, suite_path, "import a benchmark")

    header = (f"{MARKER}: {folder.format.name}, split {folder.split}, from {folder.root.resolve()}\n"
              f"# Written by `nl2sql-assets bench import {folder.format.name}`; the databases are read in place.\n")
    data = _config_data(folder, suite_rel, row_limit, timeout_s)
    sections = [dump_yaml({key: value}, width=100) for key, value in data.items()]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(config_path, header + "\n" + "\n".join(sections))
    config = load_config(config_path)  # what was written must read back as a project
    if len(config.datasources) != len(folder.databases):
        raise ConfigError(f"{config_path}: wrote {len(folder.databases)} datasources, read back "
                          f"{len(config.datasources)}")

    cases = [_case(folder, i, entry) for i, entry in enumerate(folder.entries)]
    # The rows come from regenerate's own code, in memory, so the suite is written once (a round
    # trip through the file per step grew with its size), on the SQLite adapter in the grader's
    # bulk mode: one connection per database, the read-only file and SQLite's authorizer as the
    # guard, rather than a connection and a sqlglot parse per statement.
    from nl2sql_assets.datasources.sqlite import SqliteAdapter

    adapters = {ds.id: SqliteAdapter(ds, bulk=True) for ds in config.datasources}
    with DatasourceRegistry.from_adapters(adapters) as registry:
        results, failed = rows_of_cases(dict(enumerate(cases)), registry, include_drafts=True)
    for index, (rows, alt_rows) in results.items():
        # the benchmark's review stands for ours: a case whose gold SQL gave rows may be approved
        status = {"status": "approved"} if approve else {}
        cases[index] = EvalCase.model_validate({**cases[index].model_dump(exclude_unset=True), "rows": rows,
                                                "alt_rows": alt_rows, **status})
    suite_path.parent.mkdir(parents=True, exist_ok=True)
    suite_header = (f"# {folder.format.name} {folder.split}: {len(cases)} question(s) from "
                    f"{folder.questions_file.resolve()}\n"
                    "# Drafts imported by `nl2sql-assets bench import`; rows written by regenerate from the gold SQL.\n")
    write_suite(EvalSuite(cases=cases), suite_path, header=suite_header)
    return BenchImportReport(benchmark=folder.format.name, split=folder.split, config=config_path, suite=suite_path,
                             cases=len(cases), databases=len(folder.databases), with_rows=len(results),
                             failed=failed)
