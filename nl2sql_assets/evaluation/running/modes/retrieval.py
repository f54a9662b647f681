"""Mode ``retrieval``: datasource routing and schema retrieval only, on the local embedder (no key,
no model call, no cost).

Every approved answerable case (and routing case) runs once per role allowed to read it. The
search always runs (``full_snapshot_max_tables`` is 0 for the run), each case is retrieved against
the datasource it names, and its query is the question alone. Case runs go one at a time: the
embedder already uses both cores. Nothing executes, so a case is read by its status. Policy
probes ask no question: the runner leaves them out and counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from nl2sql_assets.config import GateSettings, LLMConfig
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running.modes import loops
from nl2sql_assets.evaluation.running.modes.base import (
    CaseJob,
    CaseLoop,
    ConfigRun,
    GateRules,
    Lineup,
    Mode,
    RunSetup,
    Stopped,
)
from nl2sql_assets.evaluation.running.selection import RoleRun


class RetrievalMode(Mode):
    name: ClassVar[str] = "retrieval"
    config_name: ClassVar[str | None] = "retrieval"
    no_llm: ClassVar[str] = "mode retrieval calls no model"
    executes: ClassVar[bool] = False
    #: A policy probe has no question to route or retrieve for: left out, and counted.
    kinds: ClassVar[frozenset[str]] = frozenset({"answer", "routing"})

    def select(self, runs: list[RoleRun]) -> list[RoleRun]:
        """The roles allowed to read an answerable case (or a routing case): a refusal or an
        unanswerable question has nothing to retrieve."""
        return [rr for rr in runs if rr.expected == "allowed" and (rr.case.answerable or rr.case.kind == "routing")]

    nothing_selected: ClassVar[str] = "no selected case is answerable by a role allowed to read it"

    @contextlib.contextmanager
    def lineup(self, setup: RunSetup) -> Iterator[Lineup]:
        """The project's retriever and router, with the search always on and no curated answers;
        the settings a report keeps so two runs are compared like for like."""
        engine = setup.engine
        retriever, router = engine.retriever, engine.router
        if retriever is None or router is None:
            raise RunRefused("mode retrieval needs the engine's schema retriever and datasource router")
        runtime = engine.derive(curated=False, plan_cache=False, refusal_names_tables=False,
                                full_snapshot_max_tables=0)
        r, routing = setup.config.settings.retrieval, setup.config.settings.routing
        describe = getattr(retriever, "describe", None)
        described = describe() if callable(describe) else {}
        settings: dict[str, Any] = {
            "full_snapshot_max_tables": 0,
            "k_tables": r.k_tables,
            "k_columns": r.k_columns,
            "mmr_lambda": r.mmr_lambda,
            **{k: v for k, v in described.items() if k not in ("k_tables", "k_columns", "mmr_lambda")},
            "routing_candidates": routing.candidates,
            "routing_max_datasources": routing.max_datasources,
            "query": "the question alone",
        }
        settings.setdefault("embedder", type(retriever).__name__)
        name = self.config_name or self.name
        yield Lineup({name: ConfigRun(name, LLMConfig(), runtime, {"retriever": settings["embedder"]})}, settings)

    async def execute(self, loop: CaseLoop, jobs: Sequence[CaseJob]) -> Stopped | None:
        # Load the embedder and every index first, so latency is the search alone.
        for cfg in loop.lineup.configs.values():
            for hook in (cfg.runtime.router, cfg.runtime.retriever):
                prepare = getattr(hook, "prepare", None)
                if callable(prepare):
                    await asyncio.to_thread(prepare)
        await loops.retrieving_in_order(loop, jobs)
        return None

    def gate_rules(self, settings: GateSettings, curated: bool) -> GateRules:
        """Nothing executes: a case is read by its status (recall and routing), and no case may flip."""
        return GateRules(measures=("status",))
