"""The hook a dollar cap holds a run's model calls by: asked before every call, told after.

The LLM client knows nothing of runs or caps. A caller that spends under a cap (an eval run's case
loop) sets ``CALL_GUARD`` for the task that answers one case; every call the client makes in that
task, each retry included, first asks ``before_call`` (which raises ``CapReached`` when the call
could pass the cap) and afterwards reports itself to ``after_call``, which prices and settles it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

from nl2sql_assets.llm.calls import LLMCall


class CapReached(Exception):
    """A model call was not made: with what is spent and held, it could pass the dollar cap. The
    case it belongs to ends here, stopped by the cap (never scored as the model's failure)."""


class CallGuard(Protocol):
    def before_call(self, node: str, model: str) -> None:
        """Raise ``CapReached`` when the next call (or retry) of ``node`` could pass the cap."""
        ...

    def after_call(self, call: LLMCall) -> None:
        """Settle a call that went out (its attempts so far when it was cut short)."""
        ...


#: The guard of the task making calls now (None: nothing to hold them to).
CALL_GUARD: ContextVar[CallGuard | None] = ContextVar("nl2sql_call_guard", default=None)
