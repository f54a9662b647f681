"""The demo: two synthetic DuckDB databases beside Chinook, their policy, and a ready project folder.

``support`` (a help desk) and ``webanalytics`` (the store's website) reuse Chinook's 59 customer
ids and its 2009-2013 window, so questions that cross databases have real answers. Everything is
drawn from ``random.Random`` seeded per database: the same seed gives the same rows, always.

Deliberate edge cases (each one is checked by a test): customers with no tickets, customers with
no sessions, anonymous sessions (``customer_id`` NULL), tickets with no messages, unassigned open
tickets (``agent_id`` NULL), unrated tickets (``satisfaction_score`` NULL), customers who viewed
``/pricing`` and never converted, and anonymous ``signup`` conversions (``customer_id`` NULL).

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

import contextlib
import copy
import csv
import os
import random
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

from nl2sql_assets.config import ConfigError, DatasourceConfig, ProjectConfig
from nl2sql_assets.datasources.chinook import CHINOOK_SHA256, resolve_chinook, sha256_file
from nl2sql_assets.datasources.chinook_questions import CHINOOK_QUESTIONS
from nl2sql_assets.paths import packaged_suites_dir, repo_root
from nl2sql_assets.yamlio import dump_yaml

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


class DemoError(ConfigError):
    """The demo project could not be written (for example, the target already holds a project)."""


# ================================================================ Chinook customers


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


def _at(rng: random.Random, start: datetime, end: datetime) -> datetime:
    """A whole-second moment in [start, end]."""
    span = max(0, int((end - start).total_seconds()))
    return start + timedelta(seconds=rng.randint(0, span))


def _weighted(rng: random.Random, options: Sequence[tuple[Any, int]]) -> Any:
    values = [o[0] for o in options]
    weights = [o[1] for o in options]
    return rng.choices(values, weights=weights, k=1)[0]


def _money(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)


# ================================================================ support

AGENTS: list[tuple[str, str]] = [
    ("Maria Lopez", "billing"),
    ("Daniel Okafor", "technical"),
    ("Sofia Lindqvist", "catalog"),
    ("James Whitaker", "billing"),
    ("Priya Raman", "technical"),
    ("Lukas Brandt", "technical"),
    ("Chloe Martin", "billing"),
    ("Kenji Watanabe", "technical"),
    ("Ana Costa", "catalog"),
    ("Tom Gallagher", "billing"),
    ("Fatima Haddad", "technical"),
    ("Olivia Novak", "catalog"),
]
CATEGORY_TEAM = {
    "billing": "billing",
    "account": "billing",
    "playback": "technical",
    "downloads": "technical",
    "catalog": "catalog",
}
CATEGORIES = [("billing", 28), ("playback", 22), ("downloads", 20), ("account", 18), ("catalog", 12)]
SUBJECTS = {
    "billing": [
        "Charged twice for one order",
        "Refund for an accidental purchase",
        "Invoice shows the wrong billing address",
        "Card declined at checkout",
        "Question about a price change",
    ],
    "playback": [
        "Track stops halfway through",
        "Poor audio quality on my phone",
        "Album plays in the wrong order",
        "Cannot play purchased AAC files",
        "Video track has no sound",
    ],
    "downloads": [
        "Download link has expired",
        "Purchased album is missing tracks",
        "Downloads are very slow",
        "Cannot re-download my purchases",
    ],
    "account": [
        "Cannot reset my password",
        "Change the email on my account",
        "Please close my account",
        "Two accounts with the same email",
    ],
    "catalog": [
        "Album artwork is missing",
        "Wrong composer credited on a track",
        "Please add more albums by an artist",
        "Track listed under the wrong genre",
    ],
}
PRIORITIES = [("low", 25), ("normal", 50), ("high", 20), ("urgent", 5)]
RESOLUTION_HOURS = {"low": (6, 240), "normal": (2, 120), "high": (1, 48), "urgent": (1, 12)}
CUSTOMER_OPENERS = [
    "Hello, {issue}. Can you help?",
    "Hi support team: {issue}. This started a few days ago.",
    "Good morning. {issue_cap}. What should I do?",
    "{issue_cap}. I would appreciate a quick answer.",
]
AGENT_REPLIES = [
    "Thanks for writing in, {first}. I am looking into this now.",
    "Could you tell me the invoice number this is about?",
    "I have passed this to our {team} team and will update you shortly.",
    "This is fixed on our side. Could you try again and let me know?",
    "Sorry for the trouble, {first}. I have applied a correction to your account.",
]
CUSTOMER_FOLLOWUPS = [
    "Here are the details you asked for.",
    "It works now, thank you!",
    "Still the same problem, unfortunately.",
    "Thanks, that answers my question.",
    "Any news on this?",
]


def build_support(customers: Sequence[ChinookCustomer], seed: int = DEMO_SEED) -> dict[str, TableData]:
    """The support desk's rows, table by table, from ``random.Random`` seeded for this database."""
    rng = random.Random(f"{seed}:support")
    end = WINDOW_END

    # agents: the first of each team starts on day one, so every ticket can be assigned.
    agents = TableData(("agent_id", "name", "team", "hired_at"))
    hired: list[tuple[int, str, date]] = []
    seen_teams: set[str] = set()
    for i, (name, team) in enumerate(AGENTS, start=1):
        if team in seen_teams:
            hired_on = (_at(rng, WINDOW_START, datetime(2012, 6, 30))).date()
        else:
            hired_on = WINDOW_START.date()
            seen_teams.add(team)
        hired.append((i, team, hired_on))
        agents.rows.append((i, name, team, hired_on))

    # customers: Chinook's, with a plan and a sign-up shortly before their first purchase.
    cust = TableData(("customer_id", "email", "first_name", "last_name", "country", "plan", "signup_at"))
    signup: dict[int, datetime] = {}
    for c in customers:
        first = c.first_invoice or _at(rng, WINDOW_START, datetime(2010, 12, 31))
        at = max(WINDOW_START, first - timedelta(seconds=rng.randint(3600, 45 * 86400)))
        signup[c.customer_id] = at
        plan = _weighted(rng, [("basic", 55), ("plus", 30), ("premium", 15)])
        cust.rows.append((c.customer_id, c.email, c.first_name, c.last_name, c.country, plan, at))

    ids = [c.customer_id for c in customers]
    no_tickets = set(rng.sample(ids, k=min(6, len(ids))))

    # tickets, first as drafts, then numbered in the order they were opened.
    drafts: list[dict[str, Any]] = []
    for c in customers:
        if c.customer_id in no_tickets:
            continue
        for _ in range(rng.randint(3, 16)):
            category = _weighted(rng, CATEGORIES)
            priority = _weighted(rng, PRIORITIES)
            created = _at(rng, signup[c.customer_id], end - timedelta(hours=2))
            drafts.append(
                {
                    "customer": c,
                    "category": category,
                    "subject": rng.choice(SUBJECTS[category]),
                    "priority": priority,
                    "created": created,
                    "r": rng.random(),
                    "closed": rng.random(),
                    "unassigned": rng.random(),
                    "hours": rng.uniform(*RESOLUTION_HOURS[priority]),
                    "rated": rng.random(),
                    "score": _weighted(rng, [(5, 40), (4, 30), (3, 14), (2, 9), (1, 7)]),
                    "agent_pick": rng.random(),
                }
            )
    drafts.sort(key=lambda d: (d["created"], d["customer"].customer_id))

    tickets = TableData(
        (
            "ticket_id", "customer_id", "agent_id", "subject", "category", "priority", "status",
            "created_at", "resolved_at", "satisfaction_score",
        )
    )  # fmt: skip
    for tid, d in enumerate(drafts, start=1):
        created: datetime = d["created"]
        resolved_at: datetime | None = None
        age_days = (end - created).total_seconds() / 86400
        # New tickets are mostly still being worked on; a few old ones were never closed (the backlog).
        still_open = 0.8 if age_days < 14 else 0.12 if age_days < 90 else 0.02
        if d["r"] < still_open:
            status = "open" if d["r"] < still_open * 0.55 else "pending"
        else:
            resolved_at = created + timedelta(seconds=int(d["hours"] * 3600))
            if resolved_at > end:
                status, resolved_at = "pending", None
            else:
                status = "closed" if d["closed"] < 0.55 else "resolved"
        team = CATEGORY_TEAM[d["category"]]
        able = [a for a, t, h in hired if t == team and h <= created.date()]
        agent_id: int | None = able[int(d["agent_pick"] * len(able))]
        if status == "open" and d["unassigned"] < 0.3:
            agent_id = None  # nobody has picked it up yet
        score = d["score"] if resolved_at is not None and d["rated"] < 0.65 else None
        c = d["customer"]
        tickets.rows.append(
            (
                tid,
                c.customer_id,
                agent_id,
                d["subject"],
                d["category"],
                d["priority"],
                status,
                created,
                resolved_at,
                score,
            )
        )

    # messages: the customer opens, then agent and customer take turns until the ticket closes.
    open_ids = [row[0] for row in tickets.rows if row[6] == "open"]
    silent = set(open_ids[-3:])  # the newest open tickets: raised by phone, nothing written yet
    messages = TableData(("message_id", "ticket_id", "sender", "body", "sent_at"))
    by_id = {c.customer_id: c for c in customers}
    mid = 0
    for tid, cid, _agent, subject, category, _prio, _status, created, resolved, _score in tickets.rows:
        if tid in silent:
            continue
        c = by_id[cid]
        last = resolved if resolved is not None else min(end, created + timedelta(days=5))
        count = rng.randint(2, 6) if resolved is not None else rng.randint(1, 3)
        times = sorted(_at(rng, created, last) for _ in range(count - 1))
        issue = subject[0].lower() + subject[1:]
        team = CATEGORY_TEAM[category]
        for k, sent in enumerate([created, *times]):
            if k == 0:
                body = rng.choice(CUSTOMER_OPENERS).format(issue=issue, issue_cap=subject)
                sender = "customer"
            elif k % 2 == 1:
                body = rng.choice(AGENT_REPLIES).format(first=c.first_name, team=team)
                sender = "agent"
            else:
                body = rng.choice(CUSTOMER_FOLLOWUPS)
                sender = "customer"
            mid += 1
            messages.rows.append((mid, tid, sender, body, sent))

    return {"agents": agents, "customers": cust, "tickets": tickets, "ticket_messages": messages}


SUPPORT_DDL = [
    """CREATE TABLE agents (
        agent_id INTEGER PRIMARY KEY,
        name VARCHAR NOT NULL,
        team VARCHAR NOT NULL,
        hired_at DATE NOT NULL)""",
    """CREATE TABLE customers (
        customer_id INTEGER PRIMARY KEY,
        email VARCHAR NOT NULL,
        first_name VARCHAR NOT NULL,
        last_name VARCHAR NOT NULL,
        country VARCHAR NOT NULL,
        plan VARCHAR NOT NULL,
        signup_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE tickets (
        ticket_id INTEGER PRIMARY KEY,
        customer_id INTEGER NOT NULL REFERENCES customers (customer_id),
        agent_id INTEGER REFERENCES agents (agent_id),
        subject VARCHAR NOT NULL,
        category VARCHAR NOT NULL,
        priority VARCHAR NOT NULL,
        status VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL,
        resolved_at TIMESTAMP,
        satisfaction_score INTEGER CHECK (satisfaction_score BETWEEN 1 AND 5))""",
    """CREATE TABLE ticket_messages (
        message_id INTEGER PRIMARY KEY,
        ticket_id INTEGER NOT NULL REFERENCES tickets (ticket_id),
        sender VARCHAR NOT NULL CHECK (sender IN ('customer', 'agent')),
        body VARCHAR NOT NULL,
        sent_at TIMESTAMP NOT NULL)""",
]


# ================================================================ webanalytics

DEVICES: list[tuple[str, str, str]] = [
    ("desktop", "Windows", "Chrome"),
    ("desktop", "Windows", "Firefox"),
    ("desktop", "Windows", "Internet Explorer"),
    ("desktop", "macOS", "Safari"),
    ("desktop", "macOS", "Chrome"),
    ("desktop", "Linux", "Firefox"),
    ("mobile", "iOS", "Safari"),
    ("mobile", "Android", "Chrome"),
    ("mobile", "Android", "Android Browser"),
    ("tablet", "iPadOS", "Safari"),
    ("tablet", "Android", "Chrome"),
]
DEVICE_WEIGHTS = [22, 10, 8, 10, 5, 3, 14, 12, 4, 8, 4]
REFERRERS: list[tuple[str, str]] = [
    ("direct", "none"),
    ("google", "organic"),
    ("google", "cpc"),
    ("bing", "organic"),
    ("facebook", "social"),
    ("twitter", "social"),
    ("newsletter", "email"),
    ("music-blog.example", "referral"),
]
REFERRER_WEIGHTS = [30, 25, 10, 6, 10, 5, 8, 6]
ENTRY_PAGES = {
    "none": [("/", 8), ("/browse", 2)],
    "organic": [("/", 3), ("/browse", 3), ("/pricing", 2), ("/help", 1)],
    "cpc": [("/pricing", 3), ("/browse", 2)],
    "social": [("/blog", 3), ("/", 2), ("/browse/rock", 1)],
    "email": [("/browse", 2), ("/blog", 2), ("/pricing", 1)],
    "referral": [("/blog", 2), ("/browse/jazz", 1), ("/browse/rock", 1)],
}
NEXT_PAGES: dict[str, list[tuple[str, int]]] = {
    "/": [("/browse", 4), ("/search", 2), ("/pricing", 2), ("/blog", 1), ("/help", 1), ("/account", 1)],
    "/browse": [
        ("/browse/rock", 3),
        ("/browse/jazz", 2),
        ("/browse/metal", 2),
        ("/browse/latin", 1),
        ("/search", 1),
        ("/cart", 1),
    ],
    "/browse/rock": [("/cart", 3), ("/browse", 2), ("/search", 1), ("/pricing", 1)],
    "/browse/jazz": [("/cart", 3), ("/browse", 2), ("/search", 1), ("/pricing", 1)],
    "/browse/metal": [("/cart", 3), ("/browse", 2), ("/search", 1), ("/pricing", 1)],
    "/browse/latin": [("/cart", 3), ("/browse", 2), ("/search", 1), ("/pricing", 1)],
    "/search": [("/browse/rock", 2), ("/browse/jazz", 1), ("/cart", 2), ("/search", 1)],
    "/pricing": [("/cart", 2), ("/account", 2), ("/browse", 2), ("/help", 1)],
    "/cart": [("/checkout", 4), ("/browse", 2), ("/pricing", 1)],
    "/checkout": [("/account", 1), ("/browse", 1), ("/", 1)],
    "/account": [("/browse", 1), ("/help", 1), ("/pricing", 1)],
    "/help": [("/", 1), ("/account", 1), ("/search", 1)],
    "/blog": [("/browse", 2), ("/", 1), ("/pricing", 1)],
    "/signup": [("/", 1), ("/browse", 1)],
}
# A visitor who is not signed in cannot check out or open an account page: they are sent to sign up.
ANONYMOUS_DETOUR = {"/checkout": "/signup", "/account": "/signup"}
OTHER_COUNTRIES = [
    "USA",
    "Canada",
    "United Kingdom",
    "Germany",
    "France",
    "Brazil",
    "India",
    "Japan",
    "Mexico",
    "Spain",
]


def build_webanalytics(customers: Sequence[ChinookCustomer], seed: int = DEMO_SEED) -> dict[str, TableData]:
    """The website's rows, table by table, from ``random.Random`` seeded for this database."""
    rng = random.Random(f"{seed}:webanalytics")
    end = WINDOW_END

    devices = TableData(("device_id", "device_type", "os", "browser"))
    devices.rows = [(i, *d) for i, d in enumerate(DEVICES, start=1)]
    referrers = TableData(("referrer_id", "source", "medium"))
    referrers.rows = [(i, *r) for i, r in enumerate(REFERRERS, start=1)]
    device_ids = [r[0] for r in devices.rows]
    referrer_ids = [r[0] for r in referrers.rows]

    ids = [c.customer_id for c in customers]
    no_sessions = set(rng.sample(ids, k=min(5, len(ids))))
    with_sessions = [i for i in ids if i not in no_sessions]
    never_convert = set(rng.sample(with_sessions, k=min(5, len(with_sessions))))

    # Session drafts: (start, customer or None, device, referrer, country).
    drafts: list[tuple[datetime, int | None, int, int, str]] = []
    countries = sorted({c.country for c in customers} | set(OTHER_COUNTRIES))
    for c in customers:
        if c.customer_id in no_sessions:
            continue
        home_device = rng.choices(device_ids, weights=DEVICE_WEIGHTS, k=1)[0]
        since = max(WINDOW_START, (c.first_invoice or WINDOW_START) - timedelta(days=30))
        for _ in range(rng.randint(6, 26)):
            device = (
                home_device if rng.random() < 0.6 else rng.choices(device_ids, weights=DEVICE_WEIGHTS, k=1)[0]
            )
            referrer = rng.choices(referrer_ids, weights=REFERRER_WEIGHTS, k=1)[0]
            country = c.country if rng.random() < 0.92 else rng.choice(countries)
            drafts.append(
                (_at(rng, since, end - timedelta(hours=3)), c.customer_id, device, referrer, country)
            )
    for _ in range(700):
        device = rng.choices(device_ids, weights=DEVICE_WEIGHTS, k=1)[0]
        referrer = rng.choices(referrer_ids, weights=REFERRER_WEIGHTS, k=1)[0]
        drafts.append(
            (_at(rng, WINDOW_START, end - timedelta(hours=3)), None, device, referrer, rng.choice(countries))
        )
    drafts.sort(key=lambda d: (d[0], -1 if d[1] is None else d[1], d[2], d[3]))

    sessions = TableData(
        ("session_id", "customer_id", "device_id", "referrer_id", "started_at", "ended_at", "country")
    )
    views = TableData(("view_id", "session_id", "path", "viewed_at", "duration_s"))
    conversions = TableData(("conversion_id", "session_id", "customer_id", "kind", "amount", "converted_at"))
    forced_pricing: set[int] = set()
    for sid, (started, cid, device, referrer, country) in enumerate(drafts, start=1):
        medium = REFERRERS[referrer - 1][1]
        pages = [_weighted(rng, ENTRY_PAGES[medium])]
        while len(pages) < 10 and rng.random() < 0.72:
            pages.append(_weighted(rng, NEXT_PAGES[pages[-1]]))
        if cid is None:
            pages = [ANONYMOUS_DETOUR.get(p, p) for p in pages]
        elif cid in never_convert and cid not in forced_pricing:
            forced_pricing.add(cid)  # each never-converter has looked at the prices at least once
            if "/pricing" not in pages:
                pages.append("/pricing")
        at = started
        session_views: list[tuple[str, datetime, int]] = []
        for path in pages:
            duration = rng.randint(5, 40) if path in ("/", "/cart", "/signup") else rng.randint(10, 300)
            session_views.append((path, at, duration))
            at = at + timedelta(seconds=duration + rng.randint(1, 20))
        ended = session_views[-1][1] + timedelta(seconds=session_views[-1][2])
        sessions.rows.append((sid, cid, device, referrer, started, ended, country))
        for path, viewed, duration in session_views:
            views.rows.append((len(views.rows) + 1, sid, path, viewed, duration))

        # Conversions: purchases at checkout, upgrades after pricing, anonymous sign-ups.
        for path, viewed, _duration in session_views:
            draw = rng.random()
            if cid is not None and cid in never_convert:
                continue
            if path == "/checkout" and draw < 0.8:
                cents = _weighted(
                    rng, [(99, 20), (198, 15), (297, 10), (495, 10), (999, 25), (1398, 10), (1998, 10)]
                )
                conversions.rows.append((0, sid, cid, "purchase", _money(cents), viewed))
            elif path == "/pricing" and cid is not None and draw < 0.12:
                conversions.rows.append(
                    (0, sid, cid, "upgrade", _money(_weighted(rng, [(499, 3), (999, 1)])), viewed)
                )
            elif path == "/signup" and draw < 0.5:
                conversions.rows.append((0, sid, None, "signup", None, viewed))
    conversions.rows = [(i, *row[1:]) for i, row in enumerate(conversions.rows, start=1)]

    return {
        "devices": devices,
        "referrers": referrers,
        "sessions": sessions,
        "page_views": views,
        "conversions": conversions,
    }


WEBANALYTICS_DDL = [
    """CREATE TABLE devices (
        device_id INTEGER PRIMARY KEY,
        device_type VARCHAR NOT NULL,
        os VARCHAR NOT NULL,
        browser VARCHAR NOT NULL)""",
    """CREATE TABLE referrers (
        referrer_id INTEGER PRIMARY KEY,
        source VARCHAR NOT NULL,
        medium VARCHAR NOT NULL)""",
    """CREATE TABLE sessions (
        session_id INTEGER PRIMARY KEY,
        customer_id INTEGER,
        device_id INTEGER NOT NULL REFERENCES devices (device_id),
        referrer_id INTEGER NOT NULL REFERENCES referrers (referrer_id),
        started_at TIMESTAMP NOT NULL,
        ended_at TIMESTAMP NOT NULL,
        country VARCHAR NOT NULL)""",
    """CREATE TABLE page_views (
        view_id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions (session_id),
        path VARCHAR NOT NULL,
        viewed_at TIMESTAMP NOT NULL,
        duration_s INTEGER NOT NULL)""",
    """CREATE TABLE conversions (
        conversion_id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions (session_id),
        customer_id INTEGER,
        kind VARCHAR NOT NULL CHECK (kind IN ('purchase', 'upgrade', 'signup')),
        amount DECIMAL(10, 2),
        converted_at TIMESTAMP NOT NULL)""",
]


# ================================================================ writing DuckDB files


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""  # read back as NULL; the generators never produce an empty string
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return value


def _load_csv(conn: Any, table: str, data: TableData, folder: Path) -> None:
    """Rows go in through a temporary CSV file: far faster than executemany or huge VALUES lists."""
    path = folder / f"{table}.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerows([_csv_cell(v) for v in row] for row in data.rows)
    cols = ", ".join(data.columns)
    literal = str(path).replace("'", "''")
    conn.execute(
        f"COPY {table} ({cols}) FROM '{literal}' "
        "(FORMAT csv, HEADER false, DELIMITER ',', QUOTE '\"', ESCAPE '\"', NULL '')"
    )


def _write_duckdb(target: Path, ddl: Iterable[str], tables: dict[str, TableData]) -> Path:
    """Build the database under a temp name, then rename it into place: never a half-written file."""
    import duckdb

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        conn = duckdb.connect(str(tmp), config={"threads": 1})
        try:
            for statement in ddl:
                conn.execute(statement)
            with tempfile.TemporaryDirectory(prefix="nl2sql-demo-") as folder:
                for name, data in tables.items():  # parents first, for the foreign keys
                    _load_csv(conn, name, data, Path(folder))
            conn.execute("CHECKPOINT")
        finally:
            conn.close()
        # A stale write-ahead log beside the target would be replayed onto the new file.
        with contextlib.suppress(FileNotFoundError):
            Path(f"{target}.wal").unlink()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return target


def write_support(target: Path, customers: Sequence[ChinookCustomer], seed: int = DEMO_SEED) -> Path:
    return _write_duckdb(target, SUPPORT_DDL, build_support(customers, seed))


def write_webanalytics(target: Path, customers: Sequence[ChinookCustomer], seed: int = DEMO_SEED) -> Path:
    return _write_duckdb(target, WEBANALYTICS_DDL, build_webanalytics(customers, seed))


WRITERS = {"support": write_support, "webanalytics": write_webanalytics}


def write_demo_databases(
    out_dir: Path,
    *,
    chinook: Path | None = None,
    seed: int = DEMO_SEED,
    which: Iterable[str] = ("support", "webanalytics"),
) -> dict[str, Path]:
    """Generate the synthetic databases into ``out_dir``; Chinook (checked) supplies the customers."""
    customers = read_chinook_customers(resolve_chinook(chinook))
    return {name: WRITERS[name](Path(out_dir) / DEMO_FILES[name][1], customers, seed) for name in which}


def copy_chinook(source: Path, target: Path) -> Path:
    """Copy a checked Chinook file into place atomically, and check the copy too."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        shutil.copyfile(source, tmp)
        if sha256_file(tmp) != CHINOOK_SHA256:
            raise DemoError(f"copying {source} to {target} produced a different file; nothing was replaced")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


# ================================================================ the project files

YAML_HEADER = """\
# nl2sql-assets project: the demo datasources (Chinook, support, webanalytics), who may read what,
# and the model the reference engine calls. Paths are relative to this file.
# Written by nl2sql_assets.datasources.demo.render_project_yaml (`nl2sql-assets init --demo DIR`).
"""
EVALS_HEADER = """\
# Evaluation settings: the suites to run, the scorers, the cost cap of mode full and the gate.
# Suite paths are relative to this file.
"""


def project_config_data(data_dir: str = "data") -> dict[str, Any]:
    """``nl2sql.yaml`` of the demo as data (what ``render_project_yaml`` writes)."""
    questions = {
        "chinook": list(CHINOOK_QUESTIONS),
        "support": SUPPORT_QUESTIONS,
        "webanalytics": WEBANALYTICS_QUESTIONS,
    }
    datasources = []
    for ds_id, (engine, filename) in DEMO_FILES.items():
        datasources.append(
            {
                "id": ds_id,
                "engine": engine,
                "path": f"{data_dir}/{filename}",
                "description": DESCRIPTIONS[ds_id],
                "row_limit": 1000,
                "timeout_s": 10,
                "sample_questions": list(questions[ds_id]),
            }
        )
    return {
        "datasources": datasources,
        "policies": copy.deepcopy(DEMO_POLICIES),
        "llm": {"default": {"model": "openai/gpt-4o-mini", "api_key": "${env:OPENAI_API_KEY:-}"}},
        "evals": {"file": "evals.yaml"},
    }


def evals_config_data(suites_dir: str = "suites") -> dict[str, Any]:
    from nl2sql_assets.config import DEFAULT_SCORERS

    return {
        "suites": [f"{suites_dir}/chinook.yaml"],
        "scorers": list(DEFAULT_SCORERS),
        "curated": True,
        "max_cost_usd": 5.0,
        "gate": {"max_regressions": 2, "alpha": 0.05, "max_cost_increase": 0.2},
    }


def render_project_yaml(data_dir: str = "data") -> str:
    """The text of the demo's ``nl2sql.yaml``; the repository root's file is this text too."""
    data = project_config_data(data_dir)
    sections = [dump_yaml({key: value}, width=100) for key, value in data.items()]
    return YAML_HEADER + "\n" + "\n".join(sections)


def render_evals_yaml(suites_dir: str = "suites") -> str:
    return EVALS_HEADER + "\n" + dump_yaml(evals_config_data(suites_dir), width=100)


def render_project_files(data_dir: str = "data", suites_dir: str = "suites") -> dict[str, str]:
    """File name -> text for both config files."""
    return {"nl2sql.yaml": render_project_yaml(data_dir), "evals.yaml": render_evals_yaml(suites_dir)}


def write_root_project(root: Path | None = None) -> list[Path]:
    """Rewrite the repository root's ``nl2sql.yaml`` and ``evals.yaml`` from the renderers."""
    root = root if root is not None else repo_root()
    if root is None:
        raise DemoError("not in a checkout: there is no repository root to write to")
    written = []
    for name, text in render_project_files().items():
        path = Path(root) / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


# ================================================================ init and ensure


@dataclass(frozen=True)
class DemoProject:
    """Where ``init_demo`` put things."""

    root: Path
    config: Path
    evals: Path
    suites_dir: Path
    benchmarks_dir: Path
    data_dir: Path
    datasources: dict[str, Path]


def init_demo(
    target: Path, *, chinook: Path | None = None, data_dir_name: str = "data", force: bool = False
) -> DemoProject:
    """Write a working demo project into ``target``: config files, the shipped suites, an empty
    ``benchmarks/`` and the three databases. A folder that already holds ``nl2sql.yaml`` is refused
    unless ``force``."""
    target = Path(target).expanduser().resolve()
    config_path = target / "nl2sql.yaml"
    if config_path.exists() and not force:
        raise DemoError(f"{target} already holds a project ({config_path}); pass --force to overwrite it")
    source = resolve_chinook(chinook)

    target.mkdir(parents=True, exist_ok=True)
    suites_dir = target / "suites"
    suites_dir.mkdir(exist_ok=True)
    packaged = packaged_suites_dir()
    if packaged.is_dir() and packaged.resolve() != suites_dir.resolve():
        for suite in sorted(packaged.glob("*.yaml")):
            shutil.copyfile(suite, suites_dir / suite.name)
    benchmarks = target / "benchmarks"
    benchmarks.mkdir(exist_ok=True)

    data_dir = target / data_dir_name
    paths = {"chinook": copy_chinook(source, data_dir / DEMO_FILES["chinook"][1])}
    paths.update(write_demo_databases(data_dir, chinook=source))

    files = render_project_files(data_dir=data_dir_name)
    for name, text in files.items():
        tmp = target / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target / name)
    return DemoProject(
        root=target,
        config=config_path,
        evals=target / "evals.yaml",
        suites_dir=suites_dir,
        benchmarks_dir=benchmarks,
        data_dir=data_dir,
        datasources=paths,
    )


def _is_demo(ds: DatasourceConfig) -> bool:
    spec = DEMO_FILES.get(ds.id)
    return spec is not None and spec[0] == ds.engine and Path(ds.path).name == spec[1]


def _duckdb_ok(ds: DatasourceConfig, tables: Sequence[str]) -> bool:
    """The file opens and holds the demo's tables (checked through the adapter, same DuckDB settings)."""
    from nl2sql_assets.datasources.base import DatasourceError
    from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter

    try:
        adapter = DuckDBAdapter(ds)
    except DatasourceError:
        return False
    try:
        return set(tables) <= set(adapter.introspect().table_names)
    except DatasourceError:
        return False
    finally:
        adapter.close()


def ensure_demo_data(config: ProjectConfig, *, chinook: Path | None = None) -> dict[str, Path]:
    """Make sure every demo datasource of ``config`` has its file: Chinook copied in (again, when the
    file there has another hash), ``support`` and ``webanalytics`` generated when missing or broken.
    Good files are left alone. Datasources that are not the demo's (by id, engine and file name) are
    never touched. Returns id -> path of the demo datasources."""
    demo = {ds.id: ds for ds in config.datasources if _is_demo(ds)}
    out: dict[str, Path] = {}
    source: Path | None = None

    def chinook_source() -> Path:
        nonlocal source
        if source is None:
            source = resolve_chinook(chinook)
        return source

    if "chinook" in demo:
        path = Path(demo["chinook"].path)
        if not path.is_file() or sha256_file(path) != CHINOOK_SHA256:
            copy_chinook(chinook_source(), path)
        source = source or path
        out["chinook"] = path
    expected = {"support": SUPPORT_TABLES, "webanalytics": WEBANALYTICS_TABLES}
    customers: list[ChinookCustomer] | None = None
    for ds_id in ("support", "webanalytics"):
        if ds_id not in demo:
            continue
        ds = demo[ds_id]
        path = Path(ds.path)
        if not (path.is_file() and _duckdb_ok(ds, expected[ds_id])):
            if customers is None:
                customers = read_chinook_customers(chinook_source())
            WRITERS[ds_id](path, customers)
        out[ds_id] = path
    return out


def main() -> int:
    """``python -m nl2sql_assets.datasources.demo`` rewrites the repository root's config files."""
    for path in write_root_project():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
