"""``eval run``: every approved case once per role, scored, reported, gated against a baseline and
held to the thresholds."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import (
    EXIT_COST_CAP,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    add_command,
    add_neighbour_options,
    board_line,
    load_project,
    progress,
)
from nl2sql_assets.errors import UsageError


def add(esub: Any) -> None:
    from nl2sql_assets.evaluation.running.modes import MODES

    run = add_command(esub, "run", _cmd_eval_run, help="run the suites and score them (default mode full: real models, paid)",
                          description="Run every approved case once per role and score it. The default mode, "
                                      "full, calls real models and costs money; plans and retrieval need no key.",
                          epilog="exit codes: 0 finished, nothing regressed; 1 a regression or a missed threshold "
                                 "(also when the cost cap stopped the run: both are printed); 2 usage error, "
                                 "refused run, missing or incomparable baseline; 3 stopped at the cost cap with "
                                 "nothing regressed (the report is partial); 4 incomplete: the provider failed "
                                 "case runs (an outage, never gated)")
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
    add_neighbour_options(run, "grade", off=True)
    _threshold_options(run)


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
    with load_project(args) as project:
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
    from nl2sql_assets.evaluation.reporting.streamed import partial_path_for, records_path_for

    records = records_path_for(out)  # each case record written as it finishes; the boards read them back
    try:
        report = project.evals.run_streamed(request, records, on_case=progress())
    except KeyboardInterrupt:
        partial = partial_path_for(records)
        kept = f"the case records finished so far are in {partial}" if partial.is_file() else "no case run had finished"
        print(f"\ninterrupted (Ctrl-C): the run stopped; {kept}; no report was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    save_summary(report, out, records)
    for name, board in report.configs.items():
        print(f"{name}: {board_line(board, mode.executes)}")
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
    from nl2sql_assets.cli.common import asks_for_neighbours, grade_neighbours

    if args.no_neighbours:
        grade_neighbours(args, config)  # refuses --no-neighbours beside a neighbour option
        return False
    return grade_neighbours(args, config) if asks_for_neighbours(args) else None


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
