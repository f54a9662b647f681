"""What the demo holds: its three datasources (files, descriptions, sample questions and tables),
and the seed and the time window the two generated databases share with Chinook."""

from __future__ import annotations

from datetime import datetime

from nl2sql_assets.config import ConfigError

DEMO_SEED = 2009
WINDOW_START = datetime(2009, 1, 1, 0, 0, 0)
WINDOW_END = datetime(2013, 12, 22, 23, 59, 59)  # Chinook's last invoice is on 2013-12-22

# Datasource id -> (engine, file name) of the demo.
DEMO_FILES: dict[str, tuple[str, str]] = {
    "chinook": ("sqlite", "chinook.sqlite"),
    "support": ("duckdb", "support.duckdb"),
    "webanalytics": ("duckdb", "webanalytics.duckdb"),
}
SUPPORT_TABLES = ("agents", "customers", "tickets", "ticket_messages")
WEBANALYTICS_TABLES = ("devices", "referrers", "sessions", "page_views", "conversions")
CHINOOK_CATALOG = ["Album", "Artist", "Genre", "MediaType", "Playlist", "PlaylistTrack", "Track"]

DESCRIPTIONS = {
    "chinook": (
        "Chinook, a digital music store: artists, albums, tracks, genres, media types, playlists, "
        "customers, invoices and invoice lines, and the sales staff (2009-2013)."
    ),
    "support": (
        "The music store's customer support desk: agents and their teams, customers (Chinook's "
        "customer ids and emails), support tickets and the messages in each ticket (2009-2013)."
    ),
    "webanalytics": (
        "The music store's website analytics: visitor sessions (anonymous, or by Chinook customer id), "
        "page views, devices, referrers and conversions such as purchases and sign-ups (2009-2013)."
    ),
}

SUPPORT_QUESTIONS: list[str] = [
    "How many support tickets were opened in each category in 2012?",
    "What is the average satisfaction score of resolved tickets for each support team?",
    "Which five agents resolved the most tickets, and what was their average resolution time in hours?",
    "How many tickets are still open or pending, broken down by priority?",
]
WEBANALYTICS_QUESTIONS: list[str] = [
    "Which referrer sources brought the most sessions in 2011?",
    "What share of sessions were anonymous on each device type?",
    "What was the total purchase amount per month in 2013?",
    "Which pages have the longest average viewing time?",
]


class DemoError(ConfigError):
    """The demo project could not be written (for example, the target already holds a project)."""
