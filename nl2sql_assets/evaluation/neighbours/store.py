"""A datasource's kept neighbours for a set of gold queries, built once and reused.

The set lives in ``<folder>/<datasource>/<key>/`` (a project's ``warehouse/neighbours/``): the kept
files and ``manifest.json`` saying how they were made and what they separate. The key is a digest of
everything the files depend on (the database file's bytes, the gold queries, the count, seed and
sizes, the generator's version), so a changed suite or database builds a new set and an unchanged
one is read back. A set is built in a temporary folder and renamed into place whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.neighbours.distill import GoldQuery, distill
from nl2sql_assets.evaluation.neighbours.generate import GENERATOR_VERSION, generate_neighbours, gold_literals

MANIFEST = "manifest.json"


class NeighbourSet(BaseModel):
    """What a kept set of neighbours is and what it tells apart (the manifest)."""

    model_config = ConfigDict(extra="forbid")

    datasource: str
    key: str
    generator_version: int
    seed: int
    keep: int
    candidates: int
    max_rows: int
    kept: list[str]  # file names, in the order distillation chose them
    gold_queries: int
    mutants: int
    separated_on_original: int
    separated: int
    separable: int
    possibly_equivalent: int
    seconds: float

    def paths(self, folder: Path) -> list[Path]:
        return [folder / name for name in self.kept]


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def set_key(source: Path, golds: Sequence[GoldQuery], *, seed: int, keep: int, candidates: int,
            max_rows: int) -> str:
    """The digest of everything a set's files depend on."""
    described = {
        "generator": GENERATOR_VERSION, "seed": seed, "keep": keep, "candidates": candidates,
        "max_rows": max_rows, "database": _file_digest(source),
        "golds": sorted([g.key, g.sql, g.order_matters, list(g.alternatives)] for g in golds),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:20]


def neighbour_set(datasource: DatasourceConfig, golds: Sequence[GoldQuery], folder: Path, *, keep: int = 10,
                  seed: int = 1, candidates: int = 24, max_rows: int = 200) -> tuple[NeighbourSet, list[Path]]:
    """The kept neighbours of ``datasource`` for ``golds``: read back when built before with the
    same inputs, else generated, distilled and stored."""
    if datasource.engine != "sqlite":
        raise UserError(f"datasource {datasource.id!r}: neighbour databases are made of SQLite datasources "
                        f"for now ({datasource.engine} is not yet supported)")
    source = Path(datasource.path)
    key = set_key(source, golds, seed=seed, keep=keep, candidates=candidates, max_rows=max_rows)
    home = folder / datasource.id / key
    manifest_path = home / MANIFEST
    if manifest_path.is_file():
        stored = NeighbourSet.model_validate_json(manifest_path.read_text(encoding="utf-8"))
        if all(p.is_file() for p in stored.paths(home)):
            return stored, stored.paths(home)
    started = time.perf_counter()
    (folder / datasource.id).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder / datasource.id))
    try:
        pool = generate_neighbours(source, work / "candidates", candidates, seed, max_rows=max_rows,
                                   literals=gold_literals([g.sql for g in golds]))
        result = distill(golds, source, pool, keep)
        built = work / "set"
        built.mkdir()
        kept = []
        for n, index in enumerate(result.kept):
            name = f"neighbour_{n:02d}.sqlite"
            os.replace(pool[index], built / name)
            kept.append(name)
        manifest = NeighbourSet(
            datasource=datasource.id, key=key, generator_version=GENERATOR_VERSION, seed=seed, keep=keep,
            candidates=candidates, max_rows=max_rows, kept=kept, gold_queries=len(golds), mutants=result.total,
            separated_on_original=len(result.on_original), separated=result.separated,
            separable=result.separable, possibly_equivalent=len(result.possibly_equivalent),
            seconds=round(time.perf_counter() - started, 3))
        (built / MANIFEST).write_text(manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
        if home.exists():  # a set left half-made (its manifest or a file missing): made again
            shutil.rmtree(home)
        os.replace(built, home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return manifest, manifest.paths(home)
