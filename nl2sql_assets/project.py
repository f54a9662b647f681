"""The Python API: ``Project.load("nl2sql.yaml")`` with ``.engine`` and ``.evals``.

A thin facade over the library: it owns the datasource registry and the event bus of one
project and hands them to the engine and the eval runner, so both see the same databases.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nl2sql_assets.config import LLMConfig, ProjectConfig, load_config
from nl2sql_assets.engine.events import EventBus

if TYPE_CHECKING:
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.engine.pipeline import Engine
    from nl2sql_assets.evaluation.history.warehouse import SpendLedger
    from nl2sql_assets.evaluation.reporting.gate import GateResult
    from nl2sql_assets.evaluation.reporting.report import EvalReport
    from nl2sql_assets.evaluation.running.results import CaseRecord
    from nl2sql_assets.evaluation.suites import EvalSuite
    from nl2sql_assets.evaluation.suites.regenerate import RegenerateReport
    from nl2sql_assets.evaluation.suites.seed import SeedReport


class Project:
    """One project folder: its config, databases, engine and evals."""

    def __init__(self, config: ProjectConfig) -> None:
        self.config = config
        self.bus = EventBus()
        self._lock = threading.Lock()
        self._registry: DatasourceRegistry | None = None
        self._engine: Engine | None = None
        self.evals = Evals(self)

    @classmethod
    def load(cls, path: str | Path = "nl2sql.yaml") -> Project:
        return cls(load_config(path))

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
    def engine(self) -> Engine:
        registry = self.registry
        with self._lock:
            if self._engine is None:
                from nl2sql_assets.engine.pipeline import Engine
                from nl2sql_assets.retrieval.routing import default_hooks

                # The schema retriever and the router embed lazily: nothing loads until a
                # datasource above settings.retrieval.full_snapshot_max_tables is asked.
                retriever, router = default_hooks(self.config, registry)
                self._engine = Engine(self.config, registry=registry, bus=self.bus, retriever=retriever,
                                      router=router)
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
        on_case: Callable[[str, CaseRecord, float], None] | None = None,
        clarify: bool = False,
        budget: SpendLedger | None = None,
    ) -> EvalReport:
        """Run the suites (evals.yaml's by default); ``budget`` shares the dollar cap with other runs."""
        from nl2sql_assets.evaluation.running.runner import run_eval

        return run_eval(
            self.config,
            suites=[Path(s) for s in suites] if suites is not None else None,
            mode=mode,
            llm=llm,
            cases=cases,
            roles=roles,
            scorers=scorers,
            curated=curated,
            passes=passes,
            pass_numbers=pass_numbers,
            max_cost_usd=max_cost_usd,
            on_case=on_case,
            clarify=clarify,
            registry=self._project.registry,
            bus=self._project.bus,
            engine=self._project.engine,
            budget=budget,
        )

    def gate(self, report: EvalReport, baseline: Any) -> GateResult:
        from nl2sql_assets.evaluation.reporting.gate import gate

        return gate(report, baseline, self.config.evals_config.gate)

    def regenerate(self, path: str | Path, *, allow_packaged: bool = False) -> RegenerateReport:
        from nl2sql_assets.evaluation.suites.regenerate import regenerate

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
        from nl2sql_assets.evaluation.suites.seed import seed

        return seed(self.config, datasource_id, count=count, out=out, role=role, max_cost_usd=max_cost_usd,
                    registry=self._project.registry, llm=llm)

    def scorers(self) -> list[str]:
        from nl2sql_assets.evaluation.running.scorers import ScorerRegistry

        return ScorerRegistry.default().names()
