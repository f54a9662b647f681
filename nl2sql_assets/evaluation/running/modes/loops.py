"""The case loops a mode runs its jobs with: concurrently (local HTTP waits), concurrently under a
dollar cap (paid calls: each case reserves room first), or one at a time in order (work that
already uses every core)."""

from __future__ import annotations

import asyncio
import contextlib
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


async def under_cap(loop: CaseLoop, jobs: Sequence[CaseJob], cap: float, limit: int = 1) -> Stopped | None:
    """Up to ``limit`` case runs at once, started in order, each holding room under the cap.

    Before a case starts it reserves the most expensive case cost seen so far; it may start
    while what was spent, plus every reservation in flight, plus its own stays within the cap,
    and it settles with its real cost when it ends. A case that cannot start waits while others
    are in flight (they may settle lower) and stops the run when none is. Until one case has
    ended nothing is known about cost, so the first one runs alone. The cap is thus passed by
    at most ``limit`` cases' worth (each by what it cost above its reservation), and never by
    more than one case when cases cost the same; ``limit`` 1 is the one-at-a-time loop.

    With ``loop.budget`` (a ledger shared by several runs, e.g. every partition of a backfill),
    the ledger makes the same reservations across every run under that budget."""
    budget = loop.budget
    limit = max(1, limit)
    changed = asyncio.Condition()
    most = 0.0  # the most expensive case so far
    reserved = 0.0  # the reservations of the cases in flight
    running = 0
    ended = 0  # cases whose cost is known

    async def run(job: CaseJob, entry: str, hold: float) -> None:
        nonlocal most, reserved, running, ended
        try:
            cost = await loop.answer(job)
        except BaseException:
            if budget is not None:  # release the reservation; nothing was priced
                budget.spend(entry, 0.0, failed=True)
            raise
        if budget is not None:
            budget.spend(entry, cost, config=job.config, case=job.rr.case.id, role=job.rr.role)
        loop.finish(job)
        async with changed:
            most, reserved, running, ended = max(most, cost), reserved - hold, running - 1, ended + 1
            changed.notify_all()

    async def room(n: int, entry: str) -> bool:
        """Wait until ``jobs[n]`` may start (True), or until it never may (False)."""
        async with changed:
            while True:
                if loop.broken:
                    return False
                if running >= limit or (running and not ended):
                    await changed.wait()
                    continue
                if budget is not None:
                    decision = budget.reserve(entry, cap)
                    if decision == "go":
                        return True
                    if decision == "stop":
                        log.warning("stopping at the shared cost cap of $%.2f (%s)", cap, budget.totals())
                        return False
                    with contextlib.suppress(TimeoutError):  # another run's case, or one of ours, may end
                        await asyncio.wait_for(changed.wait(), 0.2)
                    continue
                if ended and loop.spent + reserved + most > cap:
                    if running:
                        await changed.wait()
                        continue
                    log.warning(
                        "stopping at the cost cap: spent $%.4f, the next case may cost up to $%.4f, cap $%.2f "
                        "(%d of %d case runs done)", loop.spent, most, cap, n, len(jobs),
                    )
                    return False
                return True

    stopped: Stopped | None = None
    try:
        async with asyncio.TaskGroup() as group:
            for n, job in enumerate(jobs):
                entry = f"{uuid.uuid4().hex}:{job.config}:{job.pass_index}:{job.rr.case.id}@{job.rr.role}"
                if not await room(n, entry):
                    stopped = "env_errors" if loop.broken else "max_cost"
                    break
                hold = most
                reserved += hold
                running += 1
                group.create_task(run(job, entry, hold))
    except BaseExceptionGroup as group_error:  # the caller sees the first failure itself
        raise group_error.exceptions[0] from None
    if stopped is None and loop.broken:
        stopped = "env_errors"
    return stopped


async def retrieving_in_order(loop: CaseLoop, jobs: Sequence[CaseJob]) -> None:
    """Route and retrieve each case run in its own run scope, one at a time."""
    for job in jobs:
        await loop.retrieve(job)
        loop.finish(job)
