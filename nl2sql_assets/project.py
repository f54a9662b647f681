"""The Python API: ``Project.load("nl2sql.yaml")`` with ``.engine`` and ``.evals``.

A thin facade over the library, and the one place its runtime is assembled: a project owns its
datasource registry, its event bus, its warehouse and its scorers, and builds the one Engine
(with its schema retriever and datasource router) that every run derives its runtimes from.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nl2sql_assets.config import LLMConfig, NeighbourSettings, ProjectConfig, load_config
from nl2sql_assets.engine.events import EventBus

if TYPE_CHECKING:
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.engine.pipeline import Engine
    from nl2sql_assets.evaluation.history import SpendLedger, Warehouse
    from nl2sql_assets.evaluation.reporting import EvalReport, GateResult
    from nl2sql_assets.evaluation.running import CaseRuns, OnCase, RunRequest, ScorerRegistry
    from nl2sql_assets.evaluation.suites import EvalSuite, RegenerateReport, SeedReport


def load_project_config(path: str | Path = "nl2sql.yaml") -> ProjectConfig:
    """nl2sql.yaml (and its evals.yaml) loaded, each datasource checked by its database engine and
    each ``engines:`` entry by its kind."""
    from nl2sql_assets.datasources.engines import check_datasources

    config = check_datasources(load_config(path))
    if config.engines:  # the engines package is imported only for a project that names engines
        from nl2sql_assets.engines.kinds import check_engine_entries

        check_engine_entries(config)
    return config


def _neighbour_request(value: NeighbourSettings | Mapping[str, Any] | bool | None) -> NeighbourSettings | bool | None:
    """``neighbours=`` as the run request takes it: settings, False, or None (evals.yaml's)."""
    if value is True:
        return NeighbourSettings()
    if value is None or value is False or isinstance(value, NeighbourSettings):
        return value
    return NeighbourSettings.model_validate(dict(value))


class Project:
    """One project folder: its config, databases, engine and evals. ``bus`` and ``scorers`` let a
    caller share an event bus or bring a scorer registry of its own (plugins added in code)."""

    def __init__(self, config: ProjectConfig, *, bus: EventBus | None = None,
                 scorers: ScorerRegistry | None = None) -> None:
        self.config = config
        self.bus = bus if bus is not None else EventBus()
        self._lock = threading.Lock()
        self._registry: DatasourceRegistry | None = None
        self._engine: Engine | None = None
        self._scorers = scorers
        self.evals = Evals(self)
        self.feedback = Feedback(self)

    @classmethod
    def load(cls, path: str | Path = "nl2sql.yaml") -> Project:
        return cls(load_project_config(path))

    @property
    def root(self) -> Path:
        return self.config.root

    @property
    def registry(self) -> DatasourceRegistry:
        with self._lock:
            if self._registry is None:
                from nl2sql_assets.datasources.registry import DatasourceRegistry

                self._registry = DatasourceRegistry(self.config)
            return self._registry

    @property
    def warehouse(self) -> Warehouse:
        """The project's warehouse of runs (``warehouse/`` beside nl2sql.yaml)."""
        from nl2sql_assets.evaluation.history import Warehouse

        return Warehouse.for_project(self.root)

    @property
    def scorers(self) -> ScorerRegistry:
        """The scorers a run may name: the built-ins, plugins registered in code, entry points."""
        with self._lock:
            if self._scorers is None:
                from nl2sql_assets.evaluation.running import ScorerRegistry

                self._scorers = ScorerRegistry.default()
            return self._scorers

    @property
    def engine(self) -> Engine:
        registry = self.registry
        index_folder = self.warehouse.schema_index_dir
        with self._lock:
            if self._engine is None:
                from nl2sql_assets.engine.assembly import build_engine

                self._engine = build_engine(self.config, registry, self.bus, index_folder)
            return self._engine

    def close(self) -> None:
        if self._registry is not None:
            self._registry.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Evals:
    """``project.evals``: load, run, gate, regenerate and seed suites."""

    def __init__(self, project: Project) -> None:
        self._project = project

    @property
    def config(self) -> ProjectConfig:
        return self._project.config

    def load(self, path: str | Path | None = None) -> list[EvalSuite]:
        """The suites evals.yaml names, or the one file at ``path``."""
        from nl2sql_assets.evaluation.suites import load_suite

        paths = [Path(path)] if path is not None else list(self.config.evals_config.suites)
        return [load_suite(p) for p in paths]

    def run(
        self,
        suites: Sequence[str | Path] | None = None,
        *,
        mode: str = "full",
        llm: LLMConfig | Mapping[str, LLMConfig] | None = None,
        cases: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        scorers: Sequence[str] | None = None,
        curated: bool | None = None,
        passes: int | None = None,
        pass_numbers: Sequence[int] | None = None,
        max_cost_usd: float | None = None,
        on_case: OnCase | None = None,
        clarify: bool | None = None,
        budget: SpendLedger | None = None,
        extra_scorers: Mapping[str, type] | None = None,
        workers: int | None = None,
        engines: Mapping[str, Mapping[str, Any]] | None = None,
        neighbours: NeighbourSettings | Mapping[str, Any] | bool | None = None,
    ) -> EvalReport:
        """Run the suites (evals.yaml's by default); ``budget`` shares the dollar cap with other runs.

        Options left None take evals.yaml's value. ``llm`` is None (nl2sql.yaml's own llm
        section, reported as ``default``), one LLMConfig, or a mapping of names to them;
        ``cases`` narrows by case id or tag; ``pass_numbers`` runs exactly those pass indexes;
        ``on_case(config, record, spent)`` is called after each case run. ``extra_scorers``
        (name -> scorer class, written in code) run beside the named scorers, for this run only;
        their summaries reach the report. ``workers`` shards the case runs over that many
        processes (``running.shards``; None: up to two on big runs of a mode that spends nothing).
        ``engines`` (name -> engine entry, e.g. ``{"kind": "http", "url": ...}``) are asked
        through the engine contract, each a config of mode full. ``neighbours`` grades every
        pass on neighbour databases too: settings (or a mapping of them), True for the defaults,
        False for none; None takes evals.yaml's ``neighbours:``."""
        from nl2sql_assets.evaluation.running import RunRequest

        registry = None
        if extra_scorers:
            registry = self._project.scorers.copy()
            for name, cls in extra_scorers.items():
                registry.add(name, cls)
            base = list(scorers) if scorers is not None else list(self.config.evals_config.scorers)
            scorers = [*base, *(n for n in extra_scorers if n not in base)]
        request = RunRequest(
            suites=suites, mode=mode, llm=llm, cases=cases, roles=roles, scorers=scorers, curated=curated,
            passes=passes, pass_numbers=pass_numbers, max_cost_usd=max_cost_usd, clarify=clarify, workers=workers,
            engines={name: dict(entry) for name, entry in engines.items()} if engines is not None else None,
            neighbours=_neighbour_request(neighbours),
        )
        return self.run_request(request, on_case=on_case, budget=budget, scorers=registry)

    def run_request(self, request: RunRequest, *, on_case: OnCase | None = None,
                    budget: SpendLedger | None = None, scorers: ScorerRegistry | None = None) -> EvalReport:
        """The report of a run request: its case runs, reported once."""
        from nl2sql_assets.evaluation.reporting import build_report

        runs = self.run_cases(request, on_case=on_case, budget=budget, scorers=scorers)
        registry = scorers or self._project.scorers
        return build_report(runs.records, runs.meta, scorer_classes={n: registry.get(n) for n in registry.names()})

    def run_streamed(self, request: RunRequest, records: Path, *, on_case: OnCase | None = None) -> EvalReport:
        """The report of a run request whose case records go to ``records`` (JSON Lines) as they
        finish, in the run's order at the end; the boards are built in one pass over that file and
        hold no record (``reporting.streamed``), so a run's memory does not grow with its records."""
        from nl2sql_assets.evaluation.reporting.report import report_from_records
        from nl2sql_assets.evaluation.reporting.streamed import RecordStream

        with RecordStream(records) as stream:

            def streamed(config: str, record: Any, spent: float) -> None:
                stream.on_case(config, record, spent)
                if on_case is not None:
                    on_case(config, record, spent)

            runs = self.run_cases(request, on_case=streamed, keep_records=False)
            path = stream.finish(runs.order)
        registry = self._project.scorers
        return report_from_records(path, runs.meta, scorer_classes={n: registry.get(n) for n in registry.names()})

    def run_cases(self, request: RunRequest, *, on_case: OnCase | None = None,
                  budget: SpendLedger | None = None, scorers: ScorerRegistry | None = None,
                  keep_records: bool = True) -> CaseRuns:
        """The case records and the run's metadata, on the project's engine and scorers (or the
        registry ``scorers``); ``keep_records=False``: only their keys (a caller that streams them)."""
        from nl2sql_assets.evaluation.running import run_cases

        project = self._project
        return run_cases(request, project.engine, scorers=scorers or project.scorers, on_case=on_case,
                         budget=budget, index_folder=project.warehouse.eval_index_dir, keep_records=keep_records)

    def gate(self, report: EvalReport, baseline: Any) -> GateResult:
        from nl2sql_assets.evaluation.history import gate

        return gate(report, baseline, self.config.evals_config.gate)

    def regenerate(self, path: str | Path, *, allow_packaged: bool = False) -> RegenerateReport:
        from nl2sql_assets.evaluation.suites import regenerate

        return regenerate(Path(path), self._project.registry, allow_packaged=allow_packaged)

    def seed(
        self,
        datasource_id: str,
        *,
        count: int = 20,
        out: str | Path,
        role: str | None = None,
        max_cost_usd: float | None = None,
        llm: LLMConfig | None = None,
    ) -> SeedReport:
        """Draft up to ``count`` unreviewed cases from the datasource's schema as ``role`` sees it."""
        from nl2sql_assets.evaluation.suites import seed

        return seed(self.config, datasource_id, count=count, out=out, role=role, max_cost_usd=max_cost_usd,
                    registry=self._project.registry, llm=llm)

    def scorers(self) -> list[str]:
        return self._project.scorers.names()


class Feedback:
    """``project.feedback``: mark stored case runs good or bad, and export the good ones as drafts."""

    def __init__(self, project: Project) -> None:
        self._project = project

    def rate(self, suite: str, config: str, case: str, rating: str, *, pass_index: int | None = None,
             note: str = "") -> Any:
        """Mark the stored run ``case`` (``case_id@role``) good or bad (see history.feedback)."""
        from nl2sql_assets.evaluation.history.feedback import rate

        return rate(self._project.warehouse, suite, config, case, rating, pass_index=pass_index,  # type: ignore[arg-type]
                    note=note)

    def export(self, out: str | Path, *, suites: list[str] | None = None, configs: list[str] | None = None) -> Any:
        """Write every thumbs-up stored run (marked good) as a draft case (origin feedback) to ``out``."""
        from nl2sql_assets.evaluation.history.feedback import export_good

        return export_good(self._project.warehouse, out, config=self._project.config, suites=suites, configs=configs)
