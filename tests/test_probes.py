"""Reader probes: label-free features from the LLM's single-passage answers, carried into the selectors."""

from __future__ import annotations

import numpy as np
import pytest

from udcg_ltr.data.lexical import LEXICAL_FEATURES
from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.probes import ANSWER_PROBES, answer_probes
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.select.base import rank_slates

LLM = "toy-llm"


def test_answer_probes_of_a_pool():
    texts = ["Paris is the capital of France.", "The capital is Paris, they say.", "Lyon is large.", "Nothing here."]
    answers = ["Paris", "paris!", "Marseille", "NO-RESPONSE"]
    got = answer_probes(texts, answers)
    assert got["probe_abstains"] == [0.0, 0.0, 0.0, 1.0]
    assert got["probe_answer_in_passage"] == [1.0, 1.0, 0.0, 0.0]  # "Marseille" is not in "Lyon is large."
    assert got["probe_agreement"] == pytest.approx([1 / 3, 1 / 3, 0.0, 0.0])  # abstentions never agree
    with pytest.raises(ValueError, match="answers"):
        answer_probes(texts, answers[:2])


def _record(qid, answers, pnr=0.2):
    passages = [Passage(pid=f"{qid}-{i}", text=f"passage {i} says {a}", rank=i + 1, score=1.0 - i / 10, relevance=int(i == 0),
                        annotations={LLM: {"p_no_response": pnr, "answer_alone": a}}) for i, a in enumerate(answers)]
    return QueryRecord(qid=qid, question="q?", answers=["x"], passages=passages)


def test_pad_records_computes_probes_over_the_pool_and_ranking_carries_them():
    recs = [_record("a", ["blue", "blue", "NO-RESPONSE"]), _record("b", ["red", "green"])]
    sl = pad_records(recs, llm=LLM)
    assert set(sl.probes) == {*ANSWER_PROBES, *LEXICAL_FEATURES}
    np.testing.assert_allclose(sl.probes["probe_agreement"], [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(sl.probes["probe_abstains"], [[0, 0, 1], [0, 0, 0]])
    assert (sl.probes["probe_answer_in_passage"][sl.mask] == [1, 1, 0, 1, 1]).all()
    # reorder and rank_slates carry the probes with their passages
    scores = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])
    r = rank_slates(scores, sl, extra_fields=("probe_abstains", "p_no_response"))
    np.testing.assert_allclose(r.extra["probe_abstains"], [[1, 0, 0], [0, 0, 0]])
    flipped = sl.reorder(np.array([[2, 1, 0], [0, 1, 2]]))
    np.testing.assert_allclose(flipped.probes["probe_abstains"], [[1, 0, 0], [0, 0, 0]])


def test_probes_need_answers_on_every_passage():
    rec = _record("a", ["blue", "red"])
    del rec.passages[1].annotations[LLM]["answer_alone"]
    sl = pad_records([rec], llm=LLM)
    assert set(sl.probes) == set(LEXICAL_FEATURES)  # lexical features need no LLM
    with pytest.raises(ValueError, match="answer_alone"):
        rank_slates(np.array([[1.0, 0.0]]), sl, extra_fields=("probe_agreement",))
    assert set(pad_records([rec]).probes) == set(LEXICAL_FEATURES)  # no LLM named: no reader probes
