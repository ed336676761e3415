"""PassageScores (udcg_ltr.data.scores): question id -> one score per passage, from the reranker to the selectors,
the metrics and the reports (issue 30 item 5). Properties of its constructors and lookups, and its errors, which
name the question."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.data import PassageScores, as_passage_scores
from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.models.evaluation import align_scores, top_k_by
from udcg_ltr.select.base import rank_slates


def make_records(sizes: list[int]) -> list[QueryRecord]:
    return [QueryRecord(qid=f"q{i}", question=f"question {i}?", answers=["a"],
                        passages=[Passage(pid=f"q{i}-p{j}", text=f"passage {j}", rank=j + 1) for j in range(n)])
            for i, n in enumerate(sizes)]


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def records_and_arrays(draw, max_queries: int = 6, max_passages: int = 7, values=finite):
    """Records of 1..max_passages passages each and one aligned score array per record."""
    sizes = draw(st.lists(st.integers(1, max_passages), min_size=1, max_size=max_queries))
    arrays = [np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64) for n in sizes]
    return make_records(sizes), arrays


@settings(max_examples=60, deadline=None)
@given(records_and_arrays())
def test_aligned_of_records_and_arrays_gives_the_arrays_back(data):
    records, arrays = data
    scores = PassageScores.of(records, arrays)
    got = scores.aligned(records)
    assert len(got) == len(arrays) and all(np.array_equal(a, b) for a, b in zip(got, arrays))
    assert list(scores) == [r.qid for r in records]
    assert all(a.dtype == np.float64 and not a.flags.writeable for a in got)  # immutable
    assert align_scores(records, arrays)[0].tolist() == arrays[0].tolist()  # lists keep working
    assert as_passage_scores(records, scores) is scores


@settings(max_examples=60, deadline=None)
@given(records_and_arrays())
def test_the_json_round_trip_is_exact(data):
    records, arrays = data
    scores = PassageScores.of(records, arrays)
    back = PassageScores.from_json_dict(json.loads(json.dumps(scores.to_json_dict())))
    assert back == scores
    assert all(np.array_equal(a, b) for a, b in zip(back.aligned(records), arrays))


@settings(max_examples=60, deadline=None)
@given(records_and_arrays(), st.data())
def test_restrict_subset_merge_and_the_run_form(data, draw):
    records, arrays = data
    scores = PassageScores.of(records, arrays)
    picked = draw.draw(st.lists(st.sampled_from(records), unique_by=lambda r: r.qid))
    part = scores.restrict(picked)
    assert list(part) == [r.qid for r in picked]
    assert part == scores.subset(r.qid for r in picked)
    assert all(np.array_equal(part[r.qid], scores[r.qid]) for r in picked)
    assert part.missing(records) == [r for r in records if r.qid not in part]
    assert part.merge(scores) == PassageScores({**dict(part.items()), **dict(scores.items())})
    assert PassageScores.from_run(records, scores.to_run(records)) == scores


@settings(max_examples=40, deadline=None)
@given(records_and_arrays(values=st.integers(-3, 3).map(float)), st.integers(0, 8),
       st.sampled_from(["stable", "trec"]))
def test_top_k_by_gives_the_same_pids_for_a_list_and_for_passage_scores(data, k, ties):
    records, arrays = data  # small integers: many ties, where the two forms could part
    scores = PassageScores.of(records, arrays)
    assert top_k_by(records, scores, k, ties=ties) == top_k_by(records, arrays, k, ties=ties)
    # in another order of records: each is looked up by its question id
    assert top_k_by(records[::-1], scores, k, ties=ties) == top_k_by(records, arrays, k, ties=ties)[::-1]


@settings(max_examples=30, deadline=None)
@given(records_and_arrays())
def test_padded_rows_follow_the_slates_and_the_selectors_rank_alike(data):
    records, arrays = data
    scores = PassageScores.of(records, arrays)
    slates = pad_records(records[::-1], width=8, selector_features=False)  # the rows in another order
    padded = scores.padded(slates)
    assert padded.shape == slates.shape
    for i, rec in enumerate(records[::-1]):
        assert np.array_equal(padded[i, :len(rec.passages)], scores[rec.qid])
        assert not padded[i, len(rec.passages):].any()  # 0 at padding
    keyed, listed = rank_slates(scores, slates), rank_slates(arrays[::-1], slates)
    assert np.array_equal(keyed.scores, listed.scores) and np.array_equal(keyed.order, listed.order)


# ---- errors name the question ----------------------------------------------------------------------------------
def test_a_missing_question_is_named():
    records = make_records([2, 3])
    scores = PassageScores.of(records[:1], [np.zeros(2)])
    for call in (lambda: scores.aligned(records), lambda: scores.restrict(records),
                 lambda: top_k_by(records, scores, 1), lambda: scores.subset(["q1"])):
        with pytest.raises(ValueError, match="'q1'"):
            call()
    with pytest.raises(ValueError, match="'q1'.*no score for passage 'q1-p2'"):
        PassageScores.from_run(records, {"q0": {"q0-p0": 1, "q0-p1": 2}, "q1": {"q1-p0": 1, "q1-p1": 1}})
    with pytest.raises(ValueError, match="'q1': no scores"):
        PassageScores.from_run(records, {"q0": {"q0-p0": 1, "q0-p1": 2}})
    with pytest.raises(ValueError, match="'q0'.*pid: score"):
        PassageScores.from_run(records, {"q0": [1.0, 2.0]})
    with pytest.raises(ValueError, match="slates.*'q1'|'q1'"):
        scores.padded(pad_records(records, selector_features=False))


def test_a_wrong_length_is_named():
    records = make_records([2, 3])
    with pytest.raises(ValueError, match="'q1': 3 passages but 2 scores"):
        PassageScores.of(records, [np.zeros(2), np.zeros(2)])
    with pytest.raises(ValueError, match="2 records but 1 score arrays"):
        PassageScores.of(records, [np.zeros(2)])
    scores = PassageScores({"q0": [1.0, 2.0], "q1": [1.0]})
    with pytest.raises(ValueError, match="'q1': 3 passages but 1 scores"):
        scores.aligned(records)
    assert scores.missing(records) == [records[1]]  # what a cache scores again
    with pytest.raises(ValueError, match="'q1'"):
        scores.padded(pad_records(records, selector_features=False))
    with pytest.raises(ValueError, match="'q0'.*1-D"):
        PassageScores({"q0": [[1.0, 2.0]]})
    with pytest.raises(ValueError, match="'q0' appears twice"):
        PassageScores.of(make_records([1, 1])[:1] * 2, [[1.0], [2.0]])


def test_nan_scores_are_refused_naming_the_question():
    """The metrics and the selectors rank by these scores: a NaN has no rank (infinities do)."""
    records = make_records([2, 3])
    with pytest.raises(ValueError, match="'q1': NaN score at passage 2"):
        PassageScores.of(records, [np.zeros(2), np.array([0.0, 1.0, np.nan])])
    with pytest.raises(ValueError, match="'q0': NaN"):
        align_scores(records, {"q0": {"q0-p0": float("nan"), "q0-p1": 0.0}, "q1": {f"q1-p{j}": 0 for j in range(3)}})
    with pytest.raises(ValueError, match="'q0'"):
        PassageScores.from_json_dict({"q0": [1.0, float("nan")]})
    with_inf = PassageScores.of(records, [np.array([-np.inf, 0.0]), np.zeros(3)])  # a passage without a score
    assert top_k_by(records, with_inf, 1) == [["q0-p1"], ["q1-p0"]]
    with pytest.raises(ValueError, match="'q0': infinite"):
        with_inf.to_json_dict()


def test_bad_json_is_a_value_error_naming_the_question():
    for doc, match in (([1.0], "object"), ({"q0": "1.0"}, "'q0'"), ({"q0": [True]}, "'q0'"),
                       ({"q0": ["1.0"]}, "'q0'"), ({"q0": [1.0, None]}, "'q0'")):
        with pytest.raises(ValueError, match=match):
            PassageScores.from_json_dict(doc)


def test_it_is_read_only_and_compares_by_content():
    records = make_records([2])
    scores = PassageScores.of(records, [np.array([1.0, 2.0])])
    with pytest.raises(ValueError):
        scores["q0"][0] = 5.0  # a read-only array
    with pytest.raises(TypeError):
        scores["q0"] = np.zeros(2)  # type: ignore[index]
    source = np.array([1.0, 2.0])
    copy = PassageScores.of(records, [source])
    source[0] = 9.0  # the caller's array is copied, not shared
    assert copy == scores and copy != PassageScores.of(records, [np.array([1.0, 3.0])])
    assert "1 queries" in repr(scores)
