"""AnnotationCache: durability, torn lines, concurrent readers and writers, compaction, keys."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from udcg_ltr.annotate.cache import AnnotationCache, cache_key, passages_digest


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
