"""The cluster profile's Celery executor (``defs.celery_steps``): a step whose Celery task raised
(its worker could not reach Dagster's storage) fails that step, and the run ends failed with the
worker's error. dagster-celery's own loop, given the same tasks, never submits the remaining steps
and never ends (see the module). No broker or worker here: the tasks are stand-ins that raise."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest
from dagster._core.execution.retries import RetryMode

from nl2sql_assets.defs.celery_steps import _Executor, _TaskOutcome

pytestmark = pytest.mark.timeout(120)  # were the run to hang, fail instead of waiting forever


class _RaisingTask:
    """A Celery result whose task raised on its worker, as dagster-postgres does when it gives up."""

    def ready(self) -> bool:
        return True

    def get(self) -> list[str]:
        raise RuntimeError("DagsterPostgresException: too many retries for DB connection")

    def revoke(self) -> None:
        pass


class _NoWorkerExecutor(_Executor):
    def execute(self, plan_context: Any, execution_plan: Any) -> Any:
        from dagster_celery.core_execution_loop import core_celery_execution_loop

        def submit(app: Any, job_context: Any, step: Any, queue: str, priority: int, known_state: Any) -> Any:
            return _TaskOutcome(_RaisingTask(), job_context, step)

        return core_celery_execution_loop(plan_context, execution_plan, step_execution_fn=submit)


@dg.executor(name="no_worker")
def _no_worker(init_context: dg.InitExecutorContext) -> _Executor:
    return _NoWorkerExecutor(
        broker="memory://",
        backend="cache+memory://",
        config_source=None,
        include=None,
        retries=RetryMode.DISABLED,
    )


@dg.op(pool="llm")
def first() -> int:
    return 1


@dg.op(pool="llm")
def second() -> int:
    return 2


@dg.op
def after_second(value: int) -> int:
    return value


@dg.job(executor_def=_no_worker)
def two_branches() -> None:
    first()
    after_second(second())


def test_a_step_task_that_raised_fails_its_step_and_the_run_ends():
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as instance:
        result = dg.execute_job(dg.reconstructable(two_branches), instance, raise_on_error=False)
        assert not result.success
        failures = {
            e.step_key: e.event_specific_data.error.message
            for e in result.all_events
            if e.event_type == dg.DagsterEventType.STEP_FAILURE
        }
        # Both submitted steps failed with their worker's error; the step after one of them was
        # skipped (never submitted), and the run ended rather than waiting for it.
        assert set(failures) == {"first", "second"}
        assert all(
            "failed on its worker" in m and "too many retries for DB connection" in m
            for m in failures.values()
        ), failures
        assert instance.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.FAILURE
