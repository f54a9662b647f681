"""Mode plans end to end: a fresh demo, no API key anywhere, every case passes for every role.

This is the key-free check CI leans on: each hand-written plan goes through the real engine
(litellm over HTTP to the gold LLM server, the validator with RBAC, the SQL generator and the
executor) on the generated demo databases, and nothing may fail or be skipped.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets import Project
from nl2sql_assets.demo import init_demo
from nl2sql_assets.engine.events import EVAL_CASE, EVAL_FINISHED, RUN_FINISHED, RUN_STARTED, Event
from nl2sql_assets.engine.validator import GENERIC_REFUSAL
from nl2sql_assets.evaluation.running import gold_llm
from nl2sql_assets.evaluation.suites import load_suite

APPROVED_CASES = 47  # questions; beside them, 29 policy probes (37 role runs) that ask no model
PROBE_RUNS = 37
ROLES = ("admin", "analyst", "viewer")
# The nodes each expected outcome calls, in order: a refusal stops at the validator (after the
# planner), an unanswerable question at the resolver.
NODES = {
    "allowed": {"resolver", "decomposer", "planner", "synthesizer"},
    "refused": {"resolver", "decomposer", "planner"},
    "unanswerable": {"resolver"},
}
CHINOOK_TABLES = ("Album", "Artist", "Customer", "Employee", "Genre", "Invoice", "InvoiceLine",
                  "MediaType", "Playlist", "PlaylistTrack", "Track")


@pytest.fixture
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider key of any kind in the environment."""
    for name in list(os.environ):
        if name.upper().endswith("_API_KEY"):
            monkeypatch.delenv(name)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def gold_servers(monkeypatch: pytest.MonkeyPatch) -> list[gold_llm.GoldLLMServer]:
    """Every gold server the run starts, so the test can read what went over HTTP."""
    started: list[gold_llm.GoldLLMServer] = []
    original = gold_llm.GoldLLMServer.start

    def start(self: gold_llm.GoldLLMServer) -> gold_llm.GoldLLMServer:
        started.append(self)
        return original(self)

    monkeypatch.setattr(gold_llm.GoldLLMServer, "start", start)
    return started


def _count_litellm_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many calls go through ``litellm.acompletion`` from now on."""
    from nl2sql_assets.llm.client import _lib

    lib = _lib()
    sent = {"litellm": 0}
    original = lib.acompletion

    async def counted(*args: Any, **kwargs: Any) -> Any:
        sent["litellm"] += 1
        return await original(*args, **kwargs)

    monkeypatch.setattr(lib, "acompletion", counted)
    return sent


@pytest.mark.parametrize("api", ["auto", "litellm"])
def test_mode_plans_passes_every_case_for_every_role_with_no_key(
    tmp_path: Path, chinook_path: Path, keyless: None, gold_servers: list[gold_llm.GoldLLMServer], api: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the lean OpenAI-compatible client (the default) and through litellm."""
    monkeypatch.setenv(gold_llm.GOLD_API_ENV, api)
    sent = _count_litellm_calls(monkeypatch)
    assert not [name for name in os.environ if name.upper().endswith("_API_KEY")]
    demo = init_demo(tmp_path / "demo", chinook=chinook_path)
    # evals.yaml's three suites: the 47 questions, the policy probes, the questions to ask back about.
    cases = [case for name in ("chinook", "chinook_policy", "chinook_clarify")
             for case in load_suite(demo.suites_dir / f"{name}.yaml").cases]
    approved = [case for case in cases
                if case.status == "approved" and case.kind != "probe" and "clarify" not in case.outcome.values()]
    clarify_runs = sum(list(c.outcome.values()).count("clarify") for c in cases)
    assert clarify_runs == 9
    assert len(approved) == APPROVED_CASES
    expected = {(case.id, role): outcome for case in approved for role, outcome in case.outcome.items()}
    assert len(expected) == APPROVED_CASES * len(ROLES) == 141
    probes = {(case.id, role): outcome for case in cases if case.kind == "probe"
              for role, outcome in case.outcome.items()}
    assert len(probes) == PROBE_RUNS

    project = Project.load(demo.config)
    events: list[Event] = []
    project.bus.subscribe("*", events.append)
    with project:
        # One process: its litellm calls are counted. The questions to ask back about are left
        # out (evals.yaml asks them; test_clarify_cases_pass_in_mode_plans_when_asked_for runs them).
        report = project.evals.run(mode="plans", workers=1, clarify=False)

    # ------------------------------------------------------------ every case, every role, all pass
    assert list(report.configs) == ["plans"]
    board = report.configs["plans"]
    failures = [(r.case_id, r.role, r.reason) for r in board.results if r.status != "pass"]
    assert failures == []
    records = [r for r in board.results if r.kind != "probe"]
    probe_records = [r for r in board.results if r.kind == "probe"]
    assert {(r.case_id, r.role): r.expected for r in records} == expected
    assert {(r.case_id, r.role): r.expected for r in probe_records} == probes
    assert len(records) == 141
    total = 141 + PROBE_RUNS
    assert board.summary.total == {"pass": total, "fail": 0, "error": 0, "env_error": 0, "skip": 0}
    assert report.skipped == clarify_runs and report.clarify is False  # left out, and counted
    assert all(r.execution_status == "pass" for r in records)
    assert all(r.execution_status is None and r.usage == {} for r in probe_records)  # no model call
    assert report.accuracy == 1.0
    assert board.accuracy.execution.rate == 1.0 and board.accuracy.execution.total == 141
    assert board.planned_cases == board.completed_cases == total
    policy = board.summaries()["policy"]
    assert (policy.precision, policy.recall, policy.false_negatives, policy.probe_errors) == (1.0, 1.0, 0, 0)
    assert sorted(report.roles) == list(ROLES)
    assert (report.mode, report.spent, report.stopped, report.curated) == ("plans", 0.0, None, False)

    # ------------------------------------------------------------ what each outcome looks like
    by_outcome = Counter(r.expected for r in records)
    assert by_outcome["allowed"] > 0 and by_outcome["refused"] > 0 and by_outcome["unanswerable"] == 12
    for r in records:
        if r.expected == "refused":
            assert r.error_code == "SECURITY_VIOLATION", (r.case_id, r.role)
            # The demo config names refused tables; mode plans scores the generic message.
            assert r.error_message == GENERIC_REFUSAL, (r.case_id, r.role, r.error_message)
            assert not any(table in (r.error_message or "") for table in CHINOOK_TABLES)
            assert r.row_count is None
        elif r.expected == "unanswerable":
            assert r.error_code == "QUESTION_NOT_ANSWERABLE", (r.case_id, r.role)
            assert r.row_count is None and r.sql is None
        else:
            assert r.expected == "allowed"
            assert r.error_code is None and r.result_status == "success", (r.case_id, r.role, r.result_status)
            assert r.row_count and r.row_count > 0 and r.rows_sha256, (r.case_id, r.role)
            assert r.sql and r.plan and r.answer == gold_llm.FIXED_ANSWER
            assert r.scores["result_match"].passed is True

    # ------------------------------------------------------------ the model calls went over HTTP
    assert len(gold_servers) == 1
    server = gold_servers[0]
    calls_per_record = {(r.case_id, r.role): NODES[r.expected] for r in records}
    for r in records:
        assert set(r.usage) == calls_per_record[(r.case_id, r.role)], (r.case_id, r.role, set(r.usage))
        for node, usage in r.usage.items():
            # The tokens are the gold server's canned usage, read back from its HTTP responses.
            assert (usage.input_tokens, usage.output_tokens) == (120, 30), (r.case_id, r.role, node)
        assert r.cost_usd == 0.0
        assert set(r.models.values()) == {"openai/gold-plans"}
    assert server.requests == sum(len(nodes) for nodes in calls_per_record.values())
    # Each went through the path asked for: litellm for every call, or none of them.
    assert sent["litellm"] == (server.requests if api == "litellm" else 0)
    assert server.requests_by_schema == {
        "DatasourceSelection": 141,
        "Decomposition": by_outcome["allowed"] + by_outcome["refused"],
        "PlanModel": by_outcome["allowed"] + by_outcome["refused"],
        "SynthesizedAnswer": by_outcome["allowed"],
    }

    # ------------------------------------------------------------ the events
    started = [e for e in events if e.topic == RUN_STARTED]
    finished = [e for e in events if e.topic == RUN_FINISHED]
    assert len(started) == len(finished) == 141
    assert len({e.run_id for e in started}) == 141
    assert {e.run_id for e in started} == {e.run_id for e in finished}
    context_keys = Counter((e.payload["context"]["case_id"], e.payload["context"]["role"]) for e in started)
    assert context_keys == Counter(list(expected))
    assert all(e.payload["context"]["config"] == "plans" and e.payload["context"]["pass"] == 1 for e in started)
    for e in started:  # each run finished after it started
        assert events.index(e) < next(i for i, f in enumerate(events) if f.topic == RUN_FINISHED
                                      and f.run_id == e.run_id)
    per_case: list[dict[str, Any]] = [e.payload for e in events if e.topic == EVAL_CASE]
    assert len(per_case) == 141 + PROBE_RUNS
    assert Counter((p["case"], p["role"]) for p in per_case) == Counter([*expected, *probes])
    assert all(p["passed"] is True and p["status"] == "pass" for p in per_case)
    eval_finished = [e for e in events if e.topic == EVAL_FINISHED]
    assert len(eval_finished) == 1 and events[-1] is eval_finished[0]
    summary = eval_finished[0].payload
    assert (summary["mode"], summary["cases"], summary["accuracy"], summary["spent"], summary["stopped"]) == (
        "plans", 141 + PROBE_RUNS, 1.0, 0.0, None)


def test_clarify_cases_pass_in_mode_plans_when_asked_for(tmp_path: Path, chinook_path: Path, keyless: None,
                                                          gold_servers: list[gold_llm.GoldLLMServer]) -> None:
    demo = init_demo(tmp_path / "demo", chinook=chinook_path)
    project = Project.load(demo.config)
    with project:
        asked = project.evals.run(mode="plans", cases=["clarify"], clarify=True)
        left = project.evals.run(mode="plans", cases=["clarify"], clarify=False)
        default = project.evals.run(mode="plans", cases=["clarify"])  # evals.yaml's clarify: true
    board = asked.configs["plans"]
    assert len(board.results) == 9 and asked.skipped == 0
    for r in board.results:
        assert (r.expected, r.status, r.result_status) == ("clarify", "pass", "needs_clarification"), r.case_id
        assert r.clarification and r.sql is None and r.row_count is None
        assert set(r.usage) == {"resolver"}  # asked back before any plan was made
    assert asked.accuracy == 1.0
    assert left.skipped == 9 and left.configs["plans"].results == []
    assert default.clarify is True and default.skipped == 0 and len(default.configs["plans"].results) == 9
