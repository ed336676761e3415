"""``evaluate.py mode=selectors``: the dynamic-k study (rule selectors on train + val, learned ones from a
grid chosen on val, the oracle; test) on a tiny test-built data set, run in process in seconds; and its
pieces: the candidate grid, the reranker score cache."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from job_fixtures import LLM, tiny_records

from udcg_ltr.data.jsonl import write_records
from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.probes import READER_PROBES
from udcg_ltr.data.scores import PassageScores
from udcg_ltr.jobs.common import subsample
from udcg_ltr.jobs.evaluate_job import _reranker_scores
from udcg_ltr.models.fusion import fuse_scores
from udcg_ltr.paths import PROJECT_ROOT
from udcg_ltr.report import read_csv
from udcg_ltr.select.base import rank_slates, udcg_of_kept
from udcg_ltr.select.io import load_selector
from udcg_ltr.select.training import learned_candidates, select_k, uses_probes

SPLITS = {"train": 40, "val": 16, "test": 16}


def run_selectors(tmp_path, monkeypatch, *overrides: str, records=None) -> dict:
    from hydra import compose, initialize_config_dir

    from udcg_ltr.jobs.evaluate_job import evaluate

    data = tmp_path / "tiny.jsonl"
    write_records(data, records or tiny_records(SPLITS))
    monkeypatch.setenv("UDCG_LTR_CACHE", str(tmp_path / "cache"))  # prepare_environment exports the paths
    monkeypatch.setenv("UDCG_LTR_DATA", str(tmp_path))
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[
            f"paths.root_dir={PROJECT_ROOT}", f"paths.output_dir={tmp_path / 'run'}", "mode=selectors",
            "dataset=jsonl", f"dataset.reader.path={data}", "llm=smollm2", "logger=none", "end_to_end=false",
            "selectors.scores=retriever", "selectors.grid=quick", "selectors.probes=false",
            "selectors.budget.max_epochs=2", "selectors.budget.batch_size=16", *overrides])
    return evaluate(cfg)


def test_the_study_writes_per_query_values_that_agree_with_its_table(tmp_path, monkeypatch):
    kinds = "selectors.kinds=[fixed_k,relative_threshold,kclassifier,expected_utility,oracle]"
    metrics = run_selectors(tmp_path, monkeypatch, kinds)
    run = tmp_path / "run"
    rows = {r["selector"]: r for r in read_csv(run / "selectors_test.csv")}
    assert list(rows) == ["best_fixed", "relative_threshold", "kclassifier", "expected_utility", "learned",
                          "learned_no_llm", "oracle"]
    per_query = read_csv(run / "per_query_test.csv")
    assert [q["qid"] for q in per_query] == [f"test{i}" for i in range(SPLITS["test"])]
    values = {name: np.array([float(q[name]) for q in per_query]) for name in rows}
    for name, row in rows.items():  # what a wrapper bootstraps is what the table reports
        assert values[name].mean() == pytest.approx(float(row["udcg"]), abs=1e-12)
        assert metrics[f"test/{name}/udcg"] == pytest.approx(float(row["udcg"]), abs=1e-12)
        assert np.isfinite(float(row["val_udcg"]))
        assert (values["oracle"] >= values[name] - 1e-12).all()  # the per-question best k
    job = json.loads((run / "selectors.json").read_text())
    assert job["questions"] == SPLITS and job["excluded"] == {"train": 0, "val": 0}
    # quick grid, no probes, two kinds: 2 feature sets x (2 k-classifiers + 1 expected-UDCG)
    assert job["n_candidates"] == 6 == len(read_csv(run / "learned_grid.csv"))
    chosen = job["choice"]["learned"]
    assert chosen["kind"] in ("kclassifier", "expected_utility") and not chosen["uses_probes"]
    assert (values["learned"] == values[chosen["kind"]]).all()  # the best of all is its kind's best
    assert set(job["rules"]["best_fixed"]["config"]) >= {"k"}
    assert (run / "k_hist_test.png").stat().st_size > 0
    test = [r for r in tiny_records(SPLITS) if r.split == "test"]
    slates = pad_records(test, llm=LLM)
    reloaded = load_selector(run / "selectors" / "learned")  # the saved selector chooses the same k again
    ks = select_k(reloaded, -slates.retrieval_rank.astype(float), slates)
    ranked = rank_slates(-slates.retrieval_rank.astype(float), slates)
    np.testing.assert_allclose(udcg_of_kept(ranked.utility, ranked.mask, ks), values["learned"], atol=1e-12)
    assert json.loads((run / "job_result.json").read_text())["status"] == "finished"


def test_left_out_questions_and_the_seeded_draw(tmp_path, monkeypatch):
    records = tiny_records(SPLITS)
    left_out = tmp_path / "questions.json"
    left_out.write_text(json.dumps({"train": [f"train{i}" for i in range(10)], "val": ["val0", "val9"]}))
    run_selectors(tmp_path, monkeypatch, "selectors.kinds=[fixed_k,oracle]",
                  f"selectors.exclude_questions={left_out}", "selectors.max_questions.train=12", "seed=3",
                  records=records)
    job = json.loads((tmp_path / "run" / "selectors.json").read_text())
    assert job["questions"] == {"train": 12, "val": 14, "test": 16}
    assert job["excluded"] == {"train": 10, "val": 2} and job["n_candidates"] == 0 and job["choice"] == {}
    # the rule learned on subsample's draw (seed 3) of the train questions left in: its train UDCG says so
    drawn = subsample([r for r in records if r.split == "train"][10:], 12, seed=3)
    slates = pad_records(drawn, llm=LLM)
    ranked = rank_slates(-slates.retrieval_rank.astype(float), slates)  # no retriever scores: the rank orders
    best = job["rules"]["best_fixed"]
    kept = udcg_of_kept(ranked.utility, ranked.mask, np.full(len(drawn), best["config"]["k"]))
    assert kept.mean() == pytest.approx(best["train/udcg"], abs=1e-12)
    rows = read_csv(tmp_path / "run" / "selectors_test.csv")
    assert [r["selector"] for r in rows] == ["best_fixed", "oracle"]


def test_a_reranker_trained_on_a_whole_split_is_named_as_the_reason_nothing_is_left(tmp_path, monkeypatch):
    # the squad_<system> recipes train on every train question: nothing would be held out for the selectors
    left_out = tmp_path / "questions.json"
    left_out.write_text(json.dumps({"train": [f"train{i}" for i in range(SPLITS["train"])], "val": ["val0"]}))
    with pytest.raises(ValueError, match=r"got \{'train': 0, .*reranker's own questions .*train it on part"):
        run_selectors(tmp_path, monkeypatch, "selectors.kinds=[fixed_k,oracle]",
                      f"selectors.exclude_questions={left_out}")


def test_refit_keeps_the_val_choice_and_reports_its_held_out_val_udcg(tmp_path, monkeypatch):
    kinds = "selectors.kinds=[fixed_k,expected_utility,oracle]"
    run_selectors(tmp_path, monkeypatch, kinds, "selectors.refit=true")
    run = tmp_path / "run"
    job = json.loads((run / "selectors.json").read_text())
    chosen = max(read_csv(run / "learned_grid.csv"), key=lambda r: float(r["val/udcg"]))  # first of equals
    assert job["refit"] is True and job["choice"]["learned"]["kind"] == chosen["kind"] == "expected_utility"
    config = job["choice"]["learned"]["config"]
    assert config["patience"] is None and config["max_epochs"] == int(float(chosen["fit/best_epoch"])) + 1
    rows = {r["selector"]: r for r in read_csv(run / "selectors_test.csv")}
    assert float(rows["learned"]["val_udcg"]) == pytest.approx(float(chosen["val/udcg"]), abs=1e-12)
    assert load_selector(run / "selectors" / "learned").get_config() == config
    (tmp_path / "bad").mkdir()
    with pytest.raises(ValueError, match=r"selectors.refit must be one of \[True, False\]"):
        run_selectors(tmp_path / "bad", monkeypatch, kinds, "selectors.refit=maybe")


def test_the_candidate_grid():
    full = learned_candidates(["retrieval_score"], quick=False, probes=True, max_epochs=7, n_seeds=2)
    quick = learned_candidates([], quick=True, probes=False)
    # calibrated: prior (+ probes) x 2 hidden; per feature set (3): gate 2x2, k-classifier 4, expected-UDCG 2
    assert len(full) == 2 * 2 + 3 * (4 + 4 + 2) and len(quick) == 1 + 2 * (2 + 2 + 1)
    assert all(hp["max_epochs"] == 7 and hp["n_seeds"] == 2 for _, hp in full)  # the budget, not the default
    assert all(hp["n_seeds"] == 1 and hp["max_epochs"] == 150 for _, hp in quick)
    assert not any(uses_probes(hp) for _, hp in quick)
    with_probes = [hp for _, hp in full if uses_probes(hp)]
    assert len(with_probes) == 2 + 10
    assert all(set(READER_PROBES) <= set(hp["extra_features"]) for hp in with_probes)
    assert all("retrieval_score" in hp["extra_features"] for kind, hp in full if kind != "calibrated_utility"
               and hp["extra_features"])


def test_reranker_scores_are_cached_by_question(tmp_path):
    records = tiny_records({"test": 6})
    calls = []

    class FakeReranker:
        retriever_fusion = 0.5

        def score_records(self, rs, *, progress=None, fuse=True):
            assert not fuse  # the cache holds the model's own scores; the saved weight fuses them afterwards
            calls.append([r.qid for r in rs])
            return PassageScores.of(rs, [np.arange(len(r.passages), dtype=np.float64) * (1 + int(r.qid[4:]))
                                         for r in rs])

    ctx = SimpleNamespace(reranker=FakeReranker(), reranker_identity=lambda: {"weights_sha256": ["a"]})
    cache = tmp_path / "reranker_scores.json"
    first = _reranker_scores(ctx, records[:4], cache)
    again = _reranker_scores(ctx, records, cache)  # only the two new questions are scored
    assert calls == [[f"test{i}" for i in range(4)], ["test4", "test5"]]
    alone = FakeReranker().score_records(records, fuse=False)
    expected = fuse_scores(records, alone, 0.5)
    assert again == expected and first == expected.restrict(records[:4])
    assert sorted(json.loads(cache.read_text())["scores"]) == [r.qid for r in records]
    # another model (other weights) does not reuse them: every question is scored again
    ctx.reranker_identity = lambda: {"weights_sha256": ["b"]}
    _reranker_scores(ctx, records, cache)
    assert calls[-1] == [r.qid for r in records]
