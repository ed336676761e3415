"""The bad-input catalogue (tests/bad_inputs_catalogue.py): every malformed input, through every reader and a
few command lines, must be a DataError naming the file (and the line and field where they exist) -- never a
raw exception, never silently read as data."""

from __future__ import annotations

import collections

import pytest
from bad_inputs_catalogue import (
    Case,
    Expect,
    build_catalogue,
    cli_cases,
    judge_error,
    layouts,
    run_case,
    valid_fixture_reads,
)

from udcg_ltr.data.schema import DataError

CATALOGUE = build_catalogue()


def test_catalogue_covers_every_reader_and_kind_of_damage():
    assert len(CATALOGUE) >= 190
    assert len({c.id for c in CATALOGUE}) == len(CATALOGUE)  # ids are unique (they name the test cases)
    per_reader = collections.Counter(c.reader.split(".")[0] for c in CATALOGUE)
    assert len(per_reader) >= 13 and min(per_reader.values()) >= 15, per_reader
    mutations = {c.mutation for c in CATALOGUE}
    for required in ("empty file", "non-UTF-8 byte", "corrupt gzip", "truncated gzip", "missing file",
                     "truncated JSON line", "duplicate query id", "qid null", "qid missing", "answers string",
                     "passages[0].score NaN", "passages[0].score Infinity", "passages[0].relevance negative",
                     "extra column", "inf grade", "pair judged twice"):
        assert required in mutations, required


def test_every_fixture_is_valid_before_it_is_damaged(tmp_path):
    counts = valid_fixture_reads(tmp_path)
    assert set(counts) == {lay.reader for lay in layouts()}
    assert all(n not in (0, "?") for n in counts.values()), counts


@pytest.mark.parametrize("case", CATALOGUE, ids=[c.id for c in CATALOGUE])
def test_bad_input_gives_a_clear_data_error(tmp_path, case):
    outcome = run_case(case, tmp_path)
    assert outcome.kind == "clear", f"{case.id}: {outcome.kind}: {outcome.detail}\n{outcome.message}"


def test_the_judge_can_fail(tmp_path):
    """The classification itself: a silent read, a raw exception and an error without location are caught."""
    path = tmp_path / "x.jsonl"

    def case(call, expect):
        return Case("fake", "fake", lambda folder: (call, expect))

    assert run_case(case(lambda: [], Expect(path)), tmp_path).kind == "silent"
    assert run_case(case(lambda: {}["k"], Expect(path)), tmp_path).kind == "traceback"
    assert run_case(case(_raiser(DataError("bad")), Expect(path)), tmp_path).kind == "unclear"
    assert run_case(case(_raiser(DataError("bad", path=path, line=3)), Expect(path, 2)), tmp_path).kind == "unclear"
    wrong_field = DataError("bad", path=path, line=2, field="qid")
    assert judge_error(wrong_field, Expect(path, 2, "passages[0].pid")).kind == "unclear"
    assert judge_error(DataError("bad", path=path, line=2, field="passages[0].annotations['m'].p"),
                       Expect(path, 2, "passages[0].annotations.m.p")).kind == "clear"


def _raiser(err):
    def call():
        raise err
    return call


@pytest.mark.parametrize("case", cli_cases(), ids=[c.id for c in cli_cases()])
def test_command_line_reports_bad_input_with_path_and_line(tmp_path, case):
    # Hydra entry points: exit code != 0 and the DataError's text (file, line) on stderr. Whether a Python
    # traceback is printed as well depends on the entry point (a clean print is the entry point's job).
    outcome = run_case(case, tmp_path)
    assert outcome.kind == "clear", f"{case.id}: {outcome.kind}: {outcome.detail}\n{outcome.message}"
