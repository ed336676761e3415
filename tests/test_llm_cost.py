"""Long LLM stages announce their cost first (issue 31): prompts to compute per kind, cached ones apart, and an
estimate from a rate measured batch by batch and kept beside the annotation cache."""

from __future__ import annotations

import json
import logging
import re

import pytest
from test_annotate_annotator import FakeScorer, _records

from udcg_ltr.annotate import cost
from udcg_ltr.annotate.annotator import CachedScorer, annotate_records, passage_items
from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.annotate.end_to_end import Context, run_contexts

LOGGER = "udcg_ltr.annotate.cost"
ESTIMATE = re.compile(r"about \d+(\.\d)? (s|min|h|days) at [\d.,e-]+ prompts/s measured on this machine$")


class EventScorer(FakeScorer):
    """A FakeScorer noting, at each LLM call, how many cost lines had been logged before it."""

    def __init__(self, caplog):
        super().__init__()
        self.caplog, self.lines_before_calls = caplog, []

    def score(self, items, **kwargs):
        self.lines_before_calls.append(len(cost_lines(self.caplog)))
        return super().score(items, **kwargs)


def cost_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.INFO]


@pytest.fixture(autouse=True)
def fresh_books(monkeypatch, caplog):
    """Each test starts as a new process would: no rate books in memory; cost lines captured."""
    monkeypatch.setattr(cost, "_BOOKS", {})
    caplog.set_level(logging.INFO, logger=LOGGER)


def _contexts(records, sizes=(3, 2, 4)):
    return [Context(r.qid, c, tuple(p.pid for p in r.passages[:k])) for r in records for c, k in enumerate(sizes)]


def test_announce_cost_line_format():
    line = cost.announce_cost(2946, "single", "qwen2.5-coder-0.5b-instruct", 0.24, cached=0)
    assert line.startswith("qwen2.5-coder-0.5b-instruct: 2,946 single-passage prompts to compute (0 cached), ")
    assert ESTIMATE.search(line), line
    assert "about 3.4 h at 0.24 prompts/s" in line  # 2946 / 0.24 s
    unmeasured = cost.announce_cost(40, "context", "llm", None, cached=7)
    assert unmeasured == "llm: 40 multi-passage contexts to compute (7 cached), rate not measured yet on this " \
                         "machine (reported after the first batch)"
    assert cost.announce_cost(3, "single", "llm", 1.0) is None  # a handful: no announcement
    assert cost.announce_cost(0, "single", "llm", 1.0, cached=500) is None  # nothing to compute


def test_announcement_comes_before_the_first_llm_call_with_the_right_counts(tmp_path, caplog):
    records = _records()  # 5 questions x 4 passages
    fake = EventScorer(caplog)
    annotate_records(records, fake, AnnotationCache(tmp_path))
    lines = cost_lines(caplog)
    assert fake.lines_before_calls == [1]  # the one announcement was logged before the LLM's first call
    assert lines[0] == ("fake-llm: 20 single-passage prompts to compute (0 cached), rate not measured yet on this "
                        "machine (reported after the first batch)")
    # the rate after the first batch, with what is left (FakeScorer batches 3 prompts)
    assert re.fullmatch(r"fake-llm: [\d.,e+-]+ single-passage prompts/s measured over the first batch; "
                        r"about \d+(\.\d)? (s|min|h|days) for the 17 left", lines[1]), lines[1]


def test_cached_prompts_are_not_counted(tmp_path, caplog):
    records = _records()
    cache = AnnotationCache(tmp_path)
    annotate_records(records[:2], FakeScorer(), cache)  # 8 passages cached
    caplog.clear()
    fake = EventScorer(caplog)
    annotate_records(records, fake, cache)
    lines = cost_lines(caplog)
    assert lines[0].startswith("fake-llm: 12 single-passage prompts to compute (8 cached), about ")
    assert fake.lines_before_calls == [1] and len(fake.scored) == 12
    caplog.clear()
    annotate_records(records, FakeScorer(), cache)  # everything cached: nothing announced as work
    assert cost_lines(caplog) == ["fake-llm: all 20 single-passage prompts cached, nothing to compute"]


def test_a_recorded_rate_gives_the_estimate_and_survives_a_rerun(tmp_path, caplog, monkeypatch):
    records = _records()
    annotate_records(records[:3], FakeScorer(), AnnotationCache(tmp_path / "a"))
    book = json.loads((tmp_path / "a" / cost.RATES_FILE).read_text())
    ((key, rec),) = book.items()
    assert key == "fake-llm|float32|" + cost.device_label(FakeScorer()) + "|single|generate"
    assert rec["prompts"] == 12 and rec["seconds"] > 0 and rec["rate"] == pytest.approx(12 / rec["seconds"])

    # A rerun (a new process: no book in memory) on the same cache reads the rate and estimates with it.
    monkeypatch.setattr(cost, "_BOOKS", {})
    caplog.clear()
    annotate_records(records + _records_more(), FakeScorer(), AnnotationCache(tmp_path / "a"))
    line = cost_lines(caplog)[0]
    assert line.startswith("fake-llm: 12 single-passage prompts to compute (12 cached), about "), line
    assert ESTIMATE.search(line), line
    assert json.loads((tmp_path / "a" / cost.RATES_FILE).read_text())[key]["prompts"] == 24  # 12 + 12 measured

    # A known rate gives the time it implies.
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / cost.RATES_FILE).write_text(json.dumps({key: {"prompts": 100, "seconds": 400.0}}))
    monkeypatch.setattr(cost, "_BOOKS", {})
    caplog.clear()
    annotate_records(records, FakeScorer(), AnnotationCache(tmp_path / "b"))
    assert cost_lines(caplog) == ["fake-llm: 20 single-passage prompts to compute (0 cached), about 80 s at "
                                  "0.25 prompts/s measured on this machine"]
    assert json.loads((tmp_path / "b" / cost.RATES_FILE).read_text())[key]["prompts"] == 120


def _records_more():
    more = _records()[:1]
    for r in more:
        r.qid, r.question = "q-extra", "another question?"
    return more


def test_run_contexts_announces_once_for_all_chunks_single_and_contexts_apart(tmp_path, caplog):
    records = _records()
    fake = EventScorer(caplog)
    cache = AnnotationCache(tmp_path)
    annotate_records(records, FakeScorer(), cache)  # every single-passage prompt cached (with answers)
    caplog.clear()
    contexts = _contexts(records, sizes=(3, 2, 1, 4))  # 15 multi-passage contexts, 5 one-passage ones
    runs = run_contexts(records, contexts, fake, cache, batch_items=4, progress=False)
    assert len(runs) == 20 and len(fake.scored) == 15
    lines = cost_lines(caplog)
    assert lines[0] == ("fake-llm: 15 multi-passage contexts to compute (0 cached), rate not measured yet on this "
                        "machine (reported after the first batch)")  # the 5 one-passage prompts: all cached
    assert fake.lines_before_calls == [1, 2, 2, 2, 2]  # 5 chunks: announced before the first chunk, never again per chunk
    assert sum("to compute" in ln for ln in lines) == 1
    assert sum("measured over the first batch" in ln for ln in lines) == 1


def test_run_contexts_without_a_cache_measures_chunks(caplog):
    class Plain:  # a scorer that is not a CachedScorer and knows nothing of on_batch
        name, device = "plain-llm", "cpu"

        def __init__(self):
            self.fake = FakeScorer()

        def score(self, items, generate=False):
            return self.fake.score(items, generate=generate)

    records = _records()
    runs = run_contexts(records, _contexts(records), Plain(), batch_items=5, progress=False)
    assert len(runs) == 15
    lines = cost_lines(caplog)
    assert lines[0].startswith("plain-llm: 15 multi-passage contexts to compute (0 cached), rate not measured")
    # the in-memory rate serves the next run of the process
    caplog.clear()
    run_contexts(records, _contexts(records), Plain(), progress=False)
    assert ESTIMATE.search(cost_lines(caplog)[0]), cost_lines(caplog)


def test_prints_to_stderr_when_logging_is_not_configured(monkeypatch, capsys):
    monkeypatch.setattr(cost.log, "hasHandlers", lambda: False)
    line = cost.announce_cost(50, "single", "llm", 2.0)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == line + "\n"


def test_a_corrupt_rates_file_is_measured_again(tmp_path, caplog):
    (tmp_path / cost.RATES_FILE).write_text("{not json")
    annotate_records(_records(), FakeScorer(), AnnotationCache(tmp_path))
    assert sum("unreadable" in r.getMessage() for r in caplog.records) == 1  # warned once
    assert "rate not measured yet" in cost_lines(caplog)[1]
    assert json.loads((tmp_path / cost.RATES_FILE).read_text())  # rewritten whole


def test_cached_scorer_pending_matches_what_score_computes(tmp_path):
    records = _records()
    cache = AnnotationCache(tmp_path)
    annotate_records(records[:1], FakeScorer(), cache, fields=["p_no_response"])
    cached = CachedScorer(FakeScorer(), cache)
    _, items = passage_items(records)
    items = items + items[:2]  # repeated prompts are computed once
    todo, hit = cached.pending(items, generate=False)
    assert len(hit) == 6 and len(todo) == 16  # the 2 repeats are cached ones
    assert len(cached.pending(items, generate=True)[0]) == 20  # cached entries without an answer recompute
    cached.score(items)
    assert len(cached.scorer.scored) == 16


def test_duration_and_rate_formats():
    assert [cost.format_duration(s) for s in (0.2, 40, 600, 12240, 3 * 86400)] == [
        "1 s", "40 s", "10 min", "3.4 h", "3.0 days"]
    assert [cost.format_rate(r) for r in (0.24, 3.14, 12.3, 1234.0, 0.004)] == ["0.24", "3.1", "12", "1,234", "0.004"]
