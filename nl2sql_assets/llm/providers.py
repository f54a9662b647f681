"""Models we have run end to end: each one's litellm name and the temperature it accepts.

Some newer models reject ``temperature`` outright (reasoning models); for those we send none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nl2sql_assets.config import LLMConfig

#: The environment variable litellm reads a provider's key from (and our presets name).
API_KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}


@dataclass(frozen=True)
class VerifiedModel:
    provider: str
    name: str
    temperature: float | None  # None: the model rejects a temperature, send none

    @property
    def litellm_model(self) -> str:
        return f"{self.provider}/{self.name}"


def _m(provider: str, name: str, temperature: float | None = 0.0) -> tuple[str, VerifiedModel]:
    return name, VerifiedModel(provider, name, temperature)


VERIFIED_MODELS: dict[str, VerifiedModel] = dict(
    [
        _m("openai", "gpt-5.4"),
        _m("openai", "gpt-5.4-mini"),
        _m("openai", "gpt-5.5", None),
        _m("openai", "gpt-5"),
        _m("openai", "gpt-5-mini", None),
        _m("openai", "gpt-4.1"),
        _m("openai", "gpt-4o"),
        _m("openai", "gpt-4o-mini"),
        _m("anthropic", "claude-opus-5", None),
        _m("anthropic", "claude-sonnet-5", None),
        _m("anthropic", "claude-haiku-4-5"),
    ]
)


def default_temperature(provider: str) -> float | None:
    """The temperature for a model we have not verified: 0, except none for Anthropic."""
    return None if provider == "anthropic" else 0.0


def missing_credentials(llm_configs: Mapping[str, LLMConfig], nodes: Sequence[str]) -> list[str]:
    """One line per (config, node) whose model has no key: neither ``api_key`` in its settings
    nor the provider's variable in the environment (as litellm looks it up). Checked before a
    paid run starts, so a missing key costs one clear error instead of a run of failed calls."""
    import os

    missing: dict[tuple[str, str, str], list[str]] = {}  # (config, model, keys) -> nodes
    for name, section in llm_configs.items():
        for node in nodes:
            settings = section.for_node(node)
            if settings.api_key:
                continue
            provider = settings.model.split("/", 1)[0] if "/" in settings.model else None
            variable = API_KEY_ENV.get(provider or "")
            if variable is not None and not settings.api_base:
                # a provider we know: its variable, read here (litellm's import costs seconds)
                if not os.environ.get(variable):
                    missing.setdefault((name, settings.model, variable), []).append(node)
                continue
            found = _litellm_environment(settings.model, settings.api_base)
            if not found.get("keys_in_environment", True):
                wanted = ", ".join(found.get("missing_keys") or []) or "the provider's key"
                missing.setdefault((name, settings.model, wanted), []).append(node)
    return [f"config {name!r}: {model} (nodes {', '.join(used)}) needs {wanted}; set it in the environment "
            "or as api_key in the llm section" for (name, model, wanted), used in missing.items()]


def _litellm_environment(model: str, api_base: str | None) -> dict[str, object]:
    """What litellm says a model's provider needs from the environment (any provider it knows)."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return dict(litellm.validate_environment(model=model, api_base=api_base))
