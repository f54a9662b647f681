"""The demo policy: who may read what in the three demo datasources.

The demo policy (``DEMO_POLICIES``; default role ``analyst``; refusals name tables in the playground):

=======  =====================================  =============================================  ==========================================
role     chinook                                support                                        webanalytics
=======  =====================================  =============================================  ==========================================
admin    everything                             everything                                     everything
analyst  everything except ``Employee``         everything except ``ticket_messages.body``     everything
viewer   the catalog: Album, Artist, Genre,     ``tickets`` without ``customer_id``, and       every table, without ``sessions.customer_id``
         MediaType, Playlist, PlaylistTrack,    ``agents.agent_id`` and ``agents.team``; no    and ``conversions.customer_id``
         Track                                  customers, messages or agent names
=======  =====================================  =============================================  ==========================================

Beside scope, each role has a row budget (the largest LIMIT its statements may ask for: viewer 100,
analyst 1000, admin none), and some tables may not be joined in one query:

- chinook, analyst: ``InvoiceLine`` with ``PlaylistTrack`` (a sale counted once per playlist holding
  its track);
- support, analyst: ``customers`` with ``ticket_messages`` (what was written, tied to a named
  customer and their email);
- webanalytics, analyst and viewer: ``conversions`` with ``page_views`` (two fact grains: a
  conversion's amount repeated once per page view of its session).

No role may call functions that reach files, the network or native code (``dangerous_functions``,
per dialect). None of this changes the verdict of any case of the shipped suites.
"""

from __future__ import annotations

from typing import Any

from nl2sql_assets.datasources.engines import engine_of
from nl2sql_assets.demo.catalog import CHINOOK_CATALOG, WEBANALYTICS_TABLES

DEMO_POLICIES: dict[str, Any] = {
    "default_role": "analyst",
    "refusal_names_tables": True,
    "roles": {
        "admin": {
            "description": "Reads everything in every datasource.",
            "datasources": {
                "chinook": {"allow": ["*"]},
                "support": {"allow": ["*"]},
                "webanalytics": {"allow": ["*"]},
            },
        },
        "analyst": {
            "description": (
                "Reads all business data; not the staff records (Chinook's Employee) "
                "nor the free text of support conversations."
            ),
            "row_budget": 1000,
            "datasources": {
                "chinook": {"allow": ["*"], "deny": ["Employee"],
                            "forbidden_joins": [["InvoiceLine", "PlaylistTrack"]]},
                "support": {"allow": ["*"], "deny": ["ticket_messages.body"],
                            "forbidden_joins": [["customers", "ticket_messages"]]},
                "webanalytics": {"allow": ["*"], "forbidden_joins": [["conversions", "page_views"]]},
            },
        },
        "viewer": {
            "description": (
                "Reads the music catalog and anonymous aggregates: no customer, invoice, "
                "staff or agent-name data, and no link from tickets or sessions to a customer."
            ),
            "row_budget": 100,
            "datasources": {
                "chinook": {"allow": list(CHINOOK_CATALOG)},
                "support": {
                    "allow": ["tickets", "agents.agent_id", "agents.team"],
                    "deny": ["tickets.customer_id"],
                },
                "webanalytics": {
                    "allow": list(WEBANALYTICS_TABLES),
                    "deny": ["sessions.customer_id", "conversions.customer_id"],
                    "forbidden_joins": [["conversions", "page_views"]],
                },
            },
        },
    },
    "dangerous_functions": {name: list(engine_of(name).dangerous_functions) for name in ("sqlite", "duckdb")},
}
