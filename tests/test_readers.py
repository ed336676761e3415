"""Readers for every source layout: the shared files (skipped when absent) and tiny malformed fixtures."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.readers import (
    BM25Index,
    assign_splits,
    build_nq_pool,
    chunk_paragraph,
    read_annotated_squad,
    read_beir,
    read_dl19,
    read_dpr,
    read_hotpotqa,
    read_squad,
    read_trec_qrels,
    read_trec_run,
    read_udcg_reference,
    records_from_run,
    records_to_qrels,
    records_to_run,
    split_sentences,
    write_trec_qrels,
    write_trec_run,
)
from udcg_ltr.data.readers._common import load_json
from udcg_ltr.data.readers.squad import squad_passages
from udcg_ltr.data.schema import DataError
from udcg_ltr.metrics import ndcg, udcg
from udcg_ltr.paths import shared_file
from udcg_ltr.text import has_answer


def shared(*parts):
    path = shared_file(*parts)
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent")
    return path


def assert_data_error(info, path, field, *, line=None, reason=None):
    """The error names the file, the line (when given) and the field, in attributes and message."""
    err = info.value
    msg = str(err)
    assert err.path == str(path) and str(path) in msg
    assert err.field == field and f"field '{field}'" in msg
    if line is not None:
        assert err.line == line and f"line {line}" in msg
    if reason is not None:
        assert reason in err.reason


def write_jsonl(path, objs):
    text = "".join(json.dumps(o) + "\n" for o in objs)
    if str(path).endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ---- UDCG reference ------------------------------------------------------------------------

def _reference_udcg(passages, llm, gamma):
    """The UDCG authors' formula, written out independently: sigmoid(mean of +-weighted 1 - p)."""
    score = sum((1 - p["models_info"][llm]["no_res_prob"]) * (1.0 if p["is_relevant"] else -gamma)
                for p in passages) / len(passages)
    return 1 / (1 + math.exp(-score))


def _udcg_of(records, llm, gamma):
    slates = pad_records(records, llm=llm)
    return udcg(slates.utility, slates.mask, gamma=gamma)


def test_udcg_reference_shared_files():
    folder = shared("udcg_reference")
    plain = read_udcg_reference(folder / "sample_dataset.json")
    scored = read_udcg_reference(folder / "dataset_with_scores.json")
    with_udcg = read_udcg_reference()
    assert [r.qid for r in plain] == [r.qid for r in scored] == [r.qid for r in with_udcg]
    assert all(r.llms() == [] for r in plain)
    raw = load_json(folder / "dataset_with_udcg.json")
    for rec, obj in zip(with_udcg, raw):
        assert [p.pid for p in rec.passages] == [p["doc_id"] for p in obj["passages"]]
        assert [p.relevance for p in rec.passages] == [int(p["is_relevant"]) for p in obj["passages"]]
        assert rec.extra["reference_udcg"] == obj["udcg"]


def test_udcg_reproduces_the_reference_values():
    records = read_udcg_reference(shared("udcg_reference", "dataset_with_udcg.json"))
    llm = "meta-llama/Llama-3.2-3B-Instruct"
    expected = np.array([r.extra["reference_udcg"][llm] for r in records])
    k = len(records[0].passages)
    assert all(len(r.passages) == k for r in records)
    # The shipped values were computed with the authors' CLI weight -0.333 (not -1/3): with that
    # gamma, k = number of passages, our UDCG reproduces them to rounding error.
    np.testing.assert_allclose(_udcg_of(records, llm, 0.333), expected, rtol=0, atol=1e-12)
    # With gamma = 1/3 the difference is the 0.000333 weight gap, ~5e-5, and no more.
    gap = np.abs(_udcg_of(records, llm, 1 / 3) - expected)
    assert np.all(gap < 1e-4)


def test_udcg_matches_reference_formula_with_gamma_one_third(tmp_path):
    rng = np.random.default_rng(3)
    llm = "some/llm"
    data = []
    for q in range(6):
        n = int(rng.integers(1, 8))
        passages = [{"doc_id": f"d{q}-{j}", "text": "t", "is_relevant": bool(rng.random() < 0.4),
                     "models_info": {llm: {"no_res_prob": float(rng.random())}}} for j in range(n)]
        data.append({"example_id": f"e{q}", "question": "?", "passages": passages,
                     "udcg": {llm: _reference_udcg(passages, llm, 1 / 3)}})
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(data, indent=2))
    records = read_udcg_reference(path)
    expected = [r.extra["reference_udcg"][llm] for r in records]
    np.testing.assert_allclose(_udcg_of(records, llm, 1 / 3), expected, rtol=0, atol=1e-12)


def _ref_item(i, **passage_over):
    p = {"doc_id": f"d{i}", "text": "t", "is_relevant": True, "models_info": {"m": {"no_res_prob": 0.1}}}
    p.update(passage_over)
    return {"example_id": f"e{i}", "question": "?", "passages": [p, {**p, "doc_id": f"d{i}b"}]}


@pytest.mark.parametrize(("item", "field", "reason"), [
    (_ref_item(1, is_relevant="yes"), "[1].passages[0].is_relevant", "expected true/false"),
    (_ref_item(1, models_info={"m": {"no_res_prob": 1.5}}), "[1].passages[0].models_info['m'].no_res_prob",
     "outside [0, 1]"),
    (_ref_item(1, models_info={"m": {"no_res_prob": "low"}}), "[1].passages[0].models_info['m'].no_res_prob",
     "expected a number"),
    (_ref_item(1, doc_id="d1b"), "[1].passages[1].doc_id", "duplicate passage id"),
    ({**_ref_item(1), "passages": []}, "[1].passages", "empty candidate list"),
    ({**_ref_item(1), "udcg": {"m": "high"}}, "[1].udcg.m", "expected a number"),
    ({"question": "?", "passages": []}, "[1].example_id", "missing"),
])
def test_udcg_reference_malformed(tmp_path, item, field, reason):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_ref_item(0), item], indent=2))
    with pytest.raises(DataError) as info:
        read_udcg_reference(path)
    first_line_of_item = path.read_text().split("\n").index("  {", 2) + 1
    assert_data_error(info, path, field, line=first_line_of_item, reason=reason)


def test_udcg_reference_invalid_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n {"example_id": "e0",\n  "question": }\n]')
    with pytest.raises(DataError, match="invalid JSON") as info:
        read_udcg_reference(path)
    assert info.value.line == 3 and info.value.path == str(path)
    path.write_text('{"not": "a list"}')
    with pytest.raises(DataError, match="JSON array"):
        read_udcg_reference(path)


# ---- DPR / NQ-open -------------------------------------------------------------------------

def test_dpr_shared_nq_open():
    records = read_dpr(shared("nq_open", "nq-open-oracle.jsonl.gz"))
    assert len(records) == 2655
    assert [r.qid for r in records[:3]] == ["1", "2", "3"]  # no id field: line numbers
    assert all(len(r.passages) == 1 and r.passages[0].relevance == 1 for r in records)
    assert all(r.passages[0].extra["isgold"] is True and r.passages[0].pid == f"{r.qid}-0" for r in records)
    assert len(read_dpr(limit=5)) == 5


def test_nq_pool_shared():
    records = read_dpr(shared("nq_open", "nq-open-oracle.jsonl.gz"))
    pools = build_nq_pool(records, pool_size=10, seed=0)
    assert len(pools) == len(records)
    retrieved = np.mean([r.extra["gold_retrieved"] for r in pools])
    assert retrieved > 0.8  # questions share words with their gold passage
    for rec, orig in zip(pools[:300], records[:300]):
        assert len(rec.passages) == 10
        assert [p.rank for p in rec.passages] == list(range(1, 11))
        scores = [p.score for p in rec.passages]
        assert scores[:-1] == sorted(scores[:-1], reverse=True)
        assert any(p.extra["own_gold"] for p in rec.passages)  # include_gold
        # identical gold passages are indexed once, under the first question's id
        assert any(p.pid == orig.passages[0].pid or p.text == orig.passages[0].text for p in rec.passages)
        for p in rec.passages:
            assert p.relevance == int(has_answer(p.text, rec.answers) or p.extra["own_gold"])
    # more than the gold passage is answer-bearing for some questions (the pool is not trivial)
    assert np.mean([sum(p.relevance for p in r.passages) > 1 for r in pools]) > 0.05


def test_bm25_matches_the_formula():
    texts = ["the cat sat on the mat", "dogs and cats", "a cat and a dog and a cat", "nothing here", "mat mat mat"]
    k1, b = 1.2, 0.75
    index = BM25Index(texts, k1=k1, b=b)
    from udcg_ltr.data.readers.dpr import tokenize
    docs = [tokenize(t) for t in texts]
    avgdl = np.mean([len(d) for d in docs])
    query = "cat on a mat"
    expected = []
    for d in docs:
        s = 0.0
        for term in tokenize(query):
            df = sum(term in other for other in docs)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            tf = d.count(term)
            s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
        expected.append(s)
    np.testing.assert_allclose(index.scores([query])[0], expected, rtol=1e-12)
    idx, val = index.search([query], 3)
    assert list(idx[0]) == list(np.argsort(-np.array(expected), kind="stable")[:3])


def test_bm25_ties_follow_the_seed():
    index = BM25Index([f"doc {i} same words" for i in range(50)])
    a, _ = index.search(["same words"], 5, seed=1)
    b, _ = index.search(["same words"], 5, seed=1)
    c, _ = index.search(["same words"], 5, seed=2)
    d, _ = index.search(["same words"], 5, seed=None)
    assert list(a[0]) == list(b[0]) and list(a[0]) != list(c[0])
    assert list(d[0]) == [0, 1, 2, 3, 4]


def test_nq_pool_tiny(tmp_path):
    objs = [{"question": "capital of Bravia", "answers": ["Ostrel"],
             "ctxs": [{"title": "Bravia", "text": "The capital of Bravia is Ostrel.", "hasanswer": True, "isgold": True}]},
            {"question": "river of Ostrel", "answers": ["Vell"],
             "ctxs": [{"title": "Ostrel", "text": "Ostrel lies on the Vell.", "hasanswer": True, "isgold": True}]},
            {"question": "who painted the mill", "answers": ["Karo"],
             "ctxs": [{"title": "Mill", "text": "The mill was painted by Karo.", "hasanswer": True, "isgold": True}]}]
    records = read_dpr(write_jsonl(tmp_path / "nq.jsonl", objs))
    pools = build_nq_pool(records, pool_size=2)
    assert [p.pid for p in pools[0].passages][0] == "1-0"
    # "Ostrel lies on the Vell" contains the first question's answer: relevant by has_answer
    second = {p.pid: p for p in pools[0].passages}
    assert second.get("2-0") is None or second["2-0"].relevance == 1
    assert all(len(r.passages) == 2 for r in pools)
    with pytest.raises(ValueError):
        build_nq_pool(records, pool_size=0)


def test_dpr_fields_and_ids(tmp_path):
    objs = [{"id": "nq-7", "question": "q?", "answers": ["x"],
             "ctxs": [{"id": "wiki:12", "title": "T", "text": "x here", "score": "3.5"},
                      {"title": "T", "text": "nothing", "has_answer": False}]}]
    rec = read_dpr(write_jsonl(tmp_path / "d.jsonl.gz", objs))[0]
    assert rec.qid == "nq-7"
    assert [p.pid for p in rec.passages] == ["wiki:12", "nq-7-1"]
    assert rec.passages[0].score == 3.5 and rec.passages[0].relevance == 1  # computed from the text
    assert rec.passages[0].extra["hasanswer_computed"] is True
    assert rec.passages[1].relevance == 0


@pytest.mark.parametrize(("bad", "field", "reason"), [
    ({"answers": ["a"], "ctxs": []}, "question", "missing"),
    ({"question": "q", "answers": "a", "ctxs": []}, "answers", "expected a list"),
    ({"question": "q", "answers": ["a", 1], "ctxs": []}, "answers[1]", "expected a string"),
    ({"question": "q", "answers": ["a"], "ctxs": []}, "ctxs", "empty candidate list"),
    ({"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "x", "hasanswer": "yes"}]},
     "ctxs[0].hasanswer", "expected true/false"),
    ({"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "hasanswer": True}]}, "ctxs[0].text", "missing"),
    ({"question": "q", "answers": ["a"], "ctxs": [{"id": 1, "text": "x"}, {"id": 1, "text": "y"}]},
     "ctxs[1].id", "duplicate passage id"),
    ({"question": "q", "answers": ["a"], "ctxs": [{"text": "x", "score": "high"}]}, "ctxs[0].score",
     "expected a number"),
])
def test_dpr_malformed(tmp_path, bad, field, reason):
    good = {"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "a", "hasanswer": True}]}
    path = write_jsonl(tmp_path / "bad.jsonl", [good, bad])
    with pytest.raises(DataError) as info:
        read_dpr(path)
    assert_data_error(info, path, field, line=2, reason=reason)


# ---- SQuAD ---------------------------------------------------------------------------------

def test_squad_chunks_reproduce_the_annotated_set():
    data = load_json(shared("squad", "dev-v1.1.json.gz"))
    annotated = read_annotated_squad(shared("annotated", "squad_top10.jsonl.gz"))
    ours = {p.pid: p for article in squad_passages(data) for p in article}
    assert len(ours) == 3629  # the corpus size the annotated set's README reports
    theirs = {p.pid: p for r in annotated for p in r.passages}
    agree = sum(pid in ours and ours[pid].text == p.text and ours[pid].title == p.title for pid, p in theirs.items())
    rate = agree / len(theirs)
    print(f"squad chunk agreement with annotated set: {agree}/{len(theirs)} = {rate:.4f}")
    assert rate >= 0.99


def test_squad_shared_pools_and_splits():
    records = read_squad(shared("squad", "dev-v1.1.json.gz"), questions_per_article=2, seed=1)
    assert len(records) == 96
    by_article = {}
    for r in records:
        by_article.setdefault(r.extra["article"], set()).add(r.split)
        assert all(p.pid.startswith(f"{r.extra['article']}-") for p in r.passages)
        for p in r.passages:
            assert p.relevance == int(has_answer(p.text, r.answers))
            assert p.is_distractor == (p.relevance == 0)
    assert all(len(s) == 1 for s in by_article.values())
    assert Counter(s.pop() for s in by_article.values()) == {"train": 32, "val": 8, "test": 8}
    # the answer is in the question's own paragraph (up to has_answer's normalisation noise)
    own = np.mean([any(p.relevance for p in r.passages if p.extra["same_paragraph"]) for r in records])
    assert own > 0.95
    # a different seed samples different questions; the same seed the same ones
    again = read_squad(shared("squad", "dev-v1.1.json.gz"), questions_per_article=2, seed=1, articles=[5])
    assert [r.qid for r in again] == [r.qid for r in records if r.extra["article"] == 5]


SQUAD_TINY = {"version": "1.1", "data": [
    {"title": "Alpha_Town", "paragraphs": [
        {"context": "Alpha is a town. It has a mill. The mill is red.",
         "qas": [{"id": "a1", "question": "What colour is the mill?",
                  "answers": [{"text": "red", "answer_start": 0}, {"text": "red", "answer_start": 0}]}]},
        {"context": "The river is long. " + "Word " * 120 + "ends here. Short one.",
         "qas": [{"id": "a2", "question": "What is long?", "answers": [{"text": "the river", "answer_start": 0}]}]}]},
    {"title": "Beta", "paragraphs": [
        {"context": "Beta has a bridge.", "qas": [{"id": "b1", "question": "What does Beta have?",
                                                  "answers": [{"text": "a bridge", "answer_start": 0}]}]}]},
    {"title": "Gamma", "paragraphs": [
        {"context": "Gamma has a tower.", "qas": [{"id": "g1", "question": "What does Gamma have?",
                                                   "answers": [{"text": "tower", "answer_start": 0}]}]}]}]}


def test_squad_tiny(tmp_path):
    path = tmp_path / "squad.json.gz"
    path.write_bytes(gzip.compress(json.dumps(SQUAD_TINY).encode()))
    records = read_squad(path, max_words=8, split_ratios={"train": 1, "val": 1, "test": 1})
    assert [r.qid for r in records] == ["a1", "a2", "b1", "g1"]
    a1 = records[0]
    assert a1.answers == ["red"]  # duplicates removed
    # paragraph 0: 11 words in three sentences -> "Alpha is a town. It has a mill." (8) + "The mill is red."
    assert [(p.pid, p.text) for p in a1.passages[:2]] == [("0-0-0", "Alpha is a town. It has a mill."),
                                                          ("0-0-1", "The mill is red.")]
    # paragraph 1: a sentence over max_words stays whole, in a chunk of its own
    texts = [p.text for p in a1.passages if p.pid.startswith("0-1-")]
    assert texts[0] == "The river is long." and len(texts[1].split()) == 122 and texts[2] == "Short one."
    assert a1.passages[0].title == "Alpha Town"
    assert [p.relevance for p in a1.passages] == [0, 1, 0, 0, 0]
    assert [r.split for r in records] == ["train", "train", "val", "test"]
    paragraph_pool = read_squad(path, max_words=8, pool="paragraph")
    assert [p.pid for p in paragraph_pool[0].passages] == ["0-0-0", "0-0-1"]
    custom = read_squad(path, article_splits={0: "test", 1: "train", 2: "train"}, questions_per_article=1)
    assert [(r.qid, r.split) for r in custom] == [("a1", "test"), ("b1", "train"), ("g1", "train")] or \
        [(r.qid, r.split) for r in custom] == [("a2", "test"), ("b1", "train"), ("g1", "train")]
    with pytest.raises(ValueError):
        read_squad(path, pool="corpus")


@pytest.mark.parametrize(("mutate", "field", "reason"), [
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][0]["answers"][0].update(text=7),
     "data[1].paragraphs[0].qas[0].answers[0].text", "expected a string"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][0].update(answers=[]),
     "data[1].paragraphs[0].qas[0].answers", "no gold answer"),
    (lambda d: d["data"][2]["paragraphs"][0].pop("context"), "data[2].paragraphs[0].context", "missing"),
    (lambda d: d["data"][0].pop("title"), "data[0].title", "missing"),
    (lambda d: d.pop("data"), "data", "missing"),
])
def test_squad_malformed(tmp_path, mutate, field, reason):
    data = json.loads(json.dumps(SQUAD_TINY))
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as info:
        read_squad(path)
    assert_data_error(info, path, field, reason=reason)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["a", "bb", "ccc", "d,", "e;"]), min_size=1, max_size=15),
                          st.sampled_from(".!?")), min_size=1, max_size=12),
       st.integers(1, 30))
def test_chunking_rule(parts, max_words):
    sents = [" ".join(words) + end for words, end in parts]
    text = "  ".join(sents)
    assert split_sentences(text) == sents
    chunks = chunk_paragraph(text, max_words)
    assert " ".join(chunks) == " ".join(sents)  # nothing lost, order kept
    for i, chunk in enumerate(chunks):
        n = len(chunk.split())
        assert n <= max_words or len(split_sentences(chunk)) == 1  # only a lone long sentence may overflow
        if i + 1 < len(chunks):  # greedy: the next sentence did not fit
            assert n + len(split_sentences(chunks[i + 1])[0].split()) > max_words


def test_assign_splits():
    assert Counter(assign_splits(48)) == {"train": 32, "val": 8, "test": 8}
    assert assign_splits(48)[:32] == ["train"] * 32
    shuffled = assign_splits(48, seed=3)
    assert Counter(shuffled) == Counter(assign_splits(48)) and shuffled != assign_splits(48)
    assert assign_splits(48, seed=3) == shuffled
    with pytest.raises(ValueError):
        assign_splits(4, {"train": 0})


# ---- HotpotQA ------------------------------------------------------------------------------

def test_hotpotqa_shared():
    records = read_hotpotqa(shared("hotpotqa", "dev_300.jsonl.gz"))
    assert len(records) == 300
    assert all(sum(p.relevance for p in r.passages) == 2 for r in records)
    assert all(p.is_distractor == (p.relevance == 0) for r in records for p in r.passages)
    # most supporting paragraphs of span answers contain the answer; yes/no answers rarely do
    supporting = [p.extra["has_answer"] for r in records for p in r.passages if p.relevance]
    assert np.mean(supporting) > 0.3
    assert all(r.answers for r in records)


def _hotpot(i, **ctx_over):
    ctx = {"id": "0", "title": "T", "paragraph_text": "Paris is big.", "is_supporting": True}
    ctx.update(ctx_over)
    return {"question_id": f"h{i}", "question_text": "Which city?",
            "answers_objects": [{"number": "", "spans": ["Paris"]}],
            "contexts": [ctx, {"id": "1", "title": "U", "paragraph_text": "Rome.", "is_supporting": False}]}


def test_hotpotqa_tiny(tmp_path):
    rec = read_hotpotqa(write_jsonl(tmp_path / "h.jsonl", [_hotpot(0)]))[0]
    assert rec.qid == "h0" and rec.answers == ["Paris"]
    assert [p.pid for p in rec.passages] == ["h0-0", "h0-1"]
    assert [p.relevance for p in rec.passages] == [1, 0]
    assert [p.extra["has_answer"] for p in rec.passages] == [True, False]
    assert rec.passages[0].title == "T" and rec.passages[1].rank == 2


@pytest.mark.parametrize(("bad", "field", "reason"), [
    (_hotpot(1, is_supporting="yes"), "contexts[0].is_supporting", "expected true/false"),
    (_hotpot(1, paragraph_text=None), "contexts[0].paragraph_text", "must not be null"),
    (_hotpot(1, id="1"), "contexts[1].id", "duplicate passage id"),
    ({**_hotpot(1), "answers_objects": [{"spans": []}]}, "answers_objects", "no gold answer"),
    ({**_hotpot(1), "answers_objects": [{"spans": [3]}]}, "answers_objects[0].spans[0]", "expected a string"),
    ({**_hotpot(1), "contexts": []}, "contexts", "empty candidate list"),
])
def test_hotpotqa_malformed(tmp_path, bad, field, reason):
    path = write_jsonl(tmp_path / "bad.jsonl", [_hotpot(0), bad])
    with pytest.raises(DataError) as info:
        read_hotpotqa(path)
    assert_data_error(info, path, field, line=2, reason=reason)


# ---- TREC ----------------------------------------------------------------------------------

def test_trec_run_and_qrels_round_trip(tmp_path):
    run = {"q1": {"d1": 1.5, "d2": 2.25, "d3": -0.1}, "q2": {"x": 0.1 + 0.2}}
    write_trec_run(tmp_path / "run.txt", run, tag="mine")
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert lines[0] == "q1 Q0 d2 1 2.25 mine" and lines[2].split()[:4] == ["q1", "Q0", "d3", "3"]
    assert read_trec_run(tmp_path / "run.txt") == run  # floats exact
    qrels = {"q1": {"d1": 0, "d2": 3}, "q2": {"x": 1}}
    write_trec_qrels(tmp_path / "qrels.txt.gz", qrels)
    assert read_trec_qrels(tmp_path / "qrels.txt.gz") == qrels
    with pytest.raises(ValueError, match="white space"):
        write_trec_run(tmp_path / "r2.txt", {"q 1": {"d": 1.0}})
    with pytest.raises(ValueError, match="not finite"):
        write_trec_run(tmp_path / "r3.txt", {"q1": {"d": float("nan")}})


@pytest.mark.parametrize(("line", "field", "reason"), [
    ("q1 Q0 d2 1 0.5", None, "expected 6"),
    ("q1 Q0 d2 first 0.5 t", "column 4 (rank)", "integer rank"),
    ("q1 Q0 d2 2 high t", "column 5 (score)", "finite score"),
    ("q1 Q0 d2 2 nan t", "column 5 (score)", "finite score"),
    ("q1 Q0 d1 2 0.5 t", "column 3 (docid)", "listed twice"),
])
def test_trec_run_malformed(tmp_path, line, field, reason):
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 1.0 t\n" + line + "\n")
    with pytest.raises(DataError) as info:
        read_trec_run(path)
    err = info.value
    assert err.path == str(path) and err.line == 2 and err.field == field and reason in err.reason


@pytest.mark.parametrize(("line", "field", "reason"), [
    ("q1 0 d2", None, "expected 4"),
    ("q1 0 d2 relevant", "column 4 (rel)", "integer grade"),
    ("q1 0 d1 2", "column 3 (docid)", "judged twice"),
])
def test_trec_qrels_malformed(tmp_path, line, field, reason):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1\n\n" + line + "\n")
    with pytest.raises(DataError) as info:
        read_trec_qrels(path)
    err = info.value
    assert err.path == str(path) and err.line == 3 and err.field == field and reason in err.reason


def test_dl19_shared():
    shared("trec_dl19", "retrieve_results_dl19.json.gz")
    records = read_dl19()  # default paths
    assert len(records) == 43
    assert all(len(r.passages) == 100 and [p.rank for p in r.passages] == list(range(1, 101)) for r in records)
    qrels = read_trec_qrels(shared("trec_dl19", "qrels.dl19-passage.txt.gz"))
    assert {r.qid for r in records} == set(qrels)
    for r in records[:5]:
        for p in r.passages:
            assert p.relevance == qrels[r.qid].get(p.pid, 0)
            assert p.extra["unjudged"] == (p.pid not in qrels[r.qid])
    # published BM25 nDCG@10 on DL19 is about 0.506 (trec_eval: linear gains, ideal over all qrels)
    slates = pad_records(records)
    ideal = [sorted((int(g) for g, c in r.extra["judged_grades"].items() for _ in range(c)), reverse=True)[:10]
             for r in records]
    ideal_gains = np.array([g + [0] * (10 - len(g)) for g in ideal], dtype=float)
    ideal_mask = np.array([[True] * len(g) + [False] * (10 - len(g)) for g in ideal])
    value = ndcg(slates.relevance, slates.mask, k=10, ideal_gains=ideal_gains, ideal_mask=ideal_mask).mean()
    assert abs(value - 0.506) < 0.001


def test_dl19_records_run_qrels_round_trip():
    shared("trec_dl19", "retrieve_results_dl19.json.gz")
    records = read_dl19()
    run = records_to_run(records)
    qrels = records_to_qrels(records, include_unjudged=True)
    texts = {p.pid: p.text for r in records for p in r.passages}
    queries = {r.qid: r.question for r in records}
    rebuilt = records_from_run(run, qrels, texts, queries)
    assert [[p.pid for p in r.passages] for r in rebuilt] == [[p.pid for p in r.passages] for r in records]
    assert [[p.relevance for p in r.passages] for r in rebuilt] == [[p.relevance for p in r.passages] for r in records]
    judged = records_to_qrels(records)
    assert sum(map(len, judged.values())) == sum(not p.extra["unjudged"] for r in records for p in r.passages)


def test_records_run_helpers(tmp_path):
    from udcg_ltr.data.schema import Passage, QueryRecord
    recs = [QueryRecord(qid="q", question="?", passages=[
        Passage(pid="a", text="x", rank=2, score=0.5, relevance=0, annotations={"m": {"p_no_response": 0.9}}),
        Passage(pid="b", text="y", rank=1, score=0.7, relevance=2, annotations={"m": {"p_no_response": 0.1}}),
        Passage(pid="c", text="z", rank=3, score=0.1, relevance=None, annotations={"m": {"p_no_response": 0.5}})])]
    assert records_to_run(recs) == {"q": {"a": 0.5, "b": 0.7, "c": 0.1}}
    assert records_to_run(recs, "rank") == {"q": {"a": -2.0, "b": -1.0, "c": -3.0}}
    assert records_to_run(recs, "annotations.m.p_no_response")["q"]["b"] == 0.1
    assert records_to_run(recs, lambda p: len(p.pid))["q"]["c"] == 1.0
    assert records_to_qrels(recs) == {"q": {"a": 0, "b": 2}}
    assert records_to_qrels(recs, include_zero=False) == {"q": {"b": 2}}
    with pytest.raises(ValueError, match="numeric"):
        records_to_run(recs, "relevance")
    with pytest.raises(ValueError, match="unknown score field"):
        records_to_run(recs, "bogus")
    # a run written from records reads back as the same run
    write_trec_run(tmp_path / "r.txt", records_to_run(recs))
    assert read_trec_run(tmp_path / "r.txt") == records_to_run(recs)
    built = records_from_run({"q": {"a": 1.0, "b": 3.0}}, {"q": {"b": 1}}, {"a": {"title": "T", "text": "x"},
                                                                               "b": ("U", "y")}, {"q": "?"})
    assert [(p.pid, p.title, p.rank, p.relevance, p.extra["unjudged"]) for p in built[0].passages] == \
        [("b", "U", 1, 1, False), ("a", "T", 2, 0, True)]
    with pytest.raises(DataError, match="no text for document"):
        records_from_run({"q": {"zz": 1.0}}, None, {}, {"q": "?"})


def _dl19_entry(query_id, n=3, **hit_over):
    hits = [{"content": f"text {j}", "qid": query_id, "docid": f"d{j}", "rank": j + 1, "score": 10.0 - j}
            for j in range(n)]
    hits[1].update(hit_over)
    return {"query": f"query {query_id}", "hits": hits}


@pytest.mark.parametrize(("entry", "field", "reason"), [
    (_dl19_entry(2, score="high"), "[1].hits[1].score", "expected a number"),
    (_dl19_entry(2, qid=3), "[1].hits[1].qid", "different qids"),
    (_dl19_entry(2, docid="d0"), "[1].hits[1].docid", "duplicate passage id"),
    ({"query": "q", "hits": []}, "[1].hits", "no hits"),
    (_dl19_entry(1), "[1].hits[0].qid", "appears twice"),
])
def test_dl19_malformed(tmp_path, entry, field, reason):
    results = tmp_path / "results.json"
    results.write_text(json.dumps([_dl19_entry(1), entry], indent=1))
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 Q0 d0 3\n1 Q0 d2 1\n")
    with pytest.raises(DataError) as info:
        read_dl19(results, qrels)
    err = info.value
    assert err.path == str(results) and err.field == field and reason in err.reason
    if reason != "appears twice":
        assert err.line == results.read_text().split("\n").index(" {", 2) + 1


def test_dl19_tiny_relevance_and_order(tmp_path):
    results = tmp_path / "results.json"
    entry = _dl19_entry(1, n=3)
    entry["hits"].reverse()  # file order is not rank order
    results.write_text(json.dumps([entry]))
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 Q0 d0 3\n1 Q0 d2 1\n1 Q0 d9 2\n")
    rec = read_dl19(results, qrels)[0]
    assert [p.pid for p in rec.passages] == ["d0", "d1", "d2"]
    assert [p.relevance for p in rec.passages] == [3, 0, 1]
    assert [p.extra["unjudged"] for p in rec.passages] == [False, True, False]
    assert rec.extra["judged_grades"] == {"1": 1, "2": 1, "3": 1}
    assert [p.is_relevant(2) for p in rec.passages] == [True, False, False]


# ---- BEIR ----------------------------------------------------------------------------------

def make_beir(folder, *, corpus=None, qrels=None):
    folder.mkdir(parents=True, exist_ok=True)
    corpus = corpus if corpus is not None else [
        {"_id": "d1", "title": "Alpha", "text": "alpha text"}, {"_id": "d2", "title": "", "text": "beta text"},
        {"_id": "d3", "title": "Gamma", "text": "gamma text", "metadata": {}}, {"_id": "d4", "text": "delta"}]
    write_jsonl(folder / "corpus.jsonl", corpus)
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "alpha?"}, {"_id": "q2", "text": "gamma?"},
                                           {"_id": "q3", "text": "not judged in test"}])
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text(
        qrels if qrels is not None else "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n")
    return folder


def test_beir_judged_pools(tmp_path):
    folder = make_beir(tmp_path / "tiny")
    records = read_beir(folder)
    assert [r.qid for r in records] == ["q1", "q2"]
    q1 = records[0]
    assert q1.question == "alpha?" and q1.split == "test"
    assert [(p.pid, p.title, p.text, p.relevance, p.rank) for p in q1.passages] == \
        [("d1", "Alpha", "alpha text", 1, None), ("d2", "", "beta text", 0, None)]
    assert q1.extra["judged_grades"] == {"0": 1, "1": 1}


def test_beir_run_pools(tmp_path):
    folder = make_beir(tmp_path / "tiny")
    run = {"q1": {"d4": 3.0, "d1": 2.0, "d3": 1.0}, "q2": {"d3": 0.5, "d2": 0.9}}
    records = read_beir(folder, run=run, top_k=2)
    assert [(p.pid, p.rank, p.score, p.relevance, p.extra["unjudged"]) for p in records[0].passages] == \
        [("d4", 1, 3.0, 0, True), ("d1", 2, 2.0, 1, False)]
    write_trec_run(tmp_path / "run.txt", run)
    from_file = read_beir(folder, run=tmp_path / "run.txt", top_k=2)
    assert [[p.pid for p in r.passages] for r in from_file] == [[p.pid for p in r.passages] for r in records]
    with pytest.raises(DataError, match="empty candidate list"):
        read_beir(folder, run={"q1": {"d1": 1.0}})  # q2 judged but not retrieved


def test_beir_malformed(tmp_path):
    bad_corpus = make_beir(tmp_path / "c", corpus=[{"_id": "d1", "text": "x"}, {"_id": "d2", "text": 5}])
    with pytest.raises(DataError) as info:
        read_beir(bad_corpus)
    assert_data_error(info, bad_corpus / "corpus.jsonl", "text", line=2, reason="expected a string")

    missing = make_beir(tmp_path / "m", corpus=[{"_id": "d1", "text": "x"}])
    with pytest.raises(DataError, match="not in the corpus") as info:
        read_beir(missing)
    assert info.value.path == str(missing / "corpus.jsonl")

    bad_qrels = make_beir(tmp_path / "q", qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\tvery\n")
    with pytest.raises(DataError) as info:
        read_beir(bad_qrels)
    assert_data_error(info, bad_qrels / "qrels" / "test.tsv", "column 3 (score)", line=3, reason="integer grade")

    short = make_beir(tmp_path / "s", qrels="query-id\tcorpus-id\tscore\nq1 d1 1\n")
    with pytest.raises(DataError, match="3 tab-separated columns") as info:
        read_beir(short)
    assert info.value.line == 2

    with pytest.raises(DataError, match="no such file") as info:  # the path is named, not FileNotFoundError(2, ..)
        read_beir(tmp_path / "c", split="dev")
    assert info.value.path == str(tmp_path / "c" / "qrels" / "dev.tsv") and info.value.path in repr(info.value)
    assert isinstance(info.value, FileNotFoundError)  # "is the data there?" checks keep working
