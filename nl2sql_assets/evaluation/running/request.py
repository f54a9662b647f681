"""The run request: every option of a run, as data.

It is built at the edges (the CLI, ``project.evals.run``, a Dagster partition), handed down to
the runner as it is, and recorded as given in the run's metadata, so a report says exactly what
was asked for. What is not data travels beside it: the callback, a shared budget ledger, and the
project's engine and scorers. Options left None take evals.yaml's value when the run starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_serializer, field_validator

from nl2sql_assets.config import (
    LLMConfig,
    NeighbourSettings,
    ProjectConfig,
    StrictModel,
    validate_config_name,
)
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running.modes import get_mode, llm_mode, resolve_config
from nl2sql_assets.evaluation.running.named_configs import DEFAULT_CONFIG

REDACTED = "<redacted>"


class RunRequest(StrictModel):
    """What to run: the suites, the mode, the llm sections (a mode that takes them), which cases
    and roles, the scorers, curated answers, how many passes (or exactly which), the dollar cap
    and whether clarify cases run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suites: list[Path] | None = None  # None: the suites evals.yaml names
    mode: str = "full"
    llm: dict[str, LLMConfig] | None = None  # config name -> llm section; None: nl2sql.yaml's own, as "default"
    cases: list[str] | None = None  # case ids or tags
    roles: list[str] | None = None
    scorers: list[str] | None = None
    curated: bool | None = None
    passes: int | None = None
    pass_numbers: list[int] | None = None  # exactly these pass indexes (a Dagster partition runs one)
    max_cost_usd: float | None = None
    #: ask the roles whose outcome is clarify; None: evals.yaml's ``clarify`` (off unless set)
    clarify: bool | None = None
    #: a suite holding nothing this mode runs (a suite of policy probes in mode retrieval) makes
    #: an empty run, every case counted as left out, rather than an error: a Dagster partition
    #: runs every config on every suite
    allow_empty: bool = Field(default=False, exclude_if=lambda v: not v)
    #: plans per question for every case run, in place of the engine's and the cases' own setting
    #: (a paired measure of candidate selection over the whole suite); None: theirs
    candidates: int | None = None
    #: Worker processes for the case runs (``running.shards``); None: up to two, on big runs.
    workers: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    #: Run only the jobs of one shard, (index, count): the cases ``running.shards.deal`` gives
    #: shard ``index`` of ``count`` (a worker process; it never shards again).
    shard: tuple[int, int] | None = Field(default=None, exclude_if=lambda v: v is None)
    #: config name -> engine entry (``{kind: http, url, ...}``, ``engines.kinds``): engines asked
    #: through the engine contract beside (or instead of) the llm sections; mode full only
    engines: dict[str, dict[str, Any]] | None = Field(default=None, exclude_if=lambda v: v is None)
    #: grade every pass on neighbour databases too: these settings, ``False`` for none, None:
    #: evals.yaml's ``neighbours:`` (none unless set)
    neighbours: NeighbourSettings | Literal[False] | None = Field(default=None, exclude_if=lambda v: v is None)

    def neighbour_settings(self, config: ProjectConfig) -> NeighbourSettings | None:
        """The neighbour settings the run grades on: the request's word, else evals.yaml's."""
        if self.neighbours is False:
            return None
        return self.neighbours if self.neighbours is not None else config.evals_config.neighbours

    def asks_clarify(self, config: ProjectConfig) -> bool:
        """Whether the roles whose outcome is clarify are asked: the request's word, else evals.yaml's."""
        return self.clarify if self.clarify is not None else config.evals_config.clarify

    @field_validator("mode")
    @classmethod
    def _registered(cls, mode: str) -> str:
        return get_mode(mode).name  # RunRefused names the registered modes

    @field_validator("llm", mode="before")
    @classmethod
    def _named_sections(cls, llm: Any) -> Any:
        """One llm section is config ``default``; a mapping's names must be partition keys."""
        if llm is None or isinstance(llm, LLMConfig):
            return None if llm is None else {DEFAULT_CONFIG: llm}
        if not isinstance(llm, Mapping) or not llm:
            raise RunRefused("llm must be None, one llm section (LLMConfig) or a non-empty mapping of names to them")
        for name in llm:
            validate_config_name(str(name))
        return dict(llm)

    @field_validator("engines")
    @classmethod
    def _engine_entries(cls, engines: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
        """Each entry valid for its kind; names are partition keys. Kept as given (JSON)."""
        if engines is None:
            return None
        if not engines:
            raise RunRefused("engines must be None or a non-empty mapping of names to engine entries")
        from nl2sql_assets.engines.kinds import parse_engine_config

        for name, entry in engines.items():
            validate_config_name(name)
            parse_engine_config(name, entry)
        return engines

    @field_serializer("engines")
    def _engines_without_secrets(self, engines: dict[str, dict[str, Any]] | None) -> dict[str, Any] | None:
        """Recorded without secrets: header values are written as ``<redacted>``."""
        if engines is None:
            return None
        return {name: {**entry, **({"headers": dict.fromkeys(entry["headers"], REDACTED)}
                                   if isinstance(entry.get("headers"), dict) else {})}
                for name, entry in engines.items()}

    @field_validator("passes")
    @classmethod
    def _positive_passes(cls, passes: int | None) -> int | None:
        if passes is not None and passes < 1:
            raise RunRefused(f"passes must be at least 1, got {passes}")
        return passes

    @field_validator("candidates")
    @classmethod
    def _candidate_count(cls, candidates: int | None) -> int | None:
        if candidates is not None and not 1 <= candidates <= 10:
            raise RunRefused(f"candidates must be 1 to 10 plans per question, got {candidates}")
        return candidates

    @field_validator("pass_numbers")
    @classmethod
    def _pass_numbers(cls, numbers: list[int] | None) -> list[int] | None:
        if numbers and any(n < 1 for n in numbers):
            raise RunRefused(f"pass numbers start at 1, got {sorted(set(numbers))}")
        return numbers

    @field_serializer("llm")
    def _without_secrets(self, llm: dict[str, LLMConfig] | None) -> dict[str, Any] | None:
        """Recorded without secrets: API keys and extra headers are written as ``<redacted>``."""
        if llm is None:
            return None
        return {name: _redacted(section.model_dump(mode="json")) for name, section in llm.items()}

    @classmethod
    def for_config(cls, name: str, config: ProjectConfig, **options: Any) -> RunRequest:
        """The request a named config makes (a Dagster partition): its mode, and its llm section
        under its own name for a mode that takes one."""
        if name in config.engines:  # an engine named in nl2sql.yaml is a config of its own
            return cls(mode=llm_mode().name, engines={name: config.engines[name]}, **options)
        mode, section = resolve_config(name, config)
        return cls(mode=mode, llm={name: section} if section is not None else None, **options)


def _redacted(section: dict[str, Any]) -> dict[str, Any]:
    for settings in [section.get("default"), *(section.get("nodes") or {}).values()]:
        if not isinstance(settings, dict):
            continue
        if settings.get("api_key"):
            settings["api_key"] = REDACTED
        headers = (settings.get("extra") or {}).get("extra_headers")
        if isinstance(headers, dict):
            settings["extra"]["extra_headers"] = dict.fromkeys(headers, REDACTED)
    return section
