"""The spend ledger's accounting: one set of rules for a run alone, a backfill's shared file and
the cluster's Postgres ledger.

A ledger is a list of entries. A case, before it starts, **reserves** the most expensive case so
far (nothing, for the first); each model call of the case, before it goes out, is checked against
the dearest call its node has made so far; the call's real cost is **spent** as soon as it is
known; the case, when it ends, **settles** (its reservation is released, and its whole cost
becomes the "most expensive case" to beat). The decisions:

* a case may start when spent + what the cases in flight may still spend (each reservation less
  what its calls already spent) + the most expensive case so far stays within the cap; until one
  case has ended nothing is known about cost, so the first one runs alone;
* a call may go out when spent + what the *other* cases in flight may still spend + the dearest
  call its node has made stays within the cap; the calls of the first case are never held (the
  first case always runs). A call refused ends its case, stopped by the cap.

So the cap is passed by at most the calls in flight when it is reached (each by what it cost
above the dearest call of its node before it). One case at a time, that is at most one call, and
never more than one case costs above the most expensive case before it (the reference rule).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any, Literal

Decision = Literal["go", "wait", "stop"]


@dataclasses.dataclass
class LedgerState:
    """The ledger's entries folded into what the decisions need."""

    spent: float = 0.0
    open: dict[str, float] = dataclasses.field(default_factory=dict)  # case -> its reservation
    used: dict[str, float] = dataclasses.field(default_factory=dict)  # case in flight -> its calls' cost so far
    max_case: float = 0.0
    finished: int = 0
    dearest: dict[str, float] = dataclasses.field(default_factory=dict)  # node -> its dearest call

    def apply(self, entry: dict[str, Any]) -> None:
        kind, entry_id, usd = entry["kind"], entry["id"], float(entry["usd"])
        if kind == "reserve":
            self.open[entry_id] = usd
            self.used.setdefault(entry_id, 0.0)
            return
        self.spent += usd
        if entry.get("call"):  # one model call of a case in flight
            case = str(entry.get("case") or entry_id)
            self.used[case] = self.used.get(case, 0.0) + usd
            node = entry.get("node")
            if node:
                self.dearest[str(node)] = max(self.dearest.get(str(node), 0.0), usd)
            return
        # a case settled: ``case_cost`` is its whole cost (older entries: ``usd`` alone)
        self.open.pop(entry_id, None)
        self.used.pop(entry_id, None)
        self.max_case = max(self.max_case, float(entry.get("case_cost", usd)))
        self.finished += 1

    def held(self, exclude: str | None = None) -> float:
        """What the cases in flight may still spend: each reservation less what its calls spent."""
        return sum(max(0.0, held - self.used.get(case, 0.0)) for case, held in self.open.items() if case != exclude)

    def decide_case(self, cap: float) -> tuple[Decision, float]:
        """(decision, the reservation to make on ``go``) for a case asking to start."""
        if self.finished == 0:
            return ("wait", 0.0) if self.open else ("go", 0.0)
        if self.spent + self.held() + self.max_case > cap:
            return ("wait" if self.open else "stop"), 0.0
        return "go", self.max_case

    def decide_call(self, case: str, node: str, cap: float) -> Decision:
        """``go`` or ``stop`` for a call of ``case``'s node ``node``."""
        if self.finished == 0:
            return "go"  # nothing is known about cost yet: the first case always runs
        if self.spent + self.held(exclude=case) + self.dearest.get(node, 0.0) > cap:
            return "stop"
        return "go"

    def totals(self) -> dict[str, float]:
        return {"spent": self.spent, "reserved": self.held(), "max_case": self.max_case,
                "open": len(self.open), "finished": self.finished}


def call_entry(case: str, node: str, usd: float, **info: Any) -> dict[str, Any]:
    """The entry a settled model call appends (its own id; ``case`` names the case it is part of)."""
    return {"kind": "spend", "id": f"{case}#{node}#{uuid.uuid4().hex[:12]}", "usd": usd, "call": True,
            "case": case, "node": node, **info}


class MemoryLedger:
    """The ledger of a run that shares its cap with nobody: entries folded as they come."""

    def __init__(self) -> None:
        self._state = LedgerState()
        self._lock = threading.Lock()

    def reserve(self, entry_id: str, cap: float) -> Decision:
        with self._lock:
            decision, hold = self._state.decide_case(cap)
            if decision == "go":
                self._state.apply({"kind": "reserve", "id": entry_id, "usd": hold})
            return decision

    def spend(self, entry_id: str, usd: float, **info: Any) -> None:
        with self._lock:
            self._state.apply({"kind": "spend", "id": entry_id, "usd": usd, **info})

    def reserve_call(self, entry_id: str, node: str, cap: float) -> Decision:
        with self._lock:
            return self._state.decide_call(entry_id, node, cap)

    def spend_call(self, entry_id: str, node: str, usd: float) -> None:
        with self._lock:
            self._state.apply(call_entry(entry_id, node, usd))

    def totals(self) -> dict[str, float]:
        with self._lock:
            return self._state.totals()
