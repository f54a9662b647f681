"""What one model call cost and took: the value types the LLM client records and the engine keeps."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from nl2sql_assets.config import StrictModel

#: Where a call's token counts come from: the provider's usage blocks, our own count with the
#: model's tokenizer (the provider sent none), or both (some attempts of each).
TokenSource = Literal["measured", "estimated", "mixed"]
#: Why a call failed for a reason outside the model's answer: the provider or the way to it.
#: why the environment failed a case run: the model provider's (auth ... not_found), or the
#: datasource's server, unreachable or gone mid-run (database)
EnvErrorKind = Literal["auth", "quota", "rate_limit", "server", "timeout", "transport", "not_found", "database"]


def combine_sources(sources: Iterable[TokenSource | None]) -> TokenSource | None:
    """One source for several counts: the same when they agree, ``mixed`` when they do not
    (None, nothing counted, is left out)."""
    found = {s for s in sources if s is not None}
    if not found:
        return None
    return found.pop() if len(found) == 1 else "mixed"


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
    #: every attempt's tokens, failed ones included (providers bill them); None only when no
    #: request went out or nothing could be counted
    usage: Usage | None = None
    token_source: TokenSource | None = None
    latency_ms: float = 0.0
    attempts: int = 1
    error: str | None = None
    #: set when the call failed for the environment (auth, quota, rate limit, 5xx, timeout,
    #: transport), not for what the model answered
    error_kind: EnvErrorKind | None = None
    status_code: int | None = None  # the provider's HTTP status of the last failed attempt
    #: an engine that prices itself (an evaluated engine's reply): priced by ``cost_usd`` alone,
    #: unknown when it reported none; never by a price row of ours
    priced_by_reply: bool = False
    cost_usd: float | None = None
