"""The generated ``support`` database: a help desk with agents, customers, tickets and their messages."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

from nl2sql_assets.demo.catalog import DEMO_SEED, WINDOW_END, WINDOW_START
from nl2sql_assets.demo.customers import ChinookCustomer, TableData, draw_moment, draw_weighted

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
            hired_on = (draw_moment(rng, WINDOW_START, datetime(2012, 6, 30))).date()
        else:
            hired_on = WINDOW_START.date()
            seen_teams.add(team)
        hired.append((i, team, hired_on))
        agents.rows.append((i, name, team, hired_on))

    # customers: Chinook's, with a plan and a sign-up shortly before their first purchase.
    cust = TableData(("customer_id", "email", "first_name", "last_name", "country", "plan", "signup_at"))
    signup: dict[int, datetime] = {}
    for c in customers:
        first = c.first_invoice or draw_moment(rng, WINDOW_START, datetime(2010, 12, 31))
        at = max(WINDOW_START, first - timedelta(seconds=rng.randint(3600, 45 * 86400)))
        signup[c.customer_id] = at
        plan = draw_weighted(rng, [("basic", 55), ("plus", 30), ("premium", 15)])
        cust.rows.append((c.customer_id, c.email, c.first_name, c.last_name, c.country, plan, at))

    ids = [c.customer_id for c in customers]
    no_tickets = set(rng.sample(ids, k=min(6, len(ids))))

    # tickets, first as drafts, then numbered in the order they were opened.
    drafts: list[dict[str, Any]] = []
    for c in customers:
        if c.customer_id in no_tickets:
            continue
        for _ in range(rng.randint(3, 16)):
            category = draw_weighted(rng, CATEGORIES)
            priority = draw_weighted(rng, PRIORITIES)
            created = draw_moment(rng, signup[c.customer_id], end - timedelta(hours=2))
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
                    "score": draw_weighted(rng, [(5, 40), (4, 30), (3, 14), (2, 9), (1, 7)]),
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
        times = sorted(draw_moment(rng, created, last) for _ in range(count - 1))
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
