"""A gold LLM that behaves like a real provider on a bad day: rate limits, missing usage, an
empty balance, server errors, a hung connection, an answer that is not JSON.

It serves the gold answers of ``gold_llm`` over the same real HTTP (litellm in between), so a
run against it measures what the product does with a provider's faults, not with a stub's:
what is counted and billed, what is the model's failure and what is an outage.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any, Literal

from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer, _Run

#: ok: a well-behaved provider; rate_limit_once: each request is a 429 the first time it is sent
#: (so each call is refused once, then answered, however many calls are in flight); no_usage: answers without a usage block; flaky_no_usage: both
#: (a 429 before every answer, and no usage block); quota: 402 Insufficient
#: Balance; server_error: 500; timeout: no answer before the client's deadline; malformed: an
#: answer that is not JSON (the model's failure, not the environment's).
Behaviour = Literal["ok", "rate_limit_once", "no_usage", "flaky_no_usage", "quota", "server_error", "timeout",
                    "malformed"]
BEHAVIOURS: tuple[Behaviour, ...] = ("ok", "rate_limit_once", "no_usage", "flaky_no_usage", "quota", "server_error",
                                     "timeout", "malformed")


PER_MESSAGE_TOKENS = 4  # the chat template's tokens around each message, as providers bill them


@functools.cache
def _provider_tokenizer() -> Any:
    """The provider's own tokenizer: another BPE than the one we estimate with (litellm's
    default), so an estimate against this provider has a real error. It ships with litellm."""
    import litellm.litellm_core_utils.tokenizers as bundled
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(bundled.__file__).parent / "anthropic_tokenizer.json"))


def provider_count(text: str) -> int:
    return len(_provider_tokenizer().encode(text).ids) if text else 0


def billed_usage(body: dict[str, Any], content: str) -> dict[str, int]:
    """What this provider bills for one request: every message, the response schema and the answer."""
    messages = body.get("messages") or []
    prompt = sum(provider_count(str(m.get("content") or "")) + PER_MESSAGE_TOKENS for m in messages)
    prompt += provider_count(json.dumps(body.get("response_format") or {}))
    completion = provider_count(content)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": kind}}


class FlakyLLMServer(GoldLLMServer):
    """The gold server with one ``behaviour``; ``hang_s`` is how long a ``timeout`` request waits
    (longer than the client's ``timeout_s``); ``warmup_s`` delays the first request only (a cold
    provider connection); ``delay_s`` delays every request (a model's own latency; requests are
    served on threads, so concurrent ones overlap). Every answered request is billed by this provider's own token count
    (``billed_usage``), reported or not: ``billed_prompt_tokens`` and ``billed_completion_tokens``."""

    def __init__(self, *args: Any, behaviour: Behaviour = "ok", hang_s: float = 3.0, warmup_s: float = 0.0,
                 delay_s: float = 0.0, growth: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.behaviour = behaviour
        #: each case run's calls report ``growth`` times the tokens of the case run before it (a
        #: provider whose cost jumps): the n-th case run heard of is billed growth**(n-1) times
        self.growth = growth
        self._run_order: dict[str, int] = {}
        self.hang_s = hang_s
        self.warmup_s = warmup_s
        self.delay_s = delay_s
        self.received = 0
        self.billed_prompt_tokens = 0
        self.billed_completion_tokens = 0
        self.calls_billed: list[tuple[int, int]] = []  # (prompt, completion) tokens of each billed call
        self._count = itertools.count(1)
        self._count_lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0  # the most requests it was answering at once
        self._refused: set[tuple[str | None, bytes]] = set()  # (run id, body) refused once (rate_limit_once)

    def start(self) -> FlakyLLMServer:
        provider_count("warm")  # load the tokenizer now, not inside the first request's deadline
        super().start()
        return self

    def _first_time(self, raw: bytes, run_id: str | None) -> bool:
        """True the first time this exact request of this case run arrives (its retry is the same)."""
        key = (run_id, raw)
        with self._count_lock:
            if key in self._refused:
                self._refused.discard(key)
                return False
            self._refused.add(key)
            return True

    def answer(self, body: dict[str, Any], run_id: str | None) -> dict[str, Any]:
        """As the gold server; a run it heard no event of (an engine in another process, such as
        the command line's) is found by the case question its messages quote."""
        if run_id and run_id not in self._runs:
            text = " ".join(str(m.get("content") or "") for m in body.get("messages") or []).lower()
            found = [q for q in self._by_question if q in text]
            if found:
                with self._lock:
                    self._runs[run_id] = _Run(self._by_question[max(found, key=len)], None)
        return super().answer(body, run_id)

    def respond(self, raw: bytes, run_id: str | None) -> tuple[int, dict[str, Any]]:
        with self._count_lock:
            n = next(self._count)
            self.received = n
        if n == 1 and self.warmup_s:
            time.sleep(self.warmup_s)
        if self.delay_s:
            with self._count_lock:
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            time.sleep(self.delay_s)
            with self._count_lock:
                self.in_flight -= 1
        b = self.behaviour
        if b == "quota":
            return 402, _error("Insufficient Balance: top up sk-live-0123456789abcdefghijklmnop", "insufficient_quota")
        if b == "server_error":
            return 500, _error("upstream overloaded", "server_error")
        if b in ("rate_limit_once", "flaky_no_usage") and self._first_time(raw, run_id):
            return 429, _error("Rate limit reached, retry shortly", "rate_limit_exceeded")
        if b == "timeout":
            time.sleep(self.hang_s)
            return 504, _error("gateway timeout", "timeout")
        status, reply = super().respond(raw, run_id)
        if status != 200:
            return status, reply
        usage = billed_usage(json.loads(raw or b"{}"), reply["choices"][0]["message"]["content"])
        if self.growth != 1.0:  # the n-th case run heard of is billed growth**(n-1) times the tokens
            with self._count_lock:
                n = self._run_order.setdefault(str(run_id), len(self._run_order))
            usage = {key: int(value * self.growth ** n) for key, value in usage.items()}
        reply["usage"] = usage
        with self._count_lock:  # what the provider bills, whether it says so or not
            self.billed_prompt_tokens += int(usage.get("prompt_tokens", 0))
            self.billed_completion_tokens += int(usage.get("completion_tokens", 0))
            self.calls_billed.append((int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))))
        if b in ("no_usage", "flaky_no_usage"):
            reply.pop("usage", None)
        elif b == "malformed":
            reply["choices"][0]["message"]["content"] = "Sure! Here is the plan you asked for: {not json"
        return status, reply


__all__ = ["BEHAVIOURS", "Behaviour", "FlakyLLMServer"]
