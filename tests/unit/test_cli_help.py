"""``--help`` as a newcomer reads it: every command and option says what it does, and its default."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator

import pytest

from nl2sql_assets.cli import _parser


def _parsers(parser: argparse.ArgumentParser, path: str = "nl2sql-assets") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with pytest.raises(SystemExit) as done:
        import contextlib

        with contextlib.redirect_stdout(out):
            _parser().parse_args([*argv, "--help"])
    assert done.value.code == 0
    return " ".join(out.getvalue().split())  # argparse wraps lines


def test_every_option_and_argument_has_help() -> None:
    missing = [f"{path}: {'/'.join(a.option_strings) or a.dest}"
               for path, parser in _parsers(_parser()) for a in parser._actions
               if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction) and not (a.help or "").strip()]
    assert missing == []


def test_eval_run_help_says_the_default_mode_is_full_and_paid() -> None:
    text = _help(["eval", "run"])
    assert "(default: full)" in text
    assert "The default mode, full, calls real models and costs money" in text
    assert "--baseline" in text and "checked before the run starts" in text


@pytest.mark.parametrize(("argv", "shown"), [
    (["eval", "seed"], "how many drafts to ask for (default: 20)"),
    (["pipeline", "run"], "which pass partition to materialise (default: 1)"),
    (["pipeline", "run"], "(default: the key-free ones, plans retrieval)"),
    (["eval", "run"], "--out FILE where to write the report (default: eval_<mode>.json beside nl2sql.yaml for "
                      "evals.yaml's suites, eval_<mode>_<suite>.json for a --suite"),
    ([], "--config PATH nl2sql.yaml, or the project folder holding it (default: ./nl2sql.yaml)"),
])
def test_defaults_are_shown(argv: list[str], shown: str) -> None:
    assert shown in _help(argv)


@pytest.mark.parametrize(("mode", "suites", "name"), [
    ("plans", None, "eval_plans.json"),
    ("plans", ["suites/multidomain.yaml"], "eval_plans_multidomain.json"),
    ("retrieval", ["suites/routing.yaml", "/x/wide routing.yaml"], "eval_retrieval_routing_wide-routing.json"),
    ("plans", ["a/chinook.yaml", "b/chinook.yaml"], "eval_plans_chinook.json"),
])
def test_the_default_report_names_the_suites_it_ran(mode: str, suites: list[str] | None, name: str) -> None:
    from nl2sql_assets.cli import default_report_name

    assert default_report_name(mode, suites) == name


def test_no_option_shows_a_meaningless_default() -> None:
    for path, _ in _parsers(_parser()):
        text = _help(path.split()[1:])
        for meaningless in ("(default: None)", "(default: False)", "(default: [])", "(default: )"):
            assert meaningless not in text, f"{path} --help shows {meaningless}"


def test_every_sub_command_is_described_in_its_parents_help() -> None:
    """Each COMMAND a parser lists carries a line saying what it does."""
    for path, parser in _parsers(_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                described = {choice.dest for choice in action._choices_actions if choice.help}
                missing = sorted(set(action.choices) - described)
                assert not missing, f"{path}: sub-command(s) without a description: {missing}"


def test_scripts_main_takes_the_pipelines_options() -> None:
    """The Chinook hint names --chinook: scripts/main passes its arguments to `pipeline run`, which takes it."""
    args = _parser().parse_args(["pipeline", "run", "--chinook", "/x/Chinook_Sqlite.sqlite"])
    assert args.chinook == "/x/Chinook_Sqlite.sqlite"


def test_every_command_s_help_opens_by_saying_what_it_does() -> None:
    """`nl2sql-assets X --help` starts, under its usage, with a sentence or two: what X does, what
    it writes, how it exits where that matters; a command that only holds others says what they are."""
    bare = []
    for path, parser in _parsers(_parser()):
        text = (parser.description or "").strip()
        if len(text) < 40 or not text.rstrip(".").strip() or (not text[0].isupper() and not text.startswith("`")):
            bare.append(path)
    assert bare == []


@pytest.mark.parametrize("command", [
    ["init"], ["data"], ["eval", "regenerate"], ["eval", "import"], ["eval", "export"], ["eval", "seed"],
    ["eval", "publish"], ["feedback", "rate"], ["feedback", "export"], ["configs", "list"], ["configs", "add"],
    ["pipeline", "run"], ["dashboard"], ["ui"], ["neighbours", "show"],
])
def test_the_commands_that_had_no_description_say_what_they_write(command: list[str]) -> None:
    text = _help(command)
    usage_end = text.index("options:")
    described = text[text.index(command[-1]) + len(command[-1]):usage_end]
    assert any(word in described for word in ("Write", "write", "Print", "print", "Mark", "Register", "Start",
                                                 "Make", "Run", "Read", "Record", "Check", "Ask")), text
