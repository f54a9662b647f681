"""Turn database values into JSON-safe Python values, the same way for every engine.

SQLite hands back str/int/float/bytes; DuckDB hands back Decimal, datetime, UUID and more.
Gold rows on disk and rows compared at run time must look alike whatever engine made them.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any


def normalise_value(value: Any) -> Any:
    """One value: Decimal→float (a whole number past 2**53: int), date→'YYYY-MM-DD', datetime→'YYYY-MM-DD HH:MM:SS[.ffffff]',
    time→'HH:MM:SS[.ffffff]', bytes→hex, UUID→str; None/bool/int/float/str unchanged."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Decimal):
        # A whole number past float's exact range keeps every digit (a Postgres NUMERIC sum of
        # BIGINTs); every other Decimal is a float, as SQLite's REAL is
        if value.is_finite() and abs(value) >= _EXACT_FLOAT and value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, _dt.datetime):  # before date: datetime is a date subclass
        return value.isoformat(sep=" ")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, _dt.time):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, _dt.timedelta):
        # DuckDB INTERVAL: total seconds keep it comparable and JSON-safe.
        return value.total_seconds()
    if isinstance(value, dict):
        return {str(k): normalise_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise_value(v) for v in value]
    return str(value)


#: integers from here on are not all floats: 2**53
_EXACT_FLOAT = 2**53

_PLAIN = frozenset({int, float, str, bool, type(None)})


def normalise_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Every row as a list of normalised values (plain values skip the type checks: SQLite rows are
    nearly all plain, and this runs for every row of every query)."""
    plain = _PLAIN
    return [[v if type(v) in plain else normalise_value(v) for v in row] for row in rows]
