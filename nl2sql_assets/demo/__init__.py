"""The demo: two synthetic DuckDB databases beside Chinook, their policy, and a ready project folder.

The demo: two synthetic DuckDB databases beside Chinook, their policy, and a ready project folder.

``support`` (a help desk) and ``webanalytics`` (the store's website) reuse Chinook's 59 customer
ids and its 2009-2013 window, so questions that cross databases have real answers. Everything is
drawn from ``random.Random`` seeded per database: the same seed gives the same rows, always.

Deliberate edge cases (each one is checked by a test): customers with no tickets, customers with
no sessions, anonymous sessions (``customer_id`` NULL), tickets with no messages, unassigned open
tickets (``agent_id`` NULL), unrated tickets (``satisfaction_score`` NULL), customers who viewed
``/pricing`` and never converted, and anonymous ``signup`` conversions (``customer_id`` NULL).

- ``catalog``: the three datasources, their descriptions, sample questions and tables.
- ``policy``: who may read what (``DEMO_POLICIES``).
- ``customers``, ``support``, ``webanalytics``: the two generators and the customers they share.
- ``files``: writing the database files atomically.
- ``project``: ``init --demo`` scaffolding, the root config files, ``ensure_demo_data``.
"""

from nl2sql_assets.demo.catalog import (
    DEMO_FILES,
    DEMO_SEED,
    DESCRIPTIONS,
    SUPPORT_QUESTIONS,
    SUPPORT_TABLES,
    WEBANALYTICS_QUESTIONS,
    WEBANALYTICS_TABLES,
    DemoError,
)
from nl2sql_assets.demo.customers import ChinookCustomer, read_chinook_customers
from nl2sql_assets.demo.files import copy_chinook, write_demo_databases, write_support, write_webanalytics
from nl2sql_assets.demo.policy import DEMO_POLICIES
from nl2sql_assets.demo.project import (
    DemoProject,
    ensure_demo_data,
    evals_config_data,
    init_demo,
    project_config_data,
    render_evals_yaml,
    render_project_files,
    render_project_yaml,
    write_root_project,
)
from nl2sql_assets.demo.support import build_support
from nl2sql_assets.demo.webanalytics import build_webanalytics

__all__ = [
    "DEMO_FILES",
    "DEMO_POLICIES",
    "DEMO_SEED",
    "DESCRIPTIONS",
    "SUPPORT_QUESTIONS",
    "SUPPORT_TABLES",
    "WEBANALYTICS_QUESTIONS",
    "WEBANALYTICS_TABLES",
    "ChinookCustomer",
    "DemoError",
    "DemoProject",
    "build_support",
    "build_webanalytics",
    "copy_chinook",
    "ensure_demo_data",
    "evals_config_data",
    "init_demo",
    "project_config_data",
    "read_chinook_customers",
    "render_evals_yaml",
    "render_project_files",
    "render_project_yaml",
    "write_demo_databases",
    "write_root_project",
    "write_support",
    "write_webanalytics",
]
