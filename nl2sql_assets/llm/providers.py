"""Models we have run end to end: each one's litellm name and the temperature it accepts.

Some newer models reject ``temperature`` outright (reasoning models); for those we send none.
"""

from __future__ import annotations

from dataclasses import dataclass

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
