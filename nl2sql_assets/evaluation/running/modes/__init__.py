"""The modes, registered once. A mode name (the CLI's ``--mode``, a request, a record) and a config
name (a Dagster partition) both resolve here.

Adding a mode is one module (a ``Mode`` subclass) and one entry in ``MODES``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from nl2sql_assets.config import ConfigError, LLMConfig, ProjectConfig, validate_config_name
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running.modes.base import (
    Budget,
    CaseJob,
    CaseLoop,
    ConfigRun,
    GateRules,
    Lineup,
    Measure,
    Mode,
    RunSetup,
    Stopped,
)
from nl2sql_assets.evaluation.running.modes.full import FullMode
from nl2sql_assets.evaluation.running.modes.plans import PlansMode
from nl2sql_assets.evaluation.running.modes.retrieval import RetrievalMode
from nl2sql_assets.evaluation.running.named_configs import (
    DEFAULT_CONFIG,
    find_llm_config,
    llm_config_names,
    project_configs_dir,
)

#: Every mode by name, in the order a suite report prefers them (it compares the boards of the
#: first mode that has any).
MODES: dict[str, Mode] = {mode.name: mode for mode in (FullMode(), PlansMode(), RetrievalMode())}


def _expected() -> str:
    names = list(MODES)
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


def get_mode(name: str) -> Mode:
    """The mode of that name; RunRefused names the registered ones."""
    mode = MODES.get(name)
    if mode is None:
        raise RunRefused(f"unknown mode {name!r}: expected {_expected()}")
    return mode


def _known(name: str) -> str:
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r}: expected {_expected()}")
    return name


#: A mode name in a model (a record, a report): validated against the registry.
ModeName = Annotated[str, AfterValidator(_known)]


def llm_mode() -> Mode:
    """The mode that runs named LLM configs (the first registered mode that takes llm sections)."""
    return next(mode for mode in MODES.values() if mode.takes_llm)


def key_free_configs() -> list[str]:
    """The configs that need no key: one per mode that owns a config name (``plans``, ``retrieval``)."""
    return [m.config_name for m in MODES.values() if m.config_name is not None and not m.needs_key]


def reserved_config_names() -> list[str]:
    """Names an LLM config may not take: the modes' own configs, and ``default``."""
    return [*(m.config_name for m in MODES.values() if m.config_name is not None), DEFAULT_CONFIG]


def discover_configs(config: ProjectConfig) -> list[str]:
    """Every config a project can run: the key-free ones, then its LLM configs (``default`` when
    nl2sql.yaml has its own llm section, the shipped presets, ``configs/*.yaml``), then the
    engines nl2sql.yaml names."""
    seen: list[str] = []
    for name in [*key_free_configs(), *llm_config_names(config), *config.engines]:
        validate_config_name(name)
        if name not in seen:
            seen.append(name)
    return seen


def resolve_config(name: str, config: ProjectConfig) -> tuple[str, LLMConfig | None]:
    """The name of the mode a config runs in, and its llm section for a mode that takes one."""
    validate_config_name(name)
    for mode in MODES.values():
        if mode.config_name == name:
            return mode.name, None
    if name in config.engines:  # an engine: asked through the engine contract, no llm section of ours
        return llm_mode().name, None
    section = find_llm_config(name, config)
    if section is None:
        raise ConfigError(f"unknown config {name!r}: not a preset, not in {project_configs_dir(config)}")
    return llm_mode().name, section


__all__ = [
    "MODES",
    "Budget",
    "CaseJob",
    "CaseLoop",
    "ConfigRun",
    "FullMode",
    "GateRules",
    "Lineup",
    "Measure",
    "Mode",
    "ModeName",
    "PlansMode",
    "RetrievalMode",
    "RunSetup",
    "Stopped",
    "discover_configs",
    "get_mode",
    "key_free_configs",
    "llm_mode",
    "reserved_config_names",
    "resolve_config",
]
