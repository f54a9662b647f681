"""The spend ledger's rules (``running.spend``), one table of steps for every ledger: the run's own
(in memory) and the backfill's file; tests/cluster/test_pg_ledger.py runs the same table on Postgres.

Steps under a cap of 1.00: ``case`` asks a case to start, ``call NODE`` asks for one model call of
the latest case, ``paid NODE USD`` settles that call, ``end`` settles the latest case with what its
calls cost (``end USD``: with that cost and no calls, an outside engine's). Each step's expected
decision (None for a step that decides nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.evaluation.history.warehouse import SpendLedger
from nl2sql_assets.evaluation.running.spend import MemoryLedger

LEDGER_STEPS: list[tuple[str, list[tuple[Any, ...]], list[str | None]]] = [
    ("the first case goes and its calls are never held",
     [("case",), ("call", "planner"), ("paid", "planner", 0.9), ("call", "synthesizer"), ("paid", "synthesizer", 0.9)],
     ["go", "go", None, "go", None]),
    ("nothing is known about cost until a case ends",
     [("case",), ("case",)], ["go", "wait"]),
    ("a second case goes while spent + the most expensive case fits",
     [("case",), ("call", "planner"), ("paid", "planner", 0.4), ("end",), ("case",)],
     ["go", "go", None, None, "go"]),
    ("no room and nothing in flight: stop",
     [("case",), ("paid", "planner", 0.4), ("end",), ("case",), ("paid", "planner", 0.4), ("end",), ("case",)],
     ["go", None, None, "go", None, None, "stop"]),
    ("a call whose node's dearest call could pass the cap is not made",
     [("case",), ("paid", "planner", 0.3), ("end",), ("case",), ("call", "planner"), ("paid", "planner", 0.5),
      ("call", "planner")],
     ["go", None, None, "go", "go", None, "stop"]),
    ("a node never seen costs nothing known yet: its call goes",
     [("case",), ("paid", "planner", 0.45), ("end",), ("case",), ("call", "synthesizer")],
     ["go", None, None, "go", "go"]),
    ("the other cases in flight hold what they may still spend",
     [("case",), ("paid", "planner", 0.25), ("end",), ("case",), ("case",), ("case",), ("call", "planner"),
      ("paid", "planner", 0.3), ("call", "planner")],
     ["go", None, None, "go", "go", "go", "go", None, "stop"]),  # 0.55 + 2 x 0.25 held + 0.3 > 1
    ("a case's calls use up its reservation: it holds only the rest",
     [("case",), ("paid", "planner", 0.3), ("end",), ("case",), ("paid", "planner", 0.3), ("case",)],
     ["go", None, None, "go", None, "go"]),  # 0.6 spent + (0.3 - 0.3) held + 0.3 <= 1
    ("an outside engine's reported cost settles its case",
     [("case",), ("end", 0.7), ("case",)], ["go", None, "stop"]),  # 0.7 + 0.7 > 1, nothing in flight
]


def run_steps(ledger: Any, steps: list[tuple[Any, ...]]) -> list[str | None]:
    got: list[str | None] = []
    cases: list[str] = []
    paid: dict[str, float] = {}
    for step in steps:
        action = step[0]
        if action == "case":
            entry = f"case{len(cases)}"
            decision = ledger.reserve(entry, cap=1.0)
            if decision == "go":
                cases.append(entry)
            else:
                cases.append(f"refused{len(cases)}")
            got.append(decision)
        elif action == "call":
            got.append(ledger.reserve_call(cases[-1], step[1], cap=1.0))
        elif action == "paid":
            ledger.spend_call(cases[-1], step[1], step[2])
            paid[cases[-1]] = paid.get(cases[-1], 0.0) + step[2]
            got.append(None)
        else:  # end
            cost = step[1] if len(step) > 1 else paid.get(cases[-1], 0.0)
            ledger.spend(cases[-1], max(0.0, cost - paid.get(cases[-1], 0.0)), case_cost=cost)
            got.append(None)
    return got


@pytest.fixture(params=["memory", "file"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return MemoryLedger() if request.param == "memory" else SpendLedger(tmp_path / "budget.jsonl")


@pytest.mark.parametrize(("name", "steps", "expected"), LEDGER_STEPS, ids=[s[0] for s in LEDGER_STEPS])
def test_ledger_decisions(ledger: Any, name: str, steps: list[tuple[Any, ...]], expected: list[str | None]) -> None:
    assert run_steps(ledger, steps) == expected, name


def test_two_file_ledgers_on_one_file_see_each_other(tmp_path: Path) -> None:
    """Two processes' ledgers of one budget: each decision folds in the other's entries."""
    first, second = SpendLedger(tmp_path / "b.jsonl"), SpendLedger(tmp_path / "b.jsonl")
    assert first.reserve("a", 1.0) == "go"
    first.spend_call("a", "planner", 0.6)
    first.spend("a", 0.0, case_cost=0.6)
    assert second.reserve("b", 1.0) == "stop"  # 0.6 spent + 0.6 the most expensive case > 1
    assert second.totals()["spent"] == pytest.approx(0.6) and second.totals()["finished"] == 1
