"""Strict readers (issue 31): repeated JSON keys and trailing commas refused naming line and field, integers
beyond 64 bits and lone surrogates refused at reading, run scores of the wrong type a DataError naming query
and field, negative cutoffs refused, TREC's negative grades read as trec_eval reads them; and the generated
bad inputs of tests/bad_inputs_catalogue.py through the oracle, with a fixed seed and a small budget."""

from __future__ import annotations

import json

import pytest
from bad_inputs_catalogue import (
    BEIR_CORPUS,
    BEIR_QUERIES,
    Generated,
    array_bytes,
    jsonl_bytes,
    judge_generated,
    layouts,
    record_obj,
    reference_obj,
    run_generated,
)

from udcg_ltr.data.jsonl import read_records
from udcg_ltr.data.readers import read_beir, read_udcg_reference
from udcg_ltr.data.readers.trec import read_trec_qrels, records_from_run
from udcg_ltr.data.schema import DataError


def _records_file(tmp_path, second: str):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record_obj(0)) + "\n" + second + "\n")
    return path


def test_a_key_given_twice_is_refused_naming_line_and_field(tmp_path):
    text = json.dumps(record_obj(1)).replace('"relevance": 1,', '"relevance": 1, "relevance": 0,')
    with pytest.raises(DataError) as err:
        read_records(_records_file(tmp_path, text))
    assert (err.value.line, err.value.field) == (2, "passages[0].relevance")
    assert "twice" in str(err.value) and str(tmp_path) in str(err.value)


def test_trailing_comma_in_a_json_array_is_refused(tmp_path):
    path = tmp_path / "ref.json"
    path.write_bytes(array_bytes([reference_obj(0), reference_obj(1)]).replace(b"\n]", b",\n]"))
    with pytest.raises(DataError, match="trailing comma") as err:
        read_udcg_reference(path)
    assert err.value.line == 4


@pytest.mark.parametrize(("damage", "field"), [
    ('"rank": ' + "9" * 400, "passages[0].rank"),
    ('"pid": "\\ud800x"', "passages[0].pid"),
])
def test_huge_integers_and_lone_surrogates_are_refused_at_reading(tmp_path, damage, field):
    key = damage.split(":")[0]
    obj = json.dumps(record_obj(1))
    old = f'{key}: {json.dumps(record_obj(1)["passages"][0][key.strip(chr(34))])}'
    assert old in obj
    with pytest.raises(DataError) as err:
        read_records(_records_file(tmp_path, obj.replace(old, damage, 1)))
    assert (err.value.line, err.value.field) == (2, field)
    # a surrogate *pair* is ordinary text
    assert read_records(_records_file(tmp_path, obj.replace('"T"', '"\\ud83d\\ude00"')))[1].passages[0].title == "😀"


@pytest.mark.parametrize("score", [None, "high", float("nan"), True])
def test_run_scores_of_the_wrong_type_name_query_and_field(score):
    run = {"q1": {"d1": 1.0, "d2": score}}
    with pytest.raises(DataError) as err:
        records_from_run(run, None, {"d1": "a", "d2": "b"}, {"q1": "?"})
    assert err.value.field == "run['q1']['d2']" and "'q1'" in str(err.value)


def _beir(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_bytes(jsonl_bytes(BEIR_CORPUS))
    (tmp_path / "queries.jsonl").write_bytes(jsonl_bytes(BEIR_QUERIES))
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t2\n")
    return tmp_path


@pytest.mark.parametrize("top_k", [-1, -100, 2.5, True])
def test_negative_or_non_integer_cutoffs_are_refused(tmp_path, top_k):
    run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}}
    with pytest.raises(DataError, match="top_k"):
        read_beir(_beir(tmp_path), run=run, top_k=top_k)
    with pytest.raises(DataError, match="top_k"):
        records_from_run(run, None, {"d1": "a", "d2": "b", "d3": "c"}, {"q1": "?", "q2": "?"}, top_k=top_k)
    assert len(read_beir(tmp_path, run=run, top_k=10 ** 18)[0].passages) == 2  # a huge one keeps everything


def test_trec_negative_grades_are_not_relevant_as_trec_eval_reads_them(tmp_path):
    qrels_path = tmp_path / "qrels.txt"
    qrels_path.write_text("q1 0 d1 1\nq1 0 d2 -1\n")
    qrels = read_trec_qrels(qrels_path)
    assert qrels == {"q1": {"d1": 1, "d2": -1}}
    (rec,) = records_from_run({"q1": {"d1": 2.0, "d2": 1.0}}, qrels, {"d1": "a", "d2": "b"}, {"q1": "?"})
    assert [p.relevance for p in rec.passages] == [1, 0]
    assert rec.passages[1].extra["qrels_grade"] == -1 and rec.extra["judged_grades"] == {"0": 1, "1": 1}


def test_the_oracle_can_fail(tmp_path):
    """A mutation that reads as other data is ``silent``; a harmless one (CRLF) is the same records."""
    lay = next(lay for lay in layouts() if lay.reader == "read_records")
    other = jsonl_bytes([record_obj(0), record_obj(5)])  # valid, but not the original's records
    assert judge_generated(Generated(lay, "fake", other), tmp_path / "a").kind == "silent"
    same = lay.valid().replace(b"\n", b"\r\n")
    out = judge_generated(Generated(lay, "CRLF", same), tmp_path / "b")
    assert (out.kind, out.detail) == ("clear", "same records")


def test_generated_bad_inputs_are_clear_or_harmless(tmp_path):
    """The bench's oracle (bench/bad_inputs.py) with a fixed seed and a small budget."""
    counts = run_generated(120, 31, tmp_path)
    assert counts["generated"] == 120
    assert counts["clear"] == 120, counts
