"""Metadata numbers as a person reads them: dollars to four significant figures, seconds to two
decimals, a share to three (a percentage to one decimal); the report's JSON keeps them whole."""

from __future__ import annotations

import math

import dagster as dg
import pytest

from nl2sql_assets.defs.redaction import safe_metadata
from nl2sql_assets.evaluation.reporting.headline import display_value


@pytest.mark.parametrize(("key", "value", "shown"), [
    ("execution_accuracy", 0.3870967741935484, 0.387),  # 38.7%
    ("execution_accuracy_low", 0.29403, 0.294),
    ("accuracy", 1.0, 1.0),
    ("candidate_uplift", -0.0714285, -0.071),
    ("cost_per_case_usd", 0.005585959699425784, 0.005586),
    ("cost_per_case_usd", 12.3456789, 12.35),
    ("cost_per_case_usd", 0.0, 0.0),
    ("latency_p95_s", 1.23456, 1.23),
    ("distillation_s", 0.004, 0.0),
    ("gold_median_ms", 0.4256, 0.4),
    ("rows_per_second", 3604.7123, 3605.0),
    ("separated_share", 0.99471, 0.995),
])
def test_a_number_is_rounded_by_what_it_measures(key: str, value: float, shown: float) -> None:
    assert display_value(key, value) == shown


def test_what_is_not_a_finite_float_is_left_as_it_is() -> None:
    assert math.isnan(display_value("x", float("nan")))
    out = safe_metadata({"count": 7, "flag": True, "ratio": dg.MetadataValue.float(0.123456),
                         "text": "0.123456", "share": 2 / 3})
    assert out["count"] == 7 and out["flag"] is True and out["text"] == "0.123456"
    assert out["ratio"] == dg.MetadataValue.float(0.123) and out["share"] == 0.667
