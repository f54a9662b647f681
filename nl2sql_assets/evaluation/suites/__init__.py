"""Suites: the reviewed cases (the model), their files (loader and writer), and the tools that
write them: ``regenerate`` (rows from the reviewed SQL; ``drift`` tells whether a file's rows went
stale) and ``seed`` (draft cases from a schema)."""

from nl2sql_assets.evaluation.suites.drift import Drift, drift, regenerate_copy
from nl2sql_assets.evaluation.suites.loader import (
    SuiteError,
    case_location,
    leading_comments,
    load_suite,
    parse_suite,
    suite_digest,
)
from nl2sql_assets.evaluation.suites.model import (
    CaseKind,
    CaseStatus,
    Difficulty,
    EarlierTurn,
    EvalCase,
    EvalSuite,
    Origin,
    Outcome,
    SuiteTally,
)
from nl2sql_assets.evaluation.suites.regenerate import (
    PackagedSuiteError,
    RegenerateFailure,
    RegenerateReport,
    regenerate,
)
from nl2sql_assets.evaluation.suites.seed import DroppedDraft, SeedReport, seed
from nl2sql_assets.evaluation.suites.writer import dump_suite, write_suite

__all__ = [
    "CaseKind",
    "CaseStatus",
    "Difficulty",
    "Drift",
    "DroppedDraft",
    "EarlierTurn",
    "EvalCase",
    "EvalSuite",
    "Origin",
    "Outcome",
    "PackagedSuiteError",
    "RegenerateFailure",
    "RegenerateReport",
    "SeedReport",
    "SuiteError",
    "SuiteTally",
    "case_location",
    "drift",
    "dump_suite",
    "leading_comments",
    "load_suite",
    "parse_suite",
    "regenerate",
    "regenerate_copy",
    "seed",
    "suite_digest",
    "write_suite",
]
