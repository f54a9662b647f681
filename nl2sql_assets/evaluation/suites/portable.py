"""Making a suite file read the same in every YAML reader, in place.

A suite written before the writer's current quoting rules (or by hand) may hold plain scalars that
one reader takes differently from another: ``{value: Any news?}`` stops PyYAML's pure-Python
scanner, ``1e3`` is a string to YAML 1.1 and a number to 1.2, ``010`` is 8 to one and 10 to the
other. ``portable_text`` rewrites exactly those scalars, in the file's text, the way the writer
writes them now (quoted strings, canonical numbers), keeping every comment, every other byte
and, as our loader reads it, every value. Run on its own output it changes nothing.
"""

from __future__ import annotations

import re

import yaml

from nl2sql_assets.evaluation.suites.patch import PatchError, _Lines
from nl2sql_assets.evaluation.suites.writer import _RESOLVER, _STR_TAG, _plain_ok, _quote, _scalar
from nl2sql_assets.yamlio import no_cyclic_gc, safe_load

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FLOW_OPEN = (yaml.FlowMappingStartToken, yaml.FlowSequenceStartToken)
_FLOW_CLOSE = (yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)

# Plain spellings of non-string values that YAML 1.1 and 1.2 readers agree on.
_PORTABLE = {
    "tag:yaml.org,2002:int": re.compile(r"[-+]?(?:0|[1-9][0-9]*)"),
    "tag:yaml.org,2002:float": re.compile(
        r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"),
    "tag:yaml.org,2002:bool": re.compile(r"true|True|TRUE|false|False|FALSE"),
    "tag:yaml.org,2002:null": re.compile(r"|~|null|Null|NULL"),
    "tag:yaml.org,2002:timestamp": re.compile(r".*"),  # a date or a time is one in both versions
}


def _rewrite(value: str, flow: bool) -> str | None:
    """The writer's spelling of the plain scalar ``value``, or None when it already reads the same
    everywhere."""
    tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    if tag == _STR_TAG:
        return None if _plain_ok(value, flow) else _quote(value)
    portable = _PORTABLE.get(tag)
    if portable is not None and portable.fullmatch(value):
        return None
    return _scalar(safe_load(value), flow=flow)


def portable_text(text: str) -> tuple[str, int]:
    """``text`` with each plain scalar that some YAML reader could misread written as the writer
    writes it, and how many were; anything else, comments included, is left byte for byte.
    Raises ``PatchError`` when the rewrite would change a value (it never should)."""
    lines = _Lines(text)
    edits: list[tuple[int, int, str]] = []
    depth = 0
    with no_cyclic_gc():
        for token in yaml.scan(text, Loader=_Loader):
            if isinstance(token, _FLOW_OPEN):
                depth += 1
            elif isinstance(token, _FLOW_CLOSE):
                depth -= 1
            elif isinstance(token, yaml.ScalarToken) and token.plain:
                new = _rewrite(token.value, depth > 0)
                if new is not None:
                    start, end = token.start_mark, token.end_mark
                    edits.append((lines.offset(start.line, start.column), lines.offset(end.line, end.column), new))
    if not edits:
        return text, 0
    parts, last = [], 0
    for start, end, new in edits:
        parts += [text[last:start], new]
        last = end
    out = "".join([*parts, text[last:]])
    if safe_load(out) != safe_load(text):
        raise PatchError("quoting the file's scalars would change its values")
    return out, len(edits)
