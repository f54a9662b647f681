"""Suites: YAML files of reviewed cases (``EvalCase``, ``EvalSuite``), their loader and writer.

A case is a question and what each role should get; an answerable one also carries the
reviewed SQL and the rows it returns (written by ``regenerate``, never typed). Rules that
span fields raise ``ValueError("<field>: <problem>")`` so the loader can name the field.

The file layout ``write_suite`` produces (canonical, so a rewrite of an unchanged suite is
byte for byte the same file and a diff shows only what really changed)::

    # the leading comment block of the file is kept as it is
    version: 1
    cases:

    - id: chinook_001
      question: How many customers do we have, by country?
      datasources: [chinook]
      status: approved
      origin: hand
      difficulty: easy
      tags: [aggregation, rbac-denial]
      outcome: {admin: allowed, analyst: allowed, viewer: refused}
      tables: [Customer]
      columns: [Customer.Country, Customer.CustomerId]
      order_matters: false
      sql: |
        SELECT Country, COUNT(CustomerId) AS customer_count
        FROM Customer GROUP BY Country
      rows:
      - {Country: USA, customer_count: 13}
      alt_sql:
      - |
        SELECT ...
      alt_rows:
      - - {Country: USA, n: 13}
      plan:
        select:
        - {expr: {kind: column, name: Country}}
        from: {name: Customer}

- Keys come in the order above; ``kind`` is written only when it is not ``answer``;
  ``difficulty``, ``paraphrase_group``, ``sql``, ``rows`` and ``plan`` only when set; lists
  (``tags``, ``tables``, ``columns``, ``alt_sql``, ``alt_rows``) only when not empty;
  ``order_matters`` when the case has ``sql`` or the flag is on. ``id``, ``question``,
  ``datasources``, ``status``, ``origin`` and ``outcome`` are always written.
- Short lists and the outcome map are flow collections; each row is one flow mapping on
  its own line; SQL is a literal block; a plan is one line per top-level key (a block list
  of flow items for list-valued keys).
- Scalars are plain only when the YAML resolver reads them back as the same string;
  anything else (``yes``, ``null``, ``'2009'``, ``2009-01-01``, text with ``:`` or ``#``)
  is double-quoted with JSON-style escapes. Floats use ``repr`` (exact), with ``.0``
  added where YAML 1.1 needs a dot. The writer loads its own output back and refuses
  to write a file that would not read back as the same values and types.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import re
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.errors import UserError
from nl2sql_assets.yamlio import YamlFileError, YamlLocator, load_yaml_text

Outcome = Literal["allowed", "refused", "unanswerable", "clarify"]
CaseStatus = Literal["draft", "approved", "retired"]
CaseKind = Literal["answer", "routing"]
Origin = Literal["hand", "seeded", "feedback"]
Difficulty = Literal["easy", "medium", "hard"]

_TABLE_COLUMN = re.compile(r"^[^.\s]+\.[^.\s]+$")


class EvalCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    datasources: list[str] = Field(min_length=1)
    status: CaseStatus
    kind: CaseKind = "answer"
    origin: Origin = "hand"
    difficulty: Difficulty | None = None
    tags: list[str] = Field(default_factory=list)
    paraphrase_group: str | None = None
    outcome: dict[str, Outcome] = Field(min_length=1)
    tables: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    order_matters: bool = False
    sql: str | None = None
    rows: list[dict[str, Any]] | None = None
    alt_sql: list[str] = Field(default_factory=list)
    alt_rows: list[list[dict[str, Any]]] = Field(default_factory=list)
    plan: PlanModel | None = None

    @field_validator("columns")
    @classmethod
    def _columns_are_qualified(cls, value: list[str]) -> list[str]:
        bad = [c for c in value if not _TABLE_COLUMN.match(c)]
        if bad:
            raise ValueError(f"each column must be written Table.Column: {bad}")
        return value

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> EvalCase:
        outcomes = set(self.outcome.values())
        if self.kind == "routing":
            if self.sql is not None or self.alt_sql or self.rows is not None or self.alt_rows:
                raise ValueError("sql: a routing case has no sql, rows or alternatives")
            if self.plan is not None:
                raise ValueError("plan: a routing case has no plan")
        if self.sql is not None and len(self.datasources) != 1:
            raise ValueError(f"datasources: a case with sql names exactly one datasource, not {self.datasources}")
        if "unanswerable" in outcomes:
            if self.alt_sql or self.alt_rows:
                raise ValueError("alt_sql: an unanswerable case cannot have an alternative answer")
            if outcomes == {"unanswerable"} and self.sql is not None:
                raise ValueError("sql: an unanswerable case has no sql")
        if self.status == "approved":
            if self.kind == "answer" and "allowed" in outcomes and self.sql is None:
                raise ValueError("sql: an approved answer case that a role may answer must have sql")
            # regenerate loads with allow_stale_rows: it is about to write the missing ones.
            stale_ok = bool(info.context and info.context.get("allow_stale_rows"))
            if len(self.alt_rows) != len(self.alt_sql) and not stale_ok:
                raise ValueError(
                    f"alt_rows: needs one entry per alt_sql ({len(self.alt_sql)} alt_sql, "
                    f"{len(self.alt_rows)} alt_rows); run regenerate"
                )
        return self

    @property
    def runs(self) -> bool:
        """Only approved cases run."""
        return self.status == "approved"

    @property
    def answerable(self) -> bool:
        return self.kind == "answer" and self.sql is not None

    def expected(self, role: str) -> Outcome:
        return self.outcome[role]


class EvalSuite(BaseModel):
    """The cases of one file. ``path``, ``name`` and ``header`` come from the loader and are
    not part of the file's schema (or of equality: two suites are equal when their cases are)."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    cases: list[EvalCase] = Field(default_factory=list)

    _path: Path | None = PrivateAttr(default=None)
    _header: str = PrivateAttr(default="")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EvalSuite):
            return NotImplemented
        return self.version == other.version and self.cases == other.cases

    __hash__ = None  # type: ignore[assignment]

    @property
    def path(self) -> Path | None:
        """The file the suite was loaded from (None for a suite built in code)."""
        return self._path

    @property
    def name(self) -> str | None:
        """The suite's name: its file's stem (``chinook`` for ``suites/chinook.yaml``)."""
        return self._path.stem if self._path is not None else None

    @property
    def header(self) -> str:
        """The leading comment block of the file it was loaded from ("" when none)."""
        return self._header

    @model_validator(mode="after")
    def _unique_ids(self) -> EvalSuite:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"id: case id {case.id!r} appears more than once")
            seen.add(case.id)
        return self

    def case(self, case_id: str) -> EvalCase:
        for case in self.cases:
            if case.id == case_id:
                return case
        raise KeyError(case_id)

    @property
    def approved(self) -> list[EvalCase]:
        return [c for c in self.cases if c.status == "approved"]


# ---------------------------------------------------------------- errors

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)



class SuiteError(UserError, ValueError):
    """A suite file is missing, unreadable or invalid. One line per problem, each naming the
    file, the line, the case and the field; ``problems`` holds the same lines as a list."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


# ---------------------------------------------------------------- loading

_TOP_KEYS = ("version", "cases")
_FIELD_PREFIX = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): (.*)", re.DOTALL)


def load_suite(path: str | Path, *, allow_stale_rows: bool = False) -> EvalSuite:
    """Read and check a suite file; every problem is reported (``SuiteError``), not just the first.

    ``allow_stale_rows`` accepts an approved case whose ``alt_rows`` do not match its
    ``alt_sql`` yet (an alternative was just added): regenerate loads that way."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read the suite: {exc}") from None
    return parse_suite(text, path, allow_stale_rows=allow_stale_rows)


def parse_suite(text: str, path: str | Path, *, allow_stale_rows: bool = False) -> EvalSuite:
    """Check the text of a suite file; ``path`` names it in messages and becomes ``suite.path``."""
    path = Path(path)
    # The loader allocates many small objects and frees none: the cyclic collector only costs time.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        try:
            data = load_yaml_text(text, path)
        except YamlFileError as exc:
            raise SuiteError(_name_the_case(str(exc), text, path, exc.__cause__)) from None
        suite = _validate(data, text, path, allow_stale_rows)
    finally:
        if gc_was_on:
            gc.enable()
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
    first_at: dict[str, int] = {}
    for index, raw in enumerate(raw_cases):
        label = _case_label(raw, index)
        if not isinstance(raw, dict):
            report(["cases", index], "case", f"must be a mapping of fields, not a {type(raw).__name__}", label)
            continue
        try:
            cases.append(EvalCase.model_validate(raw, context=context))
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
    return hashlib.sha256(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")).hexdigest()


# ---------------------------------------------------------------- writing

_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
# Plain (unquoted) scalars: a word character first, then a conservative set; never ':' or '#'.
# Inside flow collections ',[]{}' are indicators, so they force quotes there.
_PLAIN_FLOW = re.compile(r"\w[\w .;()/'\"+\-&%$@!?=<>*^~|\\`]*")
_PLAIN_BLOCK = re.compile(r"\w[\w .,;()\[\]{}/'\"+\-&%$@!?=<>*^~|\\`]*")
# What YAML cannot hold literally (outside the printable set, or read as a line break).
_NOT_PRINTABLE = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_NOT_LITERAL = re.compile("[^\t\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


def _plain_ok(text: str, flow: bool) -> bool:
    pattern = _PLAIN_FLOW if flow else _PLAIN_BLOCK
    return (
        pattern.fullmatch(text) is not None
        and not text.endswith(" ")
        and _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG
    )


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _quote(text: str) -> str:
    """A double-quoted YAML string: JSON's escapes, plus escapes for what YAML cannot hold."""
    return _NOT_PRINTABLE.sub(_escape, json.dumps(text, ensure_ascii=False))


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"  # YAML 1.1 reads 1e-05 as a string
        if exponent[0] not in "+-":
            exponent = "+" + exponent
        return f"{mantissa}e{exponent}"
    return text if "." in text else text + ".0"


def _scalar(value: Any, *, flow: bool, safe: bool = False) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, str):
        return value if not safe and _plain_ok(value, flow) else _quote(value)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"a suite cannot hold a {type(value).__name__} value ({value!r})")


def _flow(value: Any, safe: bool = False) -> str:
    if isinstance(value, dict):
        items = ", ".join(f"{_scalar(k, flow=True, safe=safe)}: {_flow(v, safe)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v, safe) for v in value) + "]"
    return _scalar(value, flow=True, safe=safe)


def _literal(text: str, indent: str) -> str | None:
    """``text`` as a ``|`` block (``|-`` without a final newline), or None when a block
    cannot hold it exactly."""
    if (
        not text
        or text.endswith("\n\n")
        or text[0] in " \t\n"
        or _NOT_LITERAL.search(text) is not None
    ):
        return None
    body, chomp = (text[:-1], "|") if text.endswith("\n") else (text, "|-")
    block = chomp + "".join("\n" + (indent + line if line else "") for line in body.split("\n"))
    try:
        same = yaml.load("k: " + block + "\n", Loader=_Loader) == {"k": text}  # a safe loader
    except yaml.YAMLError:
        same = False
    return block if same else None


def _sql(text: str, indent: str, safe: bool) -> str:
    block = None if safe else _literal(text, indent)
    return block if block is not None else _quote(text)


def _case_fields(case: EvalCase) -> dict[str, Any]:
    """The case as the file holds it, keys in the file's order, defaults left out."""
    data: dict[str, Any] = {
        "id": case.id,
        "question": case.question,
        "datasources": list(case.datasources),
        "status": case.status,
    }
    if case.kind != "answer":
        data["kind"] = case.kind
    data["origin"] = case.origin
    if case.difficulty is not None:
        data["difficulty"] = case.difficulty
    if case.tags:
        data["tags"] = list(case.tags)
    if case.paraphrase_group is not None:
        data["paraphrase_group"] = case.paraphrase_group
    data["outcome"] = dict(case.outcome)
    if case.tables:
        data["tables"] = list(case.tables)
    if case.columns:
        data["columns"] = list(case.columns)
    if case.sql is not None or case.order_matters:
        data["order_matters"] = case.order_matters
    if case.sql is not None:
        data["sql"] = case.sql
    if case.rows is not None:
        data["rows"] = case.rows
    if case.alt_sql:
        data["alt_sql"] = list(case.alt_sql)
    if case.alt_rows:
        data["alt_rows"] = case.alt_rows
    if case.plan is not None:
        data["plan"] = case.plan.to_data()
    return data


_FLOW_KEYS = frozenset({"datasources", "tags", "outcome", "tables", "columns"})


def _render_case(data: dict[str, Any], safe: bool) -> str:
    out: list[str] = []
    for key, value in data.items():
        lead = "- " if not out else "  "
        if key in _FLOW_KEYS:
            out.append(f"{lead}{key}: {_flow(value, safe)}")
        elif key == "sql":
            out.append(f"{lead}{key}: {_sql(value, '    ', safe)}")
        elif key == "rows":
            out.append(f"{lead}rows:" + (" []" if not value else ""))
            out.extend(f"  - {_flow(row, safe)}" for row in value)
        elif key == "alt_sql":
            out.append(f"{lead}alt_sql:")
            out.extend(f"  - {_sql(sql, '    ', safe)}" for sql in value)
        elif key == "alt_rows":
            out.append(f"{lead}alt_rows:")
            for rows in value:
                if not rows:
                    out.append("  - []")
                    continue
                out.extend(f"  {'- ' if i == 0 else '  '}- {_flow(row, safe)}" for i, row in enumerate(rows))
        elif key == "plan":
            out.append(f"{lead}plan:")
            for part, part_value in value.items():
                if isinstance(part_value, list) and part_value:
                    out.append(f"    {part}:")
                    out.extend(f"    - {_flow(item, safe)}" for item in part_value)
                else:
                    out.append(f"    {part}: {_flow(part_value, safe)}")
        else:
            out.append(f"{lead}{key}: {_scalar(value, flow=False, safe=safe)}")
    return "\n".join(out) + "\n"


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types (``1``, ``1.0`` and ``True`` all differ; NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            _same(ka, kb) and _same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _normalise_header(header: str) -> str:
    """Comment lines kept as given; other non-blank lines become comments; ends with a newline."""
    if not header:
        return ""
    lines = header.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    fixed = [line if not line.strip() or line.lstrip().startswith("#") else f"# {line}" for line in lines]
    return "\n".join(fixed) + "\n"


def dump_suite(suite: EvalSuite, *, header: str | None = None) -> str:
    """The suite's file text in the canonical layout (see the module docstring).

    ``header`` defaults to the comment block of the file the suite was loaded from. The
    text is loaded back and compared value by value and type by type; a case that would
    not read back the same is written again with every string double-quoted, and a case
    that still does not is an error rather than a silently different file."""
    head = _normalise_header(suite.header if header is None else header)
    fields = [_case_fields(case) for case in suite.cases]
    try:
        rendered = [_render_case(data, safe=False) for data in fields]
    except TypeError as exc:
        raise SuiteError(f"{suite.path or 'suite'}: {exc}") from None
    for _attempt in range(2):
        text = _join(head, rendered)
        loaded = yaml.load(text, Loader=_Loader)  # a safe loader
        read_back = loaded.get("cases") or []
        wrong = [i for i, data in enumerate(fields) if i >= len(read_back) or not _same(read_back[i], data)]
        if not wrong:
            return text
        for i in wrong:
            rendered[i] = _render_case(fields[i], safe=True)
    names = ", ".join(fields[i]["id"] for i in wrong)
    raise SuiteError(f"{suite.path or 'suite'}: cannot write case(s) {names} so that they read back the same")


def _join(head: str, rendered: list[str]) -> str:
    if not rendered:
        return f"{head}version: 1\ncases: []\n"
    return f"{head}version: 1\ncases:\n" + "".join("\n" + case for case in rendered)


def write_suite(suite: EvalSuite, path: str | Path, *, header: str | None = None) -> Path:
    """Write ``suite`` to ``path`` atomically, in the canonical layout.

    The leading comment block is ``header`` when given, else the one of the file already
    at ``path``, else the one of the file the suite was loaded from."""
    path = Path(path)
    if header is None:
        try:
            header = leading_comments(path.read_text(encoding="utf-8-sig"))
        except FileNotFoundError:
            header = suite.header
        except (OSError, UnicodeDecodeError):
            header = suite.header
    text = dump_suite(suite, header=header)
    atomic_write(path, text.encode("utf-8"))
    return path


