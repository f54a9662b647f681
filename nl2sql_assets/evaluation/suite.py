"""The suite functions at the path the README names; their home is ``nl2sql_assets.evaluation.suites``."""

from nl2sql_assets.evaluation.suites import load_suite, suite_digest, write_suite

__all__ = ["load_suite", "suite_digest", "write_suite"]
