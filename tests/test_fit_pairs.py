"""Eq. 3 features, the context table, and within-query pair construction."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.data.contexts import ContextRun
from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.fit.pairs import (
    build_context_table,
    build_pairs,
    context_features,
    group_index,
    make_pairs,
    outcome_score,
)

LLM = "m"


def record() -> QueryRecord:
    pnr = [0.1, 0.5, 0.2, 0.9, 1.0]
    rel = [1, 0, 0, 1, 1]
    return QueryRecord(qid="q", question="?", answers=["x"], passages=[
        Passage(pid=f"p{i}", text="t", relevance=r, annotations={LLM: {"p_no_response": p}})
        for i, (p, r) in enumerate(zip(pnr, rel))])


def test_context_table_utilities_in_prompt_order():
    runs = [ContextRun("q", 0, ["p3", "p1", "p0"], "a", LLM, outcome="correct"),
            ContextRun("q", 1, ["p2", "p4"], "a", LLM, outcome="wrong")]
    t = build_context_table([record()], runs, LLM, k=3)
    np.testing.assert_allclose(t.utility[0], [0.1, -0.5, 0.9])  # Eq. 2: R * (1 - P(NR))
    np.testing.assert_allclose(t.utility[1], [-0.8, 0.0, 0.0])
    assert t.mask.tolist() == [[True, True, True], [True, True, False]]
    assert t.relevant[1].tolist() == [False, True, False]  # p4 is relevant with u = 0
    np.testing.assert_array_equal(t.outcome, [2.0, 0.0])
    assert t.truncate(2).utility.shape == (2, 2)


def test_features_variants():
    u = np.array([[0.1, -0.5, 0.9], [-0.8, 0.0, 0.0]])
    mask = np.array([[True, True, True], [True, True, False]])
    rel = np.array([[True, False, True], [False, True, False]])
    full = context_features(u, mask, variant="full")
    np.testing.assert_allclose(full, [[0.1, 0, 0.9, 0, -0.5, 0], [0, 0, 0, -0.8, 0, 0]])
    np.testing.assert_allclose(context_features(u, mask, variant="relevance_only"), full[:, :3])
    binary = context_features(u, mask, relevant=rel, variant="binary")
    np.testing.assert_allclose(binary, [[1, 0, 1, 0, -0.5, 0], [0, 1, 0, -0.8, 0, 0]])
    with pytest.raises(ValueError):
        context_features(u, mask, variant="nope")


def test_table_errors():
    with pytest.raises(DataError):
        build_context_table([record()], [ContextRun("q", 0, ["zz"], "a", LLM)], LLM)
    with pytest.raises(DataError):
        build_context_table([record()], [ContextRun("other", 0, ["p0"], "a", LLM)], LLM)
    with pytest.raises(DataError):
        build_context_table([record()], [ContextRun("q", 0, ["p0", "p1", "p2"], "a", LLM)], LLM, k=2)


def test_outcome_score():
    assert [outcome_score(o) for o in ("correct", "abstained", "wrong")] == [2.0, 1.0, 0.0]
    assert np.isnan(outcome_score(None))
    with pytest.raises(ValueError):
        outcome_score("maybe")


def test_group_index_first_appearance_order():
    groups, idx = group_index(["b", "a", "b", "c", "a"])
    assert groups.tolist() == ["b", "a", "c"]
    assert idx.tolist() == [[0, 2], [1, 4], [3, -1]]


def brute_pairs(qids, scores):
    out = set()
    for i, j in itertools.permutations(range(len(qids)), 2):
        if qids[i] == qids[j] and scores[i] > scores[j]:  # NaN compares False
            out.add((i, j))
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from([0.0, 1.0, 2.0, float("nan")])),
                min_size=0, max_size=25))
def test_make_pairs_matches_brute_force(rows):
    qids = [q for q, _ in rows]
    scores = np.array([s for _, s in rows], dtype=float)
    i, j = make_pairs(qids, scores)
    assert set(zip(i.tolist(), j.tolist())) == brute_pairs(qids, scores)
    assert len(i) == len(set(zip(i.tolist(), j.tolist())))  # no duplicates


def test_build_pairs_diffs():
    X = np.arange(12, dtype=float).reshape(4, 3)
    ps = build_pairs(X, ["a", "a", "b", "b"], np.array([0.0, 2.0, 1.0, 1.0]))
    assert len(ps) == 1 and ps.n_queries == 1
    np.testing.assert_allclose(ps.diffs, [X[1] - X[0]])
