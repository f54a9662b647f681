"""Prices: a committed, dated table of USD per 1M tokens, and the arithmetic of a call's cost.

We keep our own table instead of asking litellm at run time: its cost map can change under a
run (it is fetched over the network) and costs must be reproducible from the record. A row
in ``llm.prices`` replaces the table's row for that model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nl2sql_assets.config import NODE_NAMES, LLMConfig, PriceRow
from nl2sql_assets.errors import UserError
from nl2sql_assets.llm.calls import LLMCall, Usage

_OPENAI = "OpenAI pricing page, 2026-09-21"
_ANTHROPIC = "Anthropic model table, 2026-06-24"
_LITELLM = "litellm 1.110.2 bundled price map (OpenAI list price), read 2026-11-29"

#: USD per 1M tokens. ``cache_write`` equals ``input`` for OpenAI (writing its automatic
#: cache costs nothing extra); Anthropic bills a write at 1.25x input and a read at 0.1x.
PRICES: dict[str, PriceRow] = {
    "gpt-5.4": PriceRow(input=2.50, cached_input=0.25, cache_write=2.50, output=15.00, source=_OPENAI),
    "gpt-5.4-mini": PriceRow(input=0.75, cached_input=0.075, cache_write=0.75, output=4.50, source=_OPENAI),
    "gpt-5.5": PriceRow(input=5.00, cached_input=0.50, cache_write=5.00, output=30.00, source=_LITELLM),
    "gpt-5": PriceRow(input=1.25, cached_input=0.125, cache_write=1.25, output=10.00, source=_LITELLM),
    "gpt-5-mini": PriceRow(input=0.25, cached_input=0.025, cache_write=0.25, output=2.00, source=_LITELLM),
    "gpt-4.1": PriceRow(input=2.00, cached_input=0.50, cache_write=2.00, output=8.00, source=_LITELLM),
    "gpt-4o": PriceRow(input=2.50, cached_input=1.25, cache_write=2.50, output=10.00, source=_LITELLM),
    "gpt-4o-mini": PriceRow(input=0.15, cached_input=0.075, cache_write=0.15, output=0.60, source=_LITELLM),
    "claude-opus-5": PriceRow(
        input=5.00, cached_input=0.50, cache_write=6.25, output=25.00, source=_ANTHROPIC
    ),
    "claude-sonnet-5": PriceRow(
        input=2.00, cached_input=0.20, cache_write=2.50, output=10.00, source=_ANTHROPIC
    ),
    "claude-haiku-4-5": PriceRow(
        input=1.00, cached_input=0.10, cache_write=1.25, output=5.00, source=_ANTHROPIC
    ),
}


class UnknownPriceError(UserError, LookupError):
    """A model some node would use has no price, so its spending could not be capped."""

    def __init__(self, config: str, node: str, model: str) -> None:
        self.config, self.node, self.model = config, node, model
        super().__init__(
            f"no price for model {model!r} (config {config!r}, node {node!r}); "
            f"add a row for it under llm.prices (USD per 1M tokens: input, cached_input, cache_write, output)"
        )


def _bare(model: str) -> str:
    """``openai/gpt-5.4`` → ``gpt-5.4``: the name without its provider prefix."""
    return model.split("/", 1)[1] if "/" in model else model


def price_for(
    model: str,
    overrides: Mapping[str, PriceRow] | None = None,
    *,
    config: str = "default",
    node: str = "?",
) -> PriceRow:
    """The price of ``model``: a config row first, then the committed table. Keys match a
    model name with or without its provider prefix."""
    bare = _bare(model)
    for table in (overrides or {}, PRICES):
        for name in (model, bare):
            if name in table:
                return table[name]
        for key, row in table.items():
            if _bare(key) == bare:
                return row
    raise UnknownPriceError(config, node, model)


def call_cost(usage: Usage, price: PriceRow) -> float:
    """USD for one call. Reasoning tokens are already inside output and are billed as output."""
    cached_rate = price.input if price.cached_input is None else price.cached_input
    write_rate = price.input if price.cache_write is None else price.cache_write
    plain = max(usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens, 0)
    total = (
        plain * price.input
        + usage.cached_tokens * cached_rate
        + usage.cache_write_tokens * write_rate
        + usage.output_tokens * price.output
    )
    return total / 1_000_000


def check_prices(llm_configs: Mapping[str, LLMConfig], nodes: Iterable[str] = NODE_NAMES) -> None:
    """Fail before any call when some node of some config would use an unpriced model."""
    node_list = list(nodes)
    for name, llm in llm_configs.items():
        for node in node_list:
            model = llm.for_node(node).model
            price_for(model, llm.prices, config=name, node=node)


def price_calls(calls: Iterable[LLMCall], llm: LLMConfig, *, config: str = "default") -> tuple[float, int]:
    """(USD, calls that could not be priced). Each call is priced by its node's configured model,
    so a dated snapshot name in a response never changes the price; tokens we counted ourselves
    (``token_source`` estimated or mixed) are priced like measured ones. A call that went out
    and has no count at all is unknown, never free; one that never went out cost nothing."""
    total = 0.0
    unknown = 0
    for call in calls:
        if call.priced_by_reply:  # an evaluated engine's own figure: its model is not ours to price
            if call.cost_usd is None:
                unknown += 1 if call.attempts > 0 else 0
            else:
                total += call.cost_usd
            continue
        if call.usage is None:
            unknown += 1 if call.attempts > 0 else 0
            continue
        model = llm.for_node(call.node).model
        total += call_cost(call.usage, price_for(model, llm.prices, config=config, node=call.node))
    return total, unknown
