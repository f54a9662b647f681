"""``nl2sql-assets``: set up a demo, run and gate evals, regenerate rows, publish records.

Exit codes of ``eval run``: 0 finished and nothing regressed; 1 a regression against
``--baseline`` or a threshold missed (``--min-*`` / ``--max-*``, or ``thresholds:`` in evals.yaml),
also when the cost cap stopped the run (a known regression is not "partial, fine"; both are
printed); 2 a usage error, a refused run, or a missing, unreadable or incomparable baseline; 3 the
cost cap stopped the run early and nothing regressed in what ran (the report is partial); 4 the run
is incomplete: the provider failed some case runs (auth, quota, rate limit, 5xx, timeout,
transport), so its numbers are not the model's and it is never gated (the circuit breaker may have
stopped it early).
``eval seed`` exits 2 on a refusal and 3 at the cost cap or the call limit. Any command stopped by
Ctrl-C exits 130 with one line saying so (``eval run`` names the file holding the case records
finished so far), no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from nl2sql_assets.cli import (
    bench,
    configs,
    dashboard,
    eval_run,
    feedback,
    grading,
    neighbours,
    pipeline,
    serve,
    setup,
    suites,
    ui,
)
from nl2sql_assets.cli.common import (
    EXIT_COST_CAP,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    HelpFormatter,
    add_group,
)
from nl2sql_assets.cli.eval_run import default_report_name
from nl2sql_assets.errors import UsageError, UserError

__all__ = ["EXIT_COST_CAP", "EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE", "UsageError",
           "default_report_name", "main"]


def _parser() -> argparse.ArgumentParser:
    """The whole command line: each command group's module declares its own parser and handler."""
    p = argparse.ArgumentParser(prog="nl2sql-assets", description=__doc__.splitlines()[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--config", default=None, metavar="PATH",
                   help="nl2sql.yaml, or the project folder holding it (default: ./nl2sql.yaml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    setup.add(sub)
    pipeline.add(sub)
    ui.add(sub)
    dashboard.add(sub)
    configs.add(sub)
    esub = add_group(sub, "eval", help="run, gate, regenerate, seed and publish evals",
                     description="Run suites and score them, grade predictions, audit gold, and keep suites and "
                                 "records: each sub-command's --help says what it writes and how it exits.",
                     dest="eval_command")
    eval_run.add(esub)
    suites.add(esub)
    feedback.add(sub)
    suites.add_publish(esub)
    bench.add(sub)
    grading.add(esub)
    serve.add(sub)
    neighbours.add(sub)
    return p


def _chinook_hint(argv: Sequence[str] | None) -> str:
    """How to give Chinook to the command that just failed: the command again with ``--chinook``
    (``$NL2SQL_COMMAND`` names it when a script ran this one), or with ``NL2SQL_CHINOOK`` set."""
    import shlex

    command = os.environ.get("NL2SQL_COMMAND") or shlex.join(
        ["nl2sql-assets", *(sys.argv[1:] if argv is None else argv)])
    path = "/path/to/Chinook_Sqlite.sqlite"
    return (f"Give it a local copy of Chinook_Sqlite.sqlite: {command} --chinook {path}\n"
            f"  (or: NL2SQL_CHINOOK={path} {command})")


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the process's own command: a reader that closes early is no error
        sys.stdout = _ClosedReaderGuard(sys.stdout)
    args = _parser().parse_args(argv)
    code = _dispatch(args, argv)
    if argv is None:  # the process's own command (not a caller's)
        _exit_without_teardown(code)
    return code


class _ClosedReaderGuard:
    """stdout for ``nl2sql-assets ... | head``: once the reader has gone, what is printed goes
    nowhere (the descriptor is pointed at /dev/null, so the final flush cannot fail either) and
    the command carries on to its end, its result files written whole and its exit code its own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self._gone = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _exit_without_teardown(code: int) -> None:
    """End the process as the interpreter does, less its final teardown.

    After a command the interpreter spends CPU tearing down the modules and the objects they
    hold, after everything is written and closed: about a second after a Dagster command (Dagster's
    ~2,000 modules; 2-core machine, 0.5 s quiet), 0.35-0.42 s after ``eval run --mode plans``. This does what comes before that teardown, in its order: wait for
    non-daemon threads, run the atexit handlers (logging's flush, temporary files' cleanup),
    flush stdout and stderr; then ends the process with ``code``."""
    import atexit
    import contextlib
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing reaches it
            stream.flush()
    os._exit(code)


def _dispatch(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C): stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        # Bad input, a missing or damaged database file, an unreadable path: exit 2 with the
        # message; anything else is a bug and keeps its traceback.
        from nl2sql_assets.datasources.base import DatasourceError

        if not isinstance(exc, UserError | DatasourceError | OSError):
            raise
        # A UserError lists every problem it found (one per line); the others say one thing.
        message = str(exc).strip() or type(exc).__name__
        if not isinstance(exc, UserError):
            message = message.splitlines()[0]
        print(f"error: {message}", file=sys.stderr)
        from nl2sql_assets.datasources.chinook import ChinookNotFound

        if isinstance(exc, ChinookNotFound):
            print(_chinook_hint(argv), file=sys.stderr)
        from nl2sql_assets.errors import CapRefused

        return EXIT_COST_CAP if isinstance(exc, CapRefused) else EXIT_USAGE
