"""AnnotationCache: durability, torn lines, validated reads, concurrent readers and writers, compaction, keys."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from udcg_ltr.annotate.annotator import CachedScorer
from udcg_ltr.annotate.cache import AnnotationCache, cache_key, passages_digest
from udcg_ltr.annotate.prompts import PromptItem, ScoreResult
from udcg_ltr.data.schema import DataError


def _key(i: int) -> str:
    return cache_key("llm", "v1", "score", f"question {i}", [("t", f"text {i}")])


def test_put_get_and_reopen(tmp_path):
    with AnnotationCache(tmp_path) as cache:
        cache.put_many([(_key(i), {"p_no_response": i / 10}, {"q": i}) for i in range(5)])
        assert len(cache) == 5 and cache.get(_key(3)) == {"p_no_response": 0.3}
        assert cache.get(_key(9)) is None
    again = AnnotationCache(tmp_path)
    assert len(again) == 5
    assert again.get(_key(4)) == {"p_no_response": 0.4}
    assert again.stats()["duplicate_lines"] == 0


def test_later_lines_extend_an_entry(tmp_path):
    cache = AnnotationCache(tmp_path)
    cache.put(_key(0), {"p_no_response": 0.5})
    cache.put(_key(0), {"answer": "x", "p_no_response": 0.5})
    cache.close()
    reread = AnnotationCache(tmp_path)
    assert reread.get(_key(0)) == {"p_no_response": 0.5, "answer": "x"}
    assert reread.stats()["duplicate_lines"] == 1


def test_torn_last_line_is_ignored_until_complete(tmp_path):
    cache = AnnotationCache(tmp_path)
    cache.put_many([(_key(i), {"p": i}, None) for i in range(3)])
    cache.close()
    seg = cache.segments()[0]
    full = json.dumps({"k": _key(3), "v": {"p": 3}}) + "\n"
    with open(seg, "a", encoding="utf-8") as f:  # a writer killed mid-line
        f.write(full[:25])
    reader = AnnotationCache(tmp_path, read_only=True)
    assert len(reader) == 3 and reader.get(_key(3)) is None
    assert reader.stats()["torn_bytes"] == 25 and reader.stats()["corrupt_lines"] == 0
    with open(seg, "a", encoding="utf-8") as f:  # ... or one still writing: the rest arrives
        f.write(full[25:])
    assert reader.refresh() == 1
    assert reader.get(_key(3)) == {"p": 3} and reader.stats()["torn_bytes"] == 0


def test_garbage_line_is_counted_not_fatal(tmp_path):
    (tmp_path / "seg-0-0-x.jsonl").write_text('{"k": "a", "v": {"p": 1}}\nnot json\n{"k": 5, "v": {}}\n')
    cache = AnnotationCache(tmp_path)
    assert cache.get("a") == {"p": 1}
    assert cache.stats()["corrupt_lines"] == 2


def test_each_writer_gets_its_own_segment(tmp_path):
    a, b = AnnotationCache(tmp_path), AnnotationCache(tmp_path)
    a.put(_key(1), {"p": 1})
    b.put(_key(2), {"p": 2})
    assert len(a.segments()) == 2
    assert a.get(_key(2)) is None  # not yet seen ...
    a.refresh()
    assert a.get(_key(2)) == {"p": 2}  # ... until refreshed
    a.close(), b.close()


def _writer(root: str, start: int, n: int) -> None:
    cache = AnnotationCache(root)
    for i in range(start, start + n, 5):
        cache.put_many([(_key(j), {"p": j}, None) for j in range(i, min(i + 5, start + n))])
    cache.close()


def test_concurrent_writer_processes(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s, 40)) for s in (0, 40, 80)]
    for p in procs:
        p.start()
    reader = AnnotationCache(tmp_path, read_only=True)
    while any(p.is_alive() for p in procs):
        reader.refresh()  # a reader polling mid-write only ever sees complete entries
        assert reader.stats()["corrupt_lines"] == 0
        for k in list(reader.keys()):
            assert "p" in reader.get(k)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    reader.refresh()
    assert len(reader) == 120 and reader.stats()["duplicate_lines"] == 0
    assert {reader.get(_key(j))["p"] for j in range(120)} == set(range(120))


def test_compact_merges_segments(tmp_path):
    for i in range(3):
        with AnnotationCache(tmp_path) as c:
            c.put(_key(i), {"p": i})
            c.put(_key(0), {"extra": i})
    cache = AnnotationCache(tmp_path)
    assert len(cache.segments()) == 3
    cache.compact()
    assert len(cache.segments()) == 1
    reread = AnnotationCache(tmp_path)
    assert len(reread) == 3 and reread.get(_key(0)) == {"p": 0, "extra": 2}
    assert reread.stats()["lines"] == 3


def test_keys_separate_every_component():
    base = dict(llm="a", prompt_version="v", task="score", question="q", passages=[("t", "x")])
    k0 = cache_key(**base)
    for change in (dict(llm="b"), dict(prompt_version="w"), dict(task="mc"), dict(question="q2"),
                   dict(passages=[("t2", "x")]), dict(passages=[("t", "x2")]), dict(passages=[("t", "x")] * 2)):
        assert cache_key(**{**base, **change}) != k0, change
    assert cache_key(**base, params={"n": 1}) != cache_key(**base, params={"n": 2})
    assert cache_key(**base, params={"a": 1, "b": 2}) == cache_key(**base, params={"b": 2, "a": 1})
    # title/text boundaries cannot collide
    assert passages_digest([("ab", "c")]) != passages_digest([("a", "bc")])


def test_read_only_cache_refuses_writes(tmp_path):
    cache = AnnotationCache(tmp_path / "none", read_only=True)
    assert len(cache) == 0
    with pytest.raises(PermissionError):
        cache.put("k", {"p": 1})


# ---- validated reads, torn lines and compaction ----------------------------------------------

def _segment_line(key: str, fields: dict) -> str:
    # json.dumps writes NaN / Infinity as bare literals, as a buggy or tampered writer would
    return json.dumps({"k": key, "v": fields}) + "\n"


@pytest.mark.parametrize(("fields", "field"), [
    ({"p_no_response": float("nan")}, "p_no_response"),
    ({"p_no_response": 1.5}, "p_no_response"),
    ({"p_no_response": -0.25}, "p_no_response"),
    ({"p_no_response": "0.5"}, "p_no_response"),
    ({"p_no_response": True}, "p_no_response"),
    ({"p_no_response": float("inf")}, "p_no_response"),
    ({"p_no_response_mc": 2.0}, "p_no_response_mc"),
    ({"p_no_response": 0.5, "n_prompt_tokens": -3}, "n_prompt_tokens"),
    ({"p_no_response": 0.5, "n_prompt_tokens": 2.5}, "n_prompt_tokens"),
    ({"p_no_response": 0.5, "answer": 7}, "answer"),
    ({"answer_logprob": float("nan")}, "answer_logprob"),
    ({"answer_logprob": 0.5}, "answer_logprob"),
    ({"mc_answers": "NO-RESPONSE"}, "mc_answers"),
    ({"reply": None}, "reply"),
    ({"custom": [1.0, float("-inf")]}, "custom"),
])
def test_corrupt_values_are_rejected_with_segment_and_line(tmp_path, caplog, fields, field):
    seg = tmp_path / "seg-0-0-x.jsonl"
    seg.write_text(_segment_line("good", {"p_no_response": 0.25}) + "\n" + _segment_line("bad", fields))
    with caplog.at_level("WARNING", logger="udcg_ltr.annotate.cache"):
        cache = AnnotationCache(tmp_path, read_only=True)
    assert cache.get("good") == {"p_no_response": 0.25}
    assert cache.get("bad") is None and "bad" not in cache  # not served: recomputed on demand
    assert cache.stats()["invalid_lines"] == 1 and cache.stats()["corrupt_lines"] == 0
    message = caplog.text
    assert seg.name in message and "line 3" in message and repr(field) in message


def test_a_corrupt_later_line_does_not_spoil_an_entry(tmp_path):
    (tmp_path / "seg-0-0-x.jsonl").write_text(
        _segment_line("k", {"p_no_response": 0.25}) + _segment_line("k", {"p_no_response": float("nan"), "x": 1}))
    cache = AnnotationCache(tmp_path)
    assert cache.get("k") == {"p_no_response": 0.25}  # the whole bad line is rejected, not merged in part
    assert cache.stats()["invalid_lines"] == 1


def test_put_refuses_invalid_values_and_writes_nothing(tmp_path):
    cache = AnnotationCache(tmp_path)
    with pytest.raises(DataError) as info:
        cache.put_many([(_key(0), {"p_no_response": 0.5}, None), (_key(1), {"p_no_response": float("nan")}, None)])
    assert info.value.field == "p_no_response" and str(tmp_path) in str(info.value)
    assert len(cache) == 0 and all(seg.stat().st_size == 0 for seg in cache.segments())


class _ConstantScorer:
    """A stand-in LLM: P(NO-RESPONSE) = 0.125 for every prompt; counts the prompts it scores."""

    name, dtype, quantize, batch_size, max_new_tokens, prompt_version = "const", "float32", None, 4, 8, "v1"

    def __init__(self):
        self.scored = 0

    def score(self, items, *, generate=False, progress=None, on_batch=None):
        items = list(items)
        self.scored += len(items)
        results = [ScoreResult(0.125, None, 3) for _ in items]
        if on_batch:
            on_batch(list(range(len(items))), results)
        return results


def test_a_nan_in_the_cache_is_recomputed_not_served(tmp_path):
    items = [PromptItem(f"question {i}?", [("T", f"text {i}")]) for i in range(3)]
    scorer = _ConstantScorer()
    first = CachedScorer(scorer, AnnotationCache(tmp_path))
    first.score(items)
    first.cache.close()
    assert scorer.scored == 3
    # tamper: the entry of item 1 gets a NaN (as a buggy writer or a bit flip would leave it)
    key = first.key("score", items[1])
    with open(first.cache.segments()[0], "a", encoding="utf-8") as f:
        f.write(_segment_line(key, {"p_no_response": float("nan"), "n_prompt_tokens": 3}))
    again = CachedScorer(scorer, AnnotationCache(tmp_path))
    results = again.score(items)
    assert [r.p_no_response for r in results] == [0.125] * 3  # nothing NaN reaches the output
    assert scorer.scored == 3  # the earlier valid line of item 1 still serves it
    # a key whose only line is corrupt is recomputed
    (tmp_path / "seg-0-0-only.jsonl").write_text(_segment_line(again.key("score", PromptItem("new?", [("T", "x")])),
                                                               {"p_no_response": float("nan")}))
    third = CachedScorer(scorer, AnnotationCache(tmp_path))
    assert third.score([PromptItem("new?", [("T", "x")])])[0].p_no_response == 0.125
    assert scorer.scored == 4


def test_compact_drops_torn_lines_and_keeps_one_line_per_key(tmp_path):
    with AnnotationCache(tmp_path) as cache:
        cache.put_many([(_key(i), {"p_no_response": i / 10}, None) for i in range(4)])
        cache.put(_key(0), {"answer": "x"})
    seg = cache.segments()[0]
    with open(seg, "a", encoding="utf-8") as f:  # a writer killed mid-line: a torn tail
        f.write(_segment_line(_key(9), {"p_no_response": 0.9})[:30])
    # a second writer repeated a computation and was killed mid-line as well
    second = tmp_path / "seg-1-1-y.jsonl"
    second.write_text(_segment_line(_key(1), {"p_no_response": 0.1}) + _segment_line(_key(2), {"p_no_response": 0.2})[:17])
    (tmp_path / "seg-2-2-z.jsonl").write_text(_segment_line(_key(3), {"p_no_response": float("nan")}))
    cache = AnnotationCache(tmp_path)
    assert cache.stats()["torn_bytes"] == 30 + 17 and cache.stats()["duplicate_lines"] == 2
    dest = cache.compact()
    assert cache.segments() == [dest]
    lines = dest.read_text(encoding="utf-8").splitlines()
    keys = [json.loads(line)["k"] for line in lines]
    assert sorted(keys) == sorted(_key(i) for i in range(4))  # one line per key, no torn key 9
    reread = AnnotationCache(tmp_path)
    stats = reread.stats()
    assert stats["entries"] == stats["lines"] == 4 and stats["duplicate_lines"] == 0
    assert stats["torn_bytes"] == 0 and stats["invalid_lines"] == 0 and stats["corrupt_lines"] == 0
    assert reread.get(_key(0)) == {"p_no_response": 0.0, "answer": "x"} and reread.get(_key(3)) == {"p_no_response": 0.3}
    assert reread.get(_key(9)) is None
    # compacting again is a no-op on content
    assert reread.compact().read_text(encoding="utf-8").splitlines() == lines
