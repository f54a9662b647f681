"""Named eval configs: ``plans`` and ``retrieval`` (key-free), and LLM configs (mode full).

An LLM config is an llm section found by name: a YAML file in the project's ``configs/``
folder, or a shipped preset. Names become Dagster partition keys, so they are validated
here: letters, digits, ``_``, ``.`` and ``-`` only (a ``|`` or ``...`` would silently break
multi-partition keys).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from nl2sql_assets.config import ConfigError, LLMConfig, ProjectConfig

KEY_FREE_CONFIGS = ("plans", "retrieval")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ConfigNameError(ConfigError):
    """A config name that cannot be a partition key."""


def validate_config_name(name: str) -> str:
    if not _NAME.match(name) or "..." in name or name in {".", ".."}:
        raise ConfigNameError(
            f"invalid config name {name!r}: use 1-64 letters, digits, '_', '.' or '-' (and no '...')"
        )
    return name


def project_configs_dir(config: ProjectConfig) -> Path:
    return config.root / "configs"


def discover_configs(config: ProjectConfig) -> list[str]:
    """Every config a project can run: the key-free ones, the shipped presets, ``configs/*.yaml``,
    and ``default`` when nl2sql.yaml has its own llm section."""
    from nl2sql_assets.llm.presets import PRESETS_DIR

    names: list[str] = list(KEY_FREE_CONFIGS)
    if config.llm.default is not None:
        names.append("default")
    for folder in (PRESETS_DIR, project_configs_dir(config)):
        if folder.is_dir():
            names.extend(p.stem for p in sorted(folder.glob("*.yaml")))
    seen: list[str] = []
    for name in names:
        validate_config_name(name)
        if name not in seen:
            seen.append(name)
    return seen


def resolve_config(name: str, config: ProjectConfig) -> tuple[Literal["plans", "retrieval", "full"], LLMConfig | None]:
    """The mode a config runs in, and its llm section for mode full."""
    validate_config_name(name)
    if name in KEY_FREE_CONFIGS:
        return name, None  # type: ignore[return-value]
    if name == "default":
        return "full", config.llm
    from nl2sql_assets.llm.presets import PRESETS_DIR, load_llm_file

    for folder in (project_configs_dir(config), PRESETS_DIR):
        path = folder / f"{name}.yaml"
        if path.is_file():
            return "full", load_llm_file(path)
    raise ConfigError(f"unknown config {name!r}: not a preset, not in {project_configs_dir(config)}")
