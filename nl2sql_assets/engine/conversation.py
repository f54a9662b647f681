"""A conversation: the earlier turns of a chat a follow-up question depends on.

``Engine.ask(question, role, conversation=[Turn(...), ...])`` shows them to the LLM nodes, so
"and how did that split across the months?" can be read against what was asked and answered
before. A turn is what the caller saw: the question, the SQL that ran, the answer given.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from pydantic import Field

from nl2sql_assets.config import StrictModel

#: How many earlier turns the prompts show (the most recent ones).
MAX_TURNS_SHOWN = 6


class Turn(StrictModel):
    """One earlier turn: the question, the SQL that answered it (None: none ran), the answer text."""

    question: str = Field(min_length=1)
    sql: str | None = None
    answer: str | None = None


Conversation = Sequence[Turn]


def conversation_text(conversation: Conversation) -> str:
    """The earlier turns as a prompt section ("" when there are none)."""
    shown = list(conversation)[-MAX_TURNS_SHOWN:]
    if not shown:
        return ""
    lines = ["Earlier in this conversation (the question below may refer to it):"]
    for i, turn in enumerate(shown, start=1):
        lines.append(f"{i}. Question: {turn.question}")
        if turn.sql:
            lines.append("   SQL: " + " ".join(turn.sql.split()))
        if turn.answer:
            lines.append(f"   Answer: {turn.answer}")
    return "\n".join(lines)


def conversation_key(conversation: Conversation) -> str:
    """A short digest of the conversation: a follow-up's plan depends on it (plan cache key)."""
    if not conversation:
        return ""
    blob = json.dumps([t.model_dump(mode="json") for t in conversation], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
