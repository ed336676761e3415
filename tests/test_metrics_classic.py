"""Classic metrics against independent implementations (scikit-learn, trec_eval via ir_measures),
plus the ranking helper and the padding conventions shared by every metric."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from udcg_ltr.metrics import (
    average_precision,
    dcg,
    hits,
    ideal_dcg,
    mean,
    ndcg,
    precision,
    rank_by_scores,
    recall,
    reciprocal_rank,
    take_ranked,
)
from udcg_ltr.report import markdown_table

sklearn_metrics = pytest.importorskip("sklearn.metrics")
ir_measures = pytest.importorskip("ir_measures")


def _untied_scores(rng, n_queries, width):
    # a permutation per row plus a small jitter: distinct by construction
    ranks = rng.permuted(np.tile(np.arange(width, dtype=np.float64), (n_queries, 1)), axis=1)
    return ranks + 0.5 * rng.random((n_queries, width))


@pytest.mark.parametrize("k", [None, 1, 3, 7])
def test_ndcg_matches_sklearn_on_random_nonnegative_gains(k):
    rng = np.random.default_rng(1234 + (k or 0))
    n_queries, width = 40, 12
    y_true = rng.random((n_queries, width)) * rng.integers(0, 2, (n_queries, width)) * 3.0
    y_true[:, 0] += 0.1  # sklearn needs a positive IDCG to compare a non-degenerate value
    y_score = _untied_scores(rng, n_queries, width)
    ours = ndcg(take_ranked(y_true, rank_by_scores(y_score)), k=k)
    for i in range(n_queries):
        ref = sklearn_metrics.ndcg_score(y_true[i:i + 1], y_score[i:i + 1], k=k)
        assert ours[i] == pytest.approx(ref, abs=1e-12)


def test_dcg_matches_sklearn_dcg_score():
    rng = np.random.default_rng(7)
    y_true = rng.random((25, 9)) * 4
    y_score = _untied_scores(rng, 25, 9)
    ours = dcg(take_ranked(y_true, rank_by_scores(y_score)), k=5)
    ref = [sklearn_metrics.dcg_score(y_true[i:i + 1], y_score[i:i + 1], k=5) for i in range(25)]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


def _trec_reference(labels_by_doc, scores, extra_relevant, k):
    """Per-query values from trec_eval (pytrec_eval through ir_measures) for a binary run."""
    from ir_measures import AP, RR, P, R, Success, nDCG

    qrels, run = [], []
    n_queries, width = scores.shape
    for i in range(n_queries):
        q = f"q{i}"
        for j in range(width):
            run.append(ir_measures.ScoredDoc(q, f"d{j}", float(scores[i, j])))
            qrels.append(ir_measures.Qrel(q, f"d{j}", int(labels_by_doc[i, j])))
        for j in range(extra_relevant[i]):
            qrels.append(ir_measures.Qrel(q, f"missing{j}", 1))
    measures = [nDCG @ k, RR @ k, AP @ k, P @ k, R @ k, Success @ k]
    out = {str(m): np.full(n_queries, np.nan) for m in measures}
    for res in ir_measures.iter_calc(measures, qrels, run):
        out[str(res.measure)][int(res.query_id[1:])] = res.value
    return {name.split("@")[0]: values for name, values in out.items()}


@pytest.mark.parametrize("k", [1, 5, 10])
def test_binary_metrics_match_trec_eval_with_unretrieved_relevant(k):
    rng = np.random.default_rng(99 + k)
    n_queries, width = 60, 15
    labels = rng.random((n_queries, width)) < 0.2
    extra = rng.integers(0, 3, n_queries)  # relevant qrels the run never retrieved
    extra[(labels.sum(axis=1) + extra) == 0] = 1  # trec_eval skips queries without relevant qrels
    scores = _untied_scores(rng, n_queries, width)
    ref = _trec_reference(labels, scores, extra, k)

    ranked = take_ranked(labels, rank_by_scores(scores))
    n_rel = labels.sum(axis=1) + extra
    ideal_mask = np.arange(n_rel.max())[None, :] < n_rel[:, None]
    np.testing.assert_allclose(ndcg(ranked, k=k, ideal_gains=ideal_mask.astype(float), ideal_mask=ideal_mask),
                               ref["nDCG"], atol=1e-9)
    np.testing.assert_allclose(reciprocal_rank(ranked, k=k), ref["RR"], atol=1e-9)
    np.testing.assert_allclose(average_precision(ranked, k=k, n_relevant=n_rel), ref["AP"], atol=1e-9)
    np.testing.assert_allclose(precision(ranked, k=k), ref["P"], atol=1e-9)
    np.testing.assert_allclose(recall(ranked, k=k, n_relevant=n_rel), ref["R"], atol=1e-9)
    np.testing.assert_allclose(hits(ranked, k=k), ref["Success"], atol=1e-9)


def test_graded_threshold_and_signed_ideal():
    labels = np.array([[3.0, 1.0, 2.0, 0.0]])
    # threshold=2: relevant are the labels 3 and 2, at ranks 1 and 3
    assert reciprocal_rank(labels, threshold=2)[0] == 1.0
    assert average_precision(labels, threshold=2)[0] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert precision(labels, k=2, threshold=2)[0] == pytest.approx(1 / 2)
    # signed gains: the ideal puts negatives last, so with k=2 the ideal ignores them
    signed = np.array([[-1.0, 2.0, 1.0]])
    assert ideal_dcg(signed, k=2)[0] == pytest.approx(2.0 + 1.0 / np.log2(3))
    assert dcg(signed, k=2)[0] == pytest.approx(-1.0 + 2.0 / np.log2(3))


def test_undefined_ndcg_and_empty_rows():
    zeros = np.zeros((2, 4))
    assert np.all(ndcg(zeros) == 0.0)
    assert np.all(np.isnan(ndcg(zeros, undefined=np.nan)))
    mask = np.array([[False] * 4, [True, False, False, False]])
    labels = np.array([[1.0, 1, 1, 1], [1, 1, 1, 1]])
    assert reciprocal_rank(labels, mask)[0] == 0.0 and reciprocal_rank(labels, mask)[1] == 1.0
    assert precision(labels, mask)[0] == 0.0  # no real entry: nothing retrieved
    assert hits(labels, mask, k=3).tolist() == [0.0, 1.0]


# ---- padding anywhere gives the same result as padding at the end -----------------------------

rows = st.integers(1, 4).flatmap(lambda q: st.integers(1, 8).flatmap(lambda w: st.tuples(
    hnp.arrays(np.float64, (q, w), elements=st.floats(-2, 3, allow_nan=False, width=32)),
    hnp.arrays(np.bool_, (q, w)),
    st.integers(0, 2**32 - 1),
)))


def _scatter_padding(values, mask, seed):
    """Move every row's real entries, in order, into random slots of a wider row full of garbage."""
    rng = np.random.default_rng(seed)
    q, w = values.shape
    width = w + 3
    out = np.full((q, width), np.nan)  # garbage under the mask must never leak into a result
    out_mask = np.zeros((q, width), dtype=bool)
    for i in range(q):
        real = values[i][mask[i]]
        slots = np.sort(rng.choice(width, size=real.size, replace=False))
        out[i, slots] = real
        out_mask[i, slots] = True
    return out, out_mask


@settings(max_examples=60, deadline=None)
@given(rows, st.sampled_from([None, 1, 2, 5]))
def test_padding_position_invariance(data, k):
    values, mask, seed = data
    packed = np.zeros_like(values)
    packed_mask = np.zeros_like(mask)
    for i in range(values.shape[0]):  # reference: real entries first, padding at the end
        real = values[i][mask[i]]
        packed[i, :real.size] = real
        packed_mask[i, :real.size] = True
    scattered, scattered_mask = _scatter_padding(values, mask, seed)
    for fn in (dcg, ndcg, reciprocal_rank, average_precision, precision, recall, hits):
        a = fn(packed, packed_mask, k=k)
        b = fn(scattered, scattered_mask, k=k)
        np.testing.assert_allclose(a, b, atol=1e-12, err_msg=fn.__name__)


# ---- rank_by_scores ---------------------------------------------------------------------------

tie_prone = st.integers(1, 5).flatmap(lambda q: st.integers(1, 9).flatmap(lambda w: st.tuples(
    hnp.arrays(np.float64, (q, w), elements=st.sampled_from([-np.inf, -1.0, 0.0, 0.5, 2.0, np.inf])),
    st.one_of(st.none(), hnp.arrays(np.bool_, (q, w))),
    st.one_of(st.none(), st.integers(0, 11)),
)))


def _reference_order(scores, mask):
    """Stable reference: sort by (padding last, descending score, column)."""
    q, w = scores.shape
    mask = np.ones((q, w), bool) if mask is None else mask
    out = []
    for i in range(q):
        keys = sorted(range(w), key=lambda j: (not mask[i, j], -scores[i, j] if mask[i, j] else 0.0, j))
        out.append(keys)
    return np.array(out, dtype=np.intp).reshape(q, w)


@settings(max_examples=150, deadline=None)
@given(tie_prone)
def test_rank_by_scores_is_the_stable_order_and_topk_is_its_prefix(data):
    scores, mask, k = data
    ref = _reference_order(scores, mask)
    np.testing.assert_array_equal(rank_by_scores(scores, mask), ref)
    if k is not None:
        np.testing.assert_array_equal(rank_by_scores(scores, mask, k=k), ref[:, :k])


def test_rank_by_scores_rejects_nan_and_keeps_padding_last():
    with pytest.raises(ValueError):
        rank_by_scores(np.array([[1.0, np.nan]]))
    # a NaN under the mask is padding, not an error; a real -inf still ranks before padding
    order = rank_by_scores(np.array([[np.nan, -np.inf, 3.0]]), np.array([[False, True, True]]))
    assert order.tolist() == [[2, 1, 0]]


def test_mean_leaves_na_out_and_counts_it():
    res = mean([0.5, np.nan, 1.0, np.nan])
    assert (res.value, res.n, res.n_na) == (0.75, 2, 2)
    assert np.isnan(mean([np.nan]).value)


# ---- the metric table ---------------------------------------------------------------------------

def _slates():
    from udcg_ltr.data import Passage, QueryRecord, pad_records

    llm = "some-llm"
    rng = np.random.default_rng(5)
    records = []
    for q in range(6):
        n = int(rng.integers(2, 7))
        passages = [Passage(pid=f"p{q}-{j}", text="t", rank=j + 1, score=float(10 - j + rng.random()),
                            relevance=int(rng.integers(0, 6)), is_distractor=bool(rng.random() < 0.2),
                            annotations={llm: {"p_no_response": float(rng.random())}}) for j in range(n)]
        records.append(QueryRecord(qid=f"q{q}", question="?", answers=["a"], passages=passages))
    return pad_records(records, llm=llm, relevance_threshold=3), llm


def test_metric_table_columns_are_the_library_functions():
    from udcg_ltr.metrics import (
        ERAGLabels,
        GradedLabels,
        MetricOptions,
        distractor_aware_dcg,
        erag,
        graded_precision,
        heuristic_utilities,
        metric_table,
        ra_nwg,
        summarize,
        udcg,
        udcg_theta,
    )

    slates, _ = _slates()
    k = 3
    rng = np.random.default_rng(0)
    labels = np.where(slates.mask, rng.random(slates.shape), np.nan)
    alpha, beta = rng.random(slates.shape[1]), rng.random(slates.shape[1])
    table = metric_table(slates, options=MetricOptions(k=k, alpha=alpha, beta=beta), graded=GradedLabels(),
                         erag_labels=ERAGLabels(labels))
    m = slates.mask
    np.testing.assert_allclose(table["udcg@3"], udcg(slates.utility, m, k=k))
    np.testing.assert_allclose(table["udcg_theta@3"], udcg_theta(slates.utility, alpha, beta, m, k=k))
    n_rel = slates.n_relevant
    # nDCG: graded gains (the labels) against the ideal of the whole judged pool (trec_eval ndcg_cut)
    np.testing.assert_allclose(table["ndcg@3"], ndcg(np.where(m, slates.relevance, 0.0), m, k=k,
                                                      ideal_gains=np.where(m, slates.relevance, 0.0), ideal_mask=m))
    np.testing.assert_allclose(table["map@3"], average_precision(slates.relevant, m, k=k, n_relevant=n_rel))
    np.testing.assert_allclose(table["recall@3"], recall(slates.relevant, m, k=k, n_relevant=n_rel))
    np.testing.assert_allclose(table["precision@3"], precision(slates.relevant, m, k=k))
    np.testing.assert_allclose(table["erag@3"], erag(graded_precision, labels, k=k))
    np.testing.assert_allclose(table["ra_nwg@3"], ra_nwg(slates.relevance, m, k=k), equal_nan=True)
    h = heuristic_utilities(slates.relevant, slates.retrieval_score, m, is_distractor=slates.is_distractor)
    np.testing.assert_allclose(table["da_dcg@3"], distractor_aware_dcg(h, m, k=k))
    assert all(v.shape == (6,) and v.dtype == np.float64 for v in table.values())

    summary = summarize(table)
    assert summary["mrr@3"].value == pytest.approx(table["mrr@3"].mean())
    assert summary["ra_nwg@3"].n + summary["ra_nwg@3"].n_na == 6
    # the summary as a table: the report writer (udcg_ltr.report), as every study's table
    md = markdown_table([{"metric": name, "mean": res.value, "n": res.n, "NA": res.n_na} for name, res in summary.items()])
    assert md.splitlines()[0] == "| metric | mean | n | NA |" and len(md.splitlines()) == 2 + len(table)
    assert f"| mrr@3 | {table['mrr@3'].mean():.3f} | 6 | 0 |" in md



def test_metric_keys_are_one_lower_case_spelling():
    """Every column of the metric table and the TREC table is a METRIC_NAMES key with its cutoff."""
    from udcg_ltr.metrics import (
        METRIC_NAMES,
        ERAGLabels,
        GradedLabels,
        MetricOptions,
        display_name,
        metric_key,
        metric_table,
        trec_table,
    )

    slates, _ = _slates()
    labels = np.where(slates.mask, 0.5, np.nan)
    table = metric_table(slates, options=MetricOptions(k=2, alpha=np.ones(2), beta=np.ones(2)),
                         graded=GradedLabels(), erag_labels=ERAGLabels(labels))
    trec = trec_table(slates.relevance, slates.mask, cutoffs=(2,))
    for key in [*table, *trec]:
        name, _, cut = key.partition("@")
        assert name in METRIC_NAMES and key == key.lower() and key == metric_key(name, int(cut) if cut else None)
    assert set(METRIC_NAMES) - {"utility"} == {key.split("@")[0] for key in table}  # the table uses every name
    assert metric_key("ndcg", 10) == "ndcg@10" and metric_key("map") == "map"
    assert display_name("ndcg@5") == "nDCG@5" and display_name("n_recall_4plus@3") == "N-Recall4+@3"
    assert display_name("unjudged_queries") == "unjudged_queries"
    with pytest.raises(KeyError, match="nDCG"):
        metric_key("nDCG", 5)

def test_metric_table_follows_a_reordering():
    from udcg_ltr.metrics import MetricOptions, metric_table

    slates, _ = _slates()
    scores = np.where(slates.mask, np.random.default_rng(3).random(slates.shape), -np.inf)
    reranked = slates.reorder(rank_by_scores(scores, slates.mask))
    t = metric_table(reranked, options=MetricOptions(k=2))
    order = rank_by_scores(scores, slates.mask)
    np.testing.assert_allclose(t["mrr@2"], reciprocal_rank(take_ranked(slates.relevant, order),
                                                           take_ranked(slates.mask, order), k=2))
    assert "udcg@2" in t and "ra_nwg@2" not in t and "erag@2" not in t
