"""The demo's guided Chinook questions, kept in one list; the Chinook suite includes each verbatim.

The playground offers them as starting points, so each is a plain business question with a
reviewed answer in ``suites/chinook.yaml`` (the suite's tests check that every one is there).
"""

from __future__ import annotations

CHINOOK_QUESTIONS: list[str] = [
    "How many customers do we have in each country?",
    "Who are the top 5 customers by total spend?",
    "Which five genres sell the most tracks?",
    "What are the ten longest tracks in the catalog?",
    "Which five artists have the most albums in the catalog?",
    "Which playlists hold more than 1,000 tracks?",
    "What was our total revenue in each year?",
    "What was our revenue in the most recent month in the data?",
    "Which five countries bring in the most revenue?",
    "Which sales support agent has brought in the most revenue?",
    "How many tracks in the catalog have never been bought?",
    "How many tracks are there for each media type?",
]
