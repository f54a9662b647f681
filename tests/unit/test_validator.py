"""The logical validator: names resolve, the role may read them, and the row budget hook."""

from __future__ import annotations

from typing import Any

import pytest

from nl2sql_assets.config import DatasourceAccess
from nl2sql_assets.datasources.schema import ColumnInfo, SchemaSnapshot, TableInfo
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.engine.result import SECURITY_VIOLATION, VALIDATION_ERROR
from nl2sql_assets.engine.validator import (
    GENERIC_REFUSAL,
    ValidationOutcome,
    columns_read,
    tables_read,
    validate_plan,
)

# Chinook's tables and columns, as the SQLite file has them.
CHINOOK_COLUMNS = {
    "Album": ["AlbumId", "Title", "ArtistId"],
    "Artist": ["ArtistId", "Name"],
    "Customer": [
        "CustomerId", "FirstName", "LastName", "Company", "Address", "City", "State", "Country",
        "PostalCode", "Phone", "Fax", "Email", "SupportRepId",
    ],
    "Employee": [
        "EmployeeId", "LastName", "FirstName", "Title", "ReportsTo", "BirthDate", "HireDate", "Address",
        "City", "State", "Country", "PostalCode", "Phone", "Fax", "Email",
    ],
    "Genre": ["GenreId", "Name"],
    "Invoice": [
        "InvoiceId", "CustomerId", "InvoiceDate", "BillingAddress", "BillingCity", "BillingState",
        "BillingCountry", "BillingPostalCode", "Total",
    ],
    "InvoiceLine": ["InvoiceLineId", "InvoiceId", "TrackId", "UnitPrice", "Quantity"],
    "MediaType": ["MediaTypeId", "Name"],
    "Playlist": ["PlaylistId", "Name"],
    "PlaylistTrack": ["PlaylistId", "TrackId"],
    "Track": [
        "TrackId", "Name", "AlbumId", "MediaTypeId", "GenreId", "Composer", "Milliseconds", "Bytes", "UnitPrice",
    ],
}  # fmt: skip
SCHEMA = SchemaSnapshot(
    datasource_id="chinook",
    engine="sqlite",
    tables=[
        TableInfo(name=t, columns=[ColumnInfo(name=c, type="TEXT") for c in cols])
        for t, cols in CHINOOK_COLUMNS.items()
    ],
)
ROLES: dict[str, DatasourceAccess | None] = {
    "admin": DatasourceAccess(allow=["*"]),
    "analyst": DatasourceAccess(allow=["*"], deny=["Employee"]),
    "viewer": DatasourceAccess(
        allow=["Album", "Artist", "Genre", "MediaType", "Playlist", "PlaylistTrack", "Track"]
    ),
    "nomail": DatasourceAccess(allow=["*"], deny=["Customer.Email"]),
    "open": None,  # no RBAC at all
}

# ---------------------------------------------------------------- plan-building shorthands


def col(name: str, table: str | None = None) -> dict:
    return {"kind": "column", "name": name, **({"table": table} if table else {})}


def lit(value: Any) -> dict:
    return {"kind": "literal", "value": value}


def fn(name: str, *args: dict, distinct: bool = False) -> dict:
    return {"kind": "function", "name": name, "args": list(args), "distinct": distinct}


def op(o: str, left: dict, right: dict) -> dict:
    return {"kind": "binary", "op": o, "left": left, "right": right}


def sel(*exprs: dict) -> list[dict]:
    return [{"expr": e} for e in exprs]


def frm(name: str, alias: str | None = None) -> dict:
    return {"name": name, **({"alias": alias} if alias else {})}


COUNT_STAR = fn("count", {"kind": "star"})
T_G = {"table": frm("Genre", "g"), "on": op("=", col("GenreId", "t"), col("GenreId", "g"))}
NEVER_BOUGHT = {
    "kind": "exists",
    "negated": True,
    "plan": {
        "select": sel(lit(1)),
        "from": frm("InvoiceLine", "il"),
        "where": op("=", col("TrackId", "il"), col("TrackId", "t")),
    },
}
EMPLOYEE_SUB = {
    "kind": "exists",
    "negated": True,
    "plan": {
        "select": sel(lit(1)),
        "from": frm("Employee", "e"),
        "where": op("=", col("EmployeeId", "e"), col("SupportRepId", "c")),
    },
}

# (id, plan, role, ok, error_code, a fragment the message must hold)
CASES: list[tuple[str, dict, str, bool, str | None, str | None]] = [
    ("simple select", {"select": sel(col("Name")), "from": frm("Track")}, "admin", True, None, None),
    (
        "names match without regard to case",
        {"select": sel(col("name", "T")), "from": frm("track", "t")},
        "viewer",
        True,
        None,
        None,
    ),
    ("unknown table", {"select": sel(col("Name")), "from": frm("Tracks")}, "admin", False, VALIDATION_ERROR, "'Tracks'"),
    (
        "unknown qualified column",
        {"select": sel(col("Nme", "t")), "from": frm("Track", "t")},
        "admin",
        False,
        VALIDATION_ERROR,
        "no column 'Nme'",
    ),
    (
        "unknown unqualified column",
        {"select": sel(col("Title")), "from": frm("Track")},
        "admin",
        False,
        VALIDATION_ERROR,
        "unknown column 'Title'",
    ),
    (
        "ambiguous unqualified column",
        {"select": sel(col("Name")), "from": frm("Track", "t"), "joins": [T_G]},
        "admin",
        False,
        VALIDATION_ERROR,
        "'Name' is ambiguous (in ",
    ),
    (
        "unknown alias as qualifier",
        {"select": sel(col("Name", "x")), "from": frm("Track", "t")},
        "admin",
        False,
        VALIDATION_ERROR,
        "unknown table or alias 'x'",
    ),
    (
        "table name hidden by its alias",
        {"select": sel(col("Name", "Track")), "from": frm("Track", "t")},
        "admin",
        False,
        VALIDATION_ERROR,
        "'Track'",
    ),
    (
        "select alias in ORDER BY",
        {
            "select": [{"expr": col("GenreId")}, {"expr": COUNT_STAR, "alias": "n"}],
            "from": frm("Track"),
            "group_by": [col("GenreId")],
            "order_by": [{"expr": col("n"), "direction": "desc"}],
        },
        "viewer",
        True,
        None,
        None,
    ),
    (
        "select alias in HAVING",
        {
            "select": [{"expr": col("GenreId")}, {"expr": COUNT_STAR, "alias": "n"}],
            "from": frm("Track"),
            "group_by": [col("GenreId")],
            "having": op(">", col("n"), lit(10)),
        },
        "viewer",
        True,
        None,
        None,
    ),
    (
        "select alias in WHERE",
        {"select": [{"expr": col("Milliseconds"), "alias": "ms"}], "from": frm("Track"), "where": op(">", col("ms"), lit(1))},
        "admin",
        False,
        VALIDATION_ERROR,
        "only in ORDER BY, GROUP BY and HAVING",
    ),
    (
        "ORDER BY prefers the alias over a column of the same name",
        {
            "select": [{"expr": col("Name", "g"), "alias": "Name"}, {"expr": COUNT_STAR, "alias": "n"}],
            "from": frm("Track", "t"),
            "joins": [T_G],
            "group_by": [col("Name", "g")],
            "order_by": [{"expr": col("Name")}],
        },
        "admin",
        True,
        None,
        None,
    ),
    (
        "GROUP BY alias that is the same column",
        {
            "select": [{"expr": col("Composer"), "alias": "Composer"}, {"expr": COUNT_STAR}],
            "from": frm("Track"),
            "group_by": [col("Composer")],
        },
        "admin",
        True,
        None,
        None,
    ),
    (
        "GROUP BY name that is an alias of another expression and a column",
        {
            "select": [{"expr": fn("upper", col("Composer")), "alias": "Composer"}, {"expr": COUNT_STAR}],
            "from": frm("Track"),
            "group_by": [col("Composer")],
        },
        "admin",
        False,
        VALIDATION_ERROR,
        "both a select alias and a column",
    ),
    (
        "correlated sub-plan reads the outer alias",
        {"select": sel(col("Name", "t")), "from": frm("Track", "t"), "where": NEVER_BOUGHT},
        "analyst",
        True,
        None,
        None,
    ),
    (
        "unqualified name resolves in the nearest plan first",
        {
            "select": sel(col("Name", "t")),
            "from": frm("Track", "t"),
            "where": {
                "kind": "in_subquery",
                "arg": col("GenreId", "t"),
                "plan": {"select": sel(col("GenreId")), "from": frm("Genre"), "where": op("like", col("Name"), lit("R%"))},
            },
        },
        "viewer",
        True,
        None,
        None,
    ),
    (
        "unqualified outer column inside a sub-plan",
        {
            "select": sel(col("Name", "t")),
            "from": frm("Track", "t"),
            "where": {
                "kind": "exists",
                "plan": {"select": sel(lit(1)), "from": frm("Genre", "g"), "where": op("=", col("GenreId", "g"), col("AlbumId"))},
            },
        },
        "viewer",
        True,
        None,
        None,
    ),
    (
        "outer plan cannot see a sub-plan's alias",
        {
            "select": sel(col("Name", "il")),
            "from": frm("Track", "t"),
            "where": NEVER_BOUGHT,
        },
        "admin",
        False,
        VALIDATION_ERROR,
        "unknown table or alias 'il'",
    ),
    (
        "ON may not read a table joined later",
        {
            "select": sel(col("Name", "t")),
            "from": frm("Track", "t"),
            "joins": [
                {"table": frm("Album", "al"), "on": op("=", col("ArtistId", "ar"), col("ArtistId", "al"))},
                {"table": frm("Artist", "ar"), "on": op("=", col("AlbumId", "al"), col("AlbumId", "t"))},
            ],
        },
        "admin",
        False,
        VALIDATION_ERROR,
        "unknown table or alias 'ar'",
    ),
    (
        "star outside count",
        {"select": sel({"kind": "star"}), "from": frm("Track")},
        "admin",
        False,
        VALIDATION_ERROR,
        "count(*)",
    ),
    (
        "aggregate in WHERE",
        {"select": sel(col("Name")), "from": frm("Track"), "where": op(">", fn("max", col("Bytes")), lit(1))},
        "admin",
        False,
        VALIDATION_ERROR,
        "not allowed in WHERE",
    ),
    (
        "aggregate inside an aggregate",
        {"select": sel(fn("max", fn("count", col("Bytes")))), "from": frm("Track")},
        "admin",
        False,
        VALIDATION_ERROR,
        "inside another aggregate",
    ),
    (
        "wrong argument count",
        {"select": sel(fn("round", col("Bytes"), lit(1), lit(2))), "from": frm("Track")},
        "admin",
        False,
        VALIDATION_ERROR,
        "round() takes 1 to 2 argument(s), got 3",
    ),
    (
        "coalesce needs two arguments",
        {"select": sel(fn("coalesce", col("Composer"))), "from": frm("Track")},
        "admin",
        False,
        VALIDATION_ERROR,
        "coalesce() takes at least 2",
    ),
    # ------------------------------------------------------------ RBAC
    ("viewer reads Customer", {"select": sel(col("Email")), "from": frm("Customer")}, "viewer", False, SECURITY_VIOLATION, None),
    (
        "viewer joins Track to InvoiceLine",
        {
            "select": sel(col("Name", "t")),
            "from": frm("Track", "t"),
            "joins": [{"table": frm("InvoiceLine", "il"), "on": op("=", col("TrackId", "il"), col("TrackId", "t"))}],
        },
        "viewer",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "viewer: count(*) of a denied table",
        {"select": sel(COUNT_STAR), "from": frm("Invoice")},
        "viewer",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "analyst reads Employee inside NOT EXISTS",
        {"select": sel(col("FirstName", "c")), "from": frm("Customer", "c"), "where": EMPLOYEE_SUB},
        "analyst",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "analyst reads Employee in a scalar sub-plan",
        {
            "select": sel(col("FirstName")),
            "from": frm("Customer"),
            "where": op("=", col("SupportRepId"), {"kind": "scalar_subquery", "plan": {"select": sel(fn("min", col("EmployeeId"))), "from": frm("Employee")}}),
        },
        "analyst",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "admin reads Employee",
        {"select": sel(col("FirstName", "c")), "from": frm("Customer", "c"), "where": EMPLOYEE_SUB},
        "admin",
        True,
        None,
        None,
    ),
    (
        "no policy means no RBAC",
        {"select": sel(col("FirstName")), "from": frm("Employee")},
        "open",
        True,
        None,
        None,
    ),
    (
        "a denied table wins over a misspelt column",
        {"select": sel(col("Salary")), "from": frm("Employee")},
        "analyst",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "column deny refuses selecting the column",
        {"select": sel(col("FirstName"), col("email")), "from": frm("Customer")},
        "nomail",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "column deny refuses filtering on the column",
        {"select": sel(col("FirstName")), "from": frm("Customer"), "where": op("like", col("Email"), lit("%@gmail.com"))},
        "nomail",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "column deny allows the other columns",
        {"select": sel(col("FirstName"), col("Country"), COUNT_STAR), "from": frm("Customer"), "group_by": [col("FirstName"), col("Country")]},
        "nomail",
        True,
        None,
        None,
    ),
    (
        "Employee.Email is not Customer.Email",
        {"select": sel(col("Email")), "from": frm("Employee")},
        "nomail",
        True,
        None,
        None,
    ),
    # A select alias named like a denied column: SQL reads the alias only as a bare ORDER BY key.
    (
        "bare ORDER BY key is the alias, even when a denied column has its name",
        {"select": [{"expr": col("CustomerId"), "alias": "Email"}], "from": frm("Customer"),
         "order_by": [{"expr": col("Email")}]},
        "nomail",
        True,
        None,
        None,
    ),
    (
        "inside an ORDER BY expression the name is the column",
        {"select": [{"expr": col("CustomerId"), "alias": "Email"}], "from": frm("Customer"),
         "order_by": [{"expr": op("like", col("Email"), lit("%@gmail.com")), "direction": "desc"}]},
        "nomail",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "an ORDER BY expression over an alias no column shares stays the alias",
        {"select": [{"expr": col("Country")}, {"expr": COUNT_STAR, "alias": "n"}], "from": frm("Customer"),
         "group_by": [col("Country")], "order_by": [{"expr": op("*", col("n"), lit(-1))}]},
        "nomail",
        True,
        None,
        None,
    ),
    (
        "GROUP BY alias shadowing a denied column counts the column",
        {"select": [{"expr": COUNT_STAR, "alias": "Email"}], "from": frm("Customer"),
         "group_by": [col("Email")]},
        "nomail",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "HAVING alias shadowing a denied column counts the column",
        {"select": [{"expr": col("Country")}, {"expr": fn("max", col("CustomerId")), "alias": "Email"}],
         "from": frm("Customer"), "group_by": [col("Country")], "having": op(">", col("Email"), lit("m"))},
        "nomail",
        False,
        SECURITY_VIOLATION,
        None,
    ),
    (
        "a sub-plan's ORDER BY expression reads the column too",
        {"select": sel(col("Country")), "from": frm("Customer", "c"),
         "where": op("=", col("CustomerId", "c"), {"kind": "scalar_subquery", "plan": {
             "select": [{"expr": col("CustomerId"), "alias": "Email"}], "from": frm("Customer"),
             "order_by": [{"expr": op("=", col("Email"), lit("luisg@embraer.com.br")), "direction": "desc"}],
             "limit": 1}})},
        "nomail",
        False,
        SECURITY_VIOLATION,
        None,
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case_id", "data", "role", "ok", "code", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_validation_table(
    case_id: str, data: dict, role: str, ok: bool, code: str | None, fragment: str | None
) -> None:
    out = validate_plan(PlanModel.model_validate(data), SCHEMA, ROLES[role], role=role)
    assert (out.ok, out.error_code) == (ok, code), out.message
    if ok:
        assert out.message is None
    if fragment is not None:
        assert fragment in (out.message or "")
    if code == SECURITY_VIOLATION:
        assert out.message == GENERIC_REFUSAL
        lowered = out.message.lower()
        leaked = [t for t in CHINOOK_COLUMNS if t.lower() in lowered]
        assert leaked == [], f"the refusal names {leaked}"


def test_outcome_lists_what_the_plan_reads_as_the_schema_spells_it() -> None:
    data = {
        "select": [{"expr": col("name", "G")}, {"expr": COUNT_STAR, "alias": "n"}],
        "from": frm("track", "t"),
        "joins": [{"table": frm("GENRE", "g"), "on": op("=", col("genreid", "t"), col("GenreId", "g"))}],
        "where": NEVER_BOUGHT,
        "group_by": [col("Name", "g")],
        "order_by": [{"expr": col("n")}],
    }
    out = validate_plan(PlanModel.model_validate(data), SCHEMA, ROLES["admin"], role="admin")
    assert out == ValidationOutcome(
        ok=True,
        tables=["Genre", "InvoiceLine", "Track"],
        columns=["Genre.GenreId", "Genre.Name", "InvoiceLine.TrackId", "Track.GenreId", "Track.TrackId"],
    )


def test_refusal_lists_denied_tables_and_columns_in_the_outcome() -> None:
    data = {
        "select": sel(col("FirstName", "c"), col("Email", "c")),
        "from": frm("Customer", "c"),
        "where": EMPLOYEE_SUB,
    }
    out = validate_plan(PlanModel.model_validate(data), SCHEMA, ROLES["viewer"], role="viewer")
    assert out.error_code == SECURITY_VIOLATION
    assert out.denied_tables == ["Customer", "Employee"]
    assert "Customer.Email" in out.denied_columns and "Employee.EmployeeId" in out.denied_columns
    assert out.message == GENERIC_REFUSAL


@pytest.mark.parametrize(
    ("role", "data", "suffix"),
    [
        ("viewer", {"select": sel(col("Email")), "from": frm("Customer")}, " (restricted: Customer)"),
        (
            "analyst",
            {"select": sel(col("FirstName", "c")), "from": frm("Customer", "c"), "where": EMPLOYEE_SUB},
            " (restricted: Employee)",
        ),
        ("nomail", {"select": sel(col("Email")), "from": frm("Customer")}, " (restricted: Customer.Email)"),
    ],
)
def test_refusal_names_tables_only_when_asked(role: str, data: dict, suffix: str) -> None:
    plan = PlanModel.model_validate(data)
    named = validate_plan(plan, SCHEMA, ROLES[role], role=role, refusal_names_tables=True)
    assert named.message == GENERIC_REFUSAL + suffix
    plain = validate_plan(plan, SCHEMA, ROLES[role], role=role)
    assert plain.message == GENERIC_REFUSAL


BUDGET_CASES: list[tuple[str, dict, int | None, int | None]] = [
    ("no limit", {"select": sel(col("Name")), "from": frm("Track")}, 100, 100),
    ("limit above the budget", {"select": sel(col("Name")), "from": frm("Track"), "limit": 500}, 100, 100),
    ("limit within the budget", {"select": sel(col("Name")), "from": frm("Track"), "limit": 10}, 100, None),
    (
        "limit equal to the budget",
        {"select": sel(col("Name")), "from": frm("Track"), "limit": 100},
        100,
        None,
    ),
    (
        "single-row aggregate",
        {"select": sel(COUNT_STAR, fn("max", col("Bytes"))), "from": frm("Track")},
        100,
        None,
    ),
    (
        "grouped aggregate",
        {"select": sel(col("GenreId"), COUNT_STAR), "from": frm("Track"), "group_by": [col("GenreId")]},
        100,
        100,
    ),
    (
        "aggregate only in a sub-plan",
        {
            "select": sel(col("Name")),
            "from": frm("Track"),
            "where": op(
                "=",
                col("Bytes"),
                {
                    "kind": "scalar_subquery",
                    "plan": {"select": sel(fn("max", col("Bytes"))), "from": frm("Track")},
                },
            ),
        },
        100,
        100,
    ),
    ("no budget", {"select": sel(col("Name")), "from": frm("Track")}, None, None),
]


@pytest.mark.parametrize(
    ("case_id", "data", "budget", "applied"), BUDGET_CASES, ids=[c[0] for c in BUDGET_CASES]
)
def test_row_budget_hook(case_id: str, data: dict, budget: int | None, applied: int | None) -> None:
    out = validate_plan(
        PlanModel.model_validate(data), SCHEMA, ROLES["admin"], role="admin", row_budget=budget
    )
    assert out.ok, out.message  # a soft rule: never an error by itself
    assert out.limit_applied == applied


def test_tables_read_and_columns_read_cover_sub_plans() -> None:
    data = {
        "select": [{"expr": col("Name", "t")}, {"expr": COUNT_STAR, "alias": "n"}],
        "from": frm("track", "t"),
        "joins": [T_G],
        "where": NEVER_BOUGHT,
        "group_by": [col("Name", "t")],
    }
    plan = PlanModel.model_validate(data)
    assert tables_read(plan) == {"track", "Genre", "InvoiceLine"}
    assert tables_read(plan, SCHEMA) == {"Track", "Genre", "InvoiceLine"}
    assert columns_read(plan, SCHEMA) == {
        "Track.Name",
        "Track.GenreId",
        "Track.TrackId",
        "Genre.GenreId",
        "InvoiceLine.TrackId",
    }


def test_count_star_reads_the_table_but_no_column() -> None:
    plan = PlanModel.model_validate({"select": sel(COUNT_STAR), "from": frm("Customer")})
    assert columns_read(plan, SCHEMA) == set()
    column_only = DatasourceAccess(allow=["Customer.FirstName"])
    out = validate_plan(plan, SCHEMA, column_only, role="r")
    assert out.ok and out.tables == ["Customer"] and out.columns == []


def test_columns_read_rejects_a_plan_that_does_not_resolve() -> None:
    plan = PlanModel.model_validate({"select": sel(col("Nme")), "from": frm("Track")})
    with pytest.raises(ValueError, match="unknown column 'Nme'"):
        columns_read(plan, SCHEMA)
