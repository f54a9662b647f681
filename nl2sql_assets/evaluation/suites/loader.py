"""Reading a suite file: every problem reported at once, each naming the file, the line, the case
and the field; and the digest that ties a run to the exact file it read."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.suites.model import EvalCase, EvalSuite, follows_problems, same_rows
from nl2sql_assets.yamlio import YamlFileError, YamlLocator, load_yaml_text, no_cyclic_gc


class SuiteError(UserError, ValueError):
    """A suite file is missing, unreadable or invalid. One line per problem, each naming the
    file, the line, the case and the field; ``problems`` holds the same lines as a list."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


def case_location(suite: EvalSuite, case_id: str, field: str = "sql", name: str | None = None) -> str:
    """``FILE, line N: case ID`` for a case of a loaded suite (the line of its ``field``, else of
    the case), or ``suite NAME, case ID`` for a suite built in code: what a message about one case
    of a suite starts with, so a reader goes straight to it."""
    path = suite.path
    if path is None:
        return f"suite {name or suite.name or '?'}, case {case_id!r}"
    locator, indexes = _located(suite, path)
    index = indexes.get(case_id)
    if index is None:
        return f"suite {name or suite.name or '?'}, case {case_id!r}"
    line = locator.line(["cases", index, field]) if locator is not None else None
    return f"{path}{f', line {line}' if line else ''}: case {case_id!r}"


#: the last suite files located: (path, size, mtime) -> the file's locator (composed once, on the first
#: line asked) and each case's index; a message per case of a suite of thousands reads the file once
_LOCATED: dict[tuple[str, int, int], tuple[YamlLocator | None, dict[str, int]]] = {}


def _located(suite: EvalSuite, path: Path) -> tuple[YamlLocator | None, dict[str, int]]:
    try:
        stat = path.stat()
    except OSError:
        return None, {c.id: i for i, c in enumerate(suite.cases)}
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _LOCATED:
        try:
            locator: YamlLocator | None = YamlLocator(path.read_text(encoding="utf-8-sig"))
        except OSError:
            locator = None
        if len(_LOCATED) >= 8:
            _LOCATED.pop(next(iter(_LOCATED)))
        indexes: dict[str, int] = {}
        for i, c in enumerate(suite.cases):
            indexes.setdefault(c.id, i)
        _LOCATED[key] = (locator, indexes)
    return _LOCATED[key]


# ---------------------------------------------------------------- loading

_TOP_KEYS = ("version", "cases")
_FIELD_PREFIX = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): (.*)", re.DOTALL)


def load_suite(path: str | Path, *, allow_stale_rows: bool = False, cache_dir: str | Path | None = None) -> EvalSuite:
    """Read and check a suite file; every problem is reported (``SuiteError``), not just the first.

    ``allow_stale_rows`` accepts an approved case whose ``alt_rows`` do not match its
    ``alt_sql`` yet (an alternative was just added): regenerate loads that way. ``cache_dir``
    keeps the checked suite by file digest (``suites.cache``): the next load of the same bytes
    skips YAML parsing."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite file not found") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read the suite: {exc}") from None
    digest = _digest(data) if cache_dir is not None else ""
    if cache_dir is not None:
        from nl2sql_assets.evaluation.suites import cache

        hit = cache.read_entry(Path(cache_dir), digest, allow_stale_rows)
        if hit is not None:
            suite = EvalSuite.model_construct(version=1, cases=hit[0])
            suite._path = path
            suite._header = hit[1]
            return suite
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{path}: cannot read the suite: {exc}") from None
    # read_text's newline handling: CRLF and CR read as LF
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    suite = parse_suite(text, path, allow_stale_rows=allow_stale_rows)
    if cache_dir is not None:
        cache.write_entry(Path(cache_dir), digest, allow_stale_rows, suite, suite._header)
    return suite


def parse_suite(text: str, path: str | Path, *, allow_stale_rows: bool = False) -> EvalSuite:
    """Check the text of a suite file; ``path`` names it in messages and becomes ``suite.path``."""
    path = Path(path)
    # The loader allocates many small objects and frees none: the cyclic collector only costs time.
    with no_cyclic_gc():
        try:
            data = load_yaml_text(text, path)
        except YamlFileError as exc:
            raise SuiteError(_name_the_case(str(exc), text, path, exc.__cause__)) from None
        suite = _validate(data, text, path, allow_stale_rows)
    suite._path = path
    suite._header = leading_comments(text)
    return suite


_CASE_START = re.compile(r"^\s*-\s+id:\s*[\"']?([^\"'\s#]+)")


def _name_the_case(message: str, text: str, source: Path, cause: BaseException | None) -> str:
    """A YAML syntax error with the case it sits in: the last ``- id:`` at or above the line
    where the broken construct starts (the parser's context mark, else its problem mark)."""
    mark = getattr(cause, "context_mark", None) or getattr(cause, "problem_mark", None)
    problem = getattr(cause, "problem_mark", None)
    if mark is None or problem is None:
        return message
    case_id = None
    for line in reversed(text.splitlines()[: mark.line + 1]):
        m = _CASE_START.match(line)
        if m:
            case_id = m.group(1)
            break
    where = f"{source}, line {problem.line + 1}, column {problem.column + 1}: "
    if case_id is None or not message.startswith(where):
        return message
    return f"{where}case {case_id}: {message[len(where):]}"


def _validate(data: Any, text: str, source: Path, allow_stale_rows: bool) -> EvalSuite:
    context = {"allow_stale_rows": allow_stale_rows}
    locator = YamlLocator(text)
    problems: list[str] = []
    reported: set[tuple[Any, ...]] = set()

    def report(where: list[str | int], field: str, message: str, case: str | None = None) -> None:
        key = (case, field) if case is not None else (None, field, message)
        if key in reported:  # a union gives one error per member: the first says enough
            return
        reported.add(key)
        line = locator.line(where)
        at = f", line {line}" if line else ""
        who = f"case {case}: " if case is not None else ""
        problems.append(f"{source}{at}: {who}{field}: {message}")

    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SuiteError(
            f"{source}, line 1: a suite is a mapping with 'version' and 'cases', not a {type(data).__name__}"
        )
    for key in data:
        if key not in _TOP_KEYS:
            report([key], str(key), "unknown key")
    version = data.get("version", 1)
    if type(version) is not int or version != 1:
        report(["version"], "version", f"must be 1 (got {version!r})")
    raw_cases = data.get("cases")
    if raw_cases is None:
        raw_cases = []
    elif not isinstance(raw_cases, list):
        report(["cases"], "cases", f"must be a list of cases, not a {type(raw_cases).__name__}")
        raw_cases = []

    cases: list[EvalCase] = []
    at: list[int] = []  # the raw index of each case
    first_at: dict[str, int] = {}
    for index, raw in enumerate(raw_cases):
        label = _case_label(raw, index)
        if not isinstance(raw, dict):
            report(["cases", index], "case", f"must be a mapping of fields, not a {type(raw).__name__}", label)
            continue
        try:
            cases.append(EvalCase.model_validate(raw, context=context))
            at.append(index)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                where, field, message = _describe(err, raw)
                report(["cases", index, *where], field, message, label)
        case_id = raw.get("id")
        if isinstance(case_id, str):
            if case_id in first_at:
                first_line = locator.line(["cases", first_at[case_id], "id"])
                report(
                    ["cases", index, "id"],
                    "id",
                    f"case id {case_id!r} appears more than once (first at line {first_line})",
                    label,
                )
            else:
                first_at[case_id] = index
    first_of: dict[str, int] = {}
    for n, case in enumerate(cases):  # a paraphrase group asks one thing: one result
        group = case.paraphrase_group
        if group is None or case.rows is None or case.status != "approved":
            continue
        if group not in first_of:
            first_of[group] = n
            continue
        ref = cases[first_of[group]]
        if ref.rows is not None and not same_rows(ref.rows, case.rows, ref.order_matters and case.order_matters):
            report(["cases", at[n], "rows"], "rows",
                   f"paraphrase_group {group}: the rows differ from those of case {ref.id} (line "
                   f"{locator.line(['cases', at[first_of[group]], 'rows'])}); cases of one group return the same rows",
                   case.id)
    for n, message in follows_problems(cases):  # a follow-up names a case of this file
        report(["cases", at[n], "follows"], "follows", message, cases[n].id)
    if problems:
        raise SuiteError("\n".join(problems), problems)
    # The cases are checked already; a second pass would also undo allow_stale_rows.
    return EvalSuite.model_construct(version=1, cases=cases)


def _case_label(raw: Any, index: int) -> str:
    if isinstance(raw, dict):
        case_id = raw.get("id")
        if isinstance(case_id, str | int) and not isinstance(case_id, bool) and str(case_id):
            return str(case_id)
    return f"cases[{index}]"


def _describe(err: Any, raw: dict[str, Any]) -> tuple[list[str | int], str, str]:
    """(path inside the case, dotted field name, message) for one pydantic error."""
    loc = err["loc"]
    kind = err["type"]
    message = err["msg"]
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
    if not loc:
        # A rule across fields: the model says which field with a leading "field: ".
        m = _FIELD_PREFIX.fullmatch(message)
        if m and m.group(1) in EvalCase.model_fields:
            return [m.group(1)], m.group(1), m.group(2)
        return [], "(case)", message
    where: list[str | int] = []
    node: Any = raw
    for i, step in enumerate(loc):
        last = i == len(loc) - 1
        in_dict = isinstance(node, dict) and step in node
        in_list = isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)
        if in_dict or in_list:
            node = node[step]
        elif last and isinstance(node, dict):
            node = None  # a missing field, or a dict key's own error
        else:
            continue  # a union member's tag, not a key of the data
        where.append(step)
    field = ""
    for step in where:
        field += f"[{step}]" if isinstance(step, int) else (f".{step}" if field else str(step))
    if kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "missing":
        message = "required field is missing"
    elif kind != "value_error":
        given = err.get("input")
        if isinstance(given, str | int | float | bool) or given is None:
            shown = repr(given)
            if len(shown) <= 60:
                message = f"{message} (got {shown})"
    return where, field or "(case)", message


def leading_comments(text: str) -> str:
    """The block of comment and blank lines at the top of a YAML text (kept when rewriting)."""
    end = 0
    while end < len(text):
        nl = text.find("\n", end)
        stop = len(text) if nl < 0 else nl + 1
        stripped = text[end:stop].strip()
        if stripped and not stripped.startswith("#"):
            break
        end = stop
    return text[:end]


def suite_digest(path: str | Path) -> str:
    """SHA-256 of the file's bytes with CRLF and CR read as LF, so a Windows checkout hashes the same."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite file not found") from None
    return _digest(data)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")).hexdigest()
