"""The generated ``webanalytics`` database: the store's website sessions, page views and conversions."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta

from nl2sql_assets.demo.catalog import DEMO_SEED, WINDOW_END, WINDOW_START
from nl2sql_assets.demo.customers import ChinookCustomer, TableData, draw_moment, draw_weighted, money

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
                (draw_moment(rng, since, end - timedelta(hours=3)), c.customer_id, device, referrer, country)
            )
    for _ in range(700):
        device = rng.choices(device_ids, weights=DEVICE_WEIGHTS, k=1)[0]
        referrer = rng.choices(referrer_ids, weights=REFERRER_WEIGHTS, k=1)[0]
        drafts.append(
            (draw_moment(rng, WINDOW_START, end - timedelta(hours=3)), None, device, referrer, rng.choice(countries))
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
        pages = [draw_weighted(rng, ENTRY_PAGES[medium])]
        while len(pages) < 10 and rng.random() < 0.72:
            pages.append(draw_weighted(rng, NEXT_PAGES[pages[-1]]))
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
                cents = draw_weighted(
                    rng, [(99, 20), (198, 15), (297, 10), (495, 10), (999, 25), (1398, 10), (1998, 10)]
                )
                conversions.rows.append((0, sid, cid, "purchase", money(cents), viewed))
            elif path == "/pricing" and cid is not None and draw < 0.12:
                conversions.rows.append(
                    (0, sid, cid, "upgrade", money(draw_weighted(rng, [(499, 3), (999, 1)])), viewed)
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
