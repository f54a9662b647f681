"""Mode ``full``: the whole engine on the configured model(s), priced and held under a dollar cap.

Case runs go out up to ``settings.max_concurrency`` at a time (model calls are mostly waiting),
each first reserving the most expensive case cost seen so far against the cap, and each model call
checked against it before it goes out (``loops.under_cap``, ``running.spend``): the cap is passed
by at most the calls in flight when it is reached (one case at a time: at most one call).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import ClassVar

from nl2sql_assets.config import NODE_NAMES, GateSettings, LLMConfig
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running.modes import loops
from nl2sql_assets.evaluation.running.modes.base import (
    CaseJob,
    CaseLoop,
    ConfigRun,
    GateRules,
    Lineup,
    Measure,
    Mode,
    RunSetup,
    Stopped,
    models_of,
)
from nl2sql_assets.evaluation.running.named_configs import llm_sections


class FullMode(Mode):
    name: ClassVar[str] = "full"
    needs_key: ClassVar[bool] = True
    takes_llm: ClassVar[bool] = True
    uses_curated: ClassVar[bool] = True

    @contextlib.contextmanager
    def lineup(self, setup: RunSetup) -> Iterator[Lineup]:
        config = setup.config
        evals = config.evals_config
        engines = setup.engines or {}
        only_engines = bool(engines) and setup.llm is None  # no model of ours is called
        if only_engines:
            from nl2sql_assets.engines.lineup import engines_only_cap

            cap = engines_only_cap(engines, setup.max_cost_usd, evals.max_cost_usd)
        else:
            cap = setup.max_cost_usd if setup.max_cost_usd is not None else evals.max_cost_usd
            if cap is None:
                raise RunRefused(
                    "mode full calls a paid model and needs a dollar cap: pass max_cost_usd or set it in evals.yaml"
                )
        if cap is not None and cap <= 0:
            raise RunRefused(f"max_cost_usd must be above 0, got {cap}")
        curated = evals.curated if setup.curated is None else setup.curated
        if engines and not only_engines:
            from nl2sql_assets.engines.lineup import refuse_uncosted

            refuse_uncosted(engines, cap)  # the cap covers every config of the run
        sections = llm_sections(config, setup.llm) if not only_engines else {}
        nodes = [n for n in NODE_NAMES if n != "curated" or (curated and config.curated)]
        from nl2sql_assets.llm.prices import check_prices

        check_prices(sections, nodes)  # before any call: an unpriced model stops the run here
        from nl2sql_assets.llm.providers import missing_credentials

        if problems := missing_credentials(sections, nodes):
            raise RunRefused("no API key for mode full:\n  " + "\n  ".join(problems))
        engine = setup.engine
        configs: dict[str, ConfigRun] = {}
        for name, section in sections.items():
            runtime = engine.derive(llm=section, curated=curated, plan_cache=False, refusal_names_tables=False)
            generated = (
                engine.derive(llm=section, curated=False, plan_cache=False, refusal_names_tables=False)
                if curated and config.curated
                else None
            )
            configs[name] = ConfigRun(name, section, runtime, models_of(section, nodes), generated)
        if engines:
            from nl2sql_assets.engines.lineup import engine_runtimes
            from nl2sql_assets.engines.runtime import ENGINE_NODE

            for name in engines:
                if name in configs:
                    raise RunRefused(f"config {name!r} is both an llm section and an engine: name them apart")
            built = engine_runtimes(engines, engine.derive(plan_cache=False), setup.runs)
            for name, (runtime, described) in built.items():
                # no llm section of ours: the engine's calls are priced by what it reports
                configs[name] = ConfigRun(name, LLMConfig(), runtime, {ENGINE_NODE: described}, engine=True)
        settings = {"plan_cache": False, "max_concurrency": config.settings.max_concurrency,
                    "retry_budget": config.settings.retry_budget}
        yield Lineup(configs, settings, curated=curated, max_cost_usd=cap)

    async def execute(self, loop: CaseLoop, jobs: Sequence[CaseJob]) -> Stopped | None:
        cap = loop.lineup.max_cost_usd  # None: engines only, none of which reports cost
        return await loops.under_cap(loop, jobs, cap if cap is not None else math.inf,
                                     loop.config.settings.max_concurrency)

    def gate_rules(self, settings: GateSettings, curated: bool) -> GateRules:
        """Real models are not deterministic: a few flips are allowed, a significant drop is not;
        with curated answers on, the model's own path (the curated-off reruns) is gated too."""
        measures: tuple[Measure, ...] = ("execution", "execution_generated") if curated else ("execution",)
        return GateRules(measures=measures, max_lost=settings.max_regressions, alpha=settings.alpha)

    def series_of(self, roles: Sequence[str], curated: bool) -> tuple[tuple[str, ...], bool | None]:
        """A paid run may ask a few roles only, with curated answers on or off: each is its own series."""
        return tuple(sorted(roles)), curated
