"""``eval seed`` against a gold LLM server that serves canned drafts: no key, nothing spent."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nl2sql_assets.cli import main
from nl2sql_assets.config import LLMConfig, RolePolicy, load_config
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.engine.events import RUN_STARTED, Event, EventBus
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, load_suite, write_suite
from nl2sql_assets.evaluation.suites.seed import SeedReport, seed
from nl2sql_assets.paths import chinook_suite_path

USAGE = {"prompt_tokens": 2000, "completion_tokens": 100}
PRICE = {"input": 1.0, "cached_input": 0.1, "cache_write": 1.0, "output": 4.0, "source": "test"}
PER_CALL = (2000 * 1.0 + 100 * 4.0) / 1_000_000  # 0.0024

# The gold server answers only runs it knows; seeding is no engine run, so this one case stands in.
ANCHOR = EvalCase(id="anchor", question="anchor", datasources=["chinook"], status="draft",
                  outcome={"admin": "allowed"})


def _drafts(n: int) -> list[dict[str, Any]]:
    """Call ``n``'s canned answer: broken SQL, a good draft, no rows, a good draft, one the viewer may not read."""
    broken, good1, good2, empty, customer = [
        {"question": f"What is the album's colour? ({n})", "sql": "SELECT Colour FROM Album",
         "tables": ["Album"], "difficulty": "easy"},
        {"question": f"How many albums are there? ({n})", "sql": "SELECT COUNT(*) AS albums FROM Album",
         "tables": ["Album"], "difficulty": "easy"},
        {"question": f"Which genres have more than 100 tracks? ({n})",
         "sql": "SELECT g.Name, COUNT(*) AS tracks FROM Genre g JOIN Track t ON t.GenreId = g.GenreId "
                "GROUP BY g.Name HAVING COUNT(*) > 100",
         "tables": ["Genre", "Track"], "difficulty": "Medium"},
        {"question": f"Which tracks are by the artist Nobody? ({n})",
         "sql": "SELECT t.Name FROM Track t JOIN Album a ON a.AlbumId = t.AlbumId "
                "JOIN Artist r ON r.ArtistId = a.ArtistId WHERE r.Name = 'Nobody At All'",
         "tables": ["Track", "Album", "Artist"], "difficulty": "weird"},
        {"question": f"How many customers live in Brazil? ({n})",
         "sql": "SELECT COUNT(*) AS n FROM Customer WHERE Country = 'Brazil'", "tables": ["Customer"]},
    ]
    return [broken, good1, empty, good2, customer]


class SeedServer(GoldLLMServer):
    """Registers each request's run id as the anchor case's run and keeps each request body."""

    def __init__(self) -> None:
        counter = itertools.count(1)
        super().__init__([ANCHOR], EventBus(), usage=USAGE,
                         answers={"SeedDrafts": lambda case, role, server: {"cases": _drafts(next(counter))}})
        self.bodies: list[dict[str, Any]] = []

    def answer(self, body: dict[str, Any], run_id: str | None) -> dict[str, Any]:
        self.bodies.append(body)
        if run_id:
            self.bus.publish(Event(RUN_STARTED, run_id, {"question": "anchor", "context": {"case_id": "anchor"}}))
        return super().answer(body, run_id)

    def priced_llm(self) -> LLMConfig:
        section = self.llm_config().model_dump(mode="json", exclude_none=True)
        section["prices"] = {"gold-plans": PRICE}
        return LLMConfig.model_validate(section)


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def server() -> Iterator[SeedServer]:
    with SeedServer() as s:
        yield s


@pytest.fixture
def project(demo_project: Path, server: SeedServer) -> Path:
    """The demo project with its llm section pointing at the seed server (priced, with a key)."""
    path = demo_project / "nl2sql.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["llm"] = server.priced_llm().model_dump(mode="json", exclude_none=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _seed(config_path: Path, out: Path, **kwargs: Any) -> SeedReport:
    config = load_config(config_path)
    with DatasourceRegistry(config) as registry:
        return seed(config, kwargs.pop("ds", "chinook"), out=out, registry=registry, **kwargs)


def test_drafts_are_appended_checked_and_numbered(project: Path, server: SeedServer, tmp_path: Path) -> None:
    out = tmp_path / "drafts.yaml"
    report = _seed(project, out, count=2, role="admin", max_cost_usd=1.0)
    assert (report.drafted, report.calls, report.stopped) == (2, 1, None)
    assert report.case_ids == ["seed_chinook_001", "seed_chinook_002"]
    assert report.spent == pytest.approx(PER_CALL)
    # Broken SQL and no rows are dropped; the draft past count is never checked.
    assert len(report.dropped) == 2
    reasons = {d.question.split(" (")[0]: d.reason for d in report.dropped}
    # A name the schema does not have never reaches the database: the check names it as the SQL's error.
    assert reasons["What is the album's colour?"].startswith("SQL error resolved_names: ")
    assert "no such column: colour" in reasons["What is the album's colour?"].lower()
    assert reasons["Which tracks are by the artist Nobody?"] == "returns no rows"

    suite = load_suite(out)
    assert "Unreviewed draft cases" in suite.header and "status: approved" in suite.header
    assert "eval regenerate" in suite.header
    first, second = suite.cases
    assert (first.id, first.status, first.origin, first.datasources) == ("seed_chinook_001", "draft", "seeded",
                                                                         ["chinook"])
    assert first.outcome == {"admin": "allowed"} and first.tables == ["Album"] and first.difficulty == "easy"
    assert first.sql is not None and "COUNT(*)" in first.sql and first.rows is None
    assert second.tables == ["Genre", "Track"] and second.difficulty == "medium"

    again = _seed(project, out, count=3, role="admin", max_cost_usd=1.0)
    assert again.case_ids == ["seed_chinook_003", "seed_chinook_004", "seed_chinook_005"]
    suite = load_suite(out)
    assert [c.id for c in suite.cases][:2] == ["seed_chinook_001", "seed_chinook_002"]
    assert len(suite.cases) == 5 and "Unreviewed draft cases" in suite.header


def test_viewer_sees_only_the_catalog(project: Path, server: SeedServer, tmp_path: Path) -> None:
    report = _seed(project, tmp_path / "viewer.yaml", count=3, role="viewer", max_cost_usd=1.0)
    prompt = "\n".join(m["content"] for m in server.bodies[0]["messages"])
    shown = {line.split()[1] for line in prompt.splitlines() if line.startswith("table ")}
    assert shown == {"Album", "Artist", "Genre", "MediaType", "Playlist", "PlaylistTrack", "Track"}
    assert "Customer" not in prompt and "Invoice" not in prompt and "Employee" not in prompt
    # A draft reading a table the viewer cannot see is dropped, never written as allowed.
    assert any(d.reason == "policy table_scope: role 'viewer' may not read table(s) Customer"
               for d in report.dropped)
    assert all(c.outcome == {"viewer": "allowed"} for c in load_suite(tmp_path / "viewer.yaml").cases)


def test_call_limit_stops_with_fewer_drafts(project: Path, server: SeedServer, tmp_path: Path) -> None:
    report = _seed(project, tmp_path / "d.yaml", count=5, role="viewer", max_cost_usd=1.0)
    # Each call yields two good drafts the viewer may read; 5 drafts allow 2 * ceil(5 / 5) = 2 calls.
    assert (report.drafted, report.calls, report.stopped) == (4, 2, "call_limit")
    assert len(load_suite(tmp_path / "d.yaml").cases) == 4


def _approved_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "mine.yaml"
    copy.write_text(chinook_suite_path().read_text(encoding="utf-8"), encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("packaged suite", "package ships"),
        ("suite evals.yaml names", "evals.yaml names"),
        ("file with an approved case", "approved case"),
        ("CI set", "CI"),
        ("no cap", "dollar cap"),
        ("unpriced model", "no price for model"),
        ("no API key", "no API key"),
        ("role that reads nothing", "may read nothing"),
    ],
)
def test_refusals_spend_nothing_and_write_nothing(
    name: str, needle: str, project: Path, server: SeedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(project)
    out, cap, llm = tmp_path / "new.yaml", 1.0, None
    if name == "packaged suite":
        out = chinook_suite_path()
    elif name == "suite evals.yaml names":
        out = project.parent / "suites" / "chinook.yaml"
    elif name == "file with an approved case":
        out = _approved_copy(tmp_path)
    elif name == "CI set":
        monkeypatch.setenv("CI", "")
    elif name == "no cap":
        config.evals_config.max_cost_usd = None
        cap = None
    elif name == "unpriced model":
        llm = server.llm_config()  # no price row for gold-plans
    elif name == "no API key":
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        llm = LLMConfig.model_validate({"default": {"model": "openai/gpt-4o-mini"}})
    else:
        config.policies.roles["nobody"] = RolePolicy()
    before = out.read_bytes() if out.exists() else None
    with DatasourceRegistry(config) as registry, pytest.raises(UserError) as caught:
        seed(config, "chinook", out=out, role="nobody" if name.startswith("role") else None,
             max_cost_usd=cap, registry=registry, llm=llm)
    assert needle in str(caught.value)
    assert server.requests == 0 and not server.bodies
    assert (out.read_bytes() if out.exists() else None) == before


def test_a_file_of_drafts_may_be_seeded_again(project: Path, server: SeedServer, tmp_path: Path) -> None:
    out = tmp_path / "drafts.yaml"
    write_suite(EvalSuite(cases=[ANCHOR.model_copy(update={"id": "seed_chinook_007"})]), out, header="# mine\n")
    report = _seed(project, out, count=1, role="admin", max_cost_usd=1.0)
    assert report.case_ids == ["seed_chinook_008"]
    assert load_suite(out).header == "# mine\n"


def test_cli_exits_3_at_the_cost_cap(project: Path, server: SeedServer, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "capped.yaml"
    # The first call always runs; a second could pass 0.003 (0.0024 + 0.0024), so seeding stops.
    code = main(["--config", str(project), "eval", "seed", "--datasource", "chinook", "--out", str(out),
                 "--count", "5", "--role", "admin", "--max-cost", "0.003"])
    captured = capsys.readouterr()
    assert code == 3, captured.err
    assert "stopped at the cost cap: spent $0.0024" in captured.err
    # Admin may read Customer: three of the call's five drafts are kept.
    assert "3 draft(s) added" in captured.out and server.requests == 1
    assert [c.id for c in load_suite(out).cases] == ["seed_chinook_001", "seed_chinook_002", "seed_chinook_003"]


@pytest.mark.parametrize("argv_tail", [["--max-cost", "1"], []])
def test_cli_refusals_exit_2(argv_tail: list[str], project: Path, server: SeedServer, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if argv_tail:
        monkeypatch.setenv("CI", "true")
        needle = "CI"
    else:  # the demo's evals.yaml has a cap: without it and without --max-cost, seeding refuses
        evals = project.parent / "evals.yaml"
        evals.write_text(evals.read_text(encoding="utf-8").replace("max_cost_usd: 5.0\n", ""), encoding="utf-8")
        needle = "dollar cap"
    code = main(["--config", str(project), "eval", "seed", "--datasource", "chinook",
                 "--out", str(tmp_path / "x.yaml"), *argv_tail])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and server.requests == 0
    assert not (tmp_path / "x.yaml").exists()


def test_report_is_json_ready(project: Path, server: SeedServer, tmp_path: Path) -> None:
    report = _seed(project, tmp_path / "r.yaml", count=1, role="admin", max_cost_usd=1.0)
    data = json.loads(report.model_dump_json())
    assert data["drafted"] == 1 and data["calls"] == 1 and data["stopped"] is None
