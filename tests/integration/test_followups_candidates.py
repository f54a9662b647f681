"""Follow-up cases and candidate plans end to end, key-free: the real engine over HTTP to the gold
LLM, on the demo's Chinook. A follow-up's earlier turn is played first and reaches the final
turn's prompts; candidates are planned, run and chosen among, and the board reports the uplift."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets import Project
from nl2sql_assets.config import load_config
from nl2sql_assets.engine.conversation import Turn
from nl2sql_assets.engine.result import SECURITY_VIOLATION
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.running import gold_llm
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, write_suite

ARTISTS = "SELECT COUNT(ArtistId) AS artist_count FROM Artist"
ALBUMS = "SELECT COUNT(AlbumId) AS album_count FROM Album"
ROCK = "SELECT COUNT(TrackId) AS rock_tracks FROM Track WHERE GenreId = 1"


def _count(column: str, table: str, alias: str, where: dict[str, Any] | None = None) -> dict[str, Any]:
    plan: dict[str, Any] = {"select": [{"expr": {"kind": "function", "name": "count",
                                                  "args": [{"kind": "column", "name": column}]}, "alias": alias}],
                            "from": {"name": table}}
    if where is not None:
        plan["where"] = where
    return plan


def _rows(chinook: Path, sql: str) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{chinook}?mode=ro", uri=True) as con:
        cur = con.execute(sql)
        return [dict(zip([d[0] for d in cur.description], row, strict=True)) for row in cur.fetchall()]


GENRE_1 = {"kind": "binary", "op": "=", "left": {"kind": "column", "name": "GenreId"},
           "right": {"kind": "literal", "value": 1}}


def _cases(chinook: Path) -> list[EvalCase]:
    common: dict[str, Any] = {"datasources": ["chinook"], "status": "approved",
                              "outcome": {"admin": "allowed", "viewer": "allowed"}}
    return [
        EvalCase.model_validate({
            **common, "id": "fu_1", "question": "And how many albums do they have between them?",
            "tables": ["Album"], "columns": ["Album.AlbumId"], "sql": ALBUMS, "rows": _rows(chinook, ALBUMS),
            "plan": _count("AlbumId", "Album", "album_count"),
            "turns": [{"question": "How many artists are there?", "sql": ARTISTS,
                       "plan": _count("ArtistId", "Artist", "artist_count")}],
        }),
        EvalCase.model_validate({
            **common, "id": "cand_1", "question": "How many rock tracks are there?",
            "tables": ["Track"], "columns": ["Track.GenreId", "Track.TrackId"], "sql": ROCK,
            "rows": _rows(chinook, ROCK), "plan": _count("TrackId", "Track", "rock_tracks", GENRE_1),
            "candidates": 3, "candidate_plans": [_count("TrackId", "Track", "rock_tracks")],  # the filter forgotten
        }),
    ]


@pytest.fixture
def bodies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, dict[str, Any]]]:
    """Every request the gold LLM answers: (run id, body)."""
    seen: list[tuple[str | None, dict[str, Any]]] = []
    original = gold_llm.GoldLLMServer.answer

    def answer(self: gold_llm.GoldLLMServer, body: dict[str, Any], run_id: str | None) -> dict[str, Any]:
        seen.append((run_id, body))
        return original(self, body, run_id)

    monkeypatch.setattr(gold_llm.GoldLLMServer, "answer", answer)
    return seen


def _schema(body: dict[str, Any]) -> str:
    return body["response_format"]["json_schema"]["name"]


def _user(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def test_a_follow_up_plays_its_earlier_turn_and_candidates_are_chosen_among(
    demo_project: Path, chinook_path: Path, bodies: list[tuple[str | None, dict[str, Any]]]
) -> None:
    path = demo_project / "suites" / "followups.yaml"
    write_suite(EvalSuite(cases=_cases(chinook_path)), path)
    project = Project.load(demo_project / "nl2sql.yaml")
    with project:
        report = project.evals.run([path], mode="plans")
    board = report.configs["plans"]
    assert [(r.case_id, r.role, r.status) for r in board.results if r.status != "pass"] == []

    follow = [r for r in board.results if r.case_id == "fu_1"]
    assert len(follow) == 2 and all(r.warmup_turns == 1 and r.candidate_count == 0 for r in follow)
    # Each role's follow-up is two runs on the gold LLM: the earlier turn, then the question.
    planner = [b for _, b in bodies if _schema(b) == "PlanModel"]
    turn_prompts = [_user(b) for b in planner if "How many artists are there?" in _user(b)]
    final_prompts = [_user(b) for b in planner if "how many albums do they have" in _user(b)]
    assert len(final_prompts) == 2 and len(turn_prompts) == 4  # per role: the turn itself, and as history
    for prompt in final_prompts:
        assert "Earlier in this conversation" in prompt
        assert "1. Question: How many artists are there?" in prompt
        assert 'SQL: SELECT COUNT("Artist"."ArtistId")' in prompt  # the SQL the warm-up turn really ran
        assert "Answer: " in prompt

    cand = [r for r in board.results if r.case_id == "cand_1"]
    assert {(r.candidate_count, r.selected_candidate, r.first_candidate_status) for r in cand} == {(3, 1, "fail")}
    assert all(r.candidate_extra_s is not None and r.candidate_extra_s > 0 for r in cand)
    assert len([b for b in planner if "candidate plan" in _user(b)]) == 6  # three per role
    uplift = board.candidate_uplift
    assert uplift is not None
    assert (uplift.runs, uplift.improved, uplift.worsened, uplift.uplift) == (2, 2, 0, 1.0)
    assert uplift.p_value == pytest.approx(0.5)


def test_mode_plans_needs_a_plan_for_every_earlier_turn(demo_project: Path, chinook_path: Path) -> None:
    cases = _cases(chinook_path)
    cases[0].turns[0].plan = None
    path = demo_project / "suites" / "followups.yaml"
    write_suite(EvalSuite(cases=cases), path)
    project = Project.load(demo_project / "nl2sql.yaml")
    with project, pytest.raises(RunRefused, match=r"fu_1 \(earlier turn 1\)"):
        project.evals.run([path], mode="plans")


def test_the_engine_takes_a_typed_conversation_and_a_refused_candidate_stops_the_run(
    demo_project: Path, chinook_path: Path
) -> None:
    """Engine.ask(question, role, conversation=[Turn(...)]) directly; a candidate the policy refuses
    stops the run even when another candidate would be allowed (no way around the policy)."""
    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.engine.pipeline import Engine

    rock = _cases(chinook_path)[1]
    case = EvalCase.model_validate({
        **rock.model_dump(exclude={"candidate_plans", "plan"}), "id": "cand_refused", "plan": rock.plan.to_data(),
        "candidate_plans": [rock.plan.to_data(), _count("EmployeeId", "Employee", "rock_tracks")],
    })
    config = load_config(demo_project / "nl2sql.yaml")
    bus = EventBus()
    with gold_llm.GoldLLMServer([case], bus) as server:
        engine = Engine(config, bus=bus, llm=server.llm_config())
        engine = engine.derive(curated=False, candidates=3)
        earlier = [Turn(question="How many artists are there?", sql=ARTISTS, answer="275 artists.")]
        admin = engine.ask(case.question, "admin", context={"case_id": case.id}, conversation=earlier)
        viewer = engine.ask(case.question, "viewer", context={"case_id": case.id}, conversation=earlier)
    assert admin.status == "success" and admin.selected_candidate == 0  # 2 of 3 agree on the right rows
    assert [c.error_code for c in admin.candidates] == [None, None, None]
    assert case.rows is not None and admin.rows == [[case.rows[0]["rock_tracks"]]]
    assert viewer.status == "error" and viewer.error_code == SECURITY_VIOLATION  # Employee is not the viewer's
    assert viewer.rows is None


def test_a_run_can_force_the_candidate_count_for_every_case(demo_project: Path, chinook_path: Path) -> None:
    """``--candidates N`` (RunRequest.candidates): every case run plans N times, a case's own
    setting included; where every candidate agrees the uplift is 0 and only the time is spent."""
    from nl2sql_assets.evaluation.running import RunRequest

    path = demo_project / "suites" / "followups.yaml"
    write_suite(EvalSuite(cases=_cases(chinook_path)), path)
    project = Project.load(demo_project / "nl2sql.yaml")
    with project:
        report = project.evals.run_request(RunRequest(suites=[path], mode="plans", candidates=2, roles=["admin"]))
    board = report.configs["plans"]
    assert report.request.candidates == 2  # recorded as asked
    by_case = {r.case_id: r for r in board.results}
    assert by_case["fu_1"].candidate_count == 2 and by_case["fu_1"].selected_candidate == 0
    assert by_case["fu_1"].first_candidate_status == "pass"
    # cand_1's wrong first plan against one hand plan: a tie, which goes to the earliest (the wrong one)
    assert by_case["cand_1"].candidate_count == 2 and by_case["cand_1"].selected_candidate == 0
    assert by_case["cand_1"].status == "fail"
    uplift = board.candidate_uplift
    assert uplift is not None and (uplift.runs, uplift.uplift, uplift.improved, uplift.worsened) == (2, 0.0, 0, 0)
    assert uplift.p_value == 1.0
    with pytest.raises(RunRefused, match="candidates must be 1 to 10"):
        RunRequest(mode="plans", candidates=11)


def test_a_case_can_follow_another_case_of_its_suite(demo_project: Path, chinook_path: Path,
                                                     bodies: list[tuple[str | None, dict[str, Any]]]) -> None:
    """``follows: <case id>``: the followed case (with its own conversation) is the earlier turn."""
    fu = _cases(chinook_path)[0]
    base = EvalCase.model_validate({
        "id": "base", "question": "How many artists are there?", "datasources": ["chinook"], "status": "approved",
        "outcome": {"admin": "allowed"}, "tables": ["Artist"], "columns": ["Artist.ArtistId"], "sql": ARTISTS,
        "rows": _rows(chinook_path, ARTISTS), "plan": _count("ArtistId", "Artist", "artist_count")})
    follow = EvalCase.model_validate({**fu.model_dump(exclude={"turns", "plan"}), "plan": fu.plan.to_data(),
                                      "outcome": {"admin": "allowed"}, "follows": "base"})
    path = demo_project / "suites" / "follows.yaml"
    write_suite(EvalSuite(cases=[base, follow]), path)
    assert "follows: base" in path.read_text(encoding="utf-8")
    project = Project.load(demo_project / "nl2sql.yaml")
    with project:
        report = project.evals.run([path], mode="plans", cases=["fu_1"])
    (record,) = report.configs["plans"].results
    assert (record.case_id, record.status, record.warmup_turns) == ("fu_1", "pass", 1)
    final = [_user(b) for _, b in bodies if _schema(b) == "PlanModel" and "albums do they have" in _user(b)]
    assert len(final) == 1 and "1. Question: How many artists are there?" in final[0]


@pytest.mark.parametrize(
    ("follows", "message"),
    [("nowhere", "follows 'nowhere', which is not a case of this suite"),
     ("b", "the cases a -> b -> a follow in a circle")],
)
def test_follows_names_a_case_of_the_suite_and_no_circle(follows: str, message: str) -> None:
    def case(case_id: str, follows: str) -> dict[str, Any]:
        return {"id": case_id, "question": f"q {case_id}", "datasources": ["chinook"], "status": "draft",
                "outcome": {"admin": "allowed"}, "follows": follows}

    with pytest.raises(ValueError, match=message):
        EvalSuite.model_validate({"cases": [case("a", follows), case("b", "a")]})


def test_a_suite_file_whose_case_follows_nothing_is_named_by_file_line_case_and_field(tmp_path: Path) -> None:
    from nl2sql_assets.evaluation.suites import SuiteError, load_suite

    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\ncases:\n- id: a\n  question: q a\n  datasources: [chinook]\n  status: draft\n"
                    "  outcome: {admin: allowed}\n  follows: nowhere\n", encoding="utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value) == f"{path}, line 8: case a: follows: case 'a' follows 'nowhere', which is not a case of this suite"
