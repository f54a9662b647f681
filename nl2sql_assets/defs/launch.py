"""Run a job in this process as the UI would have launched it: filed under the code location.

``execute_in_process`` records a run with no job origin, so the UI's job pages, jobs list and
Overview timeline (which file runs by that origin) never show it. Here the run is created with
the origin the workspace gives the job (``workspace.yaml`` beside the project config, else the
module this package loads from), then executed in this process by the same steps
``execute_in_process`` takes (Dagster's own calls: the in-process executor, one execution plan);
only the run's creation differs, by the origin.
"""

import sys
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.execution.api import (
    ExecuteRunWithPlanIterable,
    create_execution_plan,
    job_execution_iterator,
)
from dagster._core.execution.context_creation_job import (
    PlanOrchestrationContextManager,
    orchestration_context_event_generator,
)
from dagster._core.execution.execute_in_process import merge_run_tags
from dagster._core.remote_origin import (
    CodeLocationOrigin,
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.storage.tags import REPOSITORY_LABEL_TAG
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from nl2sql_assets.defs.keys import CODE_LOCATION
from nl2sql_assets.signals import dispositions_kept

DEFINITIONS_MODULE = "nl2sql_assets.definitions"


def code_location_origin(project_dir: Path) -> CodeLocationOrigin:
    """The code location as ``dagster dev`` loads it: from the project's workspace.yaml when it
    names ours, else the definitions module run from the project folder."""
    workspace = project_dir / "workspace.yaml"
    if workspace.is_file():
        from dagster._core.workspace.load import location_origins_from_yaml_paths

        for origin in location_origins_from_yaml_paths([str(workspace)]):
            if origin.location_name == CODE_LOCATION:
                return origin
    return ManagedGrpcPythonEnvCodeLocationOrigin(
        loadable_target_origin=LoadableTargetOrigin(
            executable_path=sys.executable, module_name=DEFINITIONS_MODULE,
            working_directory=str(project_dir)),
        location_name=CODE_LOCATION)


class LaunchedRuns:
    """Executes the definitions' jobs in this process, each run filed under its job's origin."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance, project_dir: Path) -> None:
        self.defs = defs
        self.instance = instance
        repository = defs.get_repository_def().name
        self.repository = RemoteRepositoryOrigin(code_location_origin(project_dir), repository)
        self.label = {REPOSITORY_LABEL_TAG: f"{repository}@{self.repository.code_location_origin.location_name}"}

    def execute(self, job: str, *, partition_key: str | None = None, tags: dict[str, str] | None = None,
                run_config: dict[str, Any] | None = None) -> dg.ExecuteInProcessResult:
        """``execute_in_process``'s own steps (the in-process executor, one plan, outputs kept),
        the run created with its job's origin."""
        job_def = self.defs.resolve_job_def(job)
        ephemeral = job_def.as_ephemeral_job(resource_defs={}, input_values={})
        run_config = dict(run_config or {})
        if partition_key and ephemeral.partitioned_config:
            run_config = {**ephemeral.partitioned_config.get_run_config_for_partition_key(partition_key),
                          **run_config}
        run_tags = merge_run_tags(job_def, partition_key, {**self.label, **(tags or {})}, None,
                                  self.instance, run_config)
        in_memory = InMemoryJob(ephemeral)
        plan = create_execution_plan(
            in_memory, run_config=run_config,
            instance_ref=self.instance.get_ref() if self.instance.is_persistent else None)
        run = self.instance.create_run_for_job(
            job_def=ephemeral, execution_plan=plan, run_config=run_config,
            tags={**ephemeral.run_tags, **run_tags},
            remote_job_origin=RemoteJobOrigin(self.repository, job))
        output_capture: dict[Any, Any] = {}
        with dispositions_kept():  # Dagster maps SIGTERM to SIGINT's handler and leaves it so
            events = self._events(plan, in_memory, run, run_config, output_capture)
        return dg.ExecuteInProcessResult(job_def=ephemeral, event_list=events, output_capture=output_capture,
                                         dagster_run=self.instance.get_run_by_id(run.run_id))

    def _events(self, plan: Any, in_memory: Any, run: Any, run_config: dict[str, Any],
                output_capture: dict[Any, Any]) -> list[Any]:
        return list(ExecuteRunWithPlanIterable(
            execution_plan=plan,
            iterator=job_execution_iterator,
            execution_context_manager=PlanOrchestrationContextManager(
                context_event_generator=orchestration_context_event_generator, job=in_memory,
                execution_plan=plan, dagster_run=run, instance=self.instance, run_config=run_config,
                executor_defs=None, output_capture=output_capture, raise_on_error=False)))
