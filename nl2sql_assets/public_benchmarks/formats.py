"""Reading a public benchmark's folder (Spider, BIRD): its questions, its schema list, its databases.

Each format is one ``BenchmarkFormat`` in ``FORMATS``: which file holds the questions, which key
holds the gold SQL and the evidence, where the SQLite files sit. Both benchmarks ship SQLite
only (``<databases>/<db_id>/<db_id>.sqlite``), so that is the one database layout read here.
Nothing is downloaded: the user points at a folder they already have. Every problem names the
file, the entry and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nl2sql_assets.config import DATASOURCE_ID
from nl2sql_assets.errors import UserError

BenchmarkName = Literal["spider", "bird"]


class BenchmarkFolderError(UserError, ValueError):
    """A benchmark folder that cannot be read; one line per problem, each naming the file, the
    entry and the field."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


@dataclass(frozen=True)
class BenchmarkFormat:
    """Where one benchmark keeps things; ``{split}`` in a name stands for the split (``dev``)."""

    name: BenchmarkName
    questions: str  # the default questions file
    sql_key: str  # the entry key holding the gold SQL
    evidence_key: str | None  # the entry key holding the evidence (BIRD's hints), if the format has one
    databases: tuple[str, ...]  # candidate folders of <db_id>/<db_id>.sqlite, first found wins
    tables: tuple[str, ...]  # candidate schema lists (tables.json); the first is required when ``tables_required``
    tables_required: bool


FORMATS: dict[str, BenchmarkFormat] = {
    # Spider's test release keeps its own test_database/ and test_tables.json beside dev's.
    "spider": BenchmarkFormat(name="spider", questions="dev.json", sql_key="query", evidence_key=None,
                              databases=("{split}_database", "database"), tables=("{split}_tables.json", "tables.json"),
                              tables_required=True),
    "bird": BenchmarkFormat(name="bird", questions="dev.json", sql_key="SQL", evidence_key="evidence",
                            databases=("{split}_databases", "dev_databases", "databases"),
                            tables=("{split}_tables.json", "tables.json"), tables_required=False),
}


class BenchmarkEntry(BaseModel):
    """One question as the importer needs it. The benchmarks' files carry more per entry (token
    lists, parsed SQL) that nothing here uses, so unknown keys are ignored rather than refused."""

    model_config = ConfigDict(extra="ignore")

    db_id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    sql: str = Field(min_length=1)
    evidence: str | None = None
    difficulty: str | None = None
    question_id: int | None = None


@dataclass(frozen=True)
class BenchmarkFolder:
    """A benchmark folder, read and checked: its questions in file order and each database's file."""

    format: BenchmarkFormat
    root: Path
    questions_file: Path
    split: str
    entries: list[BenchmarkEntry]
    databases: dict[str, Path]  # db_id -> the SQLite file, for every db_id the entries name


def read_folder(name: str, root: str | Path, *, questions: str | None = None, split: str | None = None,
                limit: int | None = None) -> BenchmarkFolder:
    """Read a Spider- or BIRD-format folder; ``questions`` is the questions file (relative to the
    folder; default ``dev.json``), ``split`` defaults to its stem, ``limit`` keeps the first N."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise BenchmarkFolderError(f"unknown benchmark {name!r}; known: {', '.join(FORMATS)}")
    root = Path(root)
    if not root.is_dir():
        raise BenchmarkFolderError(f"{root}: not a folder (point at the {name} folder you downloaded)")
    questions_file = root / (questions or fmt.questions)
    split = split or questions_file.stem
    entries = _read_entries(fmt, questions_file, limit)
    known = _read_tables(fmt, root, split)
    db_root = next((root / d.format(split=split) for d in fmt.databases if (root / d.format(split=split)).is_dir()),
                   None)
    if db_root is None:
        wanted = " or ".join(d.format(split=split) for d in dict.fromkeys(fmt.databases))
        raise BenchmarkFolderError(f"{root}: no database folder ({wanted}/<db_id>/<db_id>.sqlite)")
    problems: list[str] = []
    databases: dict[str, Path] = {}
    for index, entry in enumerate(entries):
        if entry.db_id in databases:
            continue
        where = f"{questions_file}: entry {index}{_qid(entry)}: field 'db_id'"
        if not DATASOURCE_ID.match(entry.db_id):
            problems.append(f"{where}: {entry.db_id!r} cannot name a datasource (a letter first, then letters, "
                            "digits, '_' and '-')")
            continue
        if known is not None and entry.db_id not in known[1]:
            problems.append(f"{where}: database {entry.db_id!r} is not listed in {known[0]}")
            continue
        path = db_root / entry.db_id / f"{entry.db_id}.sqlite"
        if not path.is_file():
            problems.append(f"{where}: no database file {path}")
            continue
        databases[entry.db_id] = path
    if problems:
        raise BenchmarkFolderError("\n".join(problems), problems)
    return BenchmarkFolder(format=fmt, root=root, questions_file=questions_file, split=split, entries=entries,
                           databases=databases)


def _qid(entry: BenchmarkEntry) -> str:
    return f" (question_id {entry.question_id})" if entry.question_id is not None else ""


def _load_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BenchmarkFolderError(f"{path}: {what} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkFolderError(f"{path}: cannot read the {what}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchmarkFolderError(f"{path}, line {exc.lineno}, column {exc.colno}: not JSON: {exc.msg}") from None


def _read_entries(fmt: BenchmarkFormat, path: Path, limit: int | None) -> list[BenchmarkEntry]:
    data = _load_json(path, "questions file")
    if not isinstance(data, list):
        raise BenchmarkFolderError(f"{path}: the questions file is a JSON list of entries, not a "
                                   f"{type(data).__name__}")
    if limit is not None:
        data = data[:limit]
    # The format's own key names, for messages: a missing 'query' is reported as 'query'.
    names = {"sql": fmt.sql_key, "evidence": fmt.evidence_key or "evidence"}
    entries: list[BenchmarkEntry] = []
    problems: list[str] = []
    for index, raw in enumerate(data):
        if not isinstance(raw, dict):
            problems.append(f"{path}: entry {index}: an entry is a JSON object, not a {type(raw).__name__}")
            continue
        fields = {k: raw[k] for k in ("db_id", "question", "difficulty", "question_id") if k in raw}
        if fmt.sql_key in raw:
            fields["sql"] = raw[fmt.sql_key]
        if fmt.evidence_key and raw.get(fmt.evidence_key) not in (None, ""):
            fields["evidence"] = raw[fmt.evidence_key]
        try:
            entries.append(BenchmarkEntry.model_validate(fields))
        except ValidationError as exc:
            qid = f" (question_id {raw['question_id']})" if "question_id" in raw else ""
            for err in exc.errors(include_url=False):
                field = str(err["loc"][0]) if err["loc"] else "entry"
                message = "missing" if err["type"] == "missing" else err["msg"][:1].lower() + err["msg"][1:]
                problems.append(f"{path}: entry {index}{qid}: field {names.get(field, field)!r}: {message}")
    if problems:
        raise BenchmarkFolderError("\n".join(problems), problems)
    return entries


def _read_tables(fmt: BenchmarkFormat, root: Path, split: str) -> tuple[Path, set[str]] | None:
    """The schema list's file and the db_ids it lists; None when the format does not require one
    and the folder has none."""
    candidates = [root / t.format(split=split) for t in dict.fromkeys(fmt.tables)]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        if fmt.tables_required:
            names = " or ".join(p.name for p in candidates)
            raise BenchmarkFolderError(f"{root}: the schema list ({names}) not found")
        return None
    data = _load_json(path, "schema list")
    if not isinstance(data, list):
        raise BenchmarkFolderError(f"{path}: the schema list is a JSON list of databases, not a {type(data).__name__}")
    ids: set[str] = set()
    problems: list[str] = []
    for index, raw in enumerate(data):
        db_id = raw.get("db_id") if isinstance(raw, dict) else None
        if not isinstance(db_id, str) or not db_id:
            problems.append(f"{path}: entry {index}: field 'db_id': missing or not a string")
            continue
        ids.add(db_id)
    if problems:
        raise BenchmarkFolderError("\n".join(problems), problems)
    return path, ids
