"""The import paths the README names for the pure functions and the facade."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_readme_pure_functions_import_from_their_documented_paths(tmp_path: Path) -> None:
    from nl2sql_assets import Project
    from nl2sql_assets.evaluation import judging, suites
    from nl2sql_assets.evaluation.judging.comparison import compare_results, compare_results_lenient
    from nl2sql_assets.evaluation.judging.faithfulness import check_faithfulness
    from nl2sql_assets.evaluation.judging.stats import mcnemar_exact, pass_hat_k, wilson_interval
    from nl2sql_assets.evaluation.suites import load_suite, suite_digest, write_suite
    from nl2sql_assets.project import Project as FacadeProject

    assert Project is FacadeProject
    assert (compare_results, compare_results_lenient) == (judging.compare_results, judging.compare_results_lenient)
    assert (load_suite, write_suite, suite_digest) == (suites.load_suite, suites.write_suite, suites.suite_digest)
    # and they still answer as documented
    assert compare_results([[1, "USA"]], [[1, "USA"]], False) is True
    assert compare_results_lenient([[13, "USA"]], [["USA", 13]], False) is True
    assert tuple(round(x, 3) for x in wilson_interval(27, 47)) == (0.433, 0.705)
    assert mcnemar_exact(0, 10) == pytest.approx(0.001953125)
    assert pass_hat_k(n=3, c=3, k=2) == 1.0
    assert check_faithfulness("There are 13 customers.", ["n"], [[13]], "How many?").faithful is True
    path = write_suite(suites.EvalSuite(cases=[]), tmp_path / "empty.yaml")
    assert load_suite(path).cases == [] and len(suite_digest(path)) == 64
