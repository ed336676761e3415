"""Inference API (Reranker), TREC run writing, saving, and evaluate_reranker on test-built data."""

from __future__ import annotations

import numpy as np
import pytest
from model_fixtures import tiny_bert

from udcg_ltr import metrics as M
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.data.scores import PassageScores

LLM = "toy-llm"


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory):
    from udcg_ltr.models.reranker import Reranker, save_reranker

    model, tok = tiny_bert(layers=1, seed=1)
    path = tmp_path_factory.mktemp("rr") / "model"
    save_reranker(model, tok, path, max_length=48, template="{title} | {text}")
    return Reranker.from_pretrained(path, batch_size=4)


def records(n=5, seed=0):
    rng = np.random.default_rng(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()
    out = []
    for q in range(n):
        m = int(rng.integers(2, 7))
        ps = []
        for j in range(m):
            text = " ".join(rng.choice(words, size=int(rng.integers(2, 30))))
            rel = int(rng.integers(0, 2))
            ps.append(Passage(pid=f"d{q}_{j}", title=f"T{j}" if j % 2 else "", text=text, rank=j + 1,
                              score=float(m - j), relevance=rel,
                              annotations={LLM: {"p_no_response": float(rng.uniform())}}))
        out.append(QueryRecord(qid=f"q{q}", question=" ".join(rng.choice(words, size=4)), answers=["x"],
                               passages=ps))
    return out


def test_rank_orders_by_score_and_cuts(tiny_reranker):
    rec = records(1, seed=3)[0]
    texts = [p.text for p in rec.passages]
    scores = tiny_reranker.scores(rec.question, texts)
    ranked = tiny_reranker.rank_passages(rec.question, texts)
    assert [r.rank for r in ranked] == list(range(1, len(texts) + 1))
    assert [r.index for r in ranked] == list(np.argsort(-scores, kind="stable"))
    assert all(a.score >= b.score for a, b in zip(ranked, ranked[1:]))
    assert ranked[0].text == texts[ranked[0].index] and ranked[0].pid is None
    top = tiny_reranker.rank_passages(rec.question, texts, top_k=2)
    assert [r.index for r in top] == [r.index for r in ranked[:2]]


def test_ties_keep_input_order_and_passages_use_the_saved_template(tiny_reranker):
    ranked = tiny_reranker.rank_passages("q", ["same text", "other", "same text"])
    same = [r.index for r in ranked if r.text == "same text"]
    assert same == [0, 2]
    p = Passage(pid="x", title="Title", text="body")
    r = tiny_reranker.rank_passages("q", [p])[0]
    assert r.pid == "x" and r.text == "Title | body"
    assert tiny_reranker.scores("q", [p])[0] == pytest.approx(tiny_reranker.scores("q", ["Title | body"])[0])


def test_batching_and_length_sorting_do_not_change_scores(tiny_reranker):
    from udcg_ltr.models.reranker import Reranker

    recs = records(6, seed=4)
    a = tiny_reranker.score_records(recs)
    one = Reranker(tiny_reranker.model, tiny_reranker.tokenizer, batch_size=1, max_length=48,
                   template=tiny_reranker.template)
    b = one.score_records(recs)
    for x, y, r in zip(a.aligned(recs), b.aligned(recs), recs):
        assert x.shape == (len(r.passages),)
        assert np.allclose(x, y, atol=1e-5)
    ranked = tiny_reranker.rank_records(recs, top_k=3)
    for r, rs, s in zip(recs, ranked, a.aligned(recs)):
        assert [x.pid for x in rs] == [r.passages[i].pid for i in np.argsort(-s, kind="stable")[:3]]


def test_write_run_round_trips(tiny_reranker, tmp_path):
    from udcg_ltr.data.readers.trec import read_trec_run
    from udcg_ltr.models.reranker import write_run

    recs = records(4, seed=5)
    scores = tiny_reranker.score_records(recs)
    path = write_run(recs, scores, tmp_path / "run.txt", tag="toy")
    run = read_trec_run(path)
    assert list(run) == [r.qid for r in recs]
    for r in recs:
        assert run[r.qid] == pytest.approx({p.pid: float(v) for p, v in zip(r.passages, scores[r.qid])})
    lines = [ln.split() for ln in path.read_text().splitlines() if ln.startswith(recs[0].qid + " ")]
    assert [int(ln[3]) for ln in lines] == list(range(1, len(recs[0].passages) + 1))
    assert [float(ln[4]) for ln in lines] == sorted(scores[recs[0].qid].tolist(), reverse=True)
    assert all(ln[5] == "toy" for ln in lines)
    p2 = tiny_reranker.write_run(recs, tmp_path / "run2.txt", tag="toy")
    assert p2.read_text() == path.read_text()
    # per-record arrays aligned with the records (the older form) write the same run
    p3 = write_run(recs, scores.aligned(recs), tmp_path / "run3.txt", tag="toy")
    assert p3.read_text() == path.read_text()


def test_save_reranker_replaces_atomically(tmp_path, tiny_reranker):
    from udcg_ltr.models.reranker import RERANKER_CONFIG, Reranker, save_reranker

    dest = tmp_path / "m"
    save_reranker(tiny_reranker.model, tiny_reranker.tokenizer, dest, max_length=40)
    save_reranker(tiny_reranker.model, tiny_reranker.tokenizer, dest, max_length=33)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temp or old directories left
    assert (dest / RERANKER_CONFIG).is_file() and (dest / "config.json").is_file()
    assert Reranker.from_pretrained(dest).max_length == 33


def test_evaluate_reranker_matches_metrics_and_oracle_bound():
    from udcg_ltr.models.evaluation import evaluate_reranker

    recs = records(8, seed=6)
    k = 3
    util = [np.array([p.utility(LLM) for p in r.passages]) for r in recs]
    oracle = evaluate_reranker(recs, util, LLM, k)
    rng = np.random.default_rng(0)
    rand = evaluate_reranker(recs, [rng.normal(size=len(r.passages)) for r in recs], LLM, k)
    # UDCG@k (Eq. 4) of the oracle order: the k highest utilities of each pool, by brute force
    best = np.mean([M.udcg(np.sort(u)[::-1][None, :], k=k)[0] for u in util])
    assert oracle[f"udcg@{k}"] == pytest.approx(best, abs=1e-12)
    assert rand[f"udcg@{k}"] <= oracle[f"udcg@{k}"] + 1e-12
    # retrieval order via a {qid: {pid: score}} mapping agrees with the metrics on retrieval-ordered rows
    by_rank = {r.qid: {p.pid: -float(p.rank) for p in r.passages} for r in recs}
    res = evaluate_reranker(recs, by_rank, LLM, k, prefix="test/")
    from udcg_ltr.data.padded import pad_records

    s = pad_records(recs, llm=LLM, order="retrieval")
    assert res[f"test/udcg@{k}"] == pytest.approx(M.mean(M.udcg(s.utility, s.mask, k=k)).value)
    assert res[f"test/ndcg@{k}"] == pytest.approx(M.mean(M.ndcg(s.relevance, s.mask, k=k)).value)
    assert res[f"test/mrr@{k}"] == pytest.approx(M.mean(M.mrr(s.relevance, s.mask, k=k)).value)
    assert res["test/n_queries"] == 8
    assert "test/da_dcg@3" in res and "test/harm@3" in res  # the metric helper's table rides along



def test_slate_metrics_are_the_metric_table_under_its_keys():
    """Validation's metrics and the report's table share one key per metric (metrics.table.METRIC_NAMES):
    every relevance column of slate_metrics is the metric table's mean on the same ranked rows."""
    from udcg_ltr.metrics.table import (
        METRIC_NAMES,
        GradedLabels,
        JudgedPool,
        MetricOptions,
        RankedRows,
        metric_table,
        summarize,
    )
    from udcg_ltr.models.evaluation import slate_metrics

    rng = np.random.default_rng(4)
    k, shape = 3, (7, 6)
    mask = rng.random(shape) < 0.85
    mask[:, 0] = True
    graded = np.where(mask, rng.integers(0, 6, shape), 0).astype(float)
    utility = np.where(mask, rng.uniform(-1, 1, shape), 0.0)
    scores = np.where(mask, rng.normal(size=shape), -np.inf)
    judged = np.arange(shape[0]) != 2
    got = slate_metrics(scores, options=MetricOptions(k=k), utility=utility, graded=graded, mask=mask,
                        relevance_threshold=3, pool=JudgedPool(judged=judged), prefix="val/")
    order = M.rank_by_scores(scores, mask)
    m, g = M.take_ranked(mask, order), M.take_ranked(graded, order)
    table = summarize(metric_table(options=MetricOptions(k=k), rows=RankedRows(mask=m, relevant=(g >= 3) & m, gains=g),
                                   pool=JudgedPool(ideal_gains=g, ideal_mask=m, judged=judged),
                                   graded=GradedLabels(grades=g)))
    for name, res in table.items():
        assert got[f"val/{name}"] == pytest.approx(res.value, nan_ok=True), name
    assert set(got) == {f"val/{name}" for name in table} | {"val/udcg@3", "val/utility@3", "val/unjudged_queries"}
    assert all(key.split("/")[1].split("@")[0] in METRIC_NAMES for key in got if "@" in key)
    assert got["val/udcg@3"] == pytest.approx(M.udcg(M.take_ranked(utility, order), m, k=k).mean())
    assert got["val/unjudged_queries"] == 1


def test_per_query_udcg_averages_to_the_reported_udcg():
    from udcg_ltr.models.evaluation import evaluate_reranker, per_query_udcg

    recs = records(8, seed=7)
    k = 3
    rng = np.random.default_rng(1)
    scores = [rng.normal(size=len(r.passages)) for r in recs]
    per_query = per_query_udcg(recs, scores, LLM, k)
    assert per_query.shape == (8,)
    assert per_query.mean() == pytest.approx(evaluate_reranker(recs, scores, LLM, k)[f"udcg@{k}"], abs=1e-12)
    # each value is Eq. 4 on that query's own top-k utilities
    u0 = np.array([p.utility(LLM) for p in recs[0].passages])[np.argsort(-scores[0], kind="stable")][:k]
    assert per_query[0] == pytest.approx(M.udcg(u0[None, :], k=k)[0], abs=1e-12)


def test_per_query_metrics_average_to_the_reported_table():
    """udcg@k, ndcg@k and hits@k per query (for paired tests) average to evaluate_reranker's values."""
    from udcg_ltr.models.evaluation import evaluate_reranker, per_query_metrics

    recs = records(9, seed=3)
    k = 4
    rng = np.random.default_rng(5)
    scores = [rng.normal(size=len(r.passages)) for r in recs]
    table = evaluate_reranker(recs, scores, LLM, k)
    per_query = per_query_metrics(recs, scores, LLM, k)
    assert set(per_query) == {f"udcg@{k}", f"ndcg@{k}", f"hits@{k}"}
    for name, values in per_query.items():
        assert values.shape == (9,)
        assert values.mean() == pytest.approx(table[name], abs=1e-12), name
    # keyed scores (udcg_ltr.data.scores) give the same numbers as the aligned list
    keyed = PassageScores.of(recs, scores)
    assert evaluate_reranker(recs, keyed, LLM, k) == pytest.approx(table, abs=0, nan_ok=True)
    assert all(np.array_equal(v, per_query[name]) for name, v in per_query_metrics(recs, keyed, LLM, k).items())


def test_evaluate_reranker_graded_ideal_from_all_qrels():
    """nDCG's ideal comes from every judged passage of the query (TREC), not just the reranked pool."""
    from udcg_ltr.models.evaluation import evaluate_reranker

    ps = [Passage(pid=f"d{i}", text="t", rank=i + 1, score=float(-i), relevance=g) for i, g in enumerate([1, 3, 0])]
    rec = QueryRecord(qid="1", question="q", passages=ps, extra={"judged_grades": {"0": 4, "1": 1, "2": 1, "3": 1}})
    res = evaluate_reranker([rec], [[0.1, 0.9, 0.0]], None, 3, relevance_threshold=2)
    dcg = 3 / np.log2(2) + 1 / np.log2(3)
    idcg = 3 / np.log2(2) + 2 / np.log2(3) + 1 / np.log2(4)
    assert res["ndcg@3"] == pytest.approx(dcg / idcg)
    assert res["recall@3"] == pytest.approx(1 / 2)  # 2 passages with grade >= 2 judged, 1 retrieved
    assert "udcg@3" not in res  # no LLM: no utilities
    local = evaluate_reranker([QueryRecord(qid="1", question="q", passages=ps)], [[0.1, 0.9, 0.0]], None, 3)
    assert local["ndcg@3"] == pytest.approx(1.0)


class _StubScorer:
    """Answers with the first word of the first passage of the context (records what it was asked)."""

    def __init__(self):
        self.items = None

    def score(self, items, generate=False):
        from udcg_ltr.annotate.scorer import ScoreResult

        assert generate
        self.items = list(items)
        return [ScoreResult(0.0, it.passages[0][1].split()[0] if it.passages else "NO-RESPONSE", 10)
                for it in items]


def test_end_to_end_rates_with_a_scorer():
    pytest.importorskip("udcg_ltr.annotate.scorer")
    from udcg_ltr.models.evaluation import evaluate_reranker

    def rec(qid, first, rel):
        ps = [Passage(pid=f"{qid}a", title="A", text=f"{first} is here", relevance=rel),
              Passage(pid=f"{qid}b", title="B", text="NO-RESPONSE", relevance=0)]
        return QueryRecord(qid=qid, question="?", answers=["paris"], passages=ps)

    recs = [rec("1", "paris", 1), rec("2", "london", 0), rec("3", "paris", 0)]
    scorer = _StubScorer()
    out = evaluate_reranker(recs, [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], None, 1, scorer=scorer)
    # q1 correct; q2 wrong; q3's top passage is the abstention -> abstained
    assert out["correct_rate"] == pytest.approx(1 / 3)
    assert out["wrong_rate"] == pytest.approx(1 / 3)
    assert out["abstained_rate"] == pytest.approx(1 / 3)
    assert [it.passages for it in scorer.items][0] == [("A", "paris is here")]
