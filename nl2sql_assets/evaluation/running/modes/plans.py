"""Mode ``plans``: each case's hand-written plan through the real pipeline, on the gold LLM server
(no key, no cost).

Case runs go out concurrently, up to ``settings.max_concurrency`` at a time, because each one
mostly waits on local HTTP. Policy probes go to the policy check alone; routing cases (no plan to
serve) are left out and counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import ClassVar

from nl2sql_assets.config import NODE_NAMES, PriceRow
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running.modes import loops
from nl2sql_assets.evaluation.running.modes.base import (
    CaseJob,
    CaseLoop,
    ConfigRun,
    Lineup,
    Mode,
    RunSetup,
    Stopped,
    models_of,
)
from nl2sql_assets.evaluation.running.selection import RoleRun
from nl2sql_assets.evaluation.suites import EvalCase


class PlansMode(Mode):
    name: ClassVar[str] = "plans"
    config_name: ClassVar[str | None] = "plans"
    no_llm: ClassVar[str] = "mode plans always runs on the gold LLM"
    #: A routing case has no plan to serve (it says where a question goes): left out, and counted.
    kinds: ClassVar[frozenset[str]] = frozenset({"answer", "probe"})
    shardable: ClassVar[bool] = True

    @contextlib.contextmanager
    def lineup(self, setup: RunSetup) -> Iterator[Lineup]:
        check_plans(setup.runs)
        from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer

        cases: dict[str, EvalCase] = {}
        for rr in setup.runs:
            cases.setdefault(rr.case.id, rr.case)
        curated = bool(setup.curated and setup.config.curated)  # off unless asked: plans gate the model's path
        server = GoldLLMServer(list(cases.values()), setup.engine.bus,
                               curated=setup.config.curated if curated else ()).start()
        try:
            gold = server.llm_config()
            # The gold model is free: a zero price row keeps one pricing path for both modes.
            zero = PriceRow(input=0.0, cached_input=0.0, cache_write=0.0, output=0.0, source="gold LLM (free)")
            gold = gold.model_copy(update={"prices": {m: zero for m in set(models_of(gold, NODE_NAMES).values())}})
            runtime = setup.engine.derive(llm=gold, curated=curated, refusal_names_tables=False)
            nodes = [n for n in NODE_NAMES if n != "curated" or curated]
            name = self.config_name or self.name
            settings = setup.config.settings
            yield Lineup(
                {name: ConfigRun(name, gold, runtime, models_of(gold, nodes))},
                {"plan_cache": settings.plan_cache, "max_concurrency": settings.max_concurrency,
                 "retry_budget": settings.retry_budget},
                curated=curated,
                on_loop=server.on_running_loop,
            )
        finally:
            server.stop()

    async def execute(self, loop: CaseLoop, jobs: Sequence[CaseJob]) -> Stopped | None:
        # The gold server answers on this loop while the case runs go out: a request and its
        # answer then never pass between threads (and the GIL with them).
        serving = loop.lineup.on_loop() if loop.lineup.on_loop is not None else contextlib.nullcontext()
        async with serving:
            await loops.concurrently(loop, jobs, loop.config.settings.max_concurrency)
        return None


def check_plans(runs: Sequence[RoleRun]) -> None:
    """Every answerable case needs its hand-written plan: the gold LLM serves it. (A probe asks
    no model; routing cases never reach this mode.)"""
    missing: list[str] = []
    for rr in runs:
        needs = rr.case.kind == "answer" and rr.case.sql is not None
        if needs and rr.case.plan is None and f"{rr.suite}:{rr.case.id}" not in missing:
            missing.append(f"{rr.suite}:{rr.case.id}")
        for i, turn in enumerate(rr.case.turns):
            label = f"{rr.suite}:{rr.case.id} (earlier turn {i + 1})"
            if turn.sql is not None and turn.plan is None and label not in missing:
                missing.append(label)
    if missing:
        raise RunRefused(
            f"mode plans needs a hand-written plan for every answerable case; without one: {', '.join(missing)}"
        )
