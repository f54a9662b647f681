"""Where machine-written draft cases may go: never into a reviewed suite.

Seeding, JSONL import and feedback export write draft cases to a file of their own. They refuse a
suite the package ships, a suite evals.yaml names, and any existing file that holds an approved
case; a file of drafts may be written again.
"""

from __future__ import annotations

from pathlib import Path

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.suites.loader import load_suite
from nl2sql_assets.evaluation.suites.model import EvalSuite


def refuse_draft_target(config: ProjectConfig | None, out: Path, verb: str = "seed drafts") -> EvalSuite | None:
    """The suite already at ``out`` (None when there is no file), or a refusal (RunRefused) naming
    why drafts may not go there."""
    from nl2sql_assets.paths import is_packaged

    if is_packaged(out):
        raise RunRefused(f"{out}: a suite the package ships; {verb} into a file of their own")
    named = getattr(config.evals, "suites", None) or [] if config is not None else []
    if config is not None and out.resolve() in {config.resolve(p).resolve() for p in named}:
        raise RunRefused(f"{out}: a suite evals.yaml names; {verb} into a file of their own")
    if not out.exists():
        return None
    suite = load_suite(out)
    if suite.approved:
        raise RunRefused(f"{out}: holds approved case(s) ({', '.join(c.id for c in suite.approved[:3])}"
                         f"{', ...' if len(suite.approved) > 3 else ''}); drafts never go into a reviewed suite")
    return suite
