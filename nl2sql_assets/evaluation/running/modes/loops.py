"""The case loops a mode runs its jobs with: concurrently (local HTTP waits), concurrently under a
dollar cap (paid calls: each case reserves room first, each model call is checked before it goes
out), or one at a time in order (work that already uses every core)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from typing import Any

from nl2sql_assets.evaluation.running.modes.base import Budget, CaseJob, CaseLoop, Stopped
from nl2sql_assets.evaluation.running.spend import MemoryLedger
from nl2sql_assets.llm.spend import CALL_GUARD, CapReached
from nl2sql_assets.redact import get_logger

log = get_logger(__name__)  # redacting: see nl2sql_assets.redact


async def concurrently(loop: CaseLoop, jobs: Sequence[CaseJob], limit: int) -> None:
    """Up to ``limit`` case runs at once; the first failure ends the run with its own error."""
    semaphore = asyncio.Semaphore(max(1, limit))

    async def go(job: CaseJob) -> None:
        async with semaphore:
            if loop.broken:  # the circuit breaker tripped: the jobs not started are not made
                return
            await loop.answer(job)
            loop.finish(job)

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(go(job))
    except BaseExceptionGroup as group_error:  # the caller sees the first failure itself
        raise group_error.exceptions[0] from None


class _CallGuard:
    """One case run's model calls held to the cap (``llm.spend.CallGuard``): each call is asked for
    before it goes out, and priced and spent as soon as it is back."""

    def __init__(self, loop: CaseLoop, budget: Budget, job: CaseJob, entry: str, cap: float) -> None:
        self.loop, self.budget, self.job, self.entry, self.cap = loop, budget, job, entry, cap
        self.spent = 0.0

    def before_call(self, node: str, model: str) -> None:
        if self.budget.reserve_call(self.entry, node, self.cap) == "stop":
            raise CapReached(f"{node}: the next call to {model} could pass the ${self.cap:.2f} cap")

    def after_call(self, call: Any) -> None:
        usd = self.loop.price_call(self.job, call)
        self.spent += usd
        self.budget.spend_call(self.entry, call.node, usd)


async def under_cap(loop: CaseLoop, jobs: Sequence[CaseJob], cap: float, limit: int = 1) -> Stopped | None:
    """Up to ``limit`` case runs at once, started in order, each held to the cap before it starts
    and at every model call it makes (``running.spend`` has the rules).

    Before a case starts it reserves the most expensive case so far; it may start while what was
    spent, plus what the cases in flight may still spend, plus its own reservation stays within the
    cap. Until one case has ended nothing is known about cost, so the first one runs alone (and is
    never stopped). Then every model call of a case asks first: a call that, with the dearest call
    its node made so far, could pass the cap is not made, and its case stops there, counted as
    stopped by the cap (no record, no verdict; what it spent is spent). So the cap is passed by at
    most the calls in flight when it is reached; one case at a time, by at most one call.

    The ledger is the run's own, or ``loop.budget`` (shared by several runs, e.g. every partition
    of a backfill, across processes or machines): the same rules either way."""
    budget: Budget = loop.budget if loop.budget is not None else MemoryLedger()
    shared = loop.budget is not None
    limit = max(1, limit)
    changed = asyncio.Condition()
    running = 0
    cap_hit = False

    async def run(job: CaseJob, entry: str) -> None:
        nonlocal running, cap_hit
        guard = _CallGuard(loop, budget, job, entry, cap)
        token = CALL_GUARD.set(guard)
        try:
            cost = await loop.answer(job)
        except CapReached as stop:
            log.warning("case %s (%s) stopped by the cost cap mid-run: %s", job.rr.case.id, job.rr.role, stop)
            budget.spend(entry, 0.0, case_cost=guard.spent, stopped="max_cost")
            loop.stopped_by_cap(job, guard.spent)
            cap_hit = True
        except BaseException:
            budget.spend(entry, 0.0, case_cost=guard.spent, failed=True)  # release the reservation
            raise
        else:
            # what the guarded calls did not already spend (an outside engine's reported cost)
            budget.spend(entry, max(0.0, cost - guard.spent), case_cost=cost, config=job.config,
                         case=job.rr.case.id, role=job.rr.role)
            loop.finish(job)
        finally:
            CALL_GUARD.reset(token)
        async with changed:
            running -= 1
            changed.notify_all()

    async def room(n: int, entry: str) -> bool:
        """Wait until ``jobs[n]`` may start (True), or until it never may (False)."""
        async with changed:
            while True:
                if loop.broken or cap_hit:
                    return False
                if running >= limit:
                    await changed.wait()
                    continue
                decision = budget.reserve(entry, cap)
                if decision == "go":
                    return True
                if decision == "stop":
                    log.warning("stopping at the cost cap of $%.2f (%s; %d of %d case runs started)", cap,
                                budget.totals(), n, len(jobs))
                    return False
                if shared:  # another run's case may end too, which no local event announces
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), 0.2)
                else:
                    await changed.wait()

    stopped: Stopped | None = None
    try:
        async with asyncio.TaskGroup() as group:
            for n, job in enumerate(jobs):
                entry = f"{uuid.uuid4().hex}:{job.config}:{job.pass_index}:{job.rr.case.id}@{job.rr.role}"
                if not await room(n, entry):
                    stopped = "env_errors" if loop.broken else "max_cost"
                    break
                running += 1
                group.create_task(run(job, entry))
    except BaseExceptionGroup as group_error:  # the caller sees the first failure itself
        raise group_error.exceptions[0] from None
    if stopped is None and loop.broken:
        stopped = "env_errors"
    if stopped is None and cap_hit:
        stopped = "max_cost"
    return stopped


async def retrieving_in_order(loop: CaseLoop, jobs: Sequence[CaseJob]) -> None:
    """Route and retrieve each case run in its own run scope, one at a time."""
    for job in jobs:
        await loop.retrieve(job)
        loop.finish(job)
