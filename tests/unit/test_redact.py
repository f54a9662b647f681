"""The redaction step: configured keys, credential-named variables and key-shaped strings."""

from __future__ import annotations

import logging

import pytest

from nl2sql_assets.config import ModelSettings, load_config
from nl2sql_assets.redact import REDACTED, get_logger, redact, redact_data, register_secret

CONFIGURED = "cfg-9bT4xQ2mLp7wZr1K"  # shaped like no provider key
FROM_ENV = "env-Hh83kPq2Wn5vYt0R"

# (text, what must come out): hand-worked, one shape per row.
SHAPES = [
    ("Authorization: Bearer abc.def-123_XYZ", "Authorization: [REDACTED]"),
    ("got Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig and more", "got [REDACTED] and more"),
    ("Incorrect API key provided: sk-proj-AbCdEf0123456789xyz.", "Incorrect API key provided: [REDACTED]."),
    ("key=sk-ant-api03-AAAABBBBCCCCDDDD1234", "key=[REDACTED]"),
    ("google AIzaSyA1234567890abcdefghijklmnopqrst", "google [REDACTED]"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "aws [REDACTED] here"),
    ("gh ghp_0123456789abcdefghijABCDEFGHIJ0123", "gh [REDACTED]"),
    ('{"api_key": "whatever-value-1"}', '{"api_key": "[REDACTED]"}'),
    ("x-api-key: plainvalue99", "x-api-key: [REDACTED]"),
    # Ordinary text is left alone.
    ("the task skipped 12 rows; see disk-usage", "the task skipped 12 rows; see disk-usage"),
    ("SELECT Name FROM Track ORDER BY Milliseconds DESC", "SELECT Name FROM Track ORDER BY Milliseconds DESC"),
    ("", ""),
]


@pytest.mark.parametrize(("text", "expected"), SHAPES, ids=[s[0][:30] for s in SHAPES])
def test_credential_shapes_are_removed(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_configured_keys_and_credential_variables_are_removed(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: object) -> None:
    ModelSettings(model="openai/x", api_key=CONFIGURED)  # a config or preset holding a key registers it
    monkeypatch.setenv("MY_GATEWAY_TOKEN", FROM_ENV)  # named like a credential
    monkeypatch.setenv("SHORT_API_KEY", "abc")  # too short to be redacted safely
    text = f"a {CONFIGURED} b {FROM_ENV} c abc"
    assert redact(text) == f"a {REDACTED} b {REDACTED} c abc"
    assert redact_data({"x": [text, 1], "y": (CONFIGURED,)}) == {"x": [redact(text), 1], "y": (REDACTED,)}


def test_a_key_substituted_into_api_key_is_registered_whatever_its_variable(tmp_path, monkeypatch) -> None:
    value = "odd-Mq72LxP0vB4nZs8W"
    monkeypatch.setenv("NL2SQL_GATEWAY", value)  # not named like a credential
    (tmp_path / "nl2sql.yaml").write_text("llm:\n  default:\n    model: openai/x\n    api_key: ${env:NL2SQL_GATEWAY}\n",
                                          encoding="utf-8")
    load_config(tmp_path / "nl2sql.yaml")
    monkeypatch.delenv("NL2SQL_GATEWAY")
    assert redact(f"echo {value}") == f"echo {REDACTED}"


def test_the_logging_filter_redacts_messages_arguments_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    register_secret(CONFIGURED)
    log = get_logger("nl2sql_assets.test_redact")
    with caplog.at_level(logging.INFO, logger="nl2sql_assets.test_redact"):
        log.info("calling with %s", CONFIGURED)
        try:
            raise RuntimeError(f"gateway said Bearer {CONFIGURED}")
        except RuntimeError:
            log.exception("failed")
    text = caplog.text
    assert CONFIGURED not in text and text.count(REDACTED) >= 2
    assert get_logger("nl2sql_assets.test_redact").filters == log.filters  # installed once


def test_the_fast_patterns_redact_exactly_what_the_plain_ones_do() -> None:
    """The literal-first patterns (written for speed) against their plain forms, on text made of
    key shapes, near misses, assignments in mixed case, the long s IGNORECASE reads as an s,
    word characters glued on either side, quotes and separators."""
    import random
    import re

    from nl2sql_assets import redact as r

    pieces = ["Bearer ", "bearer ", "xBearer ", "sk-", "_sk-", "ask-", "AIza", "AKIA", "ghp_", "gho_", "hf_", "xoxb-",
              "gsk_", "xai-", "pplx", "nvapi-", "r8_", "Xr8", "api_key", "API-KEY", "ApiKey", "x-api-key",
              "access_token", "Authorization", "\u017fecret", "SECRET", "secret", "=", ": ", ":", "'", '"', " ",
              "\n", ",", "}", "-", "_", ".", "é", "[REDACTED]", "abcdefghij", "ABCDEFGHIJKLMNOP", "0123456789",
              "Zz9", "Q"]
    plain_shapes = re.compile("|".join([re.escape("cfg-9bT4xQ2mLp7wZr1K"), *r._SHAPES_PLAIN]))
    fast_shapes = r._pattern(frozenset({"cfg-9bT4xQ2mLp7wZr1K"}))
    plain_assigned = re.compile(r._ASSIGNED_PLAIN)
    rng = random.Random(12)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        if rng.random() < 0.1:
            text += "cfg-9bT4xQ2mLp7wZr1K"
        assert fast_shapes.sub(r.REDACTED, text) == plain_shapes.sub(r.REDACTED, text), text
        assert (r._ASSIGNED.sub(lambda m: m.group(1) + r.REDACTED, text)
                == plain_assigned.sub(lambda m: m.group(1) + r.REDACTED, text)), text
