"""JSON Lines gold sets: import one as a draft suite, export a suite as one; lossless both ways.

One line is one case, in the case contract of multi-domain gold sets: ``id``, ``domain``,
``category``, ``question``, ``database``, ``expected_sql``, ``sql_policy``,
``follow_up_context``, ``candidate_selection`` and, for a policy probe,
``expected_outcome: policy_rejection`` with ``policy_probe_sql``. Our own fields ride along
under their suite names (``outcome``, ``tags``, ``tables``, ``rows``, ``plan``, ...), so a suite
exported and imported again is the same suite, and an export of an import is the same lines.

How the contract maps onto a case (each mapping one ``JsonlField`` in ``FIELDS``; a new case field
is one more entry):

- ``database`` (a datasource id, or a database file a configured datasource reads) -> ``datasources``;
  a list for a case about several. ``domain`` -> ``domain`` when it is not just the datasource.
- ``category`` -> the case's first tag; ``tags`` (ours) -> the rest.
- ``expected_sql`` -> ``sql``; a probe's ``policy_probe_sql`` -> ``sql`` of a ``kind: probe`` case,
  whose ``expected_outcome`` is ``policy_rejection`` (roles refused, by ``policy_rule``) or
  ``policy_allowed`` (an allow control; our extension).
- ``sql_policy`` (an inline policy: roles, and optionally dangerous functions) -> ``policy``.
- ``outcome`` (ours) or ``role`` -> the per-role outcome; without either, the import's default
  roles get ``allowed`` (a query) or ``refused`` (a rejection probe).
- ``follow_up_context`` (the earlier turns: a list of objects with ``question`` and optionally
  ``sql`` and our ``plan``) -> ``turns``.
- ``candidate_selection`` (``true``/``false``, or a number of candidates; ``{"n": N}`` reads as N)
  -> ``candidates``.
- ``semantic_model``: not run by this product yet; kept under ``pending`` as it was (the case
  stays a draft) and written back on export.
- ``status`` and ``origin`` (ours) travel as they are; a line without them (another tool's gold
  set) becomes ``status: draft``, ``origin: imported``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.suites.loader import SuiteError, load_suite
from nl2sql_assets.evaluation.suites.model import EvalCase, EvalSuite
from nl2sql_assets.evaluation.suites.writer import dump_suite

#: Contract fields this product keeps but does not run yet (a case holding one stays a draft).
PENDING_KEYS = ("semantic_model",)
#: Contract keys that map onto case fields of their own (follow-ups, candidate selection).
CONVERSATION_KEYS = ("follow_up_context", "candidate_selection")
REJECTION = "policy_rejection"
ALLOWED = "policy_allowed"


class JsonlError(UserError, ValueError):
    """A JSONL gold set that cannot be converted; one line per problem, naming the file, the line,
    the case and the field."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


@dataclass(frozen=True)
class ImportContext:
    """What the import needs beyond a line: the roles a line without an outcome is asked as, the
    datasource a line without a database is about, and the project's datasources (id -> file)."""

    roles: Sequence[str] = ("admin",)
    database: str | None = None
    datasources: Mapping[str, Path] | None = None

    def datasource(self, value: str) -> str:
        """A datasource id for a ``database`` value: an id as it is, or the configured datasource
        that reads that file (same path, file name or stem)."""
        known = self.datasources
        if known is None or value in known:
            return value
        given = Path(value)
        for ds_id, path in known.items():
            if given.name in (path.name, path.stem) or (given.is_absolute() and given == path):
                return ds_id
        raise ValueError(f"database {value!r} is neither a datasource id nor the file of one "
                         f"(datasources: {sorted(known)})")


@dataclass(frozen=True)
class JsonlField:
    """One mapping between the line and the case: ``load`` fills case fields from the line,
    ``dump`` writes line keys from the case. ``keys`` are the line keys it owns."""

    keys: tuple[str, ...]
    load: Callable[[dict[str, Any], dict[str, Any], ImportContext], None]
    dump: Callable[[EvalCase, dict[str, Any]], None]


# ---------------------------------------------------------------- the mappings


def _load_id(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    case["id"] = line.get("id")
    case["question"] = line.get("question")


def _dump_id(case: EvalCase, line: dict[str, Any]) -> None:
    line["id"] = case.id


def _load_where(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    database = line.get("database", ctx.database)
    if database is None:
        raise ValueError("database: the line names no database and the import has no default (--database)")
    values = database if isinstance(database, list) else [database]
    if not values or not all(isinstance(v, str) for v in values):
        raise ValueError(f"database: a datasource id or a list of them, not {database!r}")
    case["datasources"] = [ctx.datasource(v) for v in values]
    domain = line.get("domain")
    if domain is not None and domain != "+".join(case["datasources"]):
        case["domain"] = domain


def _dump_where(case: EvalCase, line: dict[str, Any]) -> None:
    line["domain"] = case.domain_name
    line["category"] = case.tags[0] if case.tags else None
    line["question"] = case.question
    line["database"] = case.datasources[0] if len(case.datasources) == 1 else list(case.datasources)


def _load_tags(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    category = line.get("category")
    rest = line.get("tags") or []
    if not isinstance(rest, list):
        raise ValueError(f"tags: a list, not {rest!r}")
    case["tags"] = ([category] if category is not None else []) + list(rest)


def _dump_tags(case: EvalCase, line: dict[str, Any]) -> None:
    if len(case.tags) > 1:
        line["tags"] = list(case.tags[1:])


def _load_sql(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    expected = line.get("expected_outcome")
    probe = line.get("policy_probe_sql")
    if expected not in (None, REJECTION, ALLOWED):
        raise ValueError(f"expected_outcome: {REJECTION} or {ALLOWED}, not {expected!r}")
    if expected is not None or probe is not None:
        if expected is None or probe is None or line.get("expected_sql") is not None:
            raise ValueError("policy_probe_sql: a probe has expected_outcome and policy_probe_sql, and no expected_sql")
        case["kind"] = "probe"
        case["sql"] = probe
        if line.get("policy_rule") is not None:
            case["rule"] = line["policy_rule"]
        return
    if line.get("policy_rule") is not None:
        raise ValueError("policy_rule: only a probe (expected_outcome, policy_probe_sql) names a rule")
    case["sql"] = line.get("expected_sql")
    if line.get("kind") is not None:
        case["kind"] = line["kind"]


def _dump_sql(case: EvalCase, line: dict[str, Any]) -> None:
    if case.kind == "probe":
        line["expected_outcome"] = REJECTION if "refused" in case.outcome.values() else ALLOWED
        line["policy_probe_sql"] = case.sql
        if case.rule is not None:
            line["policy_rule"] = case.rule
        return
    line["expected_sql"] = case.sql
    if case.kind != "answer":
        line["kind"] = case.kind


def _load_outcome(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    if line.get("outcome") is not None:
        if line.get("role") is not None:
            raise ValueError("role: give either role or outcome, not both")
        case["outcome"] = line["outcome"]
        return
    roles = [line["role"]] if line.get("role") is not None else list(ctx.roles)
    verdict = "refused" if line.get("expected_outcome") == REJECTION else "allowed"
    case["outcome"] = dict.fromkeys(roles, verdict)


def _dump_outcome(case: EvalCase, line: dict[str, Any]) -> None:
    line["outcome"] = dict(case.outcome)


def _load_policy(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    policy = line.get("sql_policy")
    if isinstance(policy, str):
        raise ValueError(f"sql_policy: {policy!r} names a policy; give the policy itself (roles with allow and deny)")
    if policy is not None:
        case["policy"] = policy


def _dump_policy(case: EvalCase, line: dict[str, Any]) -> None:
    line["sql_policy"] = case.policy.model_dump(mode="json", exclude_defaults=True) if case.policy else None


def _load_pending(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    pending = {key: line[key] for key in PENDING_KEYS if line.get(key) is not None}
    if pending:
        case["pending"] = pending


def _dump_pending(case: EvalCase, line: dict[str, Any]) -> None:
    for key, value in case.pending.items():
        line[key] = value


def _load_conversation(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    context = line.get("follow_up_context")
    if context is not None:
        if not isinstance(context, list) or not all(isinstance(t, dict) for t in context):
            raise ValueError("follow_up_context: a list of earlier turns, each an object with question (and sql)")
        case["turns"] = context
    selection = line.get("candidate_selection")
    if isinstance(selection, dict):
        if set(selection) != {"n"}:
            raise ValueError(f"candidate_selection: true, false, a number or {{\"n\": N}}, not {selection!r}")
        selection = selection["n"]
    if selection is not None:
        case["candidates"] = selection


def _dump_conversation(case: EvalCase, line: dict[str, Any]) -> None:
    # The contract's own keys, always written (null when unset).
    line["follow_up_context"] = [
        {k: (v.to_data() if k == "plan" else v) for k, v in (("question", t.question), ("sql", t.sql),
                                                               ("plan", t.plan)) if v is not None}
        for t in case.turns
    ] or None
    line["candidate_selection"] = case.candidates
    if case.candidate_plans:
        line["candidate_plans"] = [p.to_data() for p in case.candidate_plans]


def _load_review(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    case["status"] = line.get("status", "draft")
    case["origin"] = line.get("origin", "imported")


def _dump_review(case: EvalCase, line: dict[str, Any]) -> None:
    line["status"] = case.status
    line["origin"] = case.origin


#: Our own case fields, carried under their suite names (left out when unset or empty).
OWN_KEYS = ("context", "difficulty", "paraphrase_group", "tables", "columns", "order_matters", "rows", "alt_sql",
            "alt_rows", "plan", "candidate_plans", "follows", "benchmark")


def _load_own(line: dict[str, Any], case: dict[str, Any], ctx: ImportContext) -> None:
    for key in OWN_KEYS:
        if key in line:
            case[key] = line[key]


def _dump_own(case: EvalCase, line: dict[str, Any]) -> None:
    data = case.model_dump(mode="json", include=set(OWN_KEYS) - {"plan", "candidate_plans"}, exclude_defaults=True)
    if case.kind == "answer" and case.sql is not None:
        data["order_matters"] = case.order_matters
    if case.plan is not None:
        data["plan"] = case.plan.to_data()  # as a suite file writes it
    for key in OWN_KEYS:
        if key in data:
            line[key] = data[key]


#: Every mapping, in the order an exported line lists its keys.
FIELDS: tuple[JsonlField, ...] = (
    JsonlField(("id", "question"), _load_id, _dump_id),
    JsonlField(("domain", "category", "database"), _load_where, _dump_where),
    JsonlField(("tags",), _load_tags, _dump_tags),
    JsonlField(("expected_sql", "expected_outcome", "policy_probe_sql", "policy_rule", "kind"), _load_sql, _dump_sql),
    JsonlField(("sql_policy",), _load_policy, _dump_policy),
    JsonlField(CONVERSATION_KEYS, _load_conversation, _dump_conversation),
    JsonlField(PENDING_KEYS, _load_pending, _dump_pending),
    JsonlField(("outcome", "role"), _load_outcome, _dump_outcome),
    JsonlField(("status", "origin"), _load_review, _dump_review),
    JsonlField(OWN_KEYS, _load_own, _dump_own),
)
_KNOWN = frozenset(key for f in FIELDS for key in f.keys)
#: The order of an exported line's keys: the contract first, then ours.
_ORDER = ("id", "domain", "category", "question", "database", "expected_sql", "sql_policy", "follow_up_context",
          "candidate_selection", "expected_outcome", "policy_probe_sql", "policy_rule")


# ---------------------------------------------------------------- lines and cases


def case_to_line(case: EvalCase) -> dict[str, Any]:
    """One case as a JSONL object: the contract's keys first, then ours."""
    line: dict[str, Any] = {}
    for field in FIELDS:
        field.dump(case, line)
    ordered = {key: line[key] for key in _ORDER if key in line}
    ordered.update((key, value) for key, value in line.items() if key not in ordered)
    return ordered


def line_to_case(line: dict[str, Any], ctx: ImportContext) -> EvalCase:
    """One JSONL object as a case; ValueError (or pydantic's ValidationError) names what is wrong."""
    unknown = sorted(set(line) - _KNOWN)
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown key (known: {', '.join(sorted(_KNOWN))})")
    data: dict[str, Any] = {}
    for field in FIELDS:
        field.load(line, data, ctx)
    return EvalCase.model_validate({k: v for k, v in data.items() if v is not None})


def export_lines(cases: Iterable[EvalCase]) -> str:
    """The cases as JSON Lines (UTF-8 text, one object per line, keys in contract order)."""
    return "".join(json.dumps(case_to_line(c), ensure_ascii=False, separators=(", ", ": ")) + "\n" for c in cases)


def import_lines(text: str, source: str | Path, ctx: ImportContext) -> list[EvalCase]:
    """Every line of ``text`` as a case; all problems are reported at once (JsonlError)."""
    cases: list[EvalCase] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{source}, line {number}"
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(line, dict):
            problems.append(f"{where}: a case is a JSON object, not {type(line).__name__}")
            continue
        who = f"case {line.get('id')}: " if line.get("id") is not None else ""
        case_id = line.get("id")
        if isinstance(case_id, str) and case_id in seen:
            problems.append(f"{where}: {who}id: case id {case_id!r} appears more than once (first at line "
                            f"{seen[case_id]})")
            continue
        if isinstance(case_id, str):
            seen[case_id] = number
        try:
            case = line_to_case(line, ctx)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                field = ".".join(str(p) for p in err["loc"])
                message = err["msg"].removeprefix("Value error, ")
                if err["type"] == "missing":
                    message = "required field is missing"
                if not field:  # a rule across fields says which one first ("rule: ...")
                    named, _, rest = message.partition(": ")
                    field, message = (named, rest) if named in EvalCase.model_fields and rest else ("(case)", message)
                problems.append(f"{where}: {who}{field}: {message}")
            continue
        except ValueError as exc:
            problems.append(f"{where}: {who}{exc}")
            continue
        cases.append(case)
    if problems:
        raise JsonlError("\n".join(problems), problems)
    if not cases:
        raise JsonlError(f"{source}: no case in the file")
    return cases


class ImportReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: Path
    cases: int = 0
    drafts: int = 0
    pending: list[str] = Field(default_factory=list)  # cases holding fields not run yet


def _header(source: Path) -> str:
    return (
        f"# Imported by `nl2sql-assets eval import` from {source.name}. Cases without a status are drafts\n"
        "# (origin: imported) and never run. To promote one: check its SQL answers the question, fill in\n"
        "# the outcome for every role, tables and columns, set status: approved, then run\n"
        "# `nl2sql-assets eval regenerate <this file>` to write its rows. Fields under `pending` are not\n"
        "# run by this product yet (a semantic model): a case holding them stays a draft.\n"
    )


def import_jsonl(source: str | Path, out: str | Path, ctx: ImportContext, *, config: Any = None) -> ImportReport:
    """Convert the JSONL gold set at ``source`` into the suite file ``out`` (written atomically).

    ``out`` is refused when it is a packaged suite, a suite evals.yaml names, or already exists:
    an import never replaces a file."""
    from nl2sql_assets.evaluation.suites.drafts import refuse_draft_target

    source, out = Path(source), Path(out)
    try:
        text = source.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise JsonlError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise JsonlError(f"{source}: cannot read: {exc}") from None
    refuse_draft_target(config, out, "import cases")
    if out.exists():
        raise JsonlError(f"{out}: already exists; an import writes a new suite file (choose another --out)")
    cases = import_lines(text, source, ctx)
    suite = EvalSuite.model_construct(version=1, cases=cases)
    atomic_write(out, dump_suite(suite, header=_header(source)))
    load_suite(out)  # what was written reads back as a suite
    return ImportReport(path=out, cases=len(cases), drafts=sum(1 for c in cases if c.status == "draft"),
                        pending=[c.id for c in cases if c.pending])


def export_jsonl(suite_path: str | Path, out: str | Path | None = None) -> str:
    """The suite at ``suite_path`` as JSON Lines; written to ``out`` (atomically) when given."""
    try:
        suite = load_suite(suite_path)
    except SuiteError:
        raise
    text = export_lines(suite.cases)
    if out is not None:
        atomic_write(Path(out), text)
    return text
