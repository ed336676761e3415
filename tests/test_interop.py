"""Data in and out (issue 18, item 3): ranx Qrels / Run and TREC files both ways, Hugging Face datasets round
trips, the ir_datasets reader (on a fake ``ir_datasets.load``) and BEIR folders, through the configs too."""

from __future__ import annotations

import importlib.util
import json
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udcg_ltr.data import interop
from udcg_ltr.data.readers.beir import read_beir
from udcg_ltr.data.readers.trec import records_from_run, records_to_qrels, records_to_run
from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.paths import PROJECT_ROOT

LLM = "toy-llm"


def toy_records(n: int = 4, seed: int = 0) -> list[QueryRecord]:
    """Pools in rank order with strictly decreasing scores, graded labels, annotations and extras."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n):
        m = int(rng.integers(2, 6))
        scores = np.sort(rng.normal(size=m))[::-1]
        ps = [Passage(pid=f"d{q}-{j}", title=f"Title {j}" if j % 2 else "", text=f"text {q} {j} é", rank=j + 1,
                      score=float(scores[j]), relevance=int(rng.integers(0, 3)),
                      annotations={LLM: {"p_no_response": float(rng.uniform()), "answer_alone": "x"}},
                      extra={"unjudged": False, "note": [1, 2.5, None]})
              for j in range(m)]
        out.append(QueryRecord(qid=f"q{q}", question=f"question {q}?", answers=[f"a{q}"], passages=ps,
                               split="test" if q % 2 else "train", extra={"judged_grades": {"0": 1}}))
    return out


def texts_and_queries(records):
    texts = {p.pid: {"title": p.title, "text": p.text} for r in records for p in r.passages}
    return texts, {r.qid: r.question for r in records}


# ---- ranx --------------------------------------------------------------------------------------------------
def test_ranx_both_ways_and_records_from_run_accepts_ranx_objects():
    ranx = pytest.importorskip("ranx")
    records = toy_records()
    qrels, run = interop.records_to_ranx_qrels(records), interop.records_to_ranx_run(records, name="retriever")
    assert isinstance(qrels, ranx.Qrels) and isinstance(run, ranx.Run) and run.name == "retriever"
    assert qrels.to_dict() == records_to_qrels(records)
    assert run.to_dict() == records_to_run(records)
    texts, queries = texts_and_queries(records)
    from_ranx = records_from_run(run, qrels, texts, queries)  # the issue: 'Run' object has no attribute 'items'
    from_dicts = records_from_run(records_to_run(records), records_to_qrels(records), texts, queries)
    assert [r.to_dict() for r in from_ranx] == [r.to_dict() for r in from_dicts]
    by_qid = {r.qid: r for r in records}
    for rec in from_ranx:
        original = by_qid[rec.qid]
        assert [p.pid for p in rec.passages] == [p.pid for p in original.passages]
        assert [p.relevance for p in rec.passages] == [p.relevance for p in original.passages]
        assert [p.score for p in rec.passages] == [p.score for p in original.passages]
    with pytest.raises(TypeError, match="ranx object with to_dict"):
        records_from_run(object(), None, texts, queries)


# ---- TREC files ----------------------------------------------------------------------------------------------
def test_trec_files_both_ways(tmp_path):
    records = toy_records(5, seed=1)
    run_path, qrels_path = interop.records_to_trec(records, tmp_path / "run.txt", tmp_path / "qrels.txt", tag="toy")
    texts, queries = texts_and_queries(records)
    back = interop.records_from_trec(run_path, texts, queries, qrels_path)
    assert [r.qid for r in back] == [r.qid for r in records]
    for got, want in zip(back, records):
        assert [(p.pid, p.title, p.text, p.rank, p.score, p.relevance) for p in got.passages] == \
            [(p.pid, p.title, p.text, p.rank, p.score, p.relevance) for p in want.passages]
    assert interop.records_to_trec(records, qrels_path=tmp_path / "q2.txt") == (None, tmp_path / "q2.txt")
    cut = interop.records_from_trec(run_path, texts, queries, top_k=2)
    assert all(len(r.passages) <= 2 for r in cut)


def test_trec_missing_texts_name_the_run_file_line_and_column(tmp_path):
    records = toy_records(3, seed=2)
    run_path, _ = interop.records_to_trec(records, tmp_path / "run.txt")
    texts, queries = texts_and_queries(records)
    lines = run_path.read_text().splitlines()
    missing_doc = lines[-1].split()[2]
    del texts[missing_doc]
    with pytest.raises(DataError) as info:
        interop.records_from_trec(run_path, texts, queries)
    assert (info.value.path, info.value.line, info.value.field) == (str(run_path), len(lines), "column 3 (docid)")
    texts, queries = texts_and_queries(records)
    del queries["q1"]
    with pytest.raises(DataError) as info:
        interop.records_from_trec(run_path, texts, queries)
    first_q1 = next(i for i, ln in enumerate(lines, start=1) if ln.startswith("q1 "))
    assert (info.value.line, info.value.field) == (first_q1, "column 1 (qid)")


# ---- Hugging Face datasets -------------------------------------------------------------------------------
needs_datasets = pytest.mark.skipif(importlib.util.find_spec("datasets") is None, reason="datasets is not installed")

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_json_scalar = st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False) \
    | _text
_json = st.recursive(_json_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=6)
_passage = st.builds(
    Passage, pid=st.text("abcdef0123", min_size=1, max_size=6).filter(str.strip), text=_text, title=_text,
    rank=st.none() | st.integers(1, 1000), score=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    relevance=st.none() | st.integers(0, 5), is_distractor=st.none() | st.booleans(),
    annotations=st.dictionaries(_text, st.dictionaries(_text, _json, max_size=3), max_size=2),
    extra=st.dictionaries(_text, _json, max_size=3))


@st.composite
def _records(draw):
    n = draw(st.integers(1, 4))
    out = []
    for q in range(n):
        passages = draw(st.lists(_passage, min_size=1, max_size=4, unique_by=lambda p: p.pid))
        out.append(QueryRecord(qid=f"q{q}", question=draw(_text), answers=draw(st.lists(_text, max_size=2)),
                               passages=passages, split=draw(st.none() | st.sampled_from(["train", "test"])),
                               extra=draw(st.dictionaries(_text, _json, max_size=3))))
    return out


@needs_datasets
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_hf_dataset_round_trip_is_exact(records):
    back = interop.records_from_hf_dataset(interop.records_to_hf_dataset(records))
    assert back == records
    # JSON-identical too (a float 1.0 that came back as an int would compare equal above)
    assert [json.dumps(r.to_dict()) for r in back] == [json.dumps(r.to_dict()) for r in records]


@needs_datasets
def test_hf_dataset_layout_and_dataset_dict():
    import datasets

    records = toy_records(4, seed=3)
    ds = interop.records_to_hf_dataset(records)
    assert ds.column_names == list(interop.RECORD_COLUMNS) and len(ds) == 4
    row = ds[0]
    assert row["passages"][0]["pid"] == records[0].passages[0].pid
    assert json.loads(row["passages"][0]["annotations_json"]) == records[0].passages[0].annotations
    for r in records:
        r.split = None
    dd = datasets.DatasetDict({"train": interop.records_to_hf_dataset(records[:2]),
                               "test": interop.records_to_hf_dataset(records[2:])})
    back = interop.records_from_hf_dataset(dd)
    assert [(r.qid, r.split) for r in back] == [("q0", "train"), ("q1", "train"), ("q2", "test"), ("q3", "test")]
    # rows built by hand with plain mappings instead of JSON strings are read too
    plain = [{"qid": "x", "question": "?", "passages": [{"pid": "p", "text": "t", "annotations": {LLM: {"a": 1}}}]}]
    assert interop.records_from_hf_dataset(plain)[0].passages[0].annotations == {LLM: {"a": 1}}


@needs_datasets
@pytest.mark.parametrize(("mutate", "field"), [
    (lambda rows: rows[1].pop("question"), "question"),
    (lambda rows: rows[1]["passages"][0].__setitem__("annotations_json", "{not json"), "passages[0].annotations_json"),
    (lambda rows: rows[1]["passages"][1].__setitem__("relevance", 9), "passages[1].relevance"),
    (lambda rows: rows[1]["passages"][0].__setitem__("pid", 3), "passages[0].pid"),
    (lambda rows: rows[1].__setitem__("qid", "q0"), "qid"),
    (lambda rows: rows[1]["passages"][0].__setitem__("colour", "red"), "passages[0]"),
])
def test_hf_dataset_bad_rows_name_the_row_and_field(mutate, field):
    import datasets

    rows = interop.records_to_hf_dataset(toy_records(3, seed=4)).to_list()
    mutate(rows)
    with pytest.raises(DataError) as info:
        interop.records_from_hf_dataset(rows, name="toy")  # any iterable of rows (Arrow refuses some of these)
    assert (info.value.path, info.value.line, info.value.field) == ("toy", 2, field)
    if field != "passages[0].pid":  # an int id among strings does not make it into an Arrow table
        with pytest.raises(DataError) as info:
            interop.records_from_hf_dataset(datasets.Dataset.from_list(rows))
        assert info.value.path.startswith("Hugging Face dataset") and info.value.line == 2
        assert info.value.field == field


# ---- ir_datasets (offline: a fake ir_datasets.load) ----------------------------------------------------------
Query = namedtuple("Query", "query_id text")
Topic = namedtuple("Topic", "query_id title description")
Doc = namedtuple("Doc", "doc_id title text")
Qrel = namedtuple("Qrel", "query_id doc_id relevance iteration")
Scored = namedtuple("Scored", "query_id doc_id score")


class FakeStore:
    def __init__(self, docs):
        self.docs = {d.doc_id: d for d in docs}

    def get_many(self, ids):
        return {i: self.docs[i] for i in ids if i in self.docs}


class FakeDataset:
    """What ir_datasets.load returns, for the calls the reader makes."""

    def __init__(self, queries, docs, qrels, scored=None):
        self._queries, self._docs, self._qrels, self._scored = queries, docs, qrels, scored

    def queries_iter(self):
        return iter(self._queries)

    def docs_store(self):
        return FakeStore(self._docs)

    def qrels_iter(self):
        return iter(self._qrels)

    def scoreddocs_iter(self):
        return iter(self._scored or [])

    def has_scoreddocs(self):
        return self._scored is not None

    def has_qrels(self):
        return True

    def has_docs(self):
        return True


def fake_world(scored=True, grade=2):
    queries = [Query("1", "who wrote hamlet"), Query("2", "capital of france"), Query("3", "never judged")]
    docs = [Doc("a", "Hamlet", "a tragedy by shakespeare"), Doc("b", "", "paris is the capital"),
            Doc("c", "Rome", "capital of italy"), Doc("d", "Lyon", "a city in france")]
    qrels = [Qrel("1", "a", grade, "0"), Qrel("2", "b", 1, "0"), Qrel("2", "d", 0, "0")]
    hits = [Scored("1", "c", 3.0), Scored("1", "a", 2.0), Scored("2", "d", 5.0), Scored("2", "b", 4.0),
            Scored("2", "c", 1.0), Scored("3", "a", 1.0)]
    return {"fake/world": FakeDataset(queries, docs, qrels, hits if scored else None)}


@pytest.fixture()
def fake_irds(monkeypatch):
    ir_datasets = pytest.importorskip("ir_datasets")
    worlds = {}

    def load(name):
        return worlds[name]  # KeyError for an unknown id, as ir_datasets' registry

    monkeypatch.setattr(ir_datasets, "load", load)
    return worlds


def test_ir_datasets_reader_pools_from_scoreddocs_and_from_qrels(fake_irds):
    from udcg_ltr.data.readers.irds import read_ir_dataset

    fake_irds.update(fake_world())
    records = read_ir_dataset("fake/world", top_k=2, split="test")
    assert [r.qid for r in records] == ["1", "2"]  # judged queries only
    q1, q2 = records
    assert q1.question == "who wrote hamlet" and q1.split == "test"
    assert [(p.pid, p.rank, p.score, p.relevance, p.extra["unjudged"]) for p in q1.passages] == \
        [("c", 1, 3.0, 0, True), ("a", 2, 2.0, 2, False)]
    assert (q1.passages[1].title, q1.passages[1].text) == ("Hamlet", "a tragedy by shakespeare")
    assert [p.pid for p in q2.passages] == ["d", "b"]  # top_k=2 of d, b, c
    assert q2.extra["judged_grades"] == {"0": 1, "1": 1}
    fake_irds.update(fake_world(scored=False))
    judged = read_ir_dataset("fake/world")
    assert [[p.pid for p in r.passages] for r in judged] == [["a"], ["b", "d"]]
    assert all(p.rank is None and p.score is None for r in judged for p in r.passages)


def test_ir_datasets_reader_run_file_query_field_and_errors(fake_irds, tmp_path):
    from udcg_ltr.data.readers.irds import read_ir_dataset

    fake_irds.update(fake_world())
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 a 1 9.0 x\n1 Q0 b 2 8.0 x\n")
    records = read_ir_dataset("fake/world", run_path=run)
    assert [r.qid for r in records] == ["1"] and [p.pid for p in records[0].passages] == ["a", "b"]
    fake_irds["fake/topics"] = FakeDataset([Topic("1", "hamlet author", "who wrote it")], fake_world()["fake/world"]
                                           ._docs, [Qrel("1", "a", 1, "0")])
    assert read_ir_dataset("fake/topics")[0].question == "hamlet author"
    assert read_ir_dataset("fake/topics", query_field="description")[0].question == "who wrote it"
    with pytest.raises(DataError, match="unknown ir_datasets id") as info:
        read_ir_dataset("no/such/id")
    assert info.value.field == "dataset.id"
    fake_irds.update(fake_world(grade=7))
    with pytest.raises(DataError) as info:
        read_ir_dataset("fake/world")
    assert (info.value.path, info.value.line, info.value.field) == ("ir_datasets:fake/world qrels", 1, "relevance")


# ---- through the configs: dataset=ir_datasets dataset.id=..., dataset=beir dataset.path=... ----------------------
def compose(overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="evaluate",
                             overrides=[f"paths.root_dir={PROJECT_ROOT}", "paths.output_dir=.", *overrides])


def load(overrides):
    from udcg_ltr.jobs.common import load_records
    from udcg_ltr.jobs.settings import EvaluateSettings, job_settings

    return load_records(job_settings(EvaluateSettings, compose(["mode=correlation", *overrides])).dataset)


def test_ir_datasets_config(fake_irds):
    from udcg_ltr.jobs.common import ConfigError

    fake_irds.update(fake_world())
    records = load(["dataset=ir_datasets", "dataset.id=fake/world", "dataset.top_k=1"])
    assert [[p.pid for p in r.passages] for r in records] == [["c"], ["d"]]
    with pytest.raises(ConfigError, match="dataset.id is required"):
        load(["dataset=ir_datasets"])


def write_beir(folder, qrels_rows):
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": "a", "title": "Hamlet", "text": "a tragedy"}, {"_id": "b", "title": "", "text": "paris"},
            {"_id": "c", "title": "Rome", "text": "italy"}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": "1", "text": "who wrote hamlet"}, {"_id": "2", "text": "capital of france"}]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels_rows)


def test_beir_config_folder_and_run_and_a_ranx_run(tmp_path):
    folder = tmp_path / "scifact"
    write_beir(folder, "1\ta\t1\n2\tb\t2\n")
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 c 1 2.0 bm25\n1 Q0 a 2 1.0 bm25\n2 Q0 b 1 5.0 bm25\n")
    records = load(["dataset=beir", f"dataset.path={folder}", f"dataset.run_path={run}"])
    assert [[(p.pid, p.relevance) for p in r.passages] for r in records] == [[("c", 0), ("a", 1)], [("b", 2)]]
    assert records[0].passages[1].title == "Hamlet" and all(r.split == "test" for r in records)
    judged = load(["dataset=beir", f"dataset.path={folder}"])
    assert [[p.pid for p in r.passages] for r in judged] == [["a"], ["b"]]
    ranx = pytest.importorskip("ranx")
    from_ranx = read_beir(folder, run=ranx.Run.from_dict({"1": {"c": 2.0, "a": 1.0}, "2": {"b": 5.0}}))
    assert [r.to_dict() for r in from_ranx] == [r.to_dict() for r in records]


def test_beir_config_errors_name_the_value_file_line_and_field(tmp_path):
    from udcg_ltr.jobs.common import ConfigError

    with pytest.raises(ConfigError, match="dataset.path is required"):
        load(["dataset=beir"])
    with pytest.raises(ConfigError, match="does not exist"):
        load(["dataset=beir", f"dataset.path={tmp_path / 'nowhere'}"])
    folder = tmp_path / "bad"
    write_beir(folder, "1\ta\t1\n2\tb\tlots\n")
    with pytest.raises(DataError) as info:
        load(["dataset=beir", f"dataset.path={folder}"])
    assert info.value.path.endswith("test.tsv") and info.value.line == 3 and info.value.field == "column 3 (score)"
