"""Context sampling: balance, prompt order, determinism, fallbacks, uniformity of positive contexts."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.fit.sampling import (
    ContextSamplingConfig,
    candidates,
    sample_contexts,
    sample_query_contexts,
    sampling_summary,
    truncate_contexts,
)


def make_record(qid: str, relevant: list[bool], *, shuffle_seed: int | None = None) -> QueryRecord:
    passages = [Passage(pid=f"{qid}-{i}", text=f"t{i}", rank=i + 1, score=float(-i), relevance=int(r))
                for i, r in enumerate(relevant)]
    if shuffle_seed is not None:  # stored out of rank order: sampling must use the ranks
        np.random.default_rng(shuffle_seed).shuffle(passages)
    return QueryRecord(qid=qid, question=f"q {qid}?", answers=["a"], passages=passages)


def rel_of(record: QueryRecord) -> dict[str, bool]:
    return {p.pid: p.is_relevant() for p in record.passages}


def test_balanced_contexts_of_k_from_top_n():
    rec = make_record("q1", [i % 4 == 0 for i in range(30)])
    ctxs = sample_query_contexts(rec, ContextSamplingConfig(n_contexts=10, k=5, top_n=25, seed=3))
    assert len(ctxs) == 10
    top = {p.pid for p in candidates(rec, 25)}
    rel = rel_of(rec)
    for c in ctxs:
        assert len(c.pids) == 5 and len(set(c.pids)) == 5
        assert set(c.pids) <= top  # drawn from the top-25 only
        assert c.has_relevant == any(rel[p] for p in c.pids)
    assert sum(c.has_relevant for c in ctxs) == 5
    # even ids positive, odd ids negative (the shared SQuAD convention)
    assert all(c.has_relevant == (c.context_id % 2 == 0) for c in ctxs)
    assert len({c.pids for c in ctxs}) == 10  # distinct


def test_deterministic_and_independent_of_other_queries():
    recs = [make_record(f"q{i}", [j % 3 == 0 for j in range(12)]) for i in range(5)]
    a = sample_contexts(recs, seed=7)
    b = sample_contexts(list(reversed(recs)), seed=7)
    c = sample_contexts(recs[2:3], seed=7)
    key = lambda cs: {(x.qid, x.context_id): x.pids for x in cs}  # noqa: E731
    assert key(a) == key(b)
    assert {k: v for k, v in key(a).items() if k[0] == "q2"} == key(c)
    assert key(sample_contexts(recs, seed=8)) != key(a)


def test_uses_retrieval_rank_not_storage_order():
    rec = make_record("q", [True] + [False] * 11, shuffle_seed=1)
    ctxs = sample_query_contexts(rec, ContextSamplingConfig(n_contexts=4, k=3, top_n=4, seed=0))
    allowed = {"q-0", "q-1", "q-2", "q-3"}
    assert all(set(c.pids) <= allowed for c in ctxs)


def test_fallback_no_relevant():
    rec = make_record("q", [False] * 12)
    ctxs = sample_query_contexts(rec, ContextSamplingConfig(n_contexts=6, k=4))
    assert len(ctxs) == 6 and not any(c.has_relevant for c in ctxs)
    assert {c.kind for c in ctxs} == {"negative"}


def test_fallback_too_few_nonrelevant():
    rec = make_record("q", [True] * 5 + [False] * 2)
    ctxs = sample_query_contexts(rec, ContextSamplingConfig(n_contexts=6, k=4))
    kinds = Counter(c.kind for c in ctxs)
    assert kinds == {"positive": 3, "min_relevant": 3}
    rel = rel_of(rec)
    for c in ctxs:
        if c.kind == "min_relevant":  # every non-relevant passage plus the fewest relevant ones
            assert sum(not rel[p] for p in c.pids) == 2
    summary = sampling_summary(ctxs)
    assert summary["queries_min_relevant_fallback"] == 1


def test_pool_smaller_than_k():
    rec = make_record("q", [True, False, False])
    ctxs = sample_query_contexts(rec, ContextSamplingConfig(n_contexts=4, k=5))
    assert all(len(c.pids) == 3 for c in ctxs)
    assert all(sorted(c.pids) == ["q-0", "q-1", "q-2"] for c in ctxs)
    assert len({c.pids for c in ctxs}) == 4  # distinct prompt orders


def test_positive_contexts_are_uniform_over_subsets_with_a_relevant_passage():
    # Pool: 3 relevant, 5 non-relevant, k = 3. Uniform k-subsets with >= 1 relevant: the number of
    # relevant passages j follows C(3, j) C(5, 3 - j) / (C(8, 3) - C(5, 3)) for j = 1..3.
    expected = np.array([math.comb(3, j) * math.comb(5, 3 - j) for j in (1, 2, 3)], dtype=float)
    expected /= expected.sum()
    recs = [make_record(f"q{i}", [True] * 3 + [False] * 5) for i in range(600)]
    ctxs = sample_contexts(recs, ContextSamplingConfig(n_contexts=2, k=3, top_n=8, seed=1))
    counts = np.zeros(3)
    for c, rec in zip(ctxs, [r for r in recs for _ in range(2)]):
        if c.kind == "positive":
            counts[sum(rel_of(rec)[p] for p in c.pids) - 1] += 1
    observed = counts / counts.sum()
    # 600 draws: a wrong law (e.g. "one relevant, then anything") is far outside these bounds
    assert np.abs(observed - expected).max() < 0.06


def test_prompt_order_is_random():
    recs = [make_record(f"q{i}", [True] + [False] * 9) for i in range(300)]
    ctxs = sample_contexts(recs, ContextSamplingConfig(n_contexts=2, k=5, top_n=10, seed=0))
    pos = Counter(c.pids.index(f"{c.qid}-0") for c in ctxs if f"{c.qid}-0" in c.pids)
    # the single relevant passage lands at every position, none dominating
    assert set(pos) == {0, 1, 2, 3, 4}
    assert max(pos.values()) < 0.35 * sum(pos.values())


def test_truncate_contexts():
    rec = make_record("q", [False, False, True, False, False, False])
    ctxs = sample_query_contexts(rec, ContextSamplingConfig(n_contexts=4, k=5, seed=2))
    cut = truncate_contexts(ctxs, 2, {rec.qid: rec})
    for full, short in zip(ctxs, cut):
        assert short.pids == full.pids[:2]
        assert short.has_relevant == ("q-2" in short.pids)


def test_config_validation():
    with pytest.raises(ValueError):
        ContextSamplingConfig(k=0)
    with pytest.raises(ValueError):
        ContextSamplingConfig(positive_fraction=1.5)


@settings(max_examples=60, deadline=None)
@given(rel=st.lists(st.booleans(), min_size=1, max_size=20), n=st.integers(1, 8), k=st.integers(1, 6),
       top_n=st.integers(1, 25), seed=st.integers(0, 100))
def test_invariants(rel, n, k, top_n, seed):
    rec = make_record("q", rel)
    ctxs = sample_query_contexts(rec, ContextSamplingConfig(n_contexts=n, k=k, top_n=top_n, seed=seed))
    cands = candidates(rec, top_n)
    kk = min(k, len(cands))
    relmap = rel_of(rec)
    n_rel = sum(relmap[p.pid] for p in cands)
    n_non = len(cands) - n_rel
    assert len(ctxs) == n
    assert [c.context_id for c in ctxs] == list(range(n))
    for c in ctxs:
        assert len(c.pids) == kk and len(set(c.pids)) == kk
        assert set(c.pids) <= {p.pid for p in cands}
        assert c.has_relevant == any(relmap[p] for p in c.pids)
    n_pos = sum(c.has_relevant for c in ctxs)
    if n_rel == 0:
        assert n_pos == 0
    elif n_non >= kk:  # balance possible: half positive (rounded half up)
        assert n_pos == int(math.floor(n * 0.5 + 0.5))
    assert ctxs == sample_query_contexts(rec, ContextSamplingConfig(n_contexts=n, k=k, top_n=top_n, seed=seed))
