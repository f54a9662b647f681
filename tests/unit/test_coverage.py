"""Coverage counts, execution success and per-domain rates, on small hand-made records."""

from __future__ import annotations

from nl2sql_assets.evaluation.reporting.coverage import (
    by_domain,
    coverage,
    domains_markdown,
    execution_success,
)
from nl2sql_assets.evaluation.running.results import CaseRecord
from nl2sql_assets.evaluation.suites import EvalCase
from nl2sql_assets.evaluation.suites.model import case_fingerprint


def rec(case_id: str, role: str = "admin", *, kind: str = "answer", domain: str | None = "shop", status: str = "pass",
        ran: bool = True, expected: str = "allowed", fingerprint: str | None = None, mode: str = "plans",
        suite: str = "s") -> CaseRecord:
    return CaseRecord(suite=suite, case_id=case_id, role=role, config="c", mode=mode, expected=expected, kind=kind,
                      domain=domain, fingerprint=fingerprint or case_id, status=status,
                      execution_status=status if kind == "answer" else None,
                      result_status="success" if ran else "error")


def test_coverage_counts_cases_not_runs_and_finds_definitions_asked_twice() -> None:
    records = [
        rec("a", "admin"), rec("a", "viewer"),  # one case, two roles
        rec("b", fingerprint="same"), rec("c", fingerprint="same"),  # two ids, one definition
        rec("r", kind="routing"),
        rec("p", kind="probe"), rec("p", "viewer", kind="probe"),
    ]
    c = coverage(records)
    assert c is not None
    assert (c.query_count, c.probe_count, c.unique_case_count) == (4, 1, 4)
    assert c.duplicates == [["s:b", "s:c"]]


def test_coverage_is_unknown_for_records_written_before_fingerprints() -> None:
    old = rec("a").model_copy(update={"fingerprint": None})
    assert coverage([old, rec("b")]) is None


def test_execution_success_counts_allowed_questions_whose_sql_ran_right_or_wrong() -> None:
    records = [
        rec("a"), rec("b", status="fail"),  # ran: both count as executed, the wrong one too
        rec("c", status="fail", ran=False),  # did not run
        rec("d", expected="refused", status="pass", ran=False),  # a refusal is not an execution
        rec("p", kind="probe", status="pass"),  # nor is a probe
    ]
    rate = execution_success(records)
    assert rate is not None and (rate.passed, rate.total) == (2, 3)
    assert execution_success([rec("a", mode="retrieval")]) is None  # nothing executes in mode retrieval


def test_rates_per_domain_keep_domains_apart() -> None:
    records = [rec("a", domain="shop"), rec("b", domain="shop", status="fail"), rec("c", domain="help", ran=False,
                                                                                    status="fail"),
               rec("p", domain="help", kind="probe"), rec("x", domain=None)]
    rates = by_domain(records)
    assert list(rates) == ["help", "shop"]  # sorted; a record without a domain is left out
    shop, help_ = rates["shop"], rates["help"]
    assert (shop.query_runs, shop.execution_success.passed, shop.accuracy.passed, shop.accuracy.total) == (2, 2, 1, 2)
    assert (help_.query_runs, help_.execution_success.passed, help_.probes) == (1, 0, 1)
    table = domains_markdown(rates)
    assert table.splitlines()[0].startswith("| domain | query runs | execution success")
    assert "| shop | 2 | 100.0%" in table


def test_a_fingerprint_ignores_spacing_a_final_semicolon_and_the_question_s_case_only() -> None:
    one = case_fingerprint("How many  tracks?", "SELECT COUNT(*) FROM Track;")
    assert one == case_fingerprint("how many tracks?", "SELECT COUNT(*)\n  FROM Track")
    assert one != case_fingerprint("How many tracks?", "SELECT COUNT(*) FROM Album")
    rock = case_fingerprint("Rock tracks?", "SELECT COUNT(*) FROM Genre WHERE Name = 'Rock'")
    assert rock != case_fingerprint("Rock tracks?", "SELECT COUNT(*) FROM Genre WHERE Name = 'rock'")
    case = EvalCase(id="x", question="How many tracks?", datasources=["chinook"], status="draft",
                    outcome={"admin": "allowed"}, sql="SELECT COUNT(*) FROM Track")
    assert case.fingerprint() == one and case.domain_name == "chinook"
