"""dagster-celery's executor, with a step whose Celery task raised reported as that step's failure.

Why: in dagster-celery 0.29.27's execution loop (``core_celery_execution_loop``), when a step's
Celery task raises, rather than returning the step's events, the error is kept aside, no further
step is submitted, and the loop goes on while any step is not complete. The steps it no longer
submits never complete, so the run orchestrator loops forever: the run hangs, never failed, and
cannot be re-executed from failure. A task raises when its worker cannot reach Dagster's own
Postgres storage for longer than dagster-postgres retries (about 6 s): the worker loads the run
from it before the step starts, and writes every step event to it. That is a Postgres restart.

Here the task's exception becomes the step's STEP_FAILURE event, which the loop handles as any
failed step: its dependants are skipped, the steps in flight finish, and the run fails with the
worker's error; a re-execution from failure runs what did not finish. Everything else is
dagster-celery's own executor (same config schema, same task, same loop).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import dagster as dg
from dagster._core.definitions.executor_definition import multiple_process_executor_requirements
from dagster._core.events import DagsterEvent
from dagster._core.execution.plan.objects import ErrorSource, StepFailureData
from dagster._core.execution.retries import RetryMode
from dagster._serdes import serialize_value
from dagster._utils.error import SerializableErrorInfo, serializable_error_info_from_exc_info

# dagster-celery (and Celery) are imported on first use: Dagster imports every module under
# defs/, and the embedded profile must not pay for the cluster's libraries.


class _TaskOutcome:
    """A submitted step's Celery result whose ``get`` never raises for a task that failed: it
    returns the step's STEP_FAILURE event instead (a revoked task still raises, as the loop expects)."""

    def __init__(self, result: Any, job_context: Any, step: Any) -> None:
        self._result = result
        self._job_context = job_context
        self._step = step

    def ready(self) -> bool:
        return self._result.ready()

    def revoke(self) -> Any:
        return self._result.revoke()

    def get(self) -> list[str]:
        from celery.exceptions import TaskRevokedError

        try:
            return self._result.get()
        except TaskRevokedError:
            raise
        except Exception:
            cause = serializable_error_info_from_exc_info(sys.exc_info())
            error = SerializableErrorInfo(
                message=f'The Celery task of step "{self._step.key}" failed on its worker before it could report '
                f"the step (is Dagster's Postgres storage reachable from the workers?): {cause.message}",
                stack=cause.stack,
                cls_name=cause.cls_name,
                cause=cause.cause,
                context=cause.context,
            )
            event = DagsterEvent.step_failure_event(
                self._job_context.for_step(self._step),
                StepFailureData(
                    error=error, user_failure_data=None, error_source=ErrorSource.FRAMEWORK_ERROR
                ),
            )
            return [serialize_value(event)]


def _submit(
    app: Any, job_context: Any, step: Any, queue: str, priority: int, known_state: Any
) -> _TaskOutcome:
    from dagster_celery.executor import _submit_task

    return _TaskOutcome(_submit_task(app, job_context, step, queue, priority, known_state), job_context, step)


@functools.cache
def _executor_class() -> type:
    """dagster-celery's executor with ``_submit`` as its step submission (built on first use)."""
    from dagster_celery.core_execution_loop import core_celery_execution_loop
    from dagster_celery.executor import CeleryExecutor

    class _Executor(CeleryExecutor):
        def execute(self, plan_context: Any, execution_plan: Any) -> Any:
            # the module's _submit, looked up at each run (tests replace it)
            return core_celery_execution_loop(plan_context, execution_plan,
                                              step_execution_fn=lambda *a: _submit(*a))

    return _Executor


@functools.cache
def celery_executor() -> dg.ExecutorDefinition:
    """dagster-celery's ``celery_executor`` (same config), a failed step task failing its step."""
    from dagster_celery.executor import CELERY_CONFIG

    @dg.executor(name="celery", config_schema=CELERY_CONFIG,
                 requirements=multiple_process_executor_requirements())
    def executor(init_context: dg.InitExecutorContext) -> Any:
        config = init_context.executor_config
        return _executor_class()(
            broker=config.get("broker"),
            backend=config.get("backend"),
            config_source=config.get("config_source"),
            include=config.get("include"),
            retries=RetryMode.from_config(config["retries"]),
        )

    return executor


def __getattr__(name: str) -> Any:
    if name == "_Executor":  # the executor class, for tests that build one on a stand-in task
        return _executor_class()
    raise AttributeError(name)
