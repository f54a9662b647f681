"""Rewriting only the ``rows`` and ``alt_rows`` of a suite file, in its text.

regenerate changes nothing but those two fields, so it edits nothing else: the YAML parser's node
marks locate each case's ``rows:`` (and ``alt_rows:``) block, and only the blocks whose values
change are replaced (or inserted after ``sql`` / ``alt_sql`` when a case has none yet). Comments
between cases, one-line SQL, quoting and key order stay exactly as the person wrote them; a case
whose rows did not change is byte for byte what it was. New blocks are written the way
``write_suite`` writes them (one flow mapping per row).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import yaml

from nl2sql_assets.evaluation.suites.writer import render_rows_block
from nl2sql_assets.yamlio import no_cyclic_gc

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class PatchError(ValueError):
    """The text could not be patched in place (the caller writes the canonical layout instead)."""


@dataclass(frozen=True)
class _Edit:
    start: int  # character offsets into the text
    end: int
    text: str


class _Lines:
    """Character offsets of line starts, to turn (line, column) marks into offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def offset(self, line: int, column: int) -> int:
        if line >= len(self.starts):
            return len(self.text)
        return self.starts[line] + column

    def line_end(self, line: int) -> int:
        """The offset of the newline that ends ``line`` (or the end of the text)."""
        if line + 1 < len(self.starts):
            return self.starts[line + 1] - 1
        return len(self.text)


def _last_line(node: yaml.Node) -> int:
    """The 0-based line on which the node's own content ends (block scalars' trailing blank lines,
    comments after a block collection, and the next key are not part of it)."""
    if isinstance(node, yaml.ScalarNode):
        if node.style in ("|", ">"):
            body = node.value.rstrip("\n")
            return node.start_mark.line + (body.count("\n") + 1 if body else 0)
        end = node.end_mark
        return end.line if end.column > 0 else max(end.line - 1, node.start_mark.line)
    if node.flow_style:
        return node.end_mark.line
    children: list[yaml.Node] = (
        [v for _, v in node.value] if isinstance(node, yaml.MappingNode) else list(node.value)
    )
    if not children:
        return node.end_mark.line
    return _last_line(children[-1])


def _key(mapping: yaml.MappingNode, name: str) -> tuple[yaml.Node, yaml.Node] | None:
    for key, value in mapping.value:
        if isinstance(key, yaml.ScalarNode) and key.value == name:
            return key, value
    return None


def _block(lines: _Lines, mapping: yaml.MappingNode, name: str, value: list[Any], after: str) -> _Edit | None:
    """The edit that makes ``name`` hold ``value`` in this case's mapping: replace its block, or
    insert one after the ``after`` key's value. An empty ``value`` removes the block."""
    found = _key(mapping, name)
    if found is not None:
        key, node = found
        column = key.start_mark.column
        start = lines.offset(key.start_mark.line, column)
        end = lines.line_end(_last_line(node))
        if not value and name == "alt_rows":  # nothing to hold: drop the key and its lines
            start = lines.starts[key.start_mark.line]
            return _Edit(max(start - 1, 0), end, "")
        return _Edit(start, end, render_rows_block(name, value, " " * column).lstrip(" "))
    if not value and name == "alt_rows":
        return None
    anchor = _key(mapping, after)
    if anchor is None:
        raise PatchError(f"no {after!r} to place {name!r} after")
    key, node = anchor
    at = lines.line_end(_last_line(node))
    return _Edit(at, at, "\n" + render_rows_block(name, value, " " * key.start_mark.column))


def patch_rows(text: str, updates: dict[int, dict[str, list[Any]]]) -> str:
    """``text`` with, for each case index in ``updates``, its ``rows`` and/or ``alt_rows``
    replaced by the given values. Raises PatchError when the text's shape is not a suite's."""
    if not updates:
        return text
    try:
        with no_cyclic_gc():
            root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise PatchError(f"cannot parse: {exc}") from exc
    if not isinstance(root, yaml.MappingNode):
        raise PatchError("not a mapping")
    found = _key(root, "cases")
    if found is None or not isinstance(found[1], yaml.SequenceNode) or found[1].flow_style:
        raise PatchError("no block list of cases")
    cases = found[1].value
    lines = _Lines(text)
    edits: list[_Edit] = []
    for index, fields in updates.items():
        if index >= len(cases) or not isinstance(cases[index], yaml.MappingNode) or cases[index].flow_style:
            raise PatchError(f"case {index} is not a block mapping")
        mapping = cases[index]
        for name, value in fields.items():
            after = "sql" if name == "rows" else "alt_sql"
            edit = _block(lines, mapping, name, value, after)
            if edit is not None:
                edits.append(edit)
    edits.sort(key=lambda e: (e.start, e.end))
    for first, second in itertools.pairwise(edits):
        if second.start < first.end:
            raise PatchError("overlapping edits")
    pieces, last = [], 0  # one pass over the text: linear in its size, whatever the edits
    for edit in edits:
        pieces += [text[last:edit.start], edit.text]
        last = edit.end
    pieces.append(text[last:])
    return "".join(pieces)
