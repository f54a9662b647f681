"""The configs a run makes of the engines it is given: each engine one config of mode full,
asked through the engine contract (``engines.runtime``) on the project's datasources and policy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nl2sql_assets.engines.kinds import kind_of, parse_engine_config
from nl2sql_assets.engines.runtime import EngineRuntime
from nl2sql_assets.errors import CapRefused, RunRefused


def refuse_uncosted(engines: Mapping[str, Mapping[str, Any]], cap: float | None) -> None:
    """A dollar cap is only held against an engine that reports what each answer cost: refuse,
    before anything runs, a cap over an engine whose entry does not say ``reports_cost: true``."""
    if cap is None:
        return
    silent = [name for name, entry in engines.items() if not kind_of(parse_engine_config(name, entry))
              .reports_cost(parse_engine_config(name, entry))]
    if silent:
        raise CapRefused(
            f"a dollar cap of ${cap:g} cannot be held against engine(s) {', '.join(map(repr, silent))}: they report no "
            "cost (set reports_cost: true in the engine's entry once every reply carries cost_usd), or run them "
            "without a cap")


def engine_runtimes(engines: Mapping[str, Mapping[str, Any]], checker: Any,
                    runs: Any) -> dict[str, tuple[EngineRuntime, str]]:
    """Config name -> (the engine's runtime, how records name it), each built by its kind (a
    class that does not fit the interface is refused here, before any case runs)."""
    datasources = {(rr.suite, rr.case.id): tuple(rr.case.datasources) for rr in runs}
    out: dict[str, tuple[EngineRuntime, str]] = {}
    for name, entry in engines.items():
        config = parse_engine_config(name, entry)
        kind = kind_of(config)
        described = kind.describe(config)
        out[name] = (EngineRuntime(name, kind.build(config), described, checker, datasources), described)
    return out


def engines_only_cap(engines: Mapping[str, Mapping[str, Any]], asked: float | None,
                     default: float | None) -> float | None:
    """The cap of a run that calls no model of ours: the one asked for (refused against an
    engine that reports no cost); else evals.yaml's when every engine reports cost; else none."""
    if asked is not None:
        refuse_uncosted(engines, asked)
        return asked
    try:
        refuse_uncosted(engines, default)
    except RunRefused:
        return None  # evals.yaml's cap is for the models we pay; these engines price nothing we can hold
    return default
