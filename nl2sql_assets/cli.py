"""``nl2sql-assets``: set up a demo, run and gate evals, regenerate rows, publish records.

Exit codes of ``eval run``: 0 finished and nothing regressed; 1 a regression against
``--baseline`` or a threshold missed (``--min-*`` / ``--max-*``, or ``thresholds:`` in evals.yaml),
also when the cost cap stopped the run (a known regression is not "partial, fine"; both are
printed); 2 a usage error, a refused run, or a missing, unreadable or incomparable baseline; 3 the
cost cap stopped the run early and nothing regressed in what ran (the report is partial); 4 the run
is incomplete: the provider failed some case runs (auth, quota, rate limit, 5xx, timeout,
transport), so its numbers are not the model's and it is never gated (the circuit breaker may have
stopped it early).
``eval seed`` exits 2 on a refusal and 3 at the cost cap or the call limit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nl2sql_assets.errors import UserError

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_COST_CAP, EXIT_INCOMPLETE = 0, 1, 2, 3, 4


class UsageError(UserError):
    """A problem with the command line itself: reported on stderr, exit 2."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help, except where there is none to show (None, False, an
    empty string or list, or a help text that already says it)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, "", []) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _parser() -> argparse.ArgumentParser:
    from nl2sql_assets.evaluation.running.modes import MODES, key_free_configs

    fmt = {"formatter_class": _HelpFormatter}
    p = argparse.ArgumentParser(prog="nl2sql-assets", description=__doc__.splitlines()[0], **fmt)
    p.add_argument("--config", default=None, metavar="PATH",
                   help="nl2sql.yaml, or the project folder holding it (default: ./nl2sql.yaml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chinook_help = ("a local copy of Chinook_Sqlite.sqlite (default: $NL2SQL_CHINOOK, else the user cache, "
                    "else a download from its pinned URL)")

    init = sub.add_parser("init", help="write a working demo project folder", **fmt)
    init.add_argument("--demo", metavar="DIR", required=True, help="the folder to write the demo project into")
    init.add_argument("--chinook", metavar="PATH", default=None, help=chinook_help)
    init.add_argument("--force", action="store_true", help="overwrite an existing project in DIR (and, with "
                      "--database, the demo's schemas or databases on that server)")
    init.add_argument("--database", metavar="URL", default=None,
                      help="put the demo's databases on this Postgres or MySQL/MariaDB server "
                           "(postgresql://USER@HOST:PORT/DB, mysql://USER@HOST:PORT/DB) and its suites in its dialect")

    data = sub.add_parser("data", help="make sure the project's demo databases exist", **fmt)
    data.add_argument("--chinook", metavar="PATH", default=None, help=chinook_help)

    pipe = sub.add_parser("pipeline", help="the key-free evaluation through Dagster", **fmt)
    psub = pipe.add_subparsers(dest="pipeline_command", required=True, metavar="COMMAND")
    prun = psub.add_parser("run", help="check the data, then materialise datasets, case runs, scoreboards "
                                       "(with the gate) and the reports in $DAGSTER_HOME (what scripts/main runs)",
                           **fmt)
    prun.add_argument("--configs", nargs="+", default=None, metavar="NAME",
                      help=f"the configs to run (default: the key-free ones, {' '.join(key_free_configs())})")
    prun.add_argument("--pass", dest="pass_index", type=int, default=1, metavar="N",
                      help="which pass partition to materialise")
    prun.add_argument("--chinook", metavar="PATH", default=None, help=chinook_help)

    ui = sub.add_parser("ui", help="start the Dagster UI on the project (dagster dev): one line when it is "
                                   "ready, the terminal at one log level, runs launched from the UI included",
                        **fmt)
    ui.add_argument("--log-level", choices=("debug", "info", "warning", "error", "critical"), default="warning",
                    help="the least severe log line the terminal shows (the UI keeps every event)")
    ui.add_argument("--host", default="127.0.0.1", help="the address the UI listens on")
    ui.add_argument("--port", type=int, default=3000, help="the port the UI listens on")

    dash = sub.add_parser("dashboard", help="write the results dashboard: one self-contained HTML page over "
                                            "the benchmark records and the warehouse's boards", **fmt)
    dash.add_argument("--out", metavar="FILE", default=None,
                      help="the page to write (default: warehouse/dashboard.html in the project)")
    dash.add_argument("--from", dest="sources", nargs="+", metavar="DIR", default=None,
                      help="folders to read: a warehouse (a folder holding reports/) or a folder of benchmark "
                           "records (default: the project's benchmarks/ and warehouse)")
    dash.add_argument("--suite", default=None, metavar="NAME", help="only this suite's runs and cases")

    configs = sub.add_parser("configs", help="LLM configs known to the Dagster project", **fmt)
    csub = configs.add_subparsers(dest="configs_command", required=True, metavar="COMMAND")
    cadd = csub.add_parser("add", help="register a config name as a case runs partition", **fmt)
    cadd.add_argument("name", help="the config's name (letters, digits, '.', '_', '-')")
    cadd.add_argument("--llm", default=None, metavar="SPEC",
                      help="a preset name or an llm section file, written to configs/NAME.yaml "
                           "(default: a preset or configs/NAME.yaml of that name)")
    csub.add_parser("list", help="list registered configs", **fmt)

    ev = sub.add_parser("eval", help="run, gate, regenerate, seed and publish evals", **fmt)
    esub = ev.add_subparsers(dest="eval_command", required=True, metavar="COMMAND")

    run = esub.add_parser("run", help="run the suites and score them (default mode full: real models, paid)",
                          description="Run every approved case once per role and score it. The default mode, "
                                      "full, calls real models and costs money; plans and retrieval need no key.",
                          epilog="exit codes: 0 finished, nothing regressed; 1 a regression or a missed threshold "
                                 "(also when the cost cap stopped the run: both are printed); 2 usage error, "
                                 "refused run, missing or incomparable baseline; 3 stopped at the cost cap with "
                                 "nothing regressed (the report is partial); 4 incomplete: the provider failed "
                                 "case runs (an outage, never gated)",
                          **fmt)
    # Selectors take several values after one flag and may repeat (``--cases a --cases b``
    # runs both): "extend" keeps every value where nargs="+" alone would keep the last flag's.
    run.add_argument("--suite", action="extend", nargs="+", default=None, metavar="PATH",
                     help="suite files to run (default: the suites evals.yaml names)")
    run.add_argument("--mode", choices=list(MODES), default="full",
                     help="full: the whole engine on real models (needs a key, costs money, capped by "
                          "--max-cost); plans: hand-written plans on the gold LLM, no key; retrieval: schema "
                          "recall and routing on the local embedder, no key")
    run.add_argument("--llm", action="extend", nargs="+", default=None, metavar="SPEC",
                     help="mode full: a preset, a file, or NAME=PRESET|FILE; repeat to compare "
                          "(default: the llm section of nl2sql.yaml)")
    run.add_argument("--engine", action="append", default=None, metavar="NAME=URL|NAME",
                     help="mode full: evaluate an engine over the HTTP contract (docs/engine-api.openapi.yaml) at "
                          "URL, or one named under engines in nl2sql.yaml; repeat to compare (without --llm, only "
                          "the engines run)")
    run.add_argument("--cases", action="extend", nargs="+", default=None, metavar="ID/TAG",
                     help="case ids or tags to run (default: every approved case)")
    run.add_argument("--roles", action="extend", nargs="+", default=None, metavar="R",
                     help="roles to ask as (default: every role a case names)")
    run.add_argument("--candidates", type=int, default=None, metavar="N",
                     help="plans per question for every case (candidate selection; boards report the uplift "
                          "over the first candidate); default: nl2sql.yaml's settings.candidates and each case's own")
    run.add_argument("--passes", type=int, default=None, metavar="N",
                     help="passes per case, for pass^k and determinism (default: passes in evals.yaml)")
    run.add_argument("--max-cost", type=float, default=None, metavar="USD",
                     help="stop before the spend can pass this many dollars (default: max_cost_usd in evals.yaml)")
    run.add_argument("--baseline", default=None, metavar="PATH",
                     help="gate against a report, a record, or a benchmarks folder (its newest record of the "
                          "run's mode, database and config); checked before the run starts")
    run.add_argument("--out", default=None, metavar="FILE",
                     help="where to write the report (default: eval_<mode>.json beside nl2sql.yaml for evals.yaml's "
                          "suites, eval_<mode>_<suite>.json for a --suite, so one suite's report never overwrites "
                          "another's)")
    run.add_argument("--clarify", action="store_true", help="also run the roles whose outcome is clarify (evals.yaml's clarify: true does so always)")
    run.add_argument("--workers", type=int, default=None, metavar="N",
                     help="worker processes for the case runs of a mode that spends nothing (default: up to "
                          "2, on runs big enough to gain from them)")
    from nl2sql_assets.cli_bench import add_neighbour_options

    add_neighbour_options(run, "grade")
    run.add_argument("--no-neighbours", action="store_true",
                     help="grade on the original database only, whatever evals.yaml's neighbours: says")
    _threshold_options(run)

    regen = esub.add_parser("regenerate", help="write rows and alt_rows from each case's SQL", **fmt)
    regen.add_argument("path", help="the suite file to rewrite (comments are kept)")
    regen.add_argument("--allow-packaged", action="store_true",
                       help="allow rewriting a suite that ships with the package")

    imp = esub.add_parser("import", help="convert a JSONL gold set into a draft suite file", **fmt)
    imp.add_argument("file", metavar="FILE.jsonl", help="the JSONL gold set (one case per line)")
    imp.add_argument("--out", required=True, metavar="PATH", help="the suite file to write (must not exist)")
    imp.add_argument("--database", default=None, metavar="ID",
                     help="the datasource of lines that name no database")
    imp.add_argument("--roles", action="extend", nargs="+", default=None, metavar="R",
                     help="the roles a line without an outcome is asked as (default: policies.default_role)")

    exp = esub.add_parser("export", help="write a suite as a JSONL gold set", **fmt)
    exp.add_argument("suite", metavar="PATH", help="the suite file to export")
    exp.add_argument("--jsonl", required=True, metavar="FILE", help="the JSONL file to write ('-': standard output)")

    seed = esub.add_parser("seed", help="draft unreviewed cases from a datasource's schema (calls a paid model)",
                           **fmt)
    seed.add_argument("--datasource", required=True, metavar="ID", help="the datasource to draft questions for")
    seed.add_argument("--out", required=True, metavar="PATH", help="the draft suite to append to")
    seed.add_argument("--count", type=int, default=20, metavar="N", help="how many drafts to ask for")
    seed.add_argument("--role", default=None, metavar="R", help="the role drafts are checked as "
                                                               "(default: policies.default_role)")
    seed.add_argument("--max-cost", type=float, default=None, metavar="USD",
                      help="stop before the spend can pass this many dollars (default: max_cost_usd in evals.yaml)")

    fb = sub.add_parser("feedback", help="mark stored case runs and export the good ones as draft cases", **fmt)
    fsub = fb.add_subparsers(dest="feedback_command", required=True, metavar="COMMAND")
    fexp = fsub.add_parser("export", help="write the thumbs-up runs (marked good) as draft cases", **fmt)
    fexp.add_argument("--good", action="store_true", required=True, help="export the runs marked good")
    fexp.add_argument("--out", required=True, metavar="PATH", help="the draft suite to write or add to")
    fexp.add_argument("--suite", action="extend", nargs="+", default=None, metavar="NAME",
                      help="the suites whose stored runs to read (default: every suite in the warehouse)")
    fexp.add_argument("--config", dest="configs", action="extend", nargs="+", default=None, metavar="NAME",
                      help="the configs whose stored runs to read (default: every config)")
    frate = fsub.add_parser("rate", help="mark one stored case run good or bad", **fmt)
    frate.add_argument("suite", metavar="SUITE", help="the suite the case belongs to")
    frate.add_argument("case", metavar="CASE_ID@ROLE", help="the case run to mark")
    frate.add_argument("--config", dest="run_config", required=True, metavar="NAME", help="the config that ran it")
    frate.add_argument("--pass", dest="pass_index", type=int, default=None, metavar="N",
                       help="one pass (default: every pass of the run)")
    mark = frate.add_mutually_exclusive_group(required=True)
    mark.add_argument("--good", action="store_const", const="good", dest="rating", help="mark it good")
    mark.add_argument("--bad", action="store_const", const="bad", dest="rating", help="mark it bad")
    frate.add_argument("--note", default="", help="why, stored with the mark")

    pub = esub.add_parser("publish", help="record reports under benchmarks/ and rebuild the results pages", **fmt)
    pub.add_argument("reports", nargs="*", metavar="REPORT", help="eval report files (eval_<mode>.json)")
    pub.add_argument("--note", default=None, help="what changed, stored in each record")
    pub.add_argument("--from", dest="from_dirs", action="append", default=None, metavar="DIR",
                     help="also record every report *.json in DIR (repeatable)")
    pub.add_argument("--root", default=None, metavar="DIR",
                     help="the project folder holding benchmarks/ (default: the current folder)")
    pub.add_argument("--allow-incomplete", action="store_true",
                     help="record a run the provider failed in part (exit 4 of eval run); refused otherwise")
    from nl2sql_assets.cli_bench import add_bench_commands, add_neighbours_command, add_serve_command

    add_bench_commands(sub, esub, fmt)
    add_serve_command(sub, fmt)
    add_neighbours_command(sub, fmt)
    return p


def _threshold_options(run: argparse.ArgumentParser) -> None:
    """One option per threshold (``config.ThresholdSettings``): ``--min-accuracy 0.9`` and so on."""
    from nl2sql_assets.config import ThresholdSettings

    for name, field in ThresholdSettings.model_fields.items():
        flags = ["--" + name.replace("_", "-")]
        if name == "min_accuracy":
            flags.append("--min-semantic-correct")  # the name other evaluators give it
        run.add_argument(*flags, dest=f"threshold_{name}", type=float, default=None,
                         metavar="USD" if name.endswith("cost_per_case") else ("MS" if name.endswith("_ms") else "X"),
                         help=f"{field.description}; overrides evals.yaml's thresholds.{name}; exit 1 when missed")


def _config_path(args: argparse.Namespace) -> Path:
    """``--config`` names nl2sql.yaml or the project folder holding it (default: ./nl2sql.yaml)."""
    path = Path(args.config) if args.config else Path.cwd() / "nl2sql.yaml"
    return path / "nl2sql.yaml" if path.is_dir() else path


def _load_project(args: argparse.Namespace) -> Any:
    from nl2sql_assets.project import Project

    return Project.load(_config_path(args))


def _progress() -> Any:
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


def _cmd_eval_run(args: argparse.Namespace) -> int:
    from nl2sql_assets.evaluation.running.modes import get_mode

    if get_mode(args.mode).needs_key and "CI" in os.environ:
        raise UsageError(f"mode {args.mode} spends money and never runs in CI (the CI variable is set)")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.baseline and not Path(args.baseline).exists():  # before the run, which may cost money
        raise UsageError(f"--baseline {args.baseline}: no such file or folder")
    if args.out and Path(args.out).is_dir():  # checked before the run: never lose a finished run
        raise UsageError(f"--out {args.out} is a folder; give the report's file name, e.g. "
                         f"{Path(args.out) / f'eval_{args.mode}.json'}")
    with _load_project(args) as project:
        return _eval_run(args, project)


def default_report_name(mode: str, suites: Sequence[str] | None) -> str:
    """``eval_<mode>.json`` for evals.yaml's suites; with ``--suite``, the suites' file stems in the
    name (``eval_plans_multidomain.json``), so a run of one suite never overwrites another's report."""
    if not suites:
        return f"eval_{mode}.json"
    stems = list(dict.fromkeys(re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(s).stem) for s in suites))
    return f"eval_{mode}_{'_'.join(stems)}.json"


def _check_baseline_folder(args: argparse.Namespace, out: Path, llm_names: list[str] | None) -> None:
    """Before the run: a baseline folder must hold a record the run can be compared with (of its
    mode, and of its configs where they are known before it runs)."""
    from nl2sql_assets.evaluation.history import NoBaselineRecord, expect_baseline
    from nl2sql_assets.evaluation.running import get_mode

    folder = Path(args.baseline)
    if not folder.is_dir():
        return  # a file is read (and checked) by the gate itself
    mode = get_mode(args.mode)
    configs = [mode.config_name] if mode.config_name else llm_names
    try:
        expect_baseline(folder, args.mode, configs)
    except NoBaselineRecord as exc:
        raise NoBaselineRecord(
            f"--baseline {args.baseline}: no baseline yet: {exc}. Run without --baseline, record the run with "
            f"`nl2sql-assets eval publish {out}`, and gate later runs against it") from None


def _eval_run(args: argparse.Namespace, project: Any) -> int:
    from nl2sql_assets.atomic import check_writable
    from nl2sql_assets.evaluation.history import BaselineError
    from nl2sql_assets.evaluation.running import RunRequest, get_mode, llm_mode

    mode = get_mode(args.mode)
    out = Path(args.out) if args.out else project.root / default_report_name(args.mode, args.suite)
    check_writable(out)  # before the run, which may cost money: never lose a finished run
    llm = None
    if args.llm:
        if not mode.takes_llm:
            raise UsageError(f"--llm applies to mode {llm_mode().name} only")
        from nl2sql_assets.llm.presets import resolve_llm_spec

        llm = {}
        for spec in args.llm:
            name, section = resolve_llm_spec(spec)
            if name in llm:  # a second config of one name would silently replace the first
                raise UsageError(f"--llm {spec}: a config named {name!r} is given twice; "
                                 "name each with NAME=PRESET|FILE")
            llm[name] = section
    engines = None
    if args.engine:
        if not mode.takes_llm:
            raise UsageError(f"--engine applies to mode {llm_mode().name} only")
        from nl2sql_assets.engines.kinds import engines_from_specs

        engines = engines_from_specs(args.engine, project.config.engines, taken=list(llm or {}))
    if args.baseline:
        _check_baseline_folder(args, out, [*(llm or {}), *(engines or {})] or None)
    clarify = True if args.clarify else None  # the flag, else evals.yaml's clarify
    request = RunRequest(suites=args.suite, mode=args.mode, llm=llm, cases=args.cases, roles=args.roles,
                         passes=args.passes, max_cost_usd=args.max_cost, clarify=clarify,
                         candidates=args.candidates, workers=args.workers, engines=engines,
                         neighbours=_neighbour_request(args, project.config))
    from nl2sql_assets.evaluation.reporting.board import save_summary
    from nl2sql_assets.evaluation.reporting.streamed import records_path_for

    records = records_path_for(out)  # each case record written as it finishes; the boards read them back
    report = project.evals.run_streamed(request, records, on_case=_progress())
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    save_summary(report, out, records)
    for name, board in report.configs.items():
        print(f"{name}: {_board_line(board, mode.executes)}")
    if report.neighbours is not None:
        sets = ", ".join(f"{s.datasource} {s.kept}" for s in report.neighbours.sets) or "none"
        print(f"neighbours: kept per datasource {sets} (K {report.neighbours.count}, seed {report.neighbours.seed})")
        if report.neighbours.original_only:
            print(f"neighbours: {', '.join(report.neighbours.original_only)} graded on the original database only "
                  "(neighbour databases of a server are not made yet)")
        kinds: dict[str, int] = {}
        for flag in report.gold_audit:
            kinds[flag.kind] = kinds.get(flag.kind, 0) + 1
        audit = ", ".join(f"{kind} {n}" for kind, n in kinds.items()) or "no flag"
        print(f"gold audit: {audit}" + (" (nl2sql-assets eval audit SUITE lists them)" if kinds else ""))
    if report.left_out:
        left = ", ".join(f"{n} {kind}" for kind, n in sorted(report.left_out.items()))
        print(f"left out: {left} case run(s): mode {report.mode} does not run those kinds of case")
    print(f"report: {out} (case records: {records})")
    if report.incomplete:
        # An outage is not a verdict on the model: no threshold, no gate, its own exit code.
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(report.env_errors.items()))
        print(f"INCOMPLETE: case runs failed for the environment, not the model ({kinds}); "
              "left out of accuracy, not gated", file=sys.stderr)
        if report.breaker:
            print(f"circuit breaker: {report.breaker}", file=sys.stderr)
        return EXIT_INCOMPLETE
    code = EXIT_OK
    if not _thresholds_met(args, project, report):
        code = EXIT_REGRESSION
    if args.baseline:
        try:
            from nl2sql_assets.evaluation.reporting.board import load_report

            # the gate compares case by case: the report with its records read back from the file
            result = project.evals.gate(load_report(out), args.baseline)
        except BaselineError as exc:
            print(f"baseline: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if result.series_break:
            print(f"gate: not comparable: {result.series_break}", file=sys.stderr)
            return EXIT_USAGE
        for comp in result.compared:
            print(f"gate [{comp.config}/{comp.measure}]: lost {len(comp.lost)} {comp.lost}, "
                  f"gained {len(comp.gained)} {comp.gained}, McNemar p={comp.p_value:.3g}")
        for note in result.notes:
            print(f"gate: {note}")
        if not result.ok:
            for line in result.regressions:
                print(f"REGRESSION: {line}", file=sys.stderr)
            code = EXIT_REGRESSION
        else:
            print("gate: ok")
    if report.stopped == "max_cost":
        print(f"stopped at the cost cap: spent ${report.spent:.4f}; the report is partial", file=sys.stderr)
        if report.cap_rule:
            print(f"cost cap: {report.cap_rule}", file=sys.stderr)
        if code == EXIT_REGRESSION:  # what did run regressed: that is the verdict, partial or not
            print("exit 1: a regression (or a missed threshold) in the case runs made before the cap stopped "
                  "the run", file=sys.stderr)
            return EXIT_REGRESSION
        return EXIT_COST_CAP
    return code


def _neighbour_request(args: argparse.Namespace, config: Any) -> Any:
    """The run's neighbours: off with --no-neighbours, the flags over evals.yaml's setting, or
    None (evals.yaml's, the runner reads it)."""
    from nl2sql_assets.cli_bench import asks_for_neighbours, neighbour_settings

    if args.no_neighbours:
        if asks_for_neighbours(args):
            raise UsageError("--no-neighbours and --neighbours/--neighbour-seed/--witness ask opposite things; "
                             "give one")
        return False
    if not asks_for_neighbours(args):
        return None
    return neighbour_settings(args, config)


def _thresholds_met(args: argparse.Namespace, project: Any, report: Any) -> bool:
    """Check the thresholds (evals.yaml's, the command line's on top); print each one and name
    every miss with its measured value on stderr."""
    from nl2sql_assets.evaluation.reporting.thresholds import check_thresholds, merge_thresholds

    given = {k.removeprefix("threshold_"): v for k, v in vars(args).items() if k.startswith("threshold_")}
    try:
        settings = merge_thresholds(project.config.evals_config.thresholds, given)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    result = check_thresholds(report, settings)
    for check in result.checks:
        if not check.missed:
            print(f"threshold: {check.line()}")
    for check in result.misses:
        print(f"THRESHOLD: {check.line()}", file=sys.stderr)
    return result.ok


def _board_line(board: Any, executes: bool) -> str:
    """A board in one line: execution accuracy with its interval, or, in a mode that executes
    nothing (retrieval), the case runs that passed and what the scorers say (recall, routing)."""
    if executes:
        acc = board.accuracy.execution
        parts = [f"execution accuracy {acc.count_text()}" if acc.total else "no question runs",
                 f"overall {board.accuracy.overall.text()}"]
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


def _cmd_eval_regenerate(args: argparse.Namespace) -> int:
    with _load_project(args) as project:
        report = project.evals.regenerate(args.path, allow_packaged=args.allow_packaged)
    print(f"{report.path}: {report.written} result sets written, {len(report.failed)} failed"
          + (f", {report.requoted} scalars quoted so that every YAML reader reads them alike"
             if report.requoted else "")
          + (" (file unchanged)" if report.unchanged else ""))
    for failure in report.failed:
        print(f"  {failure.case_id}: {failure.reason}", file=sys.stderr)
    return 1 if report.failed else 0


def _cmd_eval_import(args: argparse.Namespace) -> int:
    from nl2sql_assets.evaluation.suites.jsonl import ImportContext, import_jsonl
    from nl2sql_assets.project import load_project_config

    config = load_project_config(_config_path(args))
    roles = args.roles or [config.policies.default_role]
    ctx = ImportContext(roles=roles, database=args.database,
                        datasources={ds.id: ds.path for ds in config.datasources})
    report = import_jsonl(args.file, args.out, ctx, config=config)
    print(f"{report.path}: {report.cases} case(s) imported, {report.drafts} of them drafts")
    if report.pending:
        print(f"  {len(report.pending)} case(s) hold fields not run yet (a semantic model) "
              f"and stay drafts: {', '.join(report.pending[:10])}"
              + (" ..." if len(report.pending) > 10 else ""))
    return EXIT_OK


def _cmd_eval_export(args: argparse.Namespace) -> int:
    from nl2sql_assets.evaluation.suites.jsonl import export_jsonl

    if args.jsonl == "-":
        sys.stdout.write(export_jsonl(args.suite))
        return EXIT_OK
    text = export_jsonl(args.suite, args.jsonl)
    print(f"{args.jsonl}: {text.count(chr(10))} case(s) written")
    return EXIT_OK


def _cmd_feedback(args: argparse.Namespace) -> int:
    from nl2sql_assets.project import Project

    project = Project.load(_config_path(args))
    if args.feedback_command == "rate":
        mark = project.feedback.rate(args.suite, args.run_config, args.case, args.rating,
                                     pass_index=args.pass_index, note=args.note)
        print(f"marked {mark.case_id}@{mark.role} ({mark.suite}, {mark.config}"
              + (f", pass {mark.pass_index}" if mark.pass_index else "") + f") {mark.rating}")
        return EXIT_OK
    report = project.feedback.export(Path(args.out), suites=args.suite, configs=args.configs)
    if not report.written:
        print(f"nothing to export: no stored run is marked good{' that is not drafted already' if report.runs else ''}"
              f"; {report.path} was not written (mark one: nl2sql-assets feedback rate SUITE CASE_ID@ROLE "
              "--config NAME --good)")
        for line in report.skipped:
            print(f"  skipped {line}", file=sys.stderr)
        return EXIT_OK
    print(f"{report.path}: {report.drafted} draft(s) from {report.runs} thumbs-up run(s)"
          + (f" ({', '.join(report.case_ids[:5])}{' ...' if len(report.case_ids) > 5 else ''})" if report.case_ids
             else ""))
    for line in report.skipped:
        print(f"  skipped {line}", file=sys.stderr)
    return EXIT_OK


def _cmd_eval_seed(args: argparse.Namespace) -> int:
    if "CI" in os.environ:  # before loading anything: seeding spends money
        raise UsageError("eval seed calls a paid model and never runs in CI (the CI variable is set)")
    with _load_project(args) as project:
        report = project.evals.seed(args.datasource, count=args.count, out=args.out, role=args.role,
                                    max_cost_usd=args.max_cost)
    print(f"{report.path}: {report.drafted} draft(s) added ({', '.join(report.case_ids) or 'none'}), "
          f"{len(report.dropped)} dropped; {report.calls} call(s), spent ${report.spent:.4f}")
    for dropped in report.dropped:
        print(f"  dropped {dropped.question!r}: {dropped.reason}", file=sys.stderr)
    for failure in report.failed_calls:
        print(f"  failed call: {failure}", file=sys.stderr)
    if report.stopped == "max_cost":
        print(f"stopped at the cost cap: spent ${report.spent:.4f}", file=sys.stderr)
        return EXIT_COST_CAP
    if report.stopped == "call_limit":
        print(f"stopped at the call limit ({report.calls} calls) with {report.drafted} of {args.count} drafts",
              file=sys.stderr)
        return EXIT_COST_CAP
    return EXIT_OK


def _cmd_eval_publish(args: argparse.Namespace) -> int:
    from nl2sql_assets.evaluation.history.publish import publish

    root = Path(args.root) if args.root else Path.cwd()
    result = publish([Path(r) for r in args.reports], note=args.note,
                     from_dirs=[Path(d) for d in args.from_dirs or []], root=root,
                     allow_incomplete=args.allow_incomplete)
    for path in result.records:
        print(f"recorded {path}")
    for path in result.written:
        print(f"updated {path}" + (" (its results block)" if path == result.readme else ""))
    for path in result.unchanged:
        print(f"unchanged {path}")
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    from nl2sql_assets.demo import init_demo

    demo = init_demo(Path(args.demo), chinook=Path(args.chinook) if args.chinook else None, force=args.force,
                     database=args.database)
    print(f"demo project written to {demo.root}")
    if demo.server is not None:
        server = demo.server
        for ds, cfg in server.datasources.items():
            where = ", ".join(cfg.schemas) if cfg.schemas else cfg.database
            print(f"  {ds}: {server.tables[ds]} tables, {server.rows[ds]} rows copied into {where} ({server.engine})")
        print(f"  suites translated into {server.engine}'s SQL and their rows regenerated there: "
              + ", ".join(f"{name} {n}" for name, n in server.translated.items() if n))
        for key, why in server.differences.items():
            print(f"  differs from the original: {key}: {why}")
        if server.export:
            print(f"the URL carries a password, so nl2sql.yaml reads it from the environment: {server.export}")
    print(f"next: cd {demo.root} && nl2sql-assets eval run --mode plans")
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    from nl2sql_assets.demo import ensure_demo_data
    from nl2sql_assets.project import load_project_config

    config = load_project_config(_config_path(args))
    for ds_id, path in ensure_demo_data(config, chinook=Path(args.chinook) if args.chinook else None).items():
        print(f"{ds_id}: {path}")
    return 0


def _dagster_instance(config_path: Path) -> Any:
    """The Dagster instance of ``$DAGSTER_HOME``, else of the project's own ``.dagster_home/``
    (``nl2sql_assets.instance``: the first line says so)."""
    import dagster as dg

    from nl2sql_assets.instance import dagster_home

    _, said = dagster_home(config_path.resolve().parent)
    if said:
        _say(said)
    return dg.DagsterInstance.get()


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from nl2sql_assets.demo import ensure_demo_data
    from nl2sql_assets.project import load_project_config

    # Preflight: the project, Chinook and the demo data first, so a missing piece is one message
    # and no Dagster run is started (a failed run would stay in the UI's run list).
    config_path = _config_path(args).resolve()
    config = load_project_config(config_path)
    ensure_demo_data(config, chinook=Path(args.chinook) if args.chinook else None,
                     on_download=lambda url: _say(f"Chinook is not cached yet: downloading it once from {url}"))
    from nl2sql_assets.yamlio import no_cyclic_gc

    # Importing Dagster and our definitions, and opening the instance, make some 200,000 objects
    # and no garbage worth a collection: without the cyclic collector meanwhile (its full
    # collections over that growing heap cost 0.3 s of CPU here); run_keyfree then keeps them out
    # of its collections (frozen_heap).
    with no_cyclic_gc():
        from nl2sql_assets.defs.automation import NIGHTLY_CONFIGS
        from nl2sql_assets.defs.keyfree import run_keyfree

        instance = _dagster_instance(config_path)
    with instance:
        run = run_keyfree(config_path, instance, configs=tuple(args.configs or NIGHTLY_CONFIGS),
                          pass_index=args.pass_index)
    for name, ok in run.runs.items():
        print(f"{'ok    ' if ok else 'FAILED'} {name}")
    for name, passed in run.checks.items():
        print(f"check {'passed' if passed else 'FAILED'}: {name}")
    if run.stopped_after:
        print(f"stopped after {run.stopped_after} failed; the runs that depend on it were not started "
              f"(its log: `dagster dev`, Runs)", file=sys.stderr)
    from nl2sql_assets.evaluation.running import get_mode

    for name, report in run.boards.items():
        for board in report.configs.values():
            if get_mode(report.mode).executes:
                acc = board.accuracy.execution
                beside = "".join(f"; {text}" for summary in board.summaries().values()
                                 if (text := summary.beside_accuracy()))
                print(f"scoreboard {name}: execution accuracy {acc.with_interval('-')}, {acc.total} case runs{beside}")
                continue
            # A mode that executes nothing: the share of case runs that passed, and what its scorers say.
            parts = [f"{board.accuracy.overall.text()} of case runs passed"]
            parts += [text for summary in board.summaries().values() if (text := summary.text())]
            print(f"scoreboard {name}: {'; '.join(parts)}")
    _next_steps(config, run)
    return 0 if run.ok else 1


def _cmd_dashboard(args: argparse.Namespace) -> int:
    """Write the results page from the records and boards found, and say what it holds."""
    from nl2sql_assets.atomic import atomic_write
    from nl2sql_assets.evaluation.history import Warehouse
    from nl2sql_assets.evaluation.history.dashboard import build_dashboard, render_html
    from nl2sql_assets.project import load_project_config

    config_path = _config_path(args)
    config = load_project_config(config_path) if config_path.is_file() else None
    root = config_path.parent
    if args.sources:
        folders = [Path(p) for p in args.sources]
        missing = [str(p) for p in folders if not p.is_dir()]
        if missing:
            raise UserError(f"--from: no such folder: {', '.join(missing)} (give a warehouse folder, one holding "
                            "reports/, or a folder of benchmark records)")
        warehouses = [p for p in folders if (p / "reports").is_dir()]
        records = [p for p in folders if p not in warehouses]
    else:
        warehouses = [Warehouse.for_project(root).root]
        records = [root / "benchmarks"] if (root / "benchmarks").is_dir() else []
    suites = [Path(p) for p in config.evals_config.suites] if config is not None else []
    data = build_dashboard(records, [w for w in warehouses if w.is_dir()], suites, only_suite=args.suite, root=root)
    if not data.runs:
        raise UserError(f"no stored run in {', '.join(str(p) for p in [*records, *warehouses]) or 'the project'}: "
                        "`nl2sql-assets eval run` (or the Dagster scoreboards) stores runs, `eval publish` records them")
    out = Path(args.out) if args.out else Warehouse.for_project(root).root / "dashboard.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(data)
    atomic_write(out, page)
    print(f"dashboard: {out} ({len(page) / 1e6:.1f} MB; {len(data.runs)} run(s), {len(data.cases)} case(s)); "
          "open it in a browser, nothing is fetched")
    return 0


def _next_steps(config: Any, run: Any) -> None:
    """What a user reads the run with: each suite's report, and the UI holding the runs."""
    from nl2sql_assets.evaluation.history import Warehouse

    warehouse = Warehouse.for_project(config.root)
    suites = sorted({name.split("/")[0] for name in run.boards})
    reports = [warehouse.suite_report_path(s) for s in suites if warehouse.suite_report_path(s).is_file()]
    if reports:
        shown = reports[0].parent.parent / "<suite>" / reports[0].name if len(reports) > 1 else reports[0]
        pages = sorted((warehouse.root / "dashboards").glob("*.html"))
        dashboards = (f"; open the results dashboard{'s' if len(pages) > 1 else ''} in a browser: "
                      f"{pages[0].parent / '<suite>.html' if len(pages) > 1 else pages[0]}") if pages else ""
        print(f"\nnext: the reports across configs are {shown} ({len(reports)} suite(s)){dashboards}; the UI holds "
              f"these runs: source scripts/_env.sh && nl2sql-assets ui (it prints the address when the UI is ready)")


def _llm_section_text(spec: str) -> str:
    """The YAML to store for ``configs add --llm SPEC``. A preset or a file is copied as written,
    so its ``${env:...}`` key stays a reference: the resolved section would hold the key itself."""
    from nl2sql_assets.llm.presets import PRESETS_DIR, preset_names, resolve_llm_spec
    from nl2sql_assets.yamlio import dump_yaml

    _, llm = resolve_llm_spec(spec)  # validates the spec and the section
    target = spec.split("=", 1)[1] if "=" in spec else spec
    short = [n for n in preset_names() if n.endswith("-" + target)]
    if target in preset_names():
        source: Path | None = PRESETS_DIR / f"{target}.yaml"
    elif Path(target).expanduser().is_file():
        source = Path(target).expanduser()
    elif len(short) == 1:
        source = PRESETS_DIR / f"{short[0]}.yaml"
    else:
        source = None  # a bare model name: a section with no key in it
    if source is not None:
        return source.read_text(encoding="utf-8")
    return dump_yaml(llm.model_dump(mode="json", exclude_none=True))


def _cmd_configs(args: argparse.Namespace) -> int:
    from nl2sql_assets.config import validate_config_name
    from nl2sql_assets.defs.partitions import CONFIGS, register_configs
    from nl2sql_assets.evaluation.running.modes import reserved_config_names, resolve_config
    from nl2sql_assets.evaluation.running.named_configs import project_configs_dir
    from nl2sql_assets.project import load_project_config

    with _dagster_instance(_config_path(args)) as instance:
        if args.configs_command == "list":
            for name in instance.get_dynamic_partitions(CONFIGS.name):
                print(name)
            return 0
        config = load_project_config(_config_path(args))
        name = validate_config_name(args.name)
        reserved = reserved_config_names()
        if args.llm and name in reserved:
            raise UsageError(f"config name {name!r} is reserved ({', '.join(reserved)}); "
                             "choose another name for an llm section")
        if args.llm:
            target = project_configs_dir(config) / f"{name}.yaml"
            from nl2sql_assets.atomic import atomic_write

            atomic_write(target, f"# llm section for config {name} (from {args.llm})\n" + _llm_section_text(args.llm))
        mode, _ = resolve_config(name, config)  # refuses a name that resolves to nothing
        new = register_configs(instance, [name])
    print(f"config {name!r} ({mode}) " + ("registered" if new else "was already registered"))
    if args.llm:
        print(f"wrote {target}: the project's configuration, meant to be committed with it (keys stay in "
              "the environment, as ${env:VAR})")
    return 0


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
        if args.command == "init":
            return _cmd_init(args)
        if args.command == "data":
            return _cmd_data(args)
        if args.command == "pipeline":
            return _cmd_pipeline(args)
        if args.command == "configs":
            return _cmd_configs(args)
        if args.command == "dashboard":
            return _cmd_dashboard(args)
        if args.command == "ui":
            from nl2sql_assets.ui import run_ui

            return run_ui(_config_path(args), args.log_level, args.host, args.port)
        if args.command == "feedback":
            return _cmd_feedback(args)
        if args.command == "serve":
            from nl2sql_assets.cli_bench import cmd_serve

            return cmd_serve(args, _config_path(args))
        if args.command == "bench":
            from nl2sql_assets.cli_bench import cmd_bench

            return cmd_bench(args)
        if args.command == "neighbours":
            from nl2sql_assets.cli_bench import cmd_neighbours

            return cmd_neighbours(args, _config_path(args))
        if args.eval_command == "audit":
            from nl2sql_assets.cli_bench import cmd_audit

            return cmd_audit(args, _config_path(args))
        if args.eval_command == "grade":
            from nl2sql_assets.cli_bench import cmd_grade

            return cmd_grade(args, _config_path(args))
        handler = {"run": _cmd_eval_run, "regenerate": _cmd_eval_regenerate, "seed": _cmd_eval_seed,
                   "publish": _cmd_eval_publish, "import": _cmd_eval_import, "export": _cmd_eval_export}
        return handler[args.eval_command](args)
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


if __name__ == "__main__":
    sys.exit(main())
