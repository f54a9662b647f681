"""The wide test bed: 1,200 tables over six company datasources, generated, for routing and
retrieval at warehouse width.

``build_wide(out)`` writes a project folder: ``data/`` with three SQLite and three DuckDB files,
``nl2sql.yaml`` naming them (one ``admin`` role that reads everything) and ``evals.yaml`` naming
the packaged ``wide_routing.yaml`` suite. Nothing is downloaded and nothing random is left to
chance: the same version builds the same schema and the same rows on every machine, so records
of the bed compare across machines (their schema fingerprints match). A folder already holding
this version's bed is reused (``manifest.json``); ``force`` rebuilds it.

Each datasource has its core tables (``wide_schema``), with primary keys, foreign keys and
``CORE_ROWS`` generated rows, and is widened to its share of the tables with what a warehouse
grows around a core table: staging copies, histories, audits, archives, daily snapshots,
monthly aggregates, de-duplication scratch tables, backups, v2 rebuilds, enriched joins,
soft-deleted rows and code lists. Those hold no rows and no keys, as such tables often do.
``total_tables`` below 1,200 builds a narrower bed (the benchmark's 100 and 400): the core
tables first, then the variants in a fixed order.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.errors import UserError
from nl2sql_assets.testbed.wide_schema import SOURCES, WideSource

WIDE_VERSION = 1
FULL_TABLES = 1200
CORE_ROWS = 40
_START = date(2022, 1, 1)
_DAYS = 3 * 365

# What a warehouse grows around each core table, in the order a narrower bed takes them:
# (name pattern, extra leading columns, extra trailing columns).
VARIANTS: tuple[tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], ...] = (
    ("stg_{t}", (), (("_loaded_at", "d"), ("_source_file", "t"))),
    ("{t}_history", (), (("valid_from", "d"), ("valid_to", "d"))),
    ("agg_{t}_monthly", (("month", "t"), ("record_count", "i")), ()),
    ("{t}_snapshot_daily", (("snapshot_date", "d"),), ()),
    ("{t}_audit", (("audit_id", "i"),), (("changed_by", "t"), ("changed_at", "d"), ("change_kind", "t"))),
    ("{t}_archive", (), (("archived_on", "d"),)),
    ("tmp_{t}_dedup", (), (("duplicate_of", "i"),)),
    ("{t}_backup_2023", (), ()),
    ("{t}_v2", (), (("migrated_at", "d"),)),
    ("int_{t}_enriched", (), (("enriched_at", "d"), ("enrichment_source", "t"))),
    ("{t}_deleted", (), (("deleted_at", "d"), ("deleted_by", "t"))),
)
_SQL_TYPES = {
    "sqlite": {"i": "INTEGER", "t": "TEXT", "m": "REAL", "f": "REAL", "d": "TEXT"},
    "duckdb": {"i": "INTEGER", "t": "VARCHAR", "m": "DECIMAL(12,2)", "f": "DOUBLE", "d": "DATE"},
}


class WideBedError(UserError, ValueError):
    """A wide bed cannot be built as asked (a table count out of range, a folder that is not one)."""


@dataclass(frozen=True)
class WideTable:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, type code)
    primary_key: str | None = None
    foreign_keys: tuple[tuple[str, str], ...] = ()  # (column, referenced table); the reference is its key
    core: bool = False


@dataclass
class WideBed:
    """A built bed: its folder, its project file and what it holds."""

    root: Path
    tables: dict[str, list[WideTable]] = field(default_factory=dict)
    reused: bool = False

    @property
    def config(self) -> Path:
        return self.root / "nl2sql.yaml"

    @property
    def table_count(self) -> int:
        return sum(len(t) for t in self.tables.values())


def parse_core(line: str) -> WideTable:
    """One ``wide_schema`` line as a table: ``name: col:type, col>parent, ...``."""
    name, _, rest = line.partition(":")
    columns: list[tuple[str, str]] = []
    fks: list[tuple[str, str]] = []
    for entry in (e.strip() for e in rest.split(",")):
        if ">" in entry:
            column, parent = entry.split(">")
            columns.append((column, "i"))
            fks.append((column, parent))
        else:
            column, kind = entry.split(":")
            columns.append((column, kind))
    return WideTable(name=name.strip(), columns=tuple(columns), primary_key=columns[0][0],
                     foreign_keys=tuple(fks), core=True)


def _code_list_columns(cores: list[WideTable]) -> list[str]:
    """The text columns a code list is kept for, in table order (statuses, kinds, places...)."""
    seen: list[str] = []
    for table in cores:
        for column, kind in table.columns[1:]:
            if kind == "t" and column not in seen and not column.endswith(("name", "email", "title", "website")):
                seen.append(column)
    return seen


def source_tables(source: WideSource, count: int) -> list[WideTable]:
    """The first ``count`` tables of ``source``: its core tables, then variants round by round,
    then code lists (``ref_<column>``), then numbered legacy copies if still short."""
    cores = [parse_core(line) for line in source.tables]
    tables = list(cores)
    for pattern, before, after in VARIANTS:
        for core in cores:
            own = {c for c, _ in core.columns}
            tables.append(WideTable(name=pattern.format(t=core.name), columns=(
                *(c for c in before if c[0] not in own), *core.columns, *(c for c in after if c[0] not in own))))
    for column in _code_list_columns(cores):
        tables.append(WideTable(name=f"ref_{column}",
                                columns=(("code", "t"), ("label", "t"), ("sort_order", "i"), ("is_active", "i"))))
    n = 1
    while len(tables) < count:
        core = cores[(n - 1) % len(cores)]
        tables.append(WideTable(name=f"{core.name}_legacy_{n:03d}", columns=core.columns))
        n += 1
    if count < len(cores):
        raise WideBedError(f"a datasource needs at least its {len(cores)} core tables, not {count}")
    return tables[:count]


def bed_tables(total_tables: int = FULL_TABLES) -> dict[str, list[WideTable]]:
    """Every datasource's tables for a bed of ``total_tables`` (shared out evenly, the first
    datasources taking any remainder)."""
    if total_tables < 16 * len(SOURCES) or total_tables > 4 * FULL_TABLES:
        raise WideBedError(f"a wide bed holds {16 * len(SOURCES)} to {4 * FULL_TABLES} tables, not {total_tables}")
    share, extra = divmod(total_tables, len(SOURCES))
    return {s.id: source_tables(s, share + (1 if i < extra else 0)) for i, s in enumerate(SOURCES)}


# ---------------------------------------------------------------- rows

_FIRST = ("Ava", "Ben", "Chloe", "Diego", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam",
          "Mei", "Noah", "Olga", "Priya", "Quinn", "Rosa", "Sami", "Tara")
_LAST = ("Adler", "Brooks", "Castro", "Dubois", "Evans", "Fischer", "Garcia", "Haddad", "Ito", "Jensen",
         "Kowalski", "Lopez", "Moreau", "Nakamura", "Okafor", "Petrov", "Quist", "Rossi", "Silva", "Tanaka")
_COMPANIES = ("Acme Logistics", "Blue Harbor Foods", "Cobalt Analytics", "Delta Fabrication", "Evergreen Health",
              "Fjord Energy", "Granite Insurance", "Helios Solar", "Ironwood Retail", "Juniper Telecom",
              "Keystone Media", "Lumen Pharma", "Meridian Bank", "Northwind Traders", "Orchid Cosmetics",
              "Pioneer Motors")
_POOLS: dict[str, tuple[str, ...]] = {
    "industry": ("software", "manufacturing", "retail", "healthcare", "finance", "energy"),
    "country": ("USA", "Canada", "Germany", "France", "Brazil", "India", "Japan", "United Kingdom"),
    "billing_country": ("USA", "Canada", "Germany", "France", "Brazil", "India"),
    "region": ("North America", "EMEA", "APAC", "LATAM"),
    "stage": ("prospecting", "qualification", "proposal", "negotiation", "closed won", "closed lost"),
    "lead_source": ("web form", "trade show", "referral", "cold call", "partner"),
    "lead_status": ("new", "working", "nurturing", "converted", "disqualified"),
    "quote_status": ("draft", "sent", "accepted", "rejected"),
    "renewal_status": ("renewed", "pending", "churned"),
    "activity_type": ("call", "email", "meeting", "demo"),
    "channel": ("email", "events", "paid search", "social"),
    "account_class": ("asset", "liability", "equity", "revenue", "expense"),
    "invoice_status": ("open", "paid", "overdue", "void"),
    "bill_status": ("open", "paid", "past due"),
    "payment_method": ("wire", "card", "ach", "check"),
    "vendor_category": ("software", "facilities", "logistics", "consulting", "hardware"),
    "division": ("operations", "sales", "research", "administration"),
    "expense_category": ("travel", "meals", "software", "equipment", "training"),
    "asset_category": ("buildings", "vehicles", "computers", "machinery", "furniture"),
    "jurisdiction": ("California", "Texas", "Ontario", "Bavaria", "Ile-de-France"),
    "currency_code": ("EUR", "GBP", "JPY", "CAD", "BRL", "INR"),
    "account_currency": ("USD", "EUR", "GBP"),
    "employment_status": ("active", "on leave", "terminated"),
    "location": ("Boston", "Austin", "Berlin", "Toronto", "Singapore"),
    "job_level": ("L1", "L2", "L3", "L4", "L5"),
    "run_status": ("completed", "in review", "failed"),
    "leave_type": ("vacation", "sick", "parental", "unpaid"),
    "approval_status": ("approved", "pending", "denied"),
    "plan_type": ("medical", "dental", "vision", "retirement"),
    "opening_status": ("open", "on hold", "filled", "closed"),
    "source": ("referral", "job board", "career site", "agency"),
    "outcome": ("advance", "reject", "hold"),
    "item_category": ("electronics", "packaging", "raw materials", "spare parts", "office supplies"),
    "city": ("Chicago", "Dallas", "Rotterdam", "Hamburg", "Osaka", "Toronto"),
    "po_status": ("open", "partially received", "received", "cancelled"),
    "transport_mode": ("road", "rail", "air", "ocean"),
    "shipment_status": ("in transit", "delivered", "delivered late", "lost"),
    "aisle": ("A", "B", "C", "D", "E"),
    "reason": ("damaged", "wrong item", "expired", "overstock"),
    "lane": ("US-East", "US-West", "EU-North", "Asia-Pacific"),
    "loyalty_tier": ("bronze", "silver", "gold", "platinum"),
    "order_status": ("placed", "shipped", "delivered", "cancelled", "returned"),
    "brand": ("Northpeak", "Lumo", "Vexa", "Orbit", "Kindle & Co"),
    "refund_reason": ("damaged", "late delivery", "changed mind", "wrong size"),
    "agent_level": ("tier 1", "tier 2", "tier 3"),
    "shift": ("day", "evening", "night"),
    "plan": ("free", "basic", "pro", "enterprise"),
    "priority": ("low", "normal", "high", "urgent"),
    "ticket_status": ("open", "pending", "solved", "closed"),
    "ticket_channel": ("email", "chat", "phone", "web"),
    "breach_type": ("first response", "resolution"),
    "article_category": ("billing", "account", "integrations", "troubleshooting"),
    "tag": ("refund", "bug", "how-to", "outage", "feature request"),
    "escalated_to": ("engineering", "billing", "management"),
    "fiscal_quarter": ("2023-Q1", "2023-Q2", "2023-Q3", "2023-Q4", "2024-Q1", "2024-Q2"),
    "forecast_month": ("2024-01", "2024-02", "2024-03", "2024-04", "2024-05", "2024-06"),
    "period_month": ("2024-01", "2024-02", "2024-03", "2024-04"),
}
_FLAGS = ("responded", "completed", "abandoned", "is_public")
_SMALL = ("rating", "stars", "score", "lead_score")


def _text(rng: random.Random, column: str, table: str, key: int) -> str:
    if column in _POOLS:
        return rng.choice(_POOLS[column])
    if column == "first_name":
        return rng.choice(_FIRST)
    if column == "last_name":
        return rng.choice(_LAST)
    if column in ("full_name", "agent_name", "customer_name", "reviewer", "interviewer", "posted_by"):
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if column in ("account_name", "company_name", "vendor_name", "supplier_name", "competitor_name", "bank_name"):
        return rng.choice(_COMPANIES)
    if column == "email":
        return f"user{key}@example.com"
    if column == "sku":
        return f"SKU-{1000 + key}"
    if column == "account_number":
        return f"{1000 + key * 10}"
    if column in ("coupon_code", "product_code"):
        return f"{column.split('_')[0].upper()}{100 + key}"
    if column == "postal_code":
        return f"{10000 + key * 37}"
    if column == "website":
        return f"https://competitor{key}.example.com"
    label = column.removesuffix("_name").removesuffix("_title").replace("_", " ")
    return f"{label} {rng.randint(1, 12)}"


def _value(rng: random.Random, column: str, kind: str, table: str, key: int) -> Any:
    if kind == "d":
        return _START + timedelta(days=rng.randrange(_DAYS))
    if kind == "m":
        high = 100_000 if any(w in column for w in ("revenue", "value", "amount", "budget", "quota", "cost",
                                                     "salary", "balance", "limit", "total")) else 500
        return round(rng.uniform(5, high), 2)
    if kind == "f":
        return round(rng.uniform(0, 0.3 if "tax" in column else 1.0), 3)
    if kind == "i":
        if column in _FLAGS:
            return rng.randint(0, 1)
        if column in _SMALL:
            return rng.randint(1, 5) if column != "lead_score" else rng.randint(1, 100)
        if "year" in column:
            return rng.choice((2022, 2023, 2024))
        return rng.randint(1, 120)
    return _text(rng, column, table, key)


def _order_parents_first(cores: list[WideTable]) -> list[WideTable]:
    by_name = {t.name: t for t in cores}
    done: list[WideTable] = []
    seen: set[str] = set()

    def visit(table: WideTable) -> None:
        if table.name in seen:
            return
        seen.add(table.name)
        for _, parent in table.foreign_keys:
            if parent != table.name:
                visit(by_name[parent])
        done.append(table)

    for table in cores:
        visit(table)
    return done


def core_rows(source_id: str, tables: list[WideTable]) -> dict[str, list[tuple[Any, ...]]]:
    """``CORE_ROWS`` rows for each core table, drawn from a generator seeded by the datasource and
    table names: keys 1..N, each foreign key one of its parent's keys."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in _order_parents_first([t for t in tables if t.core]):
        rng = random.Random(f"wide-{WIDE_VERSION}:{source_id}:{table.name}")
        fks = dict(table.foreign_keys)
        rows = []
        for key in range(1, CORE_ROWS + 1):
            row = []
            for n, (column, kind) in enumerate(table.columns):
                if n == 0:
                    row.append(key)
                elif column in fks:
                    row.append(rng.randint(1, CORE_ROWS))
                else:
                    row.append(_value(rng, column, kind, table.name, key))
            rows.append(tuple(row))
        out[table.name] = rows
    return out


# ---------------------------------------------------------------- writing


def _ddl(table: WideTable, engine: str, known: set[str]) -> str:
    types = _SQL_TYPES[engine]
    parts = []
    for column, kind in table.columns:
        pk = " PRIMARY KEY" if column == table.primary_key else ""
        parts.append(f'"{column}" {types[kind]}{pk}')
    for column, parent in table.foreign_keys:
        if parent in known:
            parts.append(f'FOREIGN KEY ("{column}") REFERENCES "{parent}" ("{_pk_of(parent)}")')
    return f'CREATE TABLE "{table.name}" ({", ".join(parts)})'


_PK_CACHE: dict[str, str] = {}


def _pk_of(table: str) -> str:
    return _PK_CACHE[table]


def _write_source(path: Path, source: WideSource, tables: list[WideTable]) -> None:
    rows = core_rows(source.id, tables)
    cores = {t.name: t for t in tables if t.core}
    _PK_CACHE.update({t.name: t.primary_key for t in cores.values() if t.primary_key})
    order = [*_order_parents_first(list(cores.values())), *(t for t in tables if not t.core)]
    if source.engine == "sqlite":
        con = sqlite3.connect(path)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            with con:
                for table in order:
                    con.execute(_ddl(table, "sqlite", set(cores)))
                    if table.name in rows:
                        marks = ", ".join("?" for _ in table.columns)
                        con.executemany(f'INSERT INTO "{table.name}" VALUES ({marks})',
                                        [tuple(v.isoformat() if isinstance(v, date) else v for v in r)
                                         for r in rows[table.name]])
        finally:
            con.close()
        return
    import duckdb

    con = duckdb.connect(str(path))
    try:
        con.execute("BEGIN")
        for table in order:
            con.execute(_ddl(table, "duckdb", set(cores)))
            if table.name in rows:
                marks = ", ".join("?" for _ in table.columns)
                con.executemany(f'INSERT INTO "{table.name}" VALUES ({marks})', rows[table.name])
        con.execute("COMMIT")
    finally:
        con.close()


def _filename(source: WideSource) -> str:
    return f"{source.id}.{'sqlite' if source.engine == 'sqlite' else 'duckdb'}"


def project_data(tables: dict[str, list[WideTable]], data_dir: str = "data") -> dict[str, Any]:
    """The bed's nl2sql.yaml as data: its datasources, and one role, admin, that reads them all."""
    sources = [s for s in SOURCES if s.id in tables]
    return {
        "datasources": [{
            "id": s.id, "engine": s.engine, "path": f"{data_dir}/{_filename(s)}", "description": s.description,
            "row_limit": 1000, "timeout_s": 10, "sample_questions": list(s.sample_questions),
        } for s in sources],
        "policies": {"default_role": "admin", "roles": {"admin": {
            "description": "Reads everything in every datasource of the bed.",
            "datasources": {s.id: {"allow": ["*"]} for s in sources}}}},
        "evals": {"file": "evals.yaml"},
    }


def _manifest(total_tables: int) -> dict[str, Any]:
    return {"wide_version": WIDE_VERSION, "tables": total_tables, "sources": [s.id for s in SOURCES]}


def build_wide(out: str | Path, *, total_tables: int = FULL_TABLES, force: bool = False,
               suite: Path | None = None) -> WideBed:
    """Build (or reuse) the bed of ``total_tables`` tables in the folder ``out``. ``suite``: the
    routing suite evals.yaml names (by default the packaged ``wide_routing.yaml``)."""
    from nl2sql_assets.paths import wide_routing_suite_path
    from nl2sql_assets.yamlio import dump_yaml

    root = Path(out)
    tables = bed_tables(total_tables)
    manifest = root / "manifest.json"
    wanted = _manifest(total_tables)
    if not force and manifest.is_file():
        try:
            if json.loads(manifest.read_text(encoding="utf-8")) == wanted and all(
                    (root / "data" / _filename(s)).is_file() for s in SOURCES):
                return WideBed(root, tables, reused=True)
        except (OSError, json.JSONDecodeError):
            pass  # a damaged manifest: build again
    marker = root / ".wide-bed"  # written first: a bed cut off mid-build is still known as one
    if root.exists() and any(root.iterdir()) and not marker.is_file():
        raise WideBedError(f"{root}: not empty and not a wide bed (no .wide-bed); give an empty or new folder")
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text("a wide test bed, built by nl2sql-assets bench wide\n", encoding="utf-8")
    data = root / "data"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    manifest.unlink(missing_ok=True)  # a half-built bed is never taken for a whole one
    for source in SOURCES:
        _write_source(data / _filename(source), source, tables[source.id])
    header = ("# The wide test bed's project (generated by `nl2sql-assets bench wide`; rebuilt, not edited).\n")
    atomic_write(root / "nl2sql.yaml", header + dump_yaml(project_data(tables), width=100))
    suite_path = suite if suite is not None else wide_routing_suite_path()
    atomic_write(root / "evals.yaml", header + dump_yaml({
        "suites": [str(suite_path)], "scorers": ["routing", "retrieval_recall"], "curated": False,
        "thresholds": {"min_execution_success": None}}, width=100))
    atomic_write(manifest, json.dumps(wanted, indent=2) + "\n")
    return WideBed(root, tables)
