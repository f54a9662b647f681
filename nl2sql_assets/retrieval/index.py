"""The schema index: a datasource's schema as short texts ("entries") and their vectors.

Entries, one per:

- table: ``table Album: columns AlbumId, Title, ArtistId``
- column: ``Album.Title (NVARCHAR(160)) in table Album``
- relationship (foreign key): ``Album.ArtistId references Artist.ArtistId``
- the datasource's description, and each of its sample questions (routing reads these).

An index is stored as one JSON file per datasource (vectors as base64 float32), keyed by the
schema fingerprint, the embedder's identity and a digest of the entry texts. An index whose
key still matches is loaded, never embedded again; anything else is rebuilt.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.redact import get_logger

if TYPE_CHECKING:
    import numpy as np

    from nl2sql_assets.config import ProjectConfig
    from nl2sql_assets.retrieval.embedder import Embedder

log = get_logger(__name__)  # redacting: see nl2sql_assets.redact

INDEX_FORMAT = 1
EntryKind = Literal["table", "column", "relationship", "datasource", "question"]
SCHEMA_KINDS: tuple[EntryKind, ...] = ("table", "column", "relationship")


@dataclass(frozen=True)
class Entry:
    """One embedded text. ``tables`` are the tables it belongs to (two for a relationship) and
    ``columns`` the ``Table.Column`` names it stands for (a relationship's key columns)."""

    kind: EntryKind
    text: str
    tables: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()

    def to_data(self) -> list[Any]:
        return [self.kind, self.text, list(self.tables), list(self.columns)]

    @classmethod
    def from_data(cls, data: Any) -> Entry:
        kind, text, tables, columns = data
        if kind not in ("table", "column", "relationship", "datasource", "question"):
            raise ValueError(f"unknown entry kind {kind!r}")
        return cls(kind, str(text), tuple(map(str, tables)), tuple(map(str, columns)))


def schema_entries(
    snapshot: SchemaSnapshot, description: str = "", sample_questions: Sequence[str] = ()
) -> list[Entry]:
    """Every entry of one datasource, in a stable order: description, sample questions, then
    per table its table entry, its column entries and its relationships; a table's or a
    column's own comment in the database (a server's catalog) is read as part of its entry."""
    entries: list[Entry] = []
    if description.strip():
        entries.append(Entry("datasource", f"datasource {snapshot.datasource_id}: {' '.join(description.split())}"))
    entries.extend(Entry("question", q.strip()) for q in sample_questions if q.strip())
    for table in snapshot.tables:
        names = [c.name for c in table.columns]
        note = f": {' '.join(table.description.split())}" if table.description else ""
        entries.append(Entry("table", f"table {table.name}: columns {', '.join(names)}{note}", (table.name,)))
        for column in table.columns:
            said = f": {' '.join(column.description.split())}" if column.description else ""
            entries.append(Entry("column", f"{table.name}.{column.name} ({column.type or 'ANY'}) in table "
                                 f"{table.name}{said}", (table.name,), (f"{table.name}.{column.name}",)))
        for fk in table.foreign_keys:
            ref = snapshot.table(fk.ref_table)
            if ref is None:  # a key to a table the snapshot does not hold cannot be sent
                continue
            own = [f"{table.name}.{c}" for c in fk.columns]
            refs = [f"{ref.name}.{c}" for c in fk.ref_columns]
            tables = (table.name,) if ref.name == table.name else (table.name, ref.name)
            entries.append(Entry("relationship", f"{', '.join(own)} references {', '.join(refs)}", tables,
                                 tuple(dict.fromkeys(own + refs))))
    return entries


def entries_digest(entries: Sequence[Entry], model: str) -> str:
    blob = json.dumps([model, [e.to_data() for e in entries]], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class SchemaIndex:
    """Entries and their unit vectors (row i belongs to entry i)."""

    datasource_id: str
    schema_fingerprint: str
    model: str
    digest: str
    entries: list[Entry]
    vectors: np.ndarray  # (len(entries), dimensions) float32
    reused: bool = False  # loaded from its file instead of embedded
    seconds: float = 0.0  # time to load or build
    _by_kind: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _matrices: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _table_sets: dict[str, list[frozenset[str]]] = field(default_factory=dict, repr=False)

    @property
    def dimensions(self) -> int:
        return int(self.vectors.shape[1]) if self.vectors.ndim == 2 else 0

    def rows(self, *kinds: str) -> list[int]:
        """Row numbers of the entries of these kinds, in index order."""
        key = ",".join(kinds)
        if key not in self._by_kind:
            self._by_kind[key] = [i for i, e in enumerate(self.entries) if e.kind in kinds]
        return self._by_kind[key]

    def matrix(self, *kinds: str) -> np.ndarray:
        """The vectors of the entries of these kinds, in index order, as float64: made once, not per
        question (on 1,200 tables the copy cost more than the product)."""
        import numpy as np
        key = ",".join(kinds)
        if key not in self._matrices:
            self._matrices[key] = np.asarray(self.vectors[self.rows(*kinds)], dtype=np.float64)
        return self._matrices[key]

    def table_sets(self, *kinds: str) -> list[frozenset[str]]:
        """For each entry of these kinds (``rows`` order), the lower-cased tables it belongs to."""
        key = ",".join(kinds)
        if key not in self._table_sets:
            self._table_sets[key] = [frozenset(t.lower() for t in self.entries[r].tables) for r in self.rows(*kinds)]
        return self._table_sets[key]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for entry in self.entries:
            out[entry.kind] = out.get(entry.kind, 0) + 1
        return out

    # ------------------------------------------------------------ files

    def to_json(self) -> str:
        import numpy as np
        vectors = np.ascontiguousarray(self.vectors, dtype="<f4")
        return json.dumps({
            "format": INDEX_FORMAT,
            "datasource_id": self.datasource_id,
            "schema_fingerprint": self.schema_fingerprint,
            "model": self.model,
            "digest": self.digest,
            "dimensions": self.dimensions,
            "entries": [e.to_data() for e in self.entries],
            "vectors": base64.b64encode(vectors.tobytes()).decode("ascii"),
        }, ensure_ascii=False, separators=(",", ":")) + "\n"

    def save(self, path: str | Path) -> Path:
        return atomic_write(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> SchemaIndex:
        """Read an index file; a malformed one raises ValueError naming the file."""
        import numpy as np
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != INDEX_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {INDEX_FORMAT}")
            entries = [Entry.from_data(item) for item in data["entries"]]
            dims = int(data["dimensions"])
            raw = base64.b64decode(data["vectors"])
            vectors = np.frombuffer(raw, dtype="<f4").astype(np.float32)
            if vectors.size != len(entries) * dims:
                raise ValueError(f"{vectors.size} numbers for {len(entries)} entries of {dims} dimensions")
            return cls(
                datasource_id=str(data["datasource_id"]),
                schema_fingerprint=str(data["schema_fingerprint"]),
                model=str(data["model"]),
                digest=str(data["digest"]),
                entries=entries,
                vectors=vectors.reshape(len(entries), dims),
            )
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: not a schema index: {exc}") from exc


def build_index(snapshot: SchemaSnapshot, embedder: Embedder, description: str = "",
                sample_questions: Sequence[str] = ()) -> SchemaIndex:
    """Embed every entry of ``snapshot`` now."""
    started = time.perf_counter()
    entries = schema_entries(snapshot, description, sample_questions)
    vectors = embedder.embed([e.text for e in entries])
    return SchemaIndex(
        datasource_id=snapshot.datasource_id,
        schema_fingerprint=snapshot.fingerprint(),
        model=embedder.identity,
        digest=entries_digest(entries, embedder.identity),
        entries=entries,
        vectors=vectors,
        seconds=time.perf_counter() - started,
    )


def ensure_index(snapshot: SchemaSnapshot, embedder: Embedder, folder: str | Path | None, *,
                 description: str = "", sample_questions: Sequence[str] = ()) -> SchemaIndex:
    """The stored index when its fingerprint, model and entries still match; else a fresh one,
    saved to ``folder/<datasource>.json`` (``folder`` None: kept in memory only)."""
    started = time.perf_counter()
    entries = schema_entries(snapshot, description, sample_questions)
    digest = entries_digest(entries, embedder.identity)
    fingerprint = snapshot.fingerprint()
    path = Path(folder) / f"{snapshot.datasource_id}.json" if folder is not None else None
    if path is not None and path.is_file():
        try:
            stored = SchemaIndex.load(path)
        except ValueError as exc:
            log.warning("rebuilding the schema index: %s", exc)
        else:
            if (stored.schema_fingerprint, stored.model, stored.digest, stored.entries) == (
                fingerprint, embedder.identity, digest, entries
            ):
                stored.reused = True
                stored.seconds = time.perf_counter() - started
                return stored
    index = build_index(snapshot, embedder, description, sample_questions)
    if path is not None:
        try:
            index.save(path)
        except OSError as exc:  # a read-only project still answers, it just embeds again next time
            log.warning("cannot save the schema index to %s: %s", path, exc)
    index.seconds = time.perf_counter() - started
    return index


class IndexStore:
    """The indexes of one project, built or loaded once per schema and shared by the retriever
    and the router (thread-safe). They are kept in ``folder`` (a project's is its warehouse's
    ``schema_index/``, which the Dagster asset writes too), or only in memory."""

    def __init__(self, config: ProjectConfig, embedder: Embedder | None = None,
                 folder: str | Path | None = None) -> None:
        self.config = config
        self._embedder = embedder
        self.folder: Path | None = Path(folder) if folder is not None else None  # None: in memory only
        self._indexes: dict[tuple[str, str], SchemaIndex] = {}
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from nl2sql_assets.retrieval.embedder import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    def datasource_text(self, datasource_id: str) -> tuple[str, list[str]]:
        """The description and sample questions the config gives a datasource."""
        for ds in self.config.datasources:
            if ds.id == datasource_id:
                return ds.description, list(ds.sample_questions)
        return "", []

    def get(self, snapshot: SchemaSnapshot) -> SchemaIndex:
        key = (snapshot.datasource_id, snapshot.fingerprint())
        index = self._indexes.get(key)
        if index is not None:
            return index
        with self._lock:
            index = self._indexes.get(key)
            if index is None:
                description, questions = self.datasource_text(snapshot.datasource_id)
                index = ensure_index(snapshot, self.embedder, self.folder, description=description,
                                     sample_questions=questions)
                self._indexes[key] = index
            return index
