"""State isolation: an eval run shares no mutable state with the engine that serves questions.

Each test poisons the serving engine's state (a bad plan in its plan cache; garbage vectors in its
schema index in memory; a stale index file in its folder), shows the poison bites the serving
path, and shows an eval of the same cases is unaffected and says what it isolated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nl2sql_assets import Project
from nl2sql_assets.engine.pipeline import normalise_question
from nl2sql_assets.evaluation.suites import load_suite


def _records(report: object) -> dict[tuple[str, str], object]:
    board = next(iter(report.configs.values()))  # type: ignore[attr-defined]
    return {(r.case_id, r.role): r for r in board.results}


def test_a_bad_plan_in_the_serving_plan_cache_never_reaches_a_run(demo_project: Path) -> None:
    suite = load_suite(demo_project / "suites" / "chinook.yaml")
    good, other = suite.case("chinook_001"), suite.case("chinook_041")
    assert good.plan is not None and other.plan is not None
    with Project.load(demo_project / "nl2sql.yaml") as project:
        serving = project.engine
        poisoned = {("chinook", role, normalise_question(good.question)): other.plan
                    for role in ("admin", "analyst")}
        serving._plan_cache.update(poisoned)  # what the serving engine would now answer with
        report = project.evals.run(mode="plans", cases=["chinook_001"])
        assert dict(serving._plan_cache) == poisoned  # the run neither used nor cleared it
    records = _records(report)
    assert records[("chinook_001", "admin")].status == "pass"
    assert records[("chinook_001", "analyst")].status == "pass"
    isolation = report.isolation
    assert isolation is not None and isolation.plan_cache.isolated and isolation.temp_folder.isolated
    assert isolation.temp_folder.path is not None and not Path(isolation.temp_folder.path).exists()  # removed
    assert "plan cache: isolated" in isolation.markdown()
    # What it says of conversations is what runs do: follow-ups get their own earlier turns, no more.
    how = isolation.conversation_state.how
    assert isolation.conversation_state.isolated and "follow-up" in how and "its own earlier turns" in how
    assert "without history" not in how.replace("with no history", "")


def test_a_poisoned_or_stale_serving_index_never_reaches_a_run(demo_project: Path) -> None:
    cases = ["chinook_001", "chinook_041"]
    with Project.load(demo_project / "nl2sql.yaml") as project:
        clean = project.evals.run(mode="retrieval", cases=cases)
    eval_copies = demo_project / "warehouse" / "eval_schema_index"
    assert (eval_copies / "chinook.json").is_file()

    with Project.load(demo_project / "nl2sql.yaml") as project:
        serving = project.engine
        snapshot = project.registry.snapshot("chinook")
        store = serving.retriever.store
        question = load_suite(demo_project / "suites" / "chinook.yaml").case("chinook_001").question
        before = serving.retriever(question, snapshot)
        index = store.get(snapshot)
        # Poison the serving engine's index in memory: every vector replaced by noise.
        noise = np.random.default_rng(7).normal(size=index.vectors.shape).astype(np.float32)
        index.vectors = noise / np.linalg.norm(noise, axis=1, keepdims=True)
        index._by_kind.clear()
        assert serving.retriever(question, snapshot) != before  # the poison bites the serving path
        # And leave a stale index file (another schema's fingerprint) in the serving folder.
        stale = (store.folder / "chinook.json").read_text().replace(index.schema_fingerprint, "0" * 64)
        (store.folder / "chinook.json").write_text(stale)
        again = project.evals.run(mode="retrieval", cases=cases)

    first, second = _records(clean), _records(again)
    assert first.keys() == second.keys() and len(first) == 5  # chinook_001 refuses the viewer
    for key, record in first.items():
        assert (second[key].retrieval, second[key].routed, second[key].status) == (
            record.retrieval, record.routed, record.status), key
    index_note = again.isolation.retrieval_index
    assert index_note.isolated and index_note.path == str(eval_copies)
    assert "never the serving engine's indexes in memory" in index_note.how
