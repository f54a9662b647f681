"""Running: which case runs a run makes (selection), the modes that make them, the run request that
says what to run, and the runner that asks, prices and scores each case run into a record.

The gold LLM server lives here (``gold_llm``): mode plans is what it is for; tests serve it too.
"""

from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running.modes import (
    MODES,
    GateRules,
    Measure,
    Mode,
    ModeName,
    discover_configs,
    get_mode,
    key_free_configs,
    llm_mode,
    reserved_config_names,
    resolve_config,
)
from nl2sql_assets.evaluation.running.request import RunRequest
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    CaseRuns,
    ConfigMeta,
    DatabaseRef,
    RunFacts,
    RunMeta,
    RunStamp,
    SuiteRef,
)
from nl2sql_assets.evaluation.running.runner import (
    ENGINE_ERROR,
    OnCase,
    arun_cases,
    build_case_record,
    rows_sha256,
    run_cases,
)
from nl2sql_assets.evaluation.running.scorers import (
    ScorerError,
    ScorerRegistry,
    register_scorer,
    scorer_class,
    unregister_scorer,
)
from nl2sql_assets.evaluation.running.selection import RoleRun, SelectionError, role_runs, select_cases

__all__ = [
    "ENGINE_ERROR",
    "MODES",
    "CaseRecord",
    "CaseRuns",
    "ConfigMeta",
    "DatabaseRef",
    "GateRules",
    "Measure",
    "Mode",
    "ModeName",
    "OnCase",
    "RoleRun",
    "RunFacts",
    "RunMeta",
    "RunRefused",
    "RunRequest",
    "RunStamp",
    "ScorerError",
    "ScorerRegistry",
    "SelectionError",
    "SuiteRef",
    "arun_cases",
    "build_case_record",
    "discover_configs",
    "get_mode",
    "key_free_configs",
    "llm_mode",
    "register_scorer",
    "reserved_config_names",
    "resolve_config",
    "role_runs",
    "rows_sha256",
    "run_cases",
    "scorer_class",
    "select_cases",
    "unregister_scorer",
]
