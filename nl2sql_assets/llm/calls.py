"""What one model call cost and took: the value types the LLM client records and the engine keeps."""

from __future__ import annotations

from nl2sql_assets.config import StrictModel


class Usage(StrictModel):
    """Token counts as the provider reported them. Reasoning tokens are part of output."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class LLMCall(StrictModel):
    """One model call: which node made it, with which configured model, what it used and took."""

    node: str
    model: str
    usage: Usage | None = None  # None when the provider reported nothing (a failed call)
    latency_ms: float = 0.0
    attempts: int = 1
    error: str | None = None
