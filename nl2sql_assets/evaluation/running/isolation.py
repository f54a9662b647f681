"""What a run keeps apart from the engine that serves questions, and the block the report shows.

A run never shares mutable state with the project's serving engine: every runtime it asks is
derived anew (its own plan cache, empty), and the schema indexes it reads are copies in a folder
of its own (the warehouse's evaluation index folder, else a temporary one): copied from the
project's index folder when newer, checked against the schema's fingerprint, the embedder and the
entries on load, and rebuilt there when stale. Nothing the serving engine learnt (a cached plan,
an index in memory) reaches a run, and nothing a run builds reaches the serving engine's folder.
The run's temporary folder is removed when it ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from nl2sql_assets.config import StrictModel

if TYPE_CHECKING:
    from nl2sql_assets.engine.pipeline import Engine


class Isolated(StrictModel):
    """One kind of state and how a run keeps it apart. ``path`` is where the run's own copy
    lived (removed when the run ended), when it is a folder."""

    isolated: bool
    how: str
    path: str | None = None


class Isolation(StrictModel):
    """What a run isolated: the plan cache, conversation state, retrieval indexes, temp folders."""

    plan_cache: Isolated
    conversation_state: Isolated
    retrieval_index: Isolated
    temp_folder: Isolated
    notes: list[str] = Field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per kind of state, for Markdown and the CLI."""
        out = []
        for name in ("plan_cache", "conversation_state", "retrieval_index", "temp_folder"):
            item: Isolated = getattr(self, name)
            where = f" ({item.path})" if item.path else ""
            out.append(f"{name.replace('_', ' ')}: {'isolated' if item.isolated else 'SHARED'}: {item.how}{where}")
        return out + list(self.notes)

    def markdown(self) -> str:
        return "Isolation:\n" + "\n".join(f"- {line}" for line in self.lines())


def _index_store(hook: Any) -> Any:
    from nl2sql_assets.retrieval.index import IndexStore

    store = getattr(hook, "store", None)
    return store if isinstance(store, IndexStore) else None


def _copy_newer(source: Path, target: Path) -> int:
    """Copy each index file of ``source`` that ``target`` lacks or holds an older copy of (each
    copy whole or absent: a temporary name, then a rename). Returns how many were copied."""
    copied = 0
    target.mkdir(parents=True, exist_ok=True)
    for index_file in sorted(source.glob("*.json")):
        mine = target / index_file.name
        stat = index_file.stat()
        if mine.is_file() and (mine.stat().st_mtime_ns, mine.stat().st_size) == (stat.st_mtime_ns, stat.st_size):
            continue
        partial = target / f".{index_file.name}.{os.getpid()}.part"
        shutil.copy2(index_file, partial)
        os.replace(partial, mine)
        copied += 1
    return copied


@contextlib.contextmanager
def isolated_engine(engine: Engine, index_folder: Path | None = None) -> Iterator[tuple[Engine, Isolation]]:
    """An engine for one run, derived from ``engine`` with retrieval hooks of its own over copies
    of the schema indexes in ``index_folder`` (None: in the run's temporary folder); the
    temporary folder is removed on exit."""
    from nl2sql_assets.retrieval.index import IndexStore
    from nl2sql_assets.retrieval.retriever import SchemaRetriever
    from nl2sql_assets.retrieval.routing import DatasourceRouter

    temp = Path(tempfile.mkdtemp(prefix="nl2sql-eval-"))
    try:
        notes: list[str] = []
        retriever, router = engine.retriever, engine.router
        stores = {id(s): s for s in (_index_store(retriever), _index_store(router)) if s is not None}
        copies = 0
        hooks: dict[str, Any] = {}
        if stores:
            serving = next(iter(stores.values()))
            folder = Path(index_folder) if index_folder is not None else temp / "schema_index"
            if serving.folder is not None and serving.folder.is_dir() and serving.folder.resolve() != folder.resolve():
                copies = _copy_newer(serving.folder, folder)
            folder.mkdir(parents=True, exist_ok=True)
            # The embedder is a stateless model: shared, so it is loaded once per process.
            own = IndexStore(engine.config, embedder=serving._embedder, folder=folder)
            if isinstance(retriever, SchemaRetriever):
                hooks["retriever"] = SchemaRetriever(engine.config, own, settings=retriever.settings)
            if isinstance(router, DatasourceRouter):
                hooks["router"] = DatasourceRouter(engine.config, router.registry, own, candidates=router.candidates)
            index = Isolated(isolated=True, path=str(folder),
                             how=f"the run's own copies ({copies} copied from the project's index folder this run), "
                                 "checked against the schema fingerprint, embedder and entries, rebuilt there "
                                 "when stale; never the serving engine's indexes in memory or its folder")
        elif retriever is None and router is None:
            index = Isolated(isolated=True, how="no schema retrieval or routing hook: nothing to share")
        else:
            index = Isolated(isolated=False, how="the engine's own retrieval hooks (not index-store based) are used as given")
            notes.append("retrieval hooks that keep their own state are shared with the serving engine")
        run_engine = engine.derive(**hooks)
        isolation = Isolation(
            plan_cache=Isolated(isolated=True, how="each runtime of the run is derived anew with an empty plan "
                                                   "cache of its own; the serving engine's cache is never read"),
            conversation_state=Isolated(isolated=True, how=(
                "no state carried between case runs: a first question is asked with no history, and a "
                "follow-up case with its own earlier turns only (played first, in order); nothing one case "
                "run says reaches another")),
            retrieval_index=index,
            temp_folder=Isolated(isolated=True, how="one folder per run, removed when it ends", path=str(temp)),
            notes=notes,
        )
        yield run_engine, isolation
    finally:
        shutil.rmtree(temp, ignore_errors=True)
