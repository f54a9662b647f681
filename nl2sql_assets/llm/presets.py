"""Named LLM configs: the shipped presets (YAML ``llm`` sections), one-model configs, and ``--llm`` specs.

A preset is an ordinary ``llm`` section in a file, so a user's own file works the same way.
Keys come from the environment (``${env:OPENAI_API_KEY:-}``): an unset key loads as empty,
so a preset can be priced and checked without one; litellm then reads the provider's own
variable at call time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from nl2sql_assets.config import (
    ConfigError,
    LLMConfig,
    ModelSettings,
    format_validation_error,
    substitute_env,
)
from nl2sql_assets.llm.providers import VERIFIED_MODELS, default_temperature
from nl2sql_assets.yamlio import YamlFileError, load_yaml_text

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def load_llm_file(path: str | Path, environ: Mapping[str, str] | None = None) -> LLMConfig:
    """An ``llm`` section from a YAML file: either the section itself or a mapping with an ``llm`` key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: llm file not found") from None
    try:
        data = load_yaml_text(text, path)
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    prefix: tuple[str, ...] = ()
    if isinstance(data, dict) and "llm" in data:
        data, prefix = data["llm"], ("llm",)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an llm section (a mapping with default/nodes/prices)")
    data = substitute_env(data, path, environ, ".".join(prefix))
    try:
        return LLMConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, path, text, prefix)) from None


def model_config(model: str) -> LLMConfig:
    """``model`` on every node. A verified model brings its provider and temperature; any
    other must be written ``provider/model`` and runs at temperature 0 (none for Anthropic)."""
    verified = VERIFIED_MODELS.get(model)
    if verified is None and "/" in model:
        provider, bare = model.split("/", 1)
        v = VERIFIED_MODELS.get(bare)
        verified = v if v is not None and v.provider == provider else None
    if verified is not None:
        return LLMConfig(
            default=ModelSettings(model=verified.litellm_model, temperature=verified.temperature)
        )
    if "/" not in model:
        raise ConfigError(
            f"model {model!r} is not a verified model ({', '.join(sorted(VERIFIED_MODELS))}); "
            "write it as provider/model, e.g. openrouter/meta-llama/llama-3.3-70b-instruct or ollama/llama3"
        )
    provider = model.split("/", 1)[0]
    return LLMConfig(default=ModelSettings(model=model, temperature=default_temperature(provider)))


def _resolve_target(target: str) -> tuple[str, LLMConfig]:
    if target in preset_names():
        return target, load_llm_file(PRESETS_DIR / f"{target}.yaml")
    path = Path(target).expanduser()
    if path.is_file():
        return path.stem, load_llm_file(path)
    if path.suffix in (".yaml", ".yml"):
        raise ConfigError(f"--llm {target}: file not found")
    # A short form of a preset's name, e.g. "mini-helpers" for "gpt-5.4-mini-helpers".
    matches = [n for n in preset_names() if n.endswith("-" + target)]
    if len(matches) == 1:
        return matches[0], load_llm_file(PRESETS_DIR / f"{matches[0]}.yaml")
    if target in VERIFIED_MODELS or "/" in target:
        name = target.rsplit("/", 1)[-1]
        return name, model_config(target)
    raise ConfigError(
        f"--llm {target}: not a preset ({', '.join(preset_names())}), an llm file, "
        "a verified model or a provider/model name"
    )


def resolve_llm_spec(spec: str) -> tuple[str, LLMConfig]:
    """What ``--llm`` takes: ``PRESET``, ``FILE`` (named by its stem), ``MODEL`` or ``NAME=`` any of them."""
    name: str | None = None
    target = spec
    if "=" in spec:
        name, target = spec.split("=", 1)
        if not _NAME.match(name):
            raise ConfigError(f"--llm {spec}: a config name holds only letters, digits, '_', '.' and '-'")
    if not target:
        raise ConfigError(f"--llm {spec}: nothing after '='")
    default_name, llm = _resolve_target(target)
    name = name or default_name
    if not _NAME.match(name):
        raise ConfigError(f"--llm {spec}: name it with NAME=..., using letters, digits, '_', '.' and '-'")
    return name, llm
