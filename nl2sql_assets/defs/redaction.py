"""Dagster metadata and descriptions through the one redaction step (``nl2sql_assets.redact``),
so no text a provider wrote reaches the instance's storage with a key in it."""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from nl2sql_assets.redact import redact, redact_data


def safe_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata with every text (plain, Markdown, JSON) redacted, every float rounded as a
    person reads it (``display_value``: the report's JSON keeps it whole), paths kept."""
    from nl2sql_assets.evaluation.reporting.headline import display_value

    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, float):
            out[key] = display_value(key, value)
        elif isinstance(value, dg.FloatMetadataValue) and value.value is not None:
            out[key] = dg.MetadataValue.float(display_value(key, value.value))
        elif isinstance(value, str):
            out[key] = redact(value)
        elif isinstance(value, dg.MarkdownMetadataValue):
            out[key] = dg.MetadataValue.md(redact(value.value or ""))
        elif isinstance(value, dg.TextMetadataValue):
            out[key] = dg.MetadataValue.text(redact(value.value or ""))
        elif isinstance(value, dg.JsonMetadataValue):
            out[key] = dg.MetadataValue.json(redact_data(value.value))
        else:
            out[key] = value
    return out


__all__ = ["redact", "safe_metadata"]
