"""Round trip and validation errors of the data model (udcg_ltr.data.schema) and its JSONL IO."""

from __future__ import annotations

import gzip
import json
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udcg_ltr.data.jsonl import dumps_record, loads_json, parse_lines, read_records, write_records
from udcg_ltr.data.schema import DataError, MissingFileError, Passage, QueryRecord, validate_record
from udcg_ltr.io import open_text

# ---- strategies ----------------------------------------------------------------------------

# any text, including the characters that break naive line-based formats
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30) | st.sampled_from(
    ["line\nbreak", "cr\rreturn", "sep\u2028line", "nel\x85", "tab\t", "quote\"", "é ü 中文", ""])
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
probability = st.floats(min_value=0.0, max_value=1.0)
json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | finite | texts


def ids(max_size):
    """Query / passage ids: any text that is not blank (a blank id is a DataError)."""
    return st.text(min_size=1, max_size=max_size).filter(lambda s: s.strip())


@st.composite
def passages(draw, pid):
    llms = draw(st.lists(st.sampled_from(["llm-a", "llm-b", "qwen"]), unique=True, max_size=2))
    annotations = {name: {"p_no_response": draw(probability), "answer_alone": draw(texts)} for name in llms}
    return Passage(
        pid=pid, text=draw(texts), title=draw(texts), rank=draw(st.none() | st.integers(1, 1000)),
        score=draw(st.none() | finite), relevance=draw(st.none() | st.integers(0, 5)),
        is_distractor=draw(st.none() | st.booleans()), annotations=annotations,
        extra=draw(st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)),
    )


@st.composite
def records(draw):
    pids = draw(st.lists(ids(8), min_size=1, max_size=5, unique=True))
    return QueryRecord(
        qid=draw(ids(10)), question=draw(texts), answers=draw(st.lists(texts, max_size=3)),
        passages=[draw(passages(pid)) for pid in pids], split=draw(st.none() | st.sampled_from(["train", "test"])),
        extra=draw(st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)),
    )


# ---- round trip ----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(records(), min_size=1, max_size=4, unique_by=lambda r: r.qid))
def test_round_trip_is_exact(tmp_path, recs):
    path = tmp_path / "r.jsonl"
    write_records(path, recs)
    back = read_records(path)
    assert back == recs
    # writing what was read reproduces the file byte for byte
    again = tmp_path / "again.jsonl"
    write_records(again, back)
    assert again.read_bytes() == path.read_bytes()
    assert len(path.read_text(encoding="utf-8").split("\n")) == len(recs) + 1  # one line each + final newline


def test_gzip_round_trip_is_deterministic(tmp_path):
    recs = [QueryRecord(qid="q1", question="Who?", answers=["A"],
                        passages=[Passage(pid="p1", text="A did it.", relevance=1,
                                          annotations={"m": {"p_no_response": 0.25}})])]
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    write_records(a, recs)
    write_records(b, recs)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes()[:2] == b"\x1f\x8b"
    assert read_records(a) == recs
    assert gzip.decompress(a.read_bytes()).decode() == dumps_record(recs[0]) + "\n"


def test_utility_follows_eq2():
    p = Passage(pid="p", text="t", relevance=1, annotations={"m": {"p_no_response": 0.2}})
    n = Passage(pid="n", text="t", relevance=0, annotations={"m": {"p_no_response": 0.2}})
    graded = Passage(pid="g", text="t", relevance=1, annotations={"m": {"p_no_response": 0.0}})
    assert p.utility("m") == pytest.approx(0.8)
    assert n.utility("m") == pytest.approx(-0.8)
    assert graded.utility("m", relevance_threshold=2) == -1.0
    with pytest.raises(KeyError, match="no p_no_response"):
        p.utility("other")


def test_llms_lists_only_complete_annotations():
    rec = QueryRecord(qid="q", question="?", passages=[
        Passage(pid="a", text="x", annotations={"m1": {"p_no_response": 0.1}, "m2": {"p_no_response": 0.1}}),
        Passage(pid="b", text="y", annotations={"m2": {"p_no_response": 0.3}})])
    assert rec.llms() == ["m2"]


def test_data_error_survives_pickling():
    # DataLoader workers and multiprocessing pools send exceptions across processes
    err = DataError("bad", path="f.jsonl", line=3, field="passages[0].pid")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err)
    assert (back.path, back.line, back.field) == ("f.jsonl", 3, "passages[0].pid")


# ---- validation errors ---------------------------------------------------------------------

def _good(**over):
    obj = {"qid": "q1", "question": "Who?", "answers": ["A"],
           "passages": [{"pid": "p1", "text": "A did it.", "relevance": 1,
                         "annotations": {"m": {"p_no_response": 0.5}}},
                        {"pid": "p2", "text": "B did not.", "relevance": 0}]}
    obj.update(over)
    return obj


def _write_lines(path, objs):
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs), encoding="utf-8")
    return path


def _bad_passage(i, **over):
    obj = _good()
    obj["passages"][i].update(over)
    return obj


@pytest.mark.parametrize(("bad", "field", "reason"), [
    (_bad_passage(1, pid="p1"), "passages[1].pid", "duplicate passage id"),
    (_bad_passage(0, annotations={"m": {"p_no_response": 1.5}}), "passages[0].annotations['m'].p_no_response",
     "outside [0, 1]"),
    (_bad_passage(0, annotations={"m": {"p_no_response": -0.1}}), "passages[0].annotations['m'].p_no_response",
     "outside [0, 1]"),
    (_bad_passage(0, annotations={"m": {"p_no_response": "0.5"}}), "passages[0].annotations['m'].p_no_response",
     "outside [0, 1]"),
    (_bad_passage(0, annotations={"m": 0.5}), "passages[0].annotations['m']", "must be an object"),
    (_bad_passage(1, relevance=6), "passages[1].relevance", "outside 0..5"),
    (_bad_passage(1, relevance=-1), "passages[1].relevance", "outside 0..5"),
    (_bad_passage(1, rank=True), "passages[1].rank", "expected an integer"),
    (_bad_passage(1, rank=1.0), "passages[1].rank", "expected int"),
    (_bad_passage(1, score="high"), "passages[1].score", "expected a number"),
    (_bad_passage(0, is_distractor=1), "passages[0].is_distractor", "expected bool"),
    (_bad_passage(0, colour="red"), "passages[0]", "unknown keys"),
    (_good(passages=[]), "passages", "empty candidate list"),
    (_good(answers=["A", 3]), "answers[1]", "expected str"),
    (_good(split=7), "split", "expected str"),
    ({"qid": "q1", "passages": []}, "question", "missing"),
    ({k: v for k, v in _good().items() if k != "passages"}, "passages", "missing"),
])
def test_read_records_names_file_line_and_field(tmp_path, bad, field, reason):
    path = _write_lines(tmp_path / "bad.jsonl", [_good(qid="q0"), "", bad])
    with pytest.raises(DataError) as info:
        read_records(path)
    err = info.value
    assert err.path == str(path)
    assert err.line == 3  # blank lines keep their number
    assert err.field == field
    assert reason in err.reason
    assert str(path) in str(err) and "line 3" in str(err) and f"field '{field}'" in str(err)


def test_non_finite_score_is_reported(tmp_path):
    # Python's json accepts NaN / Infinity literals: the validator must catch them
    line = json.dumps(_bad_passage(1, score=1.0)).replace("1.0", "Infinity")
    path = _write_lines(tmp_path / "inf.jsonl", [line])
    with pytest.raises(DataError, match="not finite") as info:
        read_records(path)
    assert (info.value.line, info.value.field) == (1, "passages[1].score")


def test_invalid_json_names_line(tmp_path):
    path = _write_lines(tmp_path / "broken.jsonl", [_good(), '{"qid": "q2", '])
    with pytest.raises(DataError, match="invalid JSON") as info:
        read_records(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, None)


def test_allow_empty_and_validate_flags(tmp_path):
    path = _write_lines(tmp_path / "empty.jsonl", [_good(passages=[])])
    assert read_records(path, allow_empty=True)[0].passages == []
    dup = _write_lines(tmp_path / "dup.jsonl", [_bad_passage(1, pid="p1")])
    assert len(read_records(dup, validate=False)[0].passages) == 2


def test_validate_record_without_location():
    rec = QueryRecord(qid="q", question="?", passages=[Passage(pid="a", text="x", score=float("nan"))])
    with pytest.raises(DataError) as info:
        validate_record(rec)
    assert info.value.path is None and info.value.field == "passages[0].score"


def test_parse_lines_attaches_location_to_parser_errors(tmp_path):
    path = _write_lines(tmp_path / "x.jsonl", [{"a": 1}, {"b": 2}])

    def parse(obj):
        if "a" not in obj:
            raise DataError("missing", field="a")
        return obj["a"]

    with pytest.raises(DataError) as info:
        list(parse_lines(path, parse))
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, "a")
    # plain KeyError / TypeError from a parser are converted too, with the line
    with pytest.raises(DataError) as info:
        list(parse_lines(path, lambda obj: obj["a"]))
    assert info.value.line == 2 and "KeyError" in info.value.reason


# ---- strict reading: bytes, gzip, non-finite numbers, duplicates, empty files ----------------

def test_open_text_names_path_line_and_column_of_bad_bytes(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"ok\r\nfine\nbad \xff here\n")
    with open_text(path) as f:
        lines = []
        with pytest.raises(DataError) as info:
            for line in f:
                lines.append(line)
    assert lines == ["ok\n", "fine\n"]  # CRLF read as LF, as text mode does
    assert (info.value.path, info.value.line) == (str(path), 3) and "column 5" in info.value.reason
    with pytest.raises(DataError) as info, open_text(path) as f:  # read(): the same line from the byte offset
        f.read()
    assert info.value.line == 3


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not gzip"])
def test_open_text_damaged_gzip_is_a_data_error(tmp_path, damage):
    data = gzip.compress(b"".join(b"line %d\n" % i for i in range(2000)), mtime=0)
    bad = {"truncated": data[: len(data) // 2], "corrupt": data[:40] + bytes(b ^ 0x33 for b in data[40:60]) + data[60:],
           "not gzip": b"plain text\n"}[damage]
    path = tmp_path / "x.txt.gz"
    path.write_bytes(bad)
    with pytest.raises(DataError, match="gzip") as info, open_text(path) as f:
        list(f)
    assert info.value.path == str(path)


def test_missing_file_names_its_path_and_is_a_file_not_found_error(tmp_path):
    path = tmp_path / "absent.jsonl"
    with pytest.raises(MissingFileError) as info:
        read_records(path)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, DataError)
    assert str(path) in str(info.value) and str(path) in repr(info.value)  # Hydra prints repr(err)


@pytest.mark.parametrize(("literal", "field"), [
    ('{"qid": "q", "question": "?", "passages": [{"pid": "p", "text": "t", "score": NaN}]}', "passages[0].score"),
    ('{"qid": "q", "question": "?", "passages": [], "extra": {"a": [1, -Infinity]}}', "extra.a[1]"),
    ('{"qid": "q", "question": "?", "passages": [{"pid": "p", "text": "t", "score": 1e999}]}', "passages[0].score"),
])
def test_non_finite_numbers_are_not_json(tmp_path, literal, field):
    path = _write_lines(tmp_path / "nan.jsonl", [_good(), literal])
    with pytest.raises(DataError, match="not finite") as info:
        read_records(path)
    assert (info.value.line, info.value.field) == (2, field)
    with pytest.raises(DataError) as info:
        loads_json(literal)
    assert info.value.field == field


def test_writer_refuses_what_the_reader_would_refuse(tmp_path):
    rec = QueryRecord(qid="q", question="?", passages=[Passage(pid="p", text="t", extra={"x": float("nan")})])
    with pytest.raises(ValueError, match=r"passages\[0\]\.extra\.x"):
        write_records(tmp_path / "out.jsonl", [rec])
    assert not (tmp_path / "out.jsonl").exists()


def test_duplicate_query_ids_and_empty_files_are_errors(tmp_path):
    path = _write_lines(tmp_path / "dup.jsonl", [_good(), _good(qid="q2"), _good()])
    with pytest.raises(DataError, match="duplicate qid 'q1' \\(first on line 1\\)") as info:
        read_records(path)
    assert (info.value.line, info.value.field) == (3, "qid")
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n \n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(DataError, match="no records") as info:
            read_records(tmp_path / name)
        assert info.value.path == str(tmp_path / name)
    assert list(parse_lines(tmp_path / "empty.jsonl", dict, allow_empty=True)) == []


@pytest.mark.parametrize(("qid", "pid", "field"), [("", "p", "qid"), (" ", "p", "qid"), ("q", "", "passages[0].pid")])
def test_blank_ids_are_errors(qid, pid, field):
    with pytest.raises(DataError, match="empty") as info:
        validate_record(QueryRecord(qid=qid, question="?", passages=[Passage(pid=pid, text="t")]))
    assert info.value.field == field


@given(st.integers(-3, 0))
def test_rank_is_one_based(rank):
    with pytest.raises(DataError, match="1-based") as info:
        validate_record(QueryRecord(qid="q", question="?", passages=[Passage(pid="p", text="t", rank=rank)]))
    assert info.value.field == "passages[0].rank"
