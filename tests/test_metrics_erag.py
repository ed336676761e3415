"""eRAG (Salemi and Zamani 2024): per-passage downstream labels, then any rank metric over them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr import text
from udcg_ltr.metrics import (
    average_precision,
    erag,
    erag_labels,
    erag_mask,
    erag_score,
    graded_precision,
    max_label,
    ndcg,
    reciprocal_rank,
)

ANSWERS = [
    ["Paris", "It is Lyon.", "the capital is Paris, France", None],
    ["William Shakespeare", "Marlowe"],
]
GOLD = [["Paris"], "Shakespeare"]


@pytest.mark.parametrize("scorer, fn", [("em", text.exact_match), ("f1", text.token_f1),
                                        ("rouge_l", text.rouge_l), ("contains", text.contains_answer)])
def test_labels_are_the_text_scorers_on_each_single_passage_answer(scorer, fn):
    labels = erag_labels(ANSWERS, GOLD, scorer)
    assert labels.shape == (2, 4)
    for i, answers in enumerate(ANSWERS):
        golds = [GOLD[i]] if isinstance(GOLD[i], str) else GOLD[i]
        for j in range(4):
            if j < len(answers) and answers[j] is not None:
                assert labels[i, j] == fn(answers[j], golds)
            else:
                assert np.isnan(labels[i, j])  # padding and unannotated passages are absent
    assert erag_mask(labels).sum() == 5


def test_known_values_and_the_composition():
    em = erag_labels(ANSWERS, GOLD, "em")
    # EM labels: query 0 -> [1, 0, 0, absent]; query 1 -> [0, 0] ("William Shakespeare" != "Shakespeare")
    assert np.nan_to_num(em, nan=-1).tolist() == [[1, 0, 0, -1], [0, 0, -1, -1]]
    # eRAG with a binary rank metric: any metric of the library, labels as relevance
    assert erag(reciprocal_rank, em, k=3).tolist() == [1.0, 0.0]
    assert erag(average_precision, em).tolist() == [1.0, 0.0]
    # contains: "the capital is Paris, France" contains "Paris"; "William Shakespeare" contains "Shakespeare"
    cont = erag_labels(ANSWERS, GOLD, "contains")
    assert erag(average_precision, cont)[0] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert erag(reciprocal_rank, cont)[1] == 1.0
    # graded labels: P@k divides by k, success@k takes the best label
    f1 = erag_labels(ANSWERS, GOLD, "f1")
    assert graded_precision(f1, erag_mask(f1), k=2)[1] == pytest.approx((f1[1, 0] + f1[1, 1]) / 2)
    assert graded_precision(f1, erag_mask(f1), k=4)[0] == pytest.approx(np.nansum(f1[0]) / 4)
    assert max_label(f1, erag_mask(f1), k=2)[0] == pytest.approx(np.nanmax(f1[0, :2]))
    # the default convenience score: exact match + Precision@k
    assert erag_score(ANSWERS, GOLD, k=2).tolist() == pytest.approx([0.5, 0.0])
    assert erag_score(labels=f1, metric="success", k=1)[0] == f1[0, 0]
    assert erag_score(labels=f1, metric="ndcg")[1] == pytest.approx(ndcg(np.nan_to_num(f1[1:, :2]))[0])


def test_errors():
    with pytest.raises(ValueError):
        erag_labels([["a"]], [["a"], ["b"]])
    with pytest.raises(ValueError):
        erag_labels([["a"]], [["a"]], scorer="bleu")
    with pytest.raises(ValueError):
        erag(reciprocal_rank, np.array([[1.5, 0.0]]))
    with pytest.raises(ValueError):  # MAP is a binary metric: graded labels are refused
        erag_score(labels=np.array([[0.5, 1.0]]), metric="map")
    with pytest.raises(ValueError):
        erag_labels([["x"]], [["x"]], scorer=lambda a, g: 2.0)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=8), min_size=1, max_size=5),
       st.integers(1, 8))
def test_graded_metrics_bounds_and_binary_agreement(rows, k):
    width = max(len(r) for r in rows)
    labels = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        labels[i, :len(r)] = r
    p = erag(graded_precision, labels, k=k)
    s = erag(max_label, labels, k=k)
    assert np.all((0 <= p) & (p <= s + 1e-12) & (s <= 1))  # the mean of k labels never beats the best
    binary = (np.nan_to_num(labels) > 0.5).astype(float)
    binary[np.isnan(labels)] = np.nan
    # on binary labels eRAG's P@k is the classic precision and success@k is HITS@k
    from udcg_ltr.metrics import hits, precision
    m = erag_mask(binary)
    np.testing.assert_allclose(erag(graded_precision, binary, k=k), precision(np.nan_to_num(binary), m, k=k))
    np.testing.assert_allclose(erag(max_label, binary, k=k), hits(np.nan_to_num(binary), m, k=k))
