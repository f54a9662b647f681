"""What every command module shares: the help formatter, the exit codes, where the project is, the
running count, a board in one line, the Dagster instance, and the neighbour options of the commands
that grade."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_COST_CAP, EXIT_INCOMPLETE = 0, 1, 2, 3, 4
#: Ctrl-C (SIGINT): the shell's own code for a command a SIGINT ended.
EXIT_INTERRUPTED = 130
#: the --chinook option's help, on every command that may need the Chinook file
CHINOOK_HELP = ("a local copy of Chinook_Sqlite.sqlite (default: $NL2SQL_CHINOOK, else the user cache, "
                "else a download from its pinned URL)")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help, except where there is none to show (None, False, an
    empty string or list, or a help text that already says it)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, "", []) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_command(sub: Any, name: str, handler: Any, help: str, description: str, **kwargs: Any) -> Any:
    """A sub-command's parser, its --help opening with ``description`` (what it does, what it
    writes, its exit codes where they matter), run by ``handler(args) -> exit code``."""
    parser = sub.add_parser(name, help=help, description=description, formatter_class=HelpFormatter, **kwargs)
    parser.set_defaults(handler=handler)
    return parser


def add_group(sub: Any, name: str, help: str, description: str, dest: str) -> Any:
    """A command group (``eval``, ``configs``, ...): its parser's sub-commands."""
    parser = sub.add_parser(name, help=help, description=description, formatter_class=HelpFormatter)
    return parser.add_subparsers(dest=dest, required=True, metavar="COMMAND")


def project_config_path(args: argparse.Namespace) -> Path:
    """``--config`` names nl2sql.yaml or the project folder holding it (default: ./nl2sql.yaml)."""
    path = Path(args.config) if args.config else Path.cwd() / "nl2sql.yaml"
    return path / "nl2sql.yaml" if path.is_dir() else path


def load_project(args: argparse.Namespace) -> Any:
    from nl2sql_assets.project import Project

    return Project.load(project_config_path(args))


def progress() -> Any:
    """A one-line running count of verdicts on a terminal; nothing when piped."""
    if not sys.stderr.isatty():
        return None
    counts = {"pass": 0, "fail": 0, "error": 0, "skip": 0}

    def on_case(config: str, record: Any, spent: float) -> None:
        counts[record.status] = counts.get(record.status, 0) + 1
        done = sum(counts.values())
        sys.stderr.write(f"\r[{config}] {done} case runs: {counts['pass']} passed, {counts['fail']} failed, "
                         f"{counts['error']} errors, spent ${spent:.4f}   ")
        sys.stderr.flush()

    return on_case


def board_line(board: Any, executes: bool, mode: str | None = None) -> str:
    """A board in one line, saying what its cases measure: execution accuracy (strict, then
    lenient) with their intervals, and the policy's precision and recall where probes ran; in a
    mode that executes nothing (retrieval), the case runs that passed and what the scorers say
    (recall, routing); a board with no case run says that no case of its suite runs in the mode."""
    if not board.accuracy.overall.total and not board.results:
        return f"no case of this suite runs in mode {mode}" if mode else "no case runs"
    if executes:
        acc = board.accuracy.execution
        lenient = board.accuracy.execution_lenient
        parts = [f"execution accuracy {acc.count_text()}" if acc.total else "no question runs"]
        if acc.total and lenient is not None:
            parts.append(f"lenient {lenient.count_text()}")
        parts.append(f"overall {board.accuracy.overall.text()}")
        if board.execution_success is not None:
            ok = board.execution_success
            parts.append(f"execution success {ok.text()} ({ok.passed}/{ok.total})")
        policy = board.summaries().get("policy")
        if policy is not None and (policy.recall is not None or policy.false_positives):
            parts.append(policy.text())
        parts += [text for summary in board.summaries().values() if (text := summary.beside_accuracy())]
        if board.coverage is not None:
            c = board.coverage
            parts.append(f"{c.query_count} queries, {c.probe_count} probes, {c.unique_case_count} unique")
        if board.candidate_uplift is not None:
            u = board.candidate_uplift
            parts.append(f"candidate uplift {u.uplift:+.3f} ({u.runs} runs, McNemar p {u.p_value:.3g}, "
                         f"+{u.extra_latency_ms:.1f} ms per run)")
        return "; ".join(parts)
    acc = board.accuracy.overall
    parts = [f"{acc.passed}/{acc.total} case runs passed ({acc.with_interval('-')})"]
    parts += [text for summary in board.summaries().values() if (text := summary.text())]
    return "; ".join(parts)


def dagster_instance(config_path: Path) -> Any:
    """The Dagster instance of ``$DAGSTER_HOME``, else of the project's own ``.dagster_home/``
    (``nl2sql_assets.instance``: the first line says so)."""
    import dagster as dg

    from nl2sql_assets.instance import dagster_home

    _, said = dagster_home(config_path.resolve().parent)
    if said:
        say(said)
    return dg.DagsterInstance.get()


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_neighbour_options(parser: Any, verb: str, *, witness: bool = True, off: bool = False) -> None:
    """The neighbour options of a command (``witness``: the search's budget too; ``off``: and
    ``--no-neighbours``, for the commands that follow evals.yaml's ``neighbours:`` by default)."""
    if off:
        parser.add_argument("--no-neighbours", action="store_true",
                            help="grade on the original database only, whatever evals.yaml's neighbours: says")
    """``--neighbours [K]`` and ``--neighbour-seed N``, for eval grade and eval run alike."""
    parser.add_argument("--neighbours", type=int, nargs="?", const=0, default=None, metavar="K",
                        help=f"also {verb} each pass on at most K neighbour databases of its datasource (SQLite or "
                             "DuckDB files made from its own rows and the gold's literals, kept by how many "
                             "near-miss mutants of the gold they tell apart; built once under "
                             "warehouse/neighbours/). Without K: evals.yaml's neighbours: count, else 10")
    parser.add_argument("--neighbour-seed", type=int, default=None, metavar="N",
                        help="the seed the neighbours are made from (evals.yaml's neighbours: seed, else 1; "
                             "another seed, another set)")
    if not witness:
        return
    parser.add_argument("--witness", type=int, default=None, metavar="N",
                        help="candidate databases the witness search tries for each pass that holds on every "
                             "kept neighbour, built for where the prediction differs from the gold (evals.yaml's "
                             "neighbours: witness, else 32; 0: no search)")


def neighbour_settings(args: argparse.Namespace, config: Any) -> Any:
    """The run's neighbour settings: evals.yaml's ``neighbours:`` with the flags over it (None:
    neither asks for neighbours)."""
    from nl2sql_assets.config import NeighbourSettings

    base = config.evals_config.neighbours
    if not asks_for_neighbours(args):
        return base
    settings = base.model_copy() if base is not None else NeighbourSettings()
    if args.neighbours:
        settings = settings.model_copy(update={"count": args.neighbours})
    if args.neighbour_seed is not None:
        settings = settings.model_copy(update={"seed": args.neighbour_seed})
    if getattr(args, "witness", None) is not None:
        settings = settings.model_copy(update={"witness": args.witness})
    try:
        return NeighbourSettings.model_validate(settings.model_dump())
    except ValueError as exc:
        from nl2sql_assets.errors import UsageError

        raise UsageError(f"neighbour options: {exc}") from None


def grade_neighbours(args: argparse.Namespace, config: Any) -> Any:
    """The neighbours a grading command grades on: none with --no-neighbours, else the flags over
    evals.yaml's ``neighbours:`` (None: neither asks for them). ``eval run`` and ``eval grade`` alike."""
    if getattr(args, "no_neighbours", False):
        if asks_for_neighbours(args):
            from nl2sql_assets.errors import UsageError

            raise UsageError("--no-neighbours and --neighbours/--neighbour-seed/--witness ask opposite things; "
                             "give one")
        return None
    return neighbour_settings(args, config)


def asks_for_neighbours(args: argparse.Namespace) -> bool:
    """Whether the command line names a neighbour setting (``--neighbours``, ``--neighbour-seed``,
    ``--witness``)."""
    return any(getattr(args, name, None) is not None for name in ("neighbours", "neighbour_seed", "witness"))
