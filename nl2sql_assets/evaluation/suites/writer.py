"""Writing a suite file, beside its reader: ``write_suite`` and ``dump_suite``.

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

- Keys come in the order above, with ``context`` (a benchmark's evidence) after ``question``,
  ``domain`` after ``datasources``, a probe's ``rule`` after ``outcome``, a follow-up's
  ``turns`` and a case's ``candidates`` and ``candidate_plans`` after ``plan`` (each turn:
  question, a SQL block, a plan one key per line), then a case's own ``policy`` and
  ``pending`` (imported fields not run yet), and an imported benchmark case's ``benchmark``
  (one flow mapping) last; ``kind`` is written only when it is not ``answer``;
  ``domain``, ``difficulty``, ``paraphrase_group``, ``rule``, ``sql``, ``rows``, ``plan``
  and ``policy`` only when set; lists and maps (``tags``, ``tables``, ``columns``,
  ``alt_sql``, ``alt_rows``, ``pending``) only when not empty; ``order_matters`` when an
  answer or routing case has ``sql`` or the flag is on. ``id``, ``question``,
  ``datasources``, ``status``, ``origin`` and ``outcome`` are always written.
- Short lists and the outcome map are flow collections; each row is one flow mapping on
  its own line; SQL is a literal block; a plan, a policy and pending fields are one line per
  top-level key (a block list of flow items for list-valued keys).
- Scalars are plain only when the YAML resolver reads them back as the same string;
  anything else (``yes``, ``null``, ``'2009'``, ``2009-01-01``, text with ``:`` or ``#``)
  is double-quoted with JSON-style escapes. Floats use ``repr`` (exact), with ``.0``
  added where YAML 1.1 needs a dot. The writer loads its own output back and refuses
  to write a file that would not read back as the same values and types.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.evaluation.suites.loader import SuiteError, leading_comments
from nl2sql_assets.evaluation.suites.model import EvalCase, EvalSuite
from nl2sql_assets.forking import fork_is_safe, process_pool
from nl2sql_assets.yamlio import safe_load

_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
# Plain (unquoted) scalars: a word character first, then a conservative set; never ':' or '#'.
# Inside flow collections ',[]{}' are indicators and '?' stops PyYAML's pure-Python scanner
# (libyaml and ruamel.yaml read it), so they force quotes there.
_PLAIN_FLOW = re.compile(r"\w[\w .;()/'\"+\-&%$@!=<>*^~|\\`]*")
_PLAIN_BLOCK = re.compile(r"\w[\w .,;()\[\]{}/'\"+\-&%$@!?=<>*^~|\\`]*")
# What some YAML 1.1 or 1.2 reader takes for something other than a string, beyond what PyYAML's
# resolver says: the 1.1 spec's booleans (y, n, on, off...), 1.2's nulls, and anything shaped like
# a number in either version (1e3 and 0o17 are numbers in 1.2, 1_000 and 0b11 in 1.1; 1.2.3 is
# quoted to be safe; sexagesimal 1:30 has a ':' and is quoted anyway). Quoting a string is always correct; leaving one plain must never be wrong.
_READS_AS_OTHER = re.compile(
    r"(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
    r"|null|Null|NULL|~|=|<<"
    r"|[-+]?[0-9._]*[0-9][0-9._]*(?:[eE][-+]?[0-9]+)?"  # ints and floats of either version, 1.2.3
    r"|[-+]?0[bBoOxX][0-9a-fA-F_]+"  # binary, octal, hex
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))"
)
# What YAML cannot hold literally (outside the printable set, or read as a line break).
_NOT_PRINTABLE = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_NOT_LITERAL = re.compile("[^\t\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


@functools.lru_cache(maxsize=65536)  # column names and values repeat on every row
def _plain_ok(text: str, flow: bool) -> bool:
    pattern = _PLAIN_FLOW if flow else _PLAIN_BLOCK
    return (
        pattern.fullmatch(text) is not None
        and not text.endswith(" ")
        and _READS_AS_OTHER.fullmatch(text) is None
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
    # Not loaded back here, one block at a time: dump_suite reads the whole text back and writes
    # any case that does not read back the same again with every string quoted.
    return chomp + "".join("\n" + (indent + line if line else "") for line in body.split("\n"))


def _sql(text: str, indent: str, safe: bool) -> str:
    block = None if safe else _literal(text, indent)
    return block if block is not None else _quote(text)


def _case_fields(case: EvalCase) -> dict[str, Any]:
    """The case as the file holds it, keys in the file's order, defaults left out."""
    data: dict[str, Any] = {
        "id": case.id,
        "question": case.question,
    }
    if case.context is not None:
        data["context"] = case.context
    data["datasources"] = list(case.datasources)
    if case.domain is not None:
        data["domain"] = case.domain
    data["status"] = case.status
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
    if case.rule is not None:
        data["rule"] = case.rule
    if case.tables:
        data["tables"] = list(case.tables)
    if case.columns:
        data["columns"] = list(case.columns)
    if (case.sql is not None and case.kind != "probe") or case.order_matters:
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
    if case.follows is not None:
        data["follows"] = case.follows
    if case.turns:
        data["turns"] = [
            {k: (v.to_data() if k == "plan" else v) for k, v in
             (("question", t.question), ("sql", t.sql), ("plan", t.plan)) if v is not None}
            for t in case.turns
        ]
    if case.candidates is not None:
        data["candidates"] = case.candidates
    if case.candidate_plans:
        data["candidate_plans"] = [p.to_data() for p in case.candidate_plans]
    if case.policy is not None:
        data["policy"] = case.policy.model_dump(mode="json", exclude_defaults=True)
    if case.pending:
        data["pending"] = dict(case.pending)
    if case.benchmark is not None:
        data["benchmark"] = case.benchmark.model_dump(mode="json", exclude_none=True)
    return data


def render_rows_block(key: str, value: list[Any], indent: str, safe: bool = False) -> str:
    """``rows:`` (one flow mapping per row) or ``alt_rows:`` (a list of such lists) as the lines
    of a case whose keys sit at ``indent``; no final newline. regenerate patches these alone."""
    out = [f"{indent}{key}:" + (" []" if not value else "")]
    if key == "rows":
        out.extend(f"{indent}- {_flow(row, safe)}" for row in value)
    else:
        for rows in value:
            if not rows:
                out.append(f"{indent}- []")
                continue
            out.extend(f"{indent}{'- ' if i == 0 else '  '}- {_flow(row, safe)}" for i, row in enumerate(rows))
    return "\n".join(out)


_FLOW_KEYS = frozenset({"datasources", "tags", "outcome", "tables", "columns", "benchmark"})


def _mapping_lines(value: dict[str, Any], indent: str, first: str, safe: bool) -> list[str]:
    """A plan-like mapping, one line per top-level key (lists as block lists of flow items);
    the first line starts with ``first`` (``"- "`` for an item of a list) instead of ``indent``."""
    out: list[str] = []
    for part, part_value in value.items():
        lead = first if not out else indent
        if isinstance(part_value, list) and part_value:
            out.append(f"{lead}{part}:")
            out.extend(f"{indent}- {_flow(item, safe)}" for item in part_value)
        else:
            out.append(f"{lead}{part}: {_flow(part_value, safe)}")
    return out


def _turn_lines(turn: dict[str, Any], safe: bool) -> list[str]:
    """An earlier turn as an item of ``turns``: question, a SQL block, a plan one key per line."""
    out: list[str] = []
    for key, value in turn.items():
        lead = "  - " if not out else "    "
        if key == "sql":
            out.append(f"{lead}sql: {_sql(value, '      ', safe)}")
        elif key == "plan":
            out.append(f"{lead}plan:")
            out.extend(_mapping_lines(value, "      ", "      ", safe))
        else:
            out.append(f"{lead}{key}: {_scalar(value, flow=False, safe=safe)}")
    return out


def _render_case(data: dict[str, Any], safe: bool) -> str:
    out: list[str] = []
    for key, value in data.items():
        lead = "- " if not out else "  "
        if key in _FLOW_KEYS:
            out.append(f"{lead}{key}: {_flow(value, safe)}")
        elif key == "sql":
            out.append(f"{lead}{key}: {_sql(value, '    ', safe)}")
        elif key in ("rows", "alt_rows"):
            out.append(lead + render_rows_block(key, value, "  ", safe)[2:])
        elif key == "alt_sql":
            out.append(f"{lead}alt_sql:")
            out.extend(f"  - {_sql(sql, '    ', safe)}" for sql in value)
        elif key == "turns":
            out.append(f"{lead}turns:")
            for turn in value:
                out.extend(_turn_lines(turn, safe))
        elif key == "candidate_plans":
            out.append(f"{lead}candidate_plans:")
            for plan in value:
                out.extend(_mapping_lines(plan, "    ", "  - ", safe))
        elif key in ("plan", "policy", "pending"):
            out.append(f"{lead}{key}:")
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
    wrong = _unfaithful(rendered, fields, range(len(fields)))
    if wrong:
        for i in wrong:
            rendered[i] = _render_case(fields[i], safe=True)
        wrong = _unfaithful(rendered, fields, wrong)
    if wrong:
        names = ", ".join(fields[i]["id"] for i in wrong)
        raise SuiteError(f"{suite.path or 'suite'}: cannot write case(s) {names} so that they read back the same")
    text = _join(head, rendered)
    if len(safe_load(text[:len(head)] + "version: 1\ncases: []\n") or {}) != 2:  # the header is comments only
        raise SuiteError(f"{suite.path or 'suite'}: the header is not a block of comments")
    return text


#: from this many cases on, reading the rendered cases back is split over the machine's cores
PARALLEL_READ_BACK = 1500
_PENDING: tuple[list[str], list[dict[str, Any]]] = ([], [])


def _unfaithful(rendered: list[str], fields: list[dict[str, Any]], which: Sequence[int]) -> list[int]:
    """The indexes in ``which`` whose rendered case does not read back as its fields. Each case is
    a block list item of its own, so cases can be read back in chunks, one per core."""
    which = list(which)
    workers = min(os.cpu_count() or 1, 4)
    if len(which) < PARALLEL_READ_BACK or workers < 2 or not fork_is_safe():
        return _check_chunk(rendered, fields, which)
    import multiprocessing

    global _PENDING
    _PENDING = (rendered, fields)  # forked workers find them in the memory they start with
    size = -(-len(which) // workers)
    chunks = [which[i:i + size] for i in range(0, len(which), size)]
    try:
        with process_pool(len(chunks), context=multiprocessing.get_context("fork")) as pool:
            return sorted(i for part in pool.map(_check_pending, chunks) for i in part)
    finally:
        _PENDING = ([], [])


def _check_pending(which: list[int]) -> list[int]:
    return _check_chunk(_PENDING[0], _PENDING[1], which)


def _check_chunk(rendered: list[str], fields: list[dict[str, Any]], which: list[int]) -> list[int]:
    if not which:
        return []
    loaded = safe_load("cases:\n" + "".join("\n" + rendered[i] for i in which)) or {}
    read_back = loaded.get("cases") or []
    return [i for n, i in enumerate(which) if n >= len(read_back) or not _same(read_back[n], fields[i])]


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
