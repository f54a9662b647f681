"""Parsed suites kept by file digest: a suite of 10,000 cases is YAML-parsed once, then read back
from compact JSON (several times faster than the C YAML loader).

An entry is keyed by the file's digest (``suite_digest``: the same bytes read the same), the
suite model's JSON schema (a model change never reads an old entry) and ``allow_stale_rows``.
Only suites that passed every check are stored; a hit validates each case again (cheap, and
nothing unchecked ever reaches a run). A damaged or unreadable entry is a miss; a cache that
cannot be written is skipped (the suite still loads).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nl2sql_assets.evaluation.suites.model import EvalCase, EvalSuite
from nl2sql_assets.redact import get_logger
from nl2sql_assets.yamlio import no_cyclic_gc

log = get_logger(__name__)

#: Bumped when the entry layout changes.
FORMAT = 1


@functools.cache
def model_key() -> str:
    """What a stored entry depends on besides the file: the layout and the suite model's schema."""
    schema = json.dumps(EvalSuite.model_json_schema(), sort_keys=True)
    return hashlib.sha256(f"{FORMAT}\n{schema}".encode()).hexdigest()[:16]


def entry_path(folder: Path, digest: str, allow_stale_rows: bool) -> Path:
    return folder / f"{digest}-{model_key()}{'-stale' if allow_stale_rows else ''}.json"


def read_entry(folder: Path, digest: str, allow_stale_rows: bool) -> tuple[list[EvalCase], str] | None:
    """The cases and header comments stored for that digest, or None (a miss)."""
    path = entry_path(folder, digest, allow_stale_rows)
    with no_cyclic_gc():
        return _read(path, digest, allow_stale_rows)


def _read(path: Path, digest: str, allow_stale_rows: bool) -> tuple[list[EvalCase], str] | None:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("suite cache %s unreadable (%s): parsing the suite again", path, exc)
        return None
    try:
        if data.get("format") != FORMAT or data.get("digest") != digest:
            return None
        context = {"allow_stale_rows": allow_stale_rows}
        cases = [EvalCase.model_validate(raw, context=context) for raw in data["cases"]]
        return cases, str(data["header"])
    except (ValidationError, KeyError, TypeError, AttributeError) as exc:
        log.warning("suite cache %s does not validate (%s): parsing the suite again", path, type(exc).__name__)
        return None


def write_entry(folder: Path, digest: str, allow_stale_rows: bool, suite: EvalSuite, header: str) -> None:
    """Store a checked suite; a folder that cannot be written only costs the next load its speed."""
    from nl2sql_assets.atomic import WriteFailed, atomic_write

    with no_cyclic_gc():
        cases: list[Any] = [case.model_dump(mode="json") for case in suite.cases]
        blob = json.dumps({"format": FORMAT, "digest": digest, "header": header, "cases": cases},
                          separators=(",", ":"), ensure_ascii=False)
    try:
        atomic_write(entry_path(folder, digest, allow_stale_rows), blob)
    except (OSError, WriteFailed) as exc:
        log.warning("suite cache not written in %s: %s", folder, exc)
