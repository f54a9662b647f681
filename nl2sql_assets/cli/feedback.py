"""``feedback rate`` and ``feedback export``: marks on stored case runs, the good ones as drafts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import EXIT_OK, add_command, add_group, project_config_path


def add(sub: Any) -> None:
    fsub = add_group(sub, "feedback", help="mark stored case runs and export the good ones as draft cases",
                     description="Marks on stored case runs (good or bad), and the good ones as draft cases.",
                     dest="feedback_command")
    fexp = add_command(
        fsub, "export", _cmd_feedback, help="write the thumbs-up runs (marked good) as draft cases",
        description="Write every stored case run marked good, not drafted already, as a draft case (its "
                    "question, SQL and rows) into --out, for a person to review; nothing is written when none "
                    "is marked.")
    fexp.add_argument("--good", action="store_true", required=True, help="export the runs marked good")
    fexp.add_argument("--out", required=True, metavar="PATH", help="the draft suite to write or add to")
    fexp.add_argument("--suite", action="extend", nargs="+", default=None, metavar="NAME",
                      help="the suites whose stored runs to read (default: every suite in the warehouse)")
    fexp.add_argument("--config", dest="configs", action="extend", nargs="+", default=None, metavar="NAME",
                      help="the configs whose stored runs to read (default: every config)")
    frate = add_command(
        fsub, "rate", _cmd_feedback, help="mark one stored case run good or bad",
        description="Mark one stored case run (CASE_ID@ROLE of a suite, run by a config) good or bad, with a "
                    "note; the mark is stored in the project's warehouse. Exit 2 where no such run is stored.")
    frate.add_argument("suite", metavar="SUITE", help="the suite the case belongs to")
    frate.add_argument("case", metavar="CASE_ID@ROLE", help="the case run to mark")
    frate.add_argument("--config", dest="run_config", required=True, metavar="NAME", help="the config that ran it")
    frate.add_argument("--pass", dest="pass_index", type=int, default=None, metavar="N",
                       help="one pass (default: every pass of the run)")
    mark = frate.add_mutually_exclusive_group(required=True)
    mark.add_argument("--good", action="store_const", const="good", dest="rating", help="mark it good")
    mark.add_argument("--bad", action="store_const", const="bad", dest="rating", help="mark it bad")
    frate.add_argument("--note", default="", help="why, stored with the mark")


def _cmd_feedback(args: argparse.Namespace) -> int:
    from nl2sql_assets.project import Project

    project = Project.load(project_config_path(args))
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
