"""Named LLM configs: an llm section found by name, for the mode that runs models.

A name is a YAML file in the project's ``configs/`` folder, a shipped preset, or ``default``
(nl2sql.yaml's own llm section). Names become Dagster partition keys, so ``config.validate_config_name``
holds them to letters, digits, ``_``, ``.`` and ``-`` (a ``|`` or ``...`` would silently break
multi-partition keys). Which mode a name runs in is the registry's business (``running.modes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from nl2sql_assets.config import LLMConfig, ProjectConfig, validate_config_name
from nl2sql_assets.errors import RunRefused

DEFAULT_CONFIG = "default"  # nl2sql.yaml's own llm section, or the one section a run is given


def project_configs_dir(config: ProjectConfig) -> Path:
    return config.root / "configs"


def llm_config_names(config: ProjectConfig) -> list[str]:
    """The LLM configs a project can run: ``default`` when nl2sql.yaml has its own llm section,
    the shipped presets, and ``configs/*.yaml``."""
    from nl2sql_assets.llm.presets import PRESETS_DIR

    names: list[str] = [DEFAULT_CONFIG] if config.llm.default is not None else []
    for folder in (PRESETS_DIR, project_configs_dir(config)):
        if folder.is_dir():
            names.extend(p.stem for p in sorted(folder.glob("*.yaml")))
    return names


def find_llm_config(name: str, config: ProjectConfig) -> LLMConfig | None:
    """The llm section named ``name``: ``default``, the project's ``configs/<name>.yaml``, else a
    shipped preset; None when there is none."""
    if name == DEFAULT_CONFIG:
        return config.llm
    from nl2sql_assets.llm.presets import PRESETS_DIR, load_llm_file

    for folder in (project_configs_dir(config), PRESETS_DIR):
        path = folder / f"{name}.yaml"
        if path.is_file():
            return load_llm_file(path)
    return None


def llm_sections(config: ProjectConfig, llm: LLMConfig | Mapping[str, LLMConfig] | None) -> dict[str, LLMConfig]:
    """The named llm sections a run answers with: the project's own as ``default`` when none is
    given, one section as ``default``, or a mapping of (validated) names to sections."""
    if llm is None:
        return {DEFAULT_CONFIG: config.llm}
    if isinstance(llm, LLMConfig):
        return {DEFAULT_CONFIG: llm}
    if not isinstance(llm, Mapping) or not llm:
        raise RunRefused("llm must be None, one llm section (LLMConfig) or a non-empty mapping of names to them")
    out: dict[str, LLMConfig] = {}
    for name, section in llm.items():
        validate_config_name(str(name))
        if not isinstance(section, LLMConfig):
            raise RunRefused(f"llm[{name!r}] must be an LLMConfig, not {type(section).__name__}")
        out[str(name)] = section
    return out
