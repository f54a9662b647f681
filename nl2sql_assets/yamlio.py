"""YAML reading with the C loader, and error locations a person can find in the file.

Loading uses libyaml when it is there (about 7x faster than the pure-Python loader);
line numbers are looked up only when something went wrong, by composing the node tree.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from nl2sql_assets.errors import UserError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class YamlFileError(UserError, ValueError):
    """A YAML file could not be parsed; the message names the file and the line."""


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Many small objects made and none freed (a YAML load): the cyclic collector would only cost
    time, and more the more is already alive (3-5x on a large suite)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def load_yaml_text(text: str, source: str | Path) -> Any:
    """Parse ``text``; a syntax error names ``source`` and the line the parser gives."""
    try:
        with no_cyclic_gc():
            return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise YamlFileError(f"{source}{where}: {problem}") from exc
    except yaml.YAMLError as exc:
        raise YamlFileError(f"{source}: {exc}") from exc


def safe_load(text: str) -> Any:
    """``text`` read by the safe (C) loader; a syntax error raises yaml's own error."""
    with no_cyclic_gc():
        return yaml.load(text, Loader=_Loader)


def dump_yaml(data: Any, **kwargs: Any) -> str:
    kwargs.setdefault("sort_keys", False)
    kwargs.setdefault("allow_unicode", True)
    kwargs.setdefault("default_flow_style", False)
    return yaml.dump(data, Dumper=_Dumper, **kwargs)


class YamlLocator:
    """Line numbers of paths (mapping keys and list indexes) in one YAML text. The node tree
    is composed once, and only when a problem first asks for a line."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._root: yaml.Node | None = None
        self._composed = False

    def line(self, path: Sequence[str | int]) -> int | None:
        """The 1-based line of the node at ``path``, or of its nearest parent that exists."""
        if not self._composed:
            self._composed = True
            try:
                self._root = yaml.compose(self._text, Loader=_Loader)
            except yaml.YAMLError:
                return None
        node = self._root
        best = node.start_mark.line + 1 if node is not None else None
        for step in path:
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for key_node, value_node in node.value:
                    if key_node.value == str(step):
                        # Point at the key: that is where a reader looks for a field.
                        best = key_node.start_mark.line + 1
                        nxt = value_node
                        break
                if nxt is None:
                    return best
                node = nxt
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                if step >= len(node.value):
                    return best
                node = node.value[step]
                best = node.start_mark.line + 1
            else:
                return best
        return best


def line_of(text: str, path: Sequence[str | int]) -> int | None:
    """The 1-based line of the node at ``path`` in ``text`` (see YamlLocator)."""
    return YamlLocator(text).line(path)
