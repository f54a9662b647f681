"""The case loops a mode runs its jobs with: concurrently (local HTTP waits), one at a time under
a dollar cap (paid calls), or one at a time in order (work that already uses every core)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from nl2sql_assets.evaluation.running.modes.base import CaseJob, CaseLoop, Stopped
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


async def under_cap(loop: CaseLoop, jobs: Sequence[CaseJob], cap: float) -> Stopped | None:
    """One case run at a time. Before each (but the first), the most expensive case so far is
    added to what was spent; if that could pass the cap, the run stops there.

    With ``loop.budget`` (a ledger shared by several runs, e.g. every partition of a backfill),
    the same rule is applied to everything spent under that budget, by any run: each case first
    reserves room, and settles the reservation with what it really cost."""
    budget = loop.budget
    most = 0.0
    for n, job in enumerate(jobs):
        if loop.broken:
            return "env_errors"
        entry = f"{uuid.uuid4().hex}:{job.config}:{job.pass_index}:{job.rr.case.id}@{job.rr.role}"
        if budget is not None:
            while (decision := budget.reserve(entry, cap)) == "wait":
                await asyncio.sleep(0.2)
            if decision == "stop":
                log.warning("stopping at the shared cost cap of $%.2f (%s)", cap, budget.totals())
                return "max_cost"
        elif n > 0 and loop.spent + most > cap:
            log.warning(
                "stopping at the cost cap: spent $%.4f, the next case may cost up to $%.4f, cap $%.2f "
                "(%d of %d case runs done)", loop.spent, most, cap, n, len(jobs),
            )
            return "max_cost"
        try:
            cost = await loop.answer(job)
        except BaseException:
            if budget is not None:  # release the reservation; nothing was priced
                budget.spend(entry, 0.0, failed=True)
            raise
        if budget is not None:
            budget.spend(entry, cost, config=job.config, case=job.rr.case.id, role=job.rr.role)
        most = max(most, cost)
        loop.finish(job)
    return "env_errors" if loop.broken else None


async def retrieving_in_order(loop: CaseLoop, jobs: Sequence[CaseJob]) -> None:
    """Route and retrieve each case run in its own run scope, one at a time."""
    for job in jobs:
        await loop.retrieve(job)
        loop.finish(job)
