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
"""

from __future__ import annotations

from typing import Any

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
            "datasources": {
                "chinook": {"allow": ["*"], "deny": ["Employee"]},
                "support": {"allow": ["*"], "deny": ["ticket_messages.body"]},
                "webanalytics": {"allow": ["*"]},
            },
        },
        "viewer": {
            "description": (
                "Reads the music catalog and anonymous aggregates: no customer, invoice, "
                "staff or agent-name data, and no link from tickets or sessions to a customer."
            ),
            "datasources": {
                "chinook": {"allow": list(CHINOOK_CATALOG)},
                "support": {
                    "allow": ["tickets", "agents.agent_id", "agents.team"],
                    "deny": ["tickets.customer_id"],
                },
                "webanalytics": {
                    "allow": list(WEBANALYTICS_TABLES),
                    "deny": ["sessions.customer_id", "conversions.customer_id"],
                },
            },
        },
    },
}
