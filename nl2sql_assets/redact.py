"""One redaction step for every text that is stored or logged: no key ever reaches a file.

A provider or gateway may repeat a request's ``Authorization`` header in its error text, and a
model may echo whatever it was sent. So every text on its way to storage (LLM errors and
responses, QueryResult errors, case records, reports, benchmark records, warehouse files,
Dagster metadata, log records) passes through ``redact``, which removes:

* the configured key values: every ``api_key`` a config or preset holds (registered when the
  settings are built), and the values of environment variables named like credentials
  (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*`` ...), which covers both the
  variables a config's ``${env:...}`` references and the provider key variables litellm reads;
* anything shaped like a bearer token or a provider key (``Bearer ...``, ``sk-...``,
  ``sk-ant-...``, ``AIza...``, ``AKIA...``, ``ghp_...``, ``hf_...``, ``xox?-...``), and the value
  after ``api_key=`` / ``"authorization": ...``.

A leaf module: it imports nothing of the project, so anything may use it.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words and numbers

# Environment variables whose values are credentials, by name.
_SECRET_NAME = re.compile(r"(API_?KEY|_KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE)", re.IGNORECASE)
# Credential shapes, each written literal first with its word boundary checked just after the
# literal (``sk-(?<=\bsk-)...`` matches exactly what ``\bsk-...`` matches): Python's regex engine
# then skips ahead to the literal instead of trying every position, 10-70x faster on the 1-2 MB
# reports the boards store. ``_SHAPES_PLAIN`` holds the plain forms, for reading (and the tests).
_SHAPES_PLAIN = (
    r"\bBearer\s+[A-Za-z0-9._~+/=-]{6,}",
    r"\bsk-[A-Za-z0-9_-]{12,}",  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), DeepSeek and most gateways
    r"\bAIza[0-9A-Za-z_-]{20,}",  # Google
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub
    r"\bhf_[A-Za-z0-9]{20,}",  # Hugging Face
    r"\bxox[abprs]-[A-Za-z0-9-]{10,}",  # Slack
    r"\b(?:gsk|xai|pplx|nvapi|r8)_?-?[A-Za-z0-9]{24,}",  # Groq, xAI, Perplexity, NVIDIA, Replicate
)
_SHAPES = (
    r"Bearer(?<=\bBearer)\s+[A-Za-z0-9._~+/=-]{6,}",
    r"sk-(?<=\bsk-)[A-Za-z0-9_-]{12,}",
    r"AIza(?<=\bAIza)[0-9A-Za-z_-]{20,}",
    r"AKIA(?<=\bAKIA)[0-9A-Z]{16}\b",
    r"gh[pousr]_(?<=\bgh[pousr]_)[A-Za-z0-9]{20,}",
    r"hf_(?<=\bhf_)[A-Za-z0-9]{20,}",
    r"xox[abprs]-(?<=\bxox[abprs]-)[A-Za-z0-9-]{10,}",
    *(rf"{p}(?<=\b{p})_?-?[A-Za-z0-9]{{24,}}" for p in ("gsk", "xai", "pplx", "nvapi", "r8")),
)
# ``api_key=...``, ``"x-api-key": "..."``, ``authorization: ...``: keep the name, drop the value.
_ASSIGNED_PLAIN = r"""(?ix)
    ((?:api[_-]?key|x-api-key|access[_-]?token|authorization|secret)["']?\s*[:=]\s*["']?)
    (?!\[REDACTED\])([^\s"',}]{6,})
    """
# The same, its first letter a character class (with U+017F, the long s that IGNORECASE reads as
# an s) and the rest case-insensitive: the engine skips to those letters (5x faster).
_ASSIGNED = re.compile(
    r"""(?x)
    ([aAxXsS\u017f](?i:(?<=a)pi[_-]?key|(?<=x)-api-key|(?<=a)ccess[_-]?token|(?<=a)uthorization|(?<=s)ecret)
     ["']?\s*[:=]\s*["']?)
    (?!\[REDACTED\])([^\s"',}]{6,})
    """
)

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a configured key value so every later ``redact`` removes it."""
    if value and len(value.strip()) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value.strip())


def register_secrets(values: Iterable[str | None]) -> None:
    for value in values:
        register_secret(value)


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential (names repeat: cached)."""
    return bool(_SECRET_NAME.search(name))


def _environment_secrets() -> frozenset[str]:
    """Read at every call (a key set after start-up is redacted too); only the names that look
    like credentials are looked up, so a call costs a pass over the names."""
    values = (os.environ.get(k) for k in list(os.environ) if is_secret_name(k))
    return frozenset(v.strip() for v in values if v is not None and len(v.strip()) >= MIN_SECRET_LENGTH)


@functools.lru_cache(maxsize=64)
def _pattern(secrets: frozenset[str]) -> re.Pattern[str]:
    # Longest first, so a key that contains another is removed whole.
    literal = [re.escape(s) for s in sorted(secrets, key=len, reverse=True)]
    return re.compile("|".join([*literal, *_SHAPES]))


def redact(text: str) -> str:
    """``text`` without any configured key value or credential-shaped string."""
    if not text:
        return text
    with _lock:
        registered = frozenset(_registered)
    cleaned = _pattern(registered | _environment_secrets()).sub(REDACTED, text)
    return _ASSIGNED.sub(lambda m: m.group(1) + REDACTED, cleaned)


def redact_data(data: Any) -> Any:
    """Every string inside plain data (dicts, lists, tuples) redacted; other values kept."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {k: redact_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(redact_data(v) for v in data)
    return data


# ---------------------------------------------------------------- logging


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (and traceback text) through ``redact`` before any
    handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format: leave it to the handler
            return True
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactingFilter()


def protect_logger(name: str) -> logging.Logger:
    """The named logger with the redacting filter on it (once). A logger's filters do not apply
    to its children, so each logger that may carry provider text is protected by name."""
    log = logging.getLogger(name)
    if _FILTER not in log.filters:
        log.addFilter(_FILTER)
    return log


#: The logger for a module of this package: ``log = get_logger(__name__)``.
get_logger = protect_logger
