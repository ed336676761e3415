"""Lexical coverage features: label-free question-term coverage of each passage, carried by pad_records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.data.lexical import LEXICAL_FEATURES, content_terms, corpus_idf, lexical_features, records_idf
from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.select.base import rank_slates


def test_coverage_counts_content_terms_once_and_weights_rare_terms_more():
    assert content_terms("What is the capital of France?") == {"capital", "france"}
    idf = corpus_idf(["France is in Europe.", "France has wine.", "The capital city.", "Paris is the capital of France."])
    assert idf["france"] < idf["capital"] < idf["unseen"]  # df 3 < df 2 < df 0
    assert idf["france"] == pytest.approx(math.log(5 / 3.5))
    got = lexical_features("What is the capital of France?", ["France, France!", "the capital", "nothing", ""], idf)
    assert got["lexical_coverage"] == [0.5, 0.5, 0.0, 0.0]
    total = idf["capital"] + idf["france"]
    assert got["lexical_coverage_idf"] == pytest.approx([idf["france"] / total, idf["capital"] / total, 0.0, 0.0])
    assert lexical_features("Who is it?", ["who is it"], idf) == {"lexical_coverage": [0.0],
                                                                "lexical_coverage_idf": [0.0]}  # no content term


words = st.sampled_from(["paris", "france", "capital", "river", "the", "of", "what", "wine", "seine", "city"])


@settings(max_examples=60, deadline=None)
@given(st.lists(words, min_size=1, max_size=8), st.lists(st.lists(words, max_size=10), min_size=1, max_size=4))
def test_coverage_is_a_share_and_full_for_the_question_itself(question, passages):
    q = " ".join(question)
    texts = [" ".join(p) for p in passages]
    idf = corpus_idf(texts)
    got = lexical_features(q, [*texts, q], idf)
    for name in LEXICAL_FEATURES:
        assert all(0.0 <= v <= 1.0 + 1e-12 for v in got[name])
        assert got[name][-1] == pytest.approx(1.0 if content_terms(q) else 0.0)


def _record(qid, question, texts):
    return QueryRecord(qid=qid, question=question, answers=["x"],
                       passages=[Passage(pid=f"{qid}-{i}", text=t, rank=i + 1, score=1.0 - i) for i, t in enumerate(texts)])


def test_pad_records_fills_lexical_features_with_a_shared_corpus():
    a = _record("a", "Which river crosses Paris?", ["The Seine crosses Paris.", "Lyon is a city."])
    b = _record("b", "What wine grows near the river?", ["Wine.", "A river and wine.", "Nothing."])
    sl = pad_records([a, b])
    assert set(LEXICAL_FEATURES) <= set(sl.probes)
    np.testing.assert_allclose(sl.probes["lexical_coverage"], [[2 / 3, 0.0, 0.0], [1 / 4, 2 / 4, 0.0]])  # wine grows near river
    # one corpus for every split: features of a record do not depend on which other records are padded with it
    idf = records_idf([a, b])
    alone = pad_records([a], idf=idf)
    np.testing.assert_allclose(alone.probes["lexical_coverage_idf"][0, :2], sl.probes["lexical_coverage_idf"][0, :2])
    r = rank_slates(np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 2.0]]), sl, extra_fields=("lexical_coverage",))
    np.testing.assert_allclose(r.extra["lexical_coverage"], [[0.0, 2 / 3, 0.0], [0.0, 2 / 4, 1 / 4]])


def test_lexical_coverage_separates_answer_bearing_passages_on_real_data(annotated_squad):
    """SQuAD questions reuse their paragraph's words: coverage ranks answer-bearing passages well (no label read)."""
    from sklearn.metrics import roc_auc_score

    sl = pad_records(annotated_squad)
    m = sl.mask
    for name in LEXICAL_FEATURES:
        assert roc_auc_score(sl.relevant[m], sl.probes[name][m]) > 0.8
    assert roc_auc_score(sl.relevant[m], sl.probes["lexical_coverage_idf"][m]) > roc_auc_score(
        sl.relevant[m], sl.retrieval_score[m])
