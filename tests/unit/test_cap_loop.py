"""``loops.under_cap``: concurrent case runs under a dollar cap, each reserving the most expensive
case so far before it starts and settling its real cost after."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from nl2sql_assets.evaluation.running.modes.loops import under_cap


class FakeLoop:
    """A CaseLoop whose case runs wait ``delay_s`` and cost ``costs[i]``; it records how many ran at once."""

    def __init__(self, costs: list[float], delay_s: float = 0.02) -> None:
        self.costs = costs
        self.delay_s = delay_s
        self.budget = None
        self.spent = 0.0
        self.broken: str | None = None
        self.in_flight = 0
        self.most_in_flight = 0
        self.started: list[int] = []
        self.finished: list[int] = []
        self.started_before_first_end = 0

    async def answer(self, job: Any) -> float:
        self.started.append(job.index)
        if not self.finished:
            self.started_before_first_end = len(self.started)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        return self.costs[job.index]

    def finish(self, job: Any) -> None:
        self.spent += self.costs[job.index]
        self.finished.append(job.index)


def _jobs(n: int) -> list[Any]:
    return [SimpleNamespace(index=i, config="c", pass_index=0, rr=SimpleNamespace(case=SimpleNamespace(id=f"k{i}"),
                                                                                   role="admin"))
            for i in range(n)]


def _run(loop: FakeLoop, cap: float, limit: int) -> str | None:
    return asyncio.run(under_cap(loop, _jobs(len(loop.costs)), cap, limit))  # type: ignore[arg-type]


def _sequential_rule(costs: list[float], cap: float) -> int:
    """How many cases the one-at-a-time rule lets through."""
    spent = most = 0.0
    for n, cost in enumerate(costs):
        if n > 0 and spent + most > cap:
            return n
        spent, most = spent + cost, max(most, cost)
    return len(costs)


@pytest.mark.parametrize("limit", [2, 4, 8])
def test_even_costs_never_pass_the_cap_by_more_than_one_case(limit: int) -> None:
    loop = FakeLoop([0.01] * 60)
    assert _run(loop, cap=0.255, limit=limit) == "max_cost"
    assert loop.spent <= 0.255 + 0.01 + 1e-9
    assert len(loop.finished) == 25  # as many as fit: the cap is not left unused either
    assert loop.most_in_flight == limit
    assert loop.started_before_first_end == 1  # nothing is known about cost until a case ends


def test_uneven_costs_pass_the_cap_by_at_most_limit_cases_worth() -> None:
    costs = [0.001 * (1 + (i * 7) % 5) for i in range(80)]  # 0.001 .. 0.005, uneven
    costs[3] = 0.0005
    for limit in (1, 3, 8):
        loop = FakeLoop(costs)
        assert _run(loop, cap=0.05, limit=limit) == "max_cost"
        assert loop.spent <= 0.05 + limit * max(costs) + 1e-9
        assert loop.most_in_flight <= limit
        assert len(loop.finished) == len(loop.started)  # every case started was finished and counted


def test_limit_one_is_the_one_at_a_time_rule() -> None:
    costs = [0.001 * (1 + (i * 3) % 4) for i in range(40)]
    loop = FakeLoop(costs, delay_s=0.0)
    assert _run(loop, cap=0.03, limit=1) == "max_cost"
    assert loop.finished == list(range(_sequential_rule(costs, 0.03)))
    assert loop.most_in_flight == 1


def test_a_run_under_the_cap_makes_every_case_concurrently() -> None:
    loop = FakeLoop([0.01] * 32, delay_s=0.05)
    assert _run(loop, cap=100.0, limit=8) is None
    assert sorted(loop.finished) == list(range(32))
    assert loop.most_in_flight == 8


def test_a_failed_case_ends_the_run_with_its_own_error() -> None:
    class Failing(FakeLoop):
        async def answer(self, job: Any) -> float:
            if job.index == 5:
                raise ValueError("case 5 broke")
            return await super().answer(job)

    with pytest.raises(ValueError, match="case 5 broke"):
        _run(Failing([0.01] * 20), cap=100.0, limit=4)


def test_the_circuit_breaker_stops_new_cases() -> None:
    class Breaking(FakeLoop):
        def finish(self, job: Any) -> None:
            super().finish(job)
            if len(self.finished) == 6:
                self.broken = "6 environment errors in a row"

    loop = Breaking([0.01] * 40)
    assert _run(loop, cap=100.0, limit=4) == "env_errors"
    assert len(loop.started) < 40
