"""Chinook's customers, whom both generated databases share, and the helpers the generators draw with."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class ChinookCustomer:
    customer_id: int
    first_name: str
    last_name: str
    email: str
    country: str
    first_invoice: datetime | None


def read_chinook_customers(chinook: Path) -> list[ChinookCustomer]:
    """The 59 customers (id, names, email, country) and the date of each one's first invoice."""
    conn = sqlite3.connect(f"file:{quote(str(Path(chinook).resolve()))}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT CustomerId, FirstName, LastName, Email, Country FROM Customer ORDER BY CustomerId"
        ).fetchall()
        firsts = dict(
            conn.execute("SELECT CustomerId, MIN(InvoiceDate) FROM Invoice GROUP BY CustomerId").fetchall()
        )
    finally:
        conn.close()
    out = []
    for cid, first, last, email, country in rows:
        raw = firsts.get(cid)
        out.append(
            ChinookCustomer(
                customer_id=cid,
                first_name=first,
                last_name=last,
                email=email,
                country=country or "Unknown",
                first_invoice=datetime.fromisoformat(raw) if raw else None,
            )
        )
    return out


# ================================================================ helpers

Rows = list[tuple[Any, ...]]


@dataclass
class TableData:
    columns: tuple[str, ...]
    rows: Rows = field(default_factory=list)


def draw_moment(rng: random.Random, start: datetime, end: datetime) -> datetime:
    """A whole-second moment in [start, end]."""
    span = max(0, int((end - start).total_seconds()))
    return start + timedelta(seconds=rng.randint(0, span))


def draw_weighted(rng: random.Random, options: Sequence[tuple[Any, int]]) -> Any:
    values = [o[0] for o in options]
    weights = [o[1] for o in options]
    return rng.choices(values, weights=weights, k=1)[0]


def money(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)
