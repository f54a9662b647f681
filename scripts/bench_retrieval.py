#!/usr/bin/env python
"""Benchmark: schema retrieval on the local ONNX embedder (min / median / max over repeats).

    python scripts/bench_retrieval.py               # 5 repeats
    python scripts/bench_retrieval.py --repeat 9

Blocks: ONNX session load and tokenizer load (uncached), ``import onnxruntime`` in a fresh
process, embeddings per second on the Chinook schema's entries (batches of 32 padded to the
longest text, against the shipped tokenizer's fixed 128-token padding), one question embedded,
MMR retrieval of one question, building an index and loading a stored one, routing over the
demo's three datasources, and a whole mode retrieval run on the Chinook suite.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_building_blocks import Row, print_rows, timed


def bench(repeat: int, chinook: Path | None) -> list[Row]:
    import numpy as np

    from nl2sql_assets import Project
    from nl2sql_assets.datasources.chinook import resolve_chinook
    from nl2sql_assets.demo import init_demo
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.retrieval import embedder as emb
    from nl2sql_assets.retrieval.index import IndexStore, build_index, ensure_index, schema_entries
    from nl2sql_assets.retrieval.retriever import SchemaRetriever
    from nl2sql_assets.retrieval.routing import DatasourceRouter

    rows: list[Row] = []
    code = "import time; t = time.perf_counter(); import onnxruntime; print(time.perf_counter() - t)"
    samples = [float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                    text=True).stdout.strip()) for _ in range(min(repeat, 3))]
    rows.append(Row("embedder", "import onnxruntime (fresh process)", "per import", samples))

    import onnxruntime as ort
    from tokenizers import Tokenizer

    model, tok_path = emb.model_file(), emb.tokenizer_file()

    def session() -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = emb.THREADS
        ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])

    rows.append(Row("embedder", "ONNX session load (int8 MiniLM, 2 threads)", "per load", timed(session, repeat)))
    rows.append(Row("embedder", "tokenizer load (tokenizer.json)", "per load",
                    timed(lambda: Tokenizer.from_file(str(tok_path)), repeat)))

    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as tmp_name:
        tmp = Path(tmp_name)
        demo = init_demo(tmp / "demo", chinook=resolve_chinook(chinook))
        project = Project.load(demo.config)
        config, registry = project.config, project.registry
        snapshot = registry.snapshot("chinook")
        ds = config.datasource("chinook")
        texts = [e.text for e in schema_entries(snapshot, ds.description, ds.sample_questions)]
        embedder = emb.Embedder().load()
        embedder.embed(texts)  # warm
        samples = timed(lambda: embedder.embed(texts), repeat, len(texts))
        rows.append(Row("embedder", f"embed the Chinook entries, batch 32, pad to longest ({len(texts)} texts)",
                        "per text", samples, f"{1 / statistics.median(samples):.0f} texts/s"))
        fixed = Tokenizer.from_file(str(tok_path))  # as shipped: pads every text to 128 tokens
        sess = emb.load_session(model)

        def padded_128() -> None:
            for i in range(0, len(texts), 32):
                enc = fixed.encode_batch(texts[i:i + 32])
                ids = np.array([e.ids for e in enc], dtype=np.int64)
                mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
                sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})

        samples = timed(padded_128, min(repeat, 3), len(texts))
        rows.append(Row("embedder", "  the same, padded to a fixed 128 (the shipped tokenizer)", "per text", samples,
                        f"{1 / statistics.median(samples):.0f} texts/s"))
        question = "How many customers do we have in each country?"
        rows.append(Row("embedder", "embed one question (no cache)", "per question",
                        timed(lambda: embedder.embed([question]), repeat)))

        rows.append(Row("index", "build the Chinook index (entries + embed)", "per build",
                        timed(lambda: build_index(snapshot, embedder, ds.description, ds.sample_questions), repeat),
                        f"{len(texts)} entries"))
        folder = tmp / "index"
        ensure_index(snapshot, embedder, folder, description=ds.description, sample_questions=ds.sample_questions)
        size = (folder / "chinook.json").stat().st_size
        rows.append(Row("index", "load the stored Chinook index (unchanged: reused)", "per load",
                        timed(lambda: ensure_index(snapshot, embedder, folder, description=ds.description,
                                                   sample_questions=ds.sample_questions), repeat),
                        f"{size / 1024:.0f} KiB file"))

        store = IndexStore(config, embedder, folder=folder)
        retriever = SchemaRetriever(config, store)
        router = DatasourceRouter(config, registry, store)
        router.prepare()
        retriever(question, snapshot)
        rows.append(Row("search", "retrieve for one question (cached vector: MMR x 2)", "per question",
                        timed(lambda: retriever(question, snapshot), repeat)))
        rows.append(Row("search", "route one question over 3 datasources (cached vector)", "per question",
                        timed(lambda: router(question), repeat)))
        questions = [c.question for c in load_suite(demo.suites_dir / "chinook.yaml").cases if c.answerable]
        fresh = emb.Embedder().load()
        fresh_store = IndexStore(config, fresh, folder=folder)
        fresh_retriever = SchemaRetriever(config, fresh_store)
        samples = timed(lambda: [fresh_retriever(q, snapshot) for q in questions], 1, len(questions))
        rows.append(Row("search", f"retrieve the {len(questions)} suite questions, first time (embeds them)",
                        "per question", samples))
        project.close()

        def mode_retrieval() -> None:
            with Project.load(demo.config) as proj:
                proj.evals.run(mode="retrieval")

        mode_retrieval()  # the indexes are then stored under the demo's warehouse
        rows.append(Row("mode retrieval", "project.evals.run(mode='retrieval'), Chinook suite, 93 case runs",
                        "per run", timed(mode_retrieval, min(repeat, 3)), "indexes stored, session warm"))
        for path in (demo.root / "warehouse" / "schema_index").glob("*.json"):
            path.unlink()
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        cli = Path(sys.executable).with_name("nl2sql-assets")
        started = time.perf_counter()
        subprocess.run([str(cli), "--config", str(demo.config), "eval", "run", "--mode", "retrieval", "--out",
                        str(tmp / "eval_retrieval.json")], check=True, env=env, capture_output=True)
        rows.append(Row("mode retrieval", "nl2sql-assets eval run --mode retrieval, cold (new process, no index)",
                        "per run", [time.perf_counter() - started], "imports, session, 3 indexes, 93 runs"))
        started = time.perf_counter()
        subprocess.run([str(cli), "--config", str(demo.config), "eval", "run", "--mode", "retrieval", "--out",
                        str(tmp / "eval_retrieval.json")], check=True, env=env, capture_output=True)
        rows.append(Row("mode retrieval", "  the same, indexes stored", "per run", [time.perf_counter() - started]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chinook", type=Path, default=None, help="chinook.sqlite (default: $NL2SQL_CHINOOK)")
    args = parser.parse_args(argv)
    rows = bench(max(1, args.repeat), args.chinook)
    print(f"\nSchema retrieval ({os.cpu_count()} CPU(s); wall time; n samples each)\n")
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
