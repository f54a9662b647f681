"""`nl2sql-assets dashboard`: one page from a project's records and warehouse, the same bytes in
any checkout, a clear refusal when there is nothing to show."""

import shutil
from pathlib import Path

from nl2sql_assets.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_the_same_records_give_the_same_page_wherever_the_project_lies(tmp_path: Path, capsys):
    pages = []
    for name in ("one", "two/deeper"):
        project = tmp_path / name
        shutil.copytree(REPO / "benchmarks", project / "benchmarks")
        out = project / "page.html"
        assert main(["--config", str(project), "dashboard", "--out", str(out)]) == 0
        assert f"dashboard: {out}" in capsys.readouterr().out
        pages.append(out.read_bytes())
    assert pages[0] == pages[1]
    assert b"From benchmarks:" in pages[0]


def test_one_suite_and_folders_named_on_the_command_line(tmp_path: Path, capsys):
    out = tmp_path / "chinook.html"
    assert main(["--config", str(REPO), "dashboard", "--from", str(REPO / "benchmarks"), "--suite", "chinook",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "case(s)" in printed and out.is_file()
    assert b'"suite":"routing"' not in out.read_bytes()


def test_nothing_stored_is_refused_with_the_next_step(tmp_path: Path, capsys):
    assert main(["--config", str(tmp_path), "dashboard", "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "no stored run" in err and "eval run" in err
    assert not (tmp_path / "x.html").exists()
    assert main(["--config", str(tmp_path), "dashboard", "--from", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
