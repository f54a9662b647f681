"""The regression gate on small hand-made runs: each check, each series break, each baseline form."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.config import GateSettings
from nl2sql_assets.evaluation.history import BaselineError, gate
from nl2sql_assets.evaluation.history.records import records_from_report, write_record
from nl2sql_assets.evaluation.reporting.board import EvalReport
from nl2sql_assets.evaluation.reporting.gate import narrowed_board
from nl2sql_assets.evaluation.reporting.report import build_report
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    ConfigMeta,
    DatabaseRef,
    RunMeta,
    RunStamp,
    SuiteRef,
)


def report(outcomes: dict[str, str | list[str]], **kw: Any) -> EvalReport:
    """``outcomes`` maps ``case`` (or ``case@role``) to its execution verdict, one per pass;
    ``generated`` maps a case to the verdict of its curated-off rerun."""
    return build_report(*report_parts(outcomes, **kw))


def report_parts(outcomes: dict[str, str | list[str]], *, mode: str = "full", config: str | None = None,
                 digest: str = "d1", fingerprint: str = "fp1", roles: tuple[str, ...] = ("analyst",),
                 curated: bool = True, cost: float = 0.01, day: int = 1, commit: str = "b" * 40,
                 generated: dict[str, str] | None = None, extra: list[CaseRecord] | None = None,
                 configs: tuple[str, ...] | None = None) -> tuple[list[CaseRecord], RunMeta]:
    """The case records and the run metadata ``report`` builds its report from."""
    config = config or {"plans": "plans", "retrieval": "retrieval"}.get(mode, "default")
    names = configs or (config,)
    records: list[CaseRecord] = []
    passes = 1
    for name in names:
        for key, verdicts in outcomes.items():
            case, _, role = key.partition("@")
            verdicts = [verdicts] if isinstance(verdicts, str) else verdicts
            passes = max(passes, len(verdicts))
            for i, verdict in enumerate(verdicts, start=1):
                rerun = None
                if generated and case in generated:
                    rerun = CaseRecord(suite="s", case_id=case, role=role or "analyst", config=name, mode=mode,
                                       expected="allowed", status=generated[case],
                                       execution_status=generated[case])
                records.append(CaseRecord(
                    suite="s", case_id=case, role=role or "analyst", config=name, mode=mode, pass_index=i,
                    expected="allowed", status=verdict,
                    execution_status=None if mode == "retrieval" else verdict,
                    cost_usd=cost, source="verified" if rerun else "generated", generated=rerun))
    records += extra or []
    stamp = RunStamp(started_at=datetime(2026, 1, day, 12, tzinfo=UTC),
                     finished_at=datetime(2026, 1, day, 13, tzinfo=UTC), package_version="0.1.0",
                     git_commit=commit, git_dirty=False)
    meta = RunMeta(mode=mode, suites=[SuiteRef(name="chinook", path="suites/chinook.yaml", digest=digest)],
                   roles=list(roles), passes=passes, curated=curated and mode == "full", run_stamp=stamp,
                   database=DatabaseRef(datasource_id="chinook", engine="sqlite", schema_fingerprint=fingerprint),
                   configs={n: ConfigMeta() for n in names})
    return records, meta


def cases(n: int, failing: set[int] = frozenset()) -> dict[str, str]:
    return {f"c{i:02d}": "fail" if i in failing else "pass" for i in range(n)}


# ---------------------------------------------------------------- flips


def test_identical_runs_pass() -> None:
    result = gate(report(cases(10)), report(cases(10)), GateSettings())
    assert result.ok and result.series_break is None and result.regressions == []
    assert [c.measure for c in result.compared] == ["execution", "execution_generated"]
    assert result.compared[0].accuracy == 1.0


def test_mode_plans_allows_no_flip() -> None:
    base = report(cases(10), mode="plans")
    result = gate(report(cases(10, {3}), mode="plans"), base, GateSettings())
    assert not result.ok
    assert result.compared[0].lost == ["c03@analyst"]
    assert "c03@analyst" in result.regressions[0]
    assert [c.measure for c in result.compared] == ["execution"]


def test_mode_retrieval_reads_status_and_allows_no_flip() -> None:
    base = report(cases(5), mode="retrieval")
    result = gate(report(cases(5, {0}), mode="retrieval"), base, GateSettings())
    assert not result.ok and result.compared[0].lost == ["c00@analyst"]


def test_mode_full_allows_two_lost_then_fails_at_three() -> None:
    base = report(cases(20))
    two = gate(report(cases(20, {1, 2})), base, GateSettings(max_regressions=2))
    assert two.ok, two.regressions
    assert two.compared[0].lost == ["c01@analyst", "c02@analyst"]
    three = gate(report(cases(20, {1, 2, 3})), base, GateSettings(max_regressions=2))
    assert not three.ok
    assert "3 case(s) went from pass to fail" in three.regressions[0]


def test_significant_drop_fails_even_under_the_count() -> None:
    base = report(cases(40))
    now = report(cases(40, set(range(10))))
    result = gate(now, base, GateSettings(max_regressions=50))
    first = result.compared[0]
    assert (len(first.lost), len(first.gained)) == (10, 0)
    assert first.p_value == pytest.approx(0.001953125)
    assert not result.ok
    assert any("significant drop" in line for line in result.regressions)


def test_balanced_flips_are_not_a_drop() -> None:
    base = report(cases(20, {10, 11, 12, 13, 14}))
    now = report(cases(20, {0, 1, 2, 3, 4}))
    result = gate(now, base, GateSettings(max_regressions=5))
    assert result.ok
    assert result.compared[0].p_value == pytest.approx(1.0)
    assert result.compared[0].gained == [f"c{i}@analyst" for i in range(10, 15)]


def test_a_flaky_case_reads_as_a_regression() -> None:
    base = report({"c1": ["pass", "pass", "pass"], "c2": ["pass"] * 3})
    now = report({"c1": ["pass", "fail", "pass"], "c2": ["pass"] * 3})
    result = gate(now, base, GateSettings(max_regressions=0))
    assert not result.ok and result.compared[0].lost == ["c1@analyst"]


def test_faithfulness_alone_never_regresses() -> None:
    base = report(cases(3))
    faithless = [CaseRecord(suite="s", case_id="c00", role="analyst", config="default", mode="full",
                            expected="allowed", status="fail", execution_status="pass", cost_usd=0.01,
                            reason="faithfulness: 1,300 is not in the rows")]
    now = report({k: v for k, v in cases(3).items() if k != "c00"}, extra=faithless)
    result = gate(now, base, GateSettings(max_regressions=0))
    assert result.ok, result.regressions


def test_routing_cases_are_left_out() -> None:
    def routing(status: str) -> CaseRecord:
        return CaseRecord(suite="s", case_id="r1", role="analyst", config="default", mode="full",
                          expected="allowed", status=status, execution_status=None, cost_usd=0.01)
    result = gate(report(cases(3), extra=[routing("fail")]), report(cases(3), extra=[routing("pass")]),
                  GateSettings(max_regressions=0))
    assert result.ok
    assert all("r1@analyst" not in c.lost for c in result.compared)


def test_curated_runs_are_checked_on_the_generated_path_too() -> None:
    base = report(cases(3), generated={"c00": "pass"})
    now = report(cases(3), generated={"c00": "fail"})
    result = gate(now, base, GateSettings(max_regressions=0))
    by_measure = {c.measure: c for c in result.compared}
    assert by_measure["execution"].lost == []
    assert by_measure["execution_generated"].lost == ["c00@analyst"]
    assert not result.ok
    assert "execution, generated" in result.regressions[0]


def test_cost_rise_over_twenty_percent_fails() -> None:
    base = report(cases(5), cost=0.10)
    assert gate(report(cases(5), cost=0.12), base, GateSettings()).ok  # +20% exactly is allowed
    up = gate(report(cases(5), cost=0.125), base, GateSettings())
    assert not up.ok and "cost per case rose" in up.regressions[0]
    assert up.compared[0].baseline_cost_per_case == pytest.approx(0.10)
    assert up.compared[0].cost_per_case == pytest.approx(0.125)
    free = report(cases(5), cost=0.0)
    paid = gate(report(cases(5), cost=1.0), free, GateSettings())
    # A zero baseline (a free model, or a provider that reported nothing) gives no rise to measure.
    assert paid.ok and paid.regressions == []
    assert paid.notes == ["config default: cost per case not compared: the baseline's cost is zero "
                          "(nothing to compare a rise with)"]
    assert gate(report(cases(5), cost=0.0), free, GateSettings()).ok  # free both times


def _with_cost(rep: EvalReport, **cost: Any) -> EvalReport:
    boards = {name: b.model_copy(update={"cost": b.cost.model_copy(update=cost)}) for name, b in rep.configs.items()}
    return rep.model_copy(update={"configs": boards})


def test_cost_is_compared_only_between_like_token_counts() -> None:
    measured = report(cases(5), cost=0.10)
    estimated = _with_cost(report(cases(5), cost=0.50), token_source="estimated", estimated_calls=20)
    result = gate(estimated, measured, GateSettings())
    assert result.ok and result.regressions == []
    assert "token counts differ in kind: the baseline's are measured, the run's estimated" in result.notes[0]
    # Both flagged: compared, and a rise is a rise.
    base = _with_cost(report(cases(5), cost=0.10), token_source="mixed")
    assert not gate(estimated, base, GateSettings()).ok
    # A baseline with unpriced calls is a lower bound: never a regression against it.
    lower = _with_cost(report(cases(5), cost=0.01), unknown_cost_calls=3)
    against = gate(report(cases(5), cost=0.10), lower, GateSettings())
    assert against.ok and "could not be priced" in against.notes[0]


def test_an_incomplete_run_or_baseline_is_never_compared() -> None:
    base = report(cases(5))
    outage = report({f"c{i:02d}": "error" for i in range(5)})
    outage = outage.model_copy(update={"incomplete": True, "env_errors": {"quota": 5}})
    result = gate(outage, base, GateSettings(max_regressions=0))
    assert not result.ok and result.regressions == [] and result.compared == []
    assert result.series_break is not None and "the run is incomplete" in result.series_break
    assert "5 quota" in result.series_break
    back = gate(base, outage, GateSettings(max_regressions=0))
    assert back.series_break is not None and "baseline report is incomplete" in back.series_break


# ---------------------------------------------------------------- series breaks


@pytest.mark.parametrize(("changed", "words"), [
    ({"digest": "d2"}, "suite digest"),
    ({"mode": "plans"}, "another mode"),
    ({"fingerprint": "fp2"}, "schema fingerprint"),
    ({"roles": ("analyst", "viewer")}, "other roles"),
    ({"curated": False}, "curated answers differ"),
    ({"config": "other"}, "no config in common"),
])
def test_series_breaks(changed: dict, words: str) -> None:
    result = gate(report(cases(3), **changed), report(cases(3)), GateSettings())
    assert not result.ok
    assert result.series_break is not None and words in result.series_break
    assert result.compared == [] and result.regressions == []


@pytest.mark.parametrize(("field", "words"), [
    ("comparator_version", "another comparator version"),
    ("policy_check_version", "another final-SQL policy check version"),
])
def test_a_baseline_judged_by_another_version_is_not_comparable(field: str, words: str) -> None:
    base = report(cases(3), mode="plans").model_copy(update={field: 1})
    now = report(cases(3), mode="plans", day=2).model_copy(update={field: 2})
    result = gate(now, base)
    assert not result.ok and result.compared == []
    assert result.series_break is not None and words in result.series_break
    assert "version 1, the run by version 2" in result.series_break and "eval publish" in result.series_break
    # a record carries the version too, and the gate reads it there
    record = records_from_report(base)[0]
    assert getattr(record, field) == 1
    assert words in (gate(now, record).series_break or "")
    # retrieval compares no rows and checks no final SQL: another version there is the same series
    assert gate(report(cases(3), mode="retrieval", day=2).model_copy(update={field: 2}),
                report(cases(3), mode="retrieval").model_copy(update={field: 1})).series_break is None


def test_roles_must_match_in_mode_plans_too() -> None:
    result = gate(report(cases(3), mode="plans", roles=("analyst", "viewer")), report(cases(3), mode="plans"))
    assert result.series_break is not None and "roles" in result.series_break


# ---------------------------------------------------------------- baselines


def test_baseline_from_a_report_file_and_a_record_file(tmp_path: Path) -> None:
    base = report(cases(4), mode="plans")
    path = base.save(tmp_path / "eval_plans.json")
    now = report(cases(4, {2}), mode="plans")
    assert gate(now, path).compared[0].lost == ["c02@analyst"]
    assert gate(now, str(path)).compared[0].lost == ["c02@analyst"]
    record_path = write_record(records_from_report(base)[0], tmp_path)
    from_record = gate(now, record_path)
    assert not from_record.ok and from_record.compared[0].lost == ["c02@analyst"]
    assert gate(now, records_from_report(base)[0]).compared[0].lost == ["c02@analyst"]


def test_baseline_from_a_benchmarks_folder_takes_the_newest_record(tmp_path: Path) -> None:
    older = report(cases(4, {1}), mode="plans", day=1, commit="1" * 40)
    newer = report(cases(4), mode="plans", day=5, commit="2" * 40)
    other_db = report(cases(4, {0, 1, 2, 3}), mode="plans", day=9, commit="3" * 40)
    other_db.databases[0].datasource_id = "support"
    full = report(cases(4, {0, 1, 2, 3}), mode="full", day=9, commit="4" * 40)
    for r in (newer, older, other_db, full):
        for record in records_from_report(r):
            write_record(record, tmp_path)
    now = report(cases(4, {1}), mode="plans", day=10)
    result = gate(now, tmp_path / "benchmarks")
    # gated against the 5th (c01 passed there), not the 1st, nor support's or mode full's
    assert not result.ok
    assert result.compared[0].lost == ["c01@analyst"]
    assert gate(now, tmp_path / "benchmarks" / "plans" / "chinook").compared[0].lost == ["c01@analyst"]


def test_newest_record_ties_break_on_file_name(tmp_path: Path) -> None:
    first = report(cases(2, {0}), mode="plans", day=3)
    second = report(cases(2), mode="plans", day=3)
    a = write_record(records_from_report(first)[0], tmp_path)
    b = write_record(records_from_report(second)[0], tmp_path)
    assert b.name == a.name.replace(".json", "-2.json")
    result = gate(report(cases(2, {0}), mode="plans"), tmp_path / "benchmarks")
    assert result.compared[0].lost == ["c00@analyst"]  # the -2 file is the newest


def test_missing_or_unreadable_baseline_raises(tmp_path: Path) -> None:
    now = report(cases(2), mode="plans")
    with pytest.raises(BaselineError, match="no such file"):
        gate(now, tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(BaselineError, match=r"bad\.json"):
        gate(now, bad)
    (tmp_path / "benchmarks").mkdir()
    with pytest.raises(BaselineError, match="no baseline record for mode plans, database chinook, config plans"):
        gate(now, tmp_path / "benchmarks")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"mode": "plans"}', "not an eval report: run_stamp: field required"),
        ('{"scoreboard": {}}', "not a benchmark record: kind: field required (and 9 more problems)"),
        ('{"scoreboard": {}, "kind": "plans", "schema": 3}', "not a benchmark record: schema: "),
    ],
)
def test_a_baseline_of_the_wrong_shape_is_named_in_one_line(tmp_path: Path, text: str, words: str) -> None:
    """A JSON file that is neither a report nor a record: one line naming the file and the first
    field wrong, not pydantic's multi-line dump with its help links."""
    bad = tmp_path / "base.json"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(BaselineError) as caught:
        gate(report(cases(2), mode="plans"), bad)
    message = str(caught.value)
    assert str(bad) in message and words in message
    assert "\n" not in message and "errors.pydantic.dev" not in message


def test_folder_with_only_other_records_raises(tmp_path: Path) -> None:
    for record in records_from_report(report(cases(2), mode="retrieval")):
        write_record(record, tmp_path)
    with pytest.raises(BaselineError, match="no baseline record for mode plans"):
        gate(report(cases(2), mode="plans"), tmp_path / "benchmarks")


def test_several_configs_compared_by_name() -> None:
    base = report(cases(4), configs=("big", "mini"))
    now = report(cases(4, {0, 1, 2}), configs=("mini", "new"))
    result = gate(now, base, GateSettings(max_regressions=2))
    assert {c.config for c in result.compared} == {"mini"}
    assert not result.ok and result.regressions[0].startswith("config mini")


# ---------------------------------------------------------------- one suite against a record of several


def suites_report(verdicts: dict[str, dict[str, str]], *, cost: float = 0.01, day: int = 1,
                  datasources: tuple[str, ...] = ("chinook",)) -> EvalReport:
    """A plans run over the suites of ``verdicts`` (suite -> case -> verdict), each suite its own
    digest, the databases ``datasources``."""
    records = [CaseRecord(suite=suite, case_id=case, role="analyst", config="plans", mode="plans",
                          expected="allowed", status=v, execution_status=v, cost_usd=cost)
               for suite, cases_ in verdicts.items() for case, v in cases_.items()]
    _, meta = report_parts({}, mode="plans", day=day)
    meta = meta.model_copy(update={
        "suites": [SuiteRef(name=s, path=f"suites/{s}.yaml", digest=f"digest-{s}") for s in verdicts],
        "databases": [DatabaseRef(datasource_id=d, engine="sqlite", schema_fingerprint=f"fp-{d}")
                     for d in datasources]})
    return build_report(records, meta)


@pytest.mark.parametrize(("now", "lost", "verdict"), [
    # the suite's own cases as they were: passes, though another suite's case failed in the record
    ({"clarify": {"k1": "pass", "k2": "pass"}}, [], "ok"),
    # a lost case of the suite is a flip (mode plans allows none)
    ({"clarify": {"k1": "pass", "k2": "fail"}}, ["k2@analyst"], "regressed"),
    # two suites of the three: both suites' cases, and only theirs
    ({"gold": {"g1": "fail", "g2": "pass"}, "policy": {"p1": "pass"}}, ["g1@analyst"], "regressed"),
])
def test_a_run_of_fewer_suites_is_gated_on_those_suites_cases_in_a_record_of_more(
        tmp_path: Path, now: dict[str, dict[str, str]], lost: list[str], verdict: str) -> None:
    base = suites_report({"gold": {"g1": "pass", "g2": "fail"}, "policy": {"p1": "pass"},
                          "clarify": {"k1": "pass", "k2": "pass"}})
    write_record(records_from_report(base)[0], tmp_path)
    result = gate(suites_report(now, day=2), tmp_path / "benchmarks")
    assert result.series_break is None
    assert result.compared[0].lost == lost and result.ok == (verdict == "ok")
    names = ", ".join(sorted(now))
    assert any(f"its suite(s) {names}" in note for note in result.notes)
    # the baseline's accuracy is over the run's suites' cases only
    shared = [c for s in now for c in base.configs["plans"].results if c.suite == s]
    assert result.compared[0].baseline_accuracy == sum(r.status == "pass" for r in shared) / len(shared)


def test_a_suite_or_database_the_record_never_ran_is_still_a_new_series(tmp_path: Path) -> None:
    base = suites_report({"gold": {"g1": "pass"}, "policy": {"p1": "pass"}})
    elsewhere = suites_report({"gold": {"g1": "pass"}}, datasources=("support",))
    # its suite is in the record, but its database is not: not narrowed, a new series
    assert gate(elsewhere, base).series_break is not None and gate(elsewhere, base).compared == []
    other = suites_report({"other": {"o1": "pass"}})
    assert "suite digest" in (gate(other, base).series_break or "")
    same = suites_report({"gold": {"g1": "pass"}, "policy": {"p1": "pass"}}, day=2)
    assert gate(same, base).ok and not gate(same, base).notes  # the whole run: nothing narrowed


def test_a_narrowed_baseline_counts_cost_per_case_over_its_suite_only() -> None:
    base = suites_report({"gold": {"g1": "pass", "g2": "pass"}, "policy": {"p1": "pass"}}, cost=0.01)
    cheap = base.configs["plans"].results
    cheap[2] = cheap[2].model_copy(update={"cost_usd": 1.0})  # the policy suite's case was dear
    board = base.configs["plans"].model_copy(update={"results": cheap})
    gold_only = narrowed_board(board, {"gold"})
    assert [r.case_id for r in gold_only.results] == ["g1", "g2"]
    assert gold_only.cost.per_case_usd == pytest.approx(0.01) and gold_only.cost.total_usd == pytest.approx(0.02)
    assert narrowed_board(board, {"policy"}).cost.per_case_usd == pytest.approx(1.0)


def test_a_suite_the_mode_ran_nothing_of_compares_empty_with_empty() -> None:
    """Mode retrieval runs no probe: a probe suite's board is empty, as its cases in the record."""
    base = suites_report({"gold": {"g1": "pass"}, "probes": {}})
    empty = suites_report({"probes": {}}, day=2)
    empty = empty.model_copy(update={"roles": []})
    result = gate(empty, base)
    assert result.series_break is None and result.ok
    assert result.compared[0].lost == [] and result.compared[0].accuracy == 0.0


# ---------------------------------------------------------------- verdicts on neighbour databases


def neighbours_report(verdicts: dict[str, tuple[str, bool | None]], *, seed: int | None = 1, day: int = 1
                      ) -> EvalReport:
    """A plans run whose cases have an execution verdict and a neighbour_match verdict (None: it
    did not apply); ``seed`` None: graded on the original only."""
    from nl2sql_assets.evaluation.judging.scorers import Score
    from nl2sql_assets.evaluation.running.results import NeighbourRun

    records = []
    for case, (execution, robust) in verdicts.items():
        scores = {} if seed is None else {"neighbour_match": Score(
            passed=robust, value=None if robust is None else float(robust),
            detail={"reason": {True: "match", False: "fails_on_neighbour", None: "fails_on_original"}[robust]})}
        records.append(CaseRecord(suite="s", case_id=case, role="analyst", config="plans", mode="plans",
                                  expected="allowed", status="fail" if robust is False else execution,
                                  execution_status=execution, scores=scores))
    _, meta = report_parts({}, mode="plans", day=day)
    if seed is not None:
        meta = meta.model_copy(update={"neighbours": NeighbourRun(count=10, seed=seed, candidates=24, max_rows=200,
                                                                  generator_version=2)})
    return build_report(records, meta)


BASE = {"a": ("pass", True), "b": ("pass", True), "c": ("fail", None)}


@pytest.mark.parametrize(("now", "verdict", "lost"), [
    # b is overturned on a neighbour: it passes on the original, so only the neighbours' verdict loses it
    ({**BASE, "b": ("pass", False)}, "original", []),
    ({**BASE, "b": ("pass", False)}, "neighbours", ["b@analyst"]),
    # a fails on the original: both verdicts lose it
    ({**BASE, "a": ("fail", None)}, "original", ["a@analyst"]),
    ({**BASE, "a": ("fail", None)}, "neighbours", ["a@analyst"]),
])
def test_the_gate_reads_the_verdict_it_is_told(now: dict[str, tuple[str, bool | None]], verdict: str,
                                              lost: list[str]) -> None:
    result = gate(neighbours_report(now, day=2), neighbours_report(BASE), GateSettings(verdict=verdict))
    assert result.series_break is None
    assert result.compared[0].lost == lost and result.compared[0].on_neighbours == (verdict == "neighbours")


@pytest.mark.parametrize(("run_seed", "base_seed"), [(2, 1), (None, 1), (1, None)])
def test_other_neighbour_settings_are_another_series(run_seed: int | None, base_seed: int | None) -> None:
    result = gate(neighbours_report(BASE, seed=run_seed, day=2), neighbours_report(BASE, seed=base_seed))
    assert result.series_break is not None and "other neighbour databases" in result.series_break


@pytest.mark.parametrize(("change", "said"), [
    ({"generator_version": 3}, "another neighbour generator version: baseline"),
    ({"witness": 32, "witness_version": 2}, "other neighbour databases"),  # the search added: another series
    ({"witness": 0}, None),  # no search either side: the version is nobody's
])
def test_neighbours_made_or_searched_by_another_version_are_not_comparable(change: dict[str, int],
                                                                          said: str | None) -> None:
    base = neighbours_report(BASE)
    now = neighbours_report(BASE, day=2)
    assert now.neighbours is not None
    now = now.model_copy(update={"neighbours": now.neighbours.model_copy(update=change)})
    result = gate(now, base)
    if said is None:
        assert result.series_break is None
        return
    assert result.series_break is not None and said in result.series_break


def test_another_witness_search_version_is_named_with_both_versions() -> None:
    base, now = neighbours_report(BASE), neighbours_report(BASE, day=2)
    assert base.neighbours is not None and now.neighbours is not None
    base = base.model_copy(update={"neighbours": base.neighbours.model_copy(update={"witness": 32,
                                                                                    "witness_version": 1})})
    now = now.model_copy(update={"neighbours": now.neighbours.model_copy(update={"witness": 32,
                                                                                 "witness_version": 2})})
    result = gate(now, base)
    assert result.series_break is not None
    assert "another witness search version" in result.series_break
    assert "witness search version 1, the run under version 2" in result.series_break


def test_another_generator_version_is_named_with_both_versions() -> None:
    base, now = neighbours_report(BASE), neighbours_report(BASE, day=2)
    assert now.neighbours is not None
    now = now.model_copy(update={"neighbours": now.neighbours.model_copy(update={"generator_version": 3})})
    result = gate(now, base)
    assert result.series_break is not None
    assert "neighbour generator version 2, the run under version 3" in result.series_break


def test_the_neighbours_verdict_on_a_run_without_neighbours_says_so() -> None:
    result = gate(neighbours_report(BASE, seed=None, day=2), neighbours_report(BASE, seed=None),
                  GateSettings(verdict="neighbours"))
    assert result.ok and any("was not graded on any" in note for note in result.notes)
