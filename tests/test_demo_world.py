"""The seeded demo world: determinism, pool composition, answerability, splits."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from udcg_ltr.data.demo_world import (
    ATTRIBUTES,
    build_world,
    generate_demo_world,
    gold_answers,
    write_demo_world,
)
from udcg_ltr.data.jsonl import read_records
from udcg_ltr.text import has_answer


@pytest.fixture(scope="module")
def world():
    return generate_demo_world(seed=0)


def test_same_seed_same_bytes_different_seed_different(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    write_demo_world(a, seed=5)
    write_demo_world(b, seed=5)
    write_demo_world(c, seed=6)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    gz1, gz2 = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    write_demo_world(gz1, seed=5)
    write_demo_world(gz2, seed=5)
    assert gz1.read_bytes() == gz2.read_bytes()
    assert read_records(a) == read_records(gz1) == generate_demo_world(seed=5)


def test_bytes_do_not_depend_on_hash_randomisation(tmp_path):
    # set iteration order changes with PYTHONHASHSEED; the world must not
    outputs = []
    for hash_seed in ("1", "2"):
        path = tmp_path / f"w{hash_seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-m", "udcg_ltr.data.demo_world", str(path), "--seed", "3",
                        "--n-questions", "20"], check=True, env=env, capture_output=True)
        outputs.append(path.read_bytes())
    assert outputs[0] == outputs[1]
    in_process = tmp_path / "here.jsonl"
    write_demo_world(in_process, seed=3, n_questions=20)
    assert in_process.read_bytes() == outputs[0]


def test_sizes_and_balance(world):
    assert len(world) == 60
    assert all(len(r.passages) == 12 for r in world)
    assert len({r.qid for r in world}) == 60
    types = Counter(r.extra["entity_type"] for r in world)
    assert set(types) == set(ATTRIBUTES) and max(types.values()) - min(types.values()) <= 1
    assert len({(r.extra["entity"], r.extra["attribute"]) for r in world}) == 60  # no repeated question


def test_answerable_from_exactly_the_answer_passages(world):
    for r in world:
        relevant = [p for p in r.passages if p.relevance == 1]
        assert 1 <= len(relevant) <= 2
        for p in r.passages:
            assert has_answer(p.text, r.answers) == (p.relevance == 1), (r.question, p.text)
        for p in relevant:
            assert r.extra["entity_name"] in p.text  # the passage names the entity it answers about
            assert r.extra["attribute"] in p.extra["attributes"]
            assert p.extra["entity"] == r.extra["entity"] and p.is_distractor is False


def test_pool_has_hard_distractors(world):
    kinds = Counter(p.extra["kind"] for r in world for p in r.passages)
    assert kinds["same_entity"] > 0 and kinds["similar_entity"] > 0 and kinds["unrelated"] > 0
    for r in world:
        distractors = [p for p in r.passages if p.is_distractor]
        assert distractors, r.question
        for p in r.passages:
            kind = p.extra["kind"]
            assert p.is_distractor == (kind in ("same_entity", "similar_entity", "mentions_entity"))
            if kind == "same_entity":
                assert p.extra["entity"] == r.extra["entity"] and r.extra["attribute"] not in p.extra["attributes"]
            if kind == "similar_entity":  # a look-alike, same attribute, different value (has_answer above)
                assert p.extra["entity"] != r.extra["entity"] and r.extra["attribute"] in p.extra["attributes"]
            if kind == "mentions_entity":
                assert r.extra["entity_name"] in p.text and p.extra["entity"] != r.extra["entity"]
    # most questions face a look-alike entity's statement of the same attribute
    assert np.mean([any(p.extra["kind"] == "similar_entity" for p in r.passages) for r in world]) > 0.8


def test_similar_entities_are_look_alikes_with_other_values():
    w = build_world(seed=0)
    families = {}
    for e in w.entities:
        families.setdefault(e.family, []).append(e)
    assert all(len(members) == 2 for members in families.values())
    for members in families.values():
        a, b = members
        assert a.etype == b.etype and a.split == b.split
        assert all(a.values[k] != b.values[k] for k in ATTRIBUTES[a.etype])
        if a.etype == "person":
            assert a.name.split()[-1] == b.name.split()[-1]  # siblings share a surname
        else:
            assert a.name[:3] == b.name[:3]  # shared stem
    names = [e.name for e in w.entities]
    assert len(set(names)) == len(names)


def test_passages_are_short_and_titled():
    w = build_world(seed=1, n_entities=40)
    for p in w.passages:
        assert 20 <= len(p.text.split()) <= 60
        assert p.title == w.entity(p.eid).name and p.title in p.text
    # every fact is stated somewhere
    for e in w.entities:
        stated = {a for p in w.passages if p.eid == e.eid for a in p.attributes}
        assert stated == set(ATTRIBUTES[e.etype])
        for a in ATTRIBUTES[e.etype]:
            assert any(has_answer(p.text, gold_answers(e, a)) for p in w.passages if p.eid == e.eid and a in p.attributes)


def test_retrieval_scores_are_noisy_but_informative(world):
    for r in world:
        assert [p.rank for p in r.passages] == list(range(1, 13))
        scores = [p.score for p in r.passages]
        assert scores == sorted(scores, reverse=True)
    first_relevant = np.mean([r.passages[0].relevance == 1 for r in world])
    assert 0.2 < first_relevant < 0.95  # relevant passages are not always first
    assert np.mean([any(p.is_distractor for p in r.passages[:3]) for r in world]) > 0.5
    rank_of = lambda kind: np.mean([p.rank for r in world for p in r.passages if p.extra["kind"] == kind])  # noqa: E731
    assert rank_of("answer") < rank_of("unrelated") and rank_of("similar_entity") < rank_of("unrelated")


def test_splits_by_entity_family(world):
    assert set(r.split for r in world) <= {"train", "val", "test"}
    ent = build_world(seed=0)  # the world behind generate_demo_world(seed=0)
    split_of = {e.eid: e.split for e in ent.entities}
    by_family = {}
    for r in world:
        by_family.setdefault(r.extra["family"], set()).add(r.split)
        assert split_of[r.extra["entity"]] == r.split
        # unrelated filler passages come from the question's split too
        assert all(split_of[p.extra["entity"]] == r.split for p in r.passages if p.extra["kind"] == "unrelated")
    assert all(len(s) == 1 for s in by_family.values())
    counts = Counter(e.split for e in ent.entities)
    assert counts["train"] > counts["val"] > 0 and counts["test"] > 0


def test_parameters():
    big = generate_demo_world(seed=2, n_entities=80, n_questions=150, pool_size=8)
    assert len(big) == 150 and all(len(r.passages) <= 8 for r in big)
    assert np.mean([len(r.passages) == 8 for r in big]) > 0.9
    with pytest.raises(ValueError, match="pairs"):
        generate_demo_world(n_entities=8, n_questions=500)
    with pytest.raises(ValueError):
        generate_demo_world(n_entities=3)
    with pytest.raises(ValueError):
        generate_demo_world(pool_size=1)
    quiet = generate_demo_world(seed=0, score_noise=0.0)
    loud = generate_demo_world(seed=0, score_noise=3.0)
    first = lambda recs: np.mean([r.passages[0].relevance for r in recs])  # noqa: E731
    assert first(quiet) > first(loud)
