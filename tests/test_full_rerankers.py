"""The reranker recipes (``conf/experiment/full_*.yaml``), what the train job writes for them (the seeded
subsamples and ``cross_encoder/questions.json``, ``per_query.csv``, the cross-encoder alone), and the plumbing
of ``bench/full_rerankers.py`` (the job commands, seed means, paired tests; the jobs themselves faked)."""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from job_fixtures import LLM, compose, run_train_job, tiny_job_config, tiny_records

from udcg_ltr.jobs.common import subsample
from udcg_ltr.losses import get_loss, with_spec
from udcg_ltr.report import read_csv, write_csv

BENCH = Path(__file__).resolve().parent.parent / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

import full_rerankers  # noqa: E402
from _full_data import write_subsample  # noqa: E402


def _recipe(name: str) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose([f"experiment={name}", "paths.output_dir=unused"]), resolve=True)


def test_the_full_recipes_are_the_old_benchs_budget():
    udcg, bce = _recipe("full_udcg"), _recipe("full_bce")
    ce = udcg["model"]["cross_encoder"]
    budget = {"train_questions": 800, "train_subsample_seed": 1234, "val_questions": 200,
              "val_subsample_seed": 4321, "batch_size": 8, "lr": 5e-5, "warmup": 0.1, "max_length": 256,
              "eval_precision": "32-true", "retriever_fusion": True, "pretrained": None, "weight_decay": 0.01}
    assert {key: ce[key] for key in budget} == budget
    assert udcg["trainer"]["max_epochs"] == 1 and udcg["trainer"]["precision"] == "auto"
    assert list(udcg["callbacks"]) == ["model_checkpoint"]  # the old bench: early_stopping_patience=None
    assert udcg["splits"] == ["test"] and udcg["end_to_end"] is False
    assert udcg["dataset"]["name"] == "annotated_squad_full" and udcg["llm"]["dtype"] == "float32"
    assert udcg["k"] == 5 and udcg["model"]["stages"] == ["annotate", "cross_encoder", "evaluate"]
    # the old bench's direct-UDCG loss: "udcg" with {"k": 5, "tau": 1.0, "objective": "udcg"}
    kwargs = {key: v for key, v in udcg["loss"].items() if key != "name"}
    ours = get_loss(udcg["loss"]["name"], **with_spec(udcg["loss"]["name"], kwargs, k=5, gamma=udcg["gamma"]))
    old = get_loss("udcg", **with_spec("udcg", {"k": 5, "tau": 1.0, "objective": "udcg"}, k=5, gamma=1 / 3))
    assert type(ours) is type(old) and vars(ours).keys() == vars(old).keys()
    assert {key: v for key, v in vars(ours).items() if not key.startswith("_")} == \
           {key: v for key, v in vars(old).items() if not key.startswith("_")}
    assert bce["loss"] == {"name": "bce"}
    def same(c):  # everything but the loss and the tags
        return {key: v for key, v in c.items() if key not in ("loss", "tags")}

    assert same(bce) == same(udcg)
    for name in ("full_listnet", "full_lambda_udcg"):
        assert same(_recipe(name)) == same(udcg)


def test_the_train_job_subsamples_writes_its_questions_and_per_query_rows(tmp_path, monkeypatch):
    from udcg_ltr.jobs.systems import retrieval_scores
    from udcg_ltr.models.evaluation import per_query_metrics
    from udcg_ltr.models.fusion import fuse_scores
    from udcg_ltr.models.reranker import Reranker, read_reranker_config

    records = tiny_records({"train": 8, "val": 6, "test": 4}, seed=5)
    cfg = tiny_job_config(tmp_path, monkeypatch, records, [
        "loss=bce", "model.cross_encoder.batch_size=2", "model.cross_encoder.retriever_fusion=true",
        "model.cross_encoder.train_questions=5", "model.cross_encoder.val_questions=3",
        "model.cross_encoder.eval_precision=32-true", "trainer=debug", "trainer.num_threads=1", "logger=none",
        "k=3"])
    metrics = run_train_job(cfg)
    run = tmp_path / "run"
    split = {s: [r for r in records if r.split == s] for s in ("train", "val", "test")}
    train_qs, val_qs = subsample(split["train"], 5, 1234), subsample(split["val"], 3, 4321)
    assert json.loads((run / "cross_encoder" / "questions.json").read_text()) == {
        "train": [r.qid for r in train_qs], "val": [r.qid for r in val_qs]}
    assert len(train_qs) == 5 and len(val_qs) == 3
    assert train_qs != split["train"][:5] or val_qs != split["val"][:3]  # a draw, not the first questions

    rows = read_csv(run / "per_query.csv")
    means = {r["system"]: r for r in read_csv(run / "results.csv")}
    assert list(means) == ["retriever@3", "reranker_alone@3", "reranker@3", "oracle_utility@3"]
    test = split["test"]
    for system, mean in means.items():
        mine = [r for r in rows if r["system"] == system]
        assert [r["qid"] for r in mine] == [r.qid for r in test] and {r["split"] for r in mine} == {"test"}
        for metric in ("udcg@3", "ndcg@3", "hits@3", "mrr@3", "erag@3"):
            values = [float(r[metric]) for r in mine if r[metric] != ""]
            assert math.isclose(np.mean(values), float(mean[metric]), rel_tol=1e-9, abs_tol=1e-12), \
                (system, metric)
            assert metrics[f"test/{system}/{metric}"] == pytest.approx(float(mean[metric]))

    # the old bench's per-query metrics (udcg_ltr.models.evaluation) of the same rankings: the same values
    saved = run / "cross_encoder" / "model"
    alone = Reranker.from_pretrained(saved, retriever_fusion=0.0).score_records(test, fuse=False)
    fused = fuse_scores(test, alone, read_reranker_config(saved)["retriever_fusion"])
    for system, scores in (("retriever@3", retrieval_scores(test)), ("reranker_alone@3", alone),
                           ("reranker@3", fused)):
        old = per_query_metrics(test, scores, LLM, 3)
        mine = [r for r in rows if r["system"] == system]
        for metric, values in old.items():
            assert np.allclose([float(r[metric]) for r in mine], values, atol=1e-12), (system, metric)


def _fake_job(cmd: list[str], run_dir: Path) -> float:
    """What the train job leaves for the bench, with per-query values that depend on the loss and the seed."""
    option = dict(c.split("=", 1) for c in cmd[2:] if "=" in c)
    loss, seed = option["experiment"].split("_", 1)[1], int(option["seed"])
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for q in range(40):
        base = 0.5 + 0.01 * math.sin(q)
        for system, value in (("retriever@5", base), ("reranker_alone@5", base - 0.01),
                              ("reranker@5", base + (0.02 if loss == "udcg" else 0.0) + 0.001 * seed),
                              ("oracle_utility@5", base + 0.05)):
            rows.append({"system": system, "qid": f"q{q}", "split": "test", "udcg@5": value, "ndcg@5": value,
                         "mrr@5": value, "hits@5": 1.0, "erag@5": ""})
    write_csv(run_dir / "per_query.csv", rows)
    val = {"bce": 0.50, "udcg": 0.51, "listnet": 0.52}[loss] + 0.001 * seed  # fused at the chosen weight 0.5
    (run_dir / "job_result.json").write_text(json.dumps({"metrics": {
        "cross_encoder/best_epoch": 0.0, "cross_encoder/retriever_fusion": 0.5,
        "cross_encoder/val_udcg_fusion_0.5": val, "cross_encoder/val_udcg_fusion_1": 0.9}}))
    return 0.0


def test_the_bench_maps_its_options_to_overrides_and_pairs_seed_means(tmp_path, monkeypatch, capsys):
    args = argparse.Namespace(
        dataset="annotated_full", train_questions=0, val_questions=10, epochs=None, force=True,
        overrides=["trainer.limit_train_batches=2"])
    cmd = full_rerankers.job_command("udcg", 2, Path("/data"), Path("/out/udcg_seed2"), args)
    assert cmd[2:] == ["experiment=full_udcg", "seed=2", "paths.data_dir=/data", "logger=none",
                       "hydra.run.dir=/out/udcg_seed2", "model.cross_encoder.train_questions=null",
                       "model.cross_encoder.val_questions=10", "force=true", "trainer.limit_train_batches=2"]

    monkeypatch.setattr(full_rerankers, "run_job", _fake_job)
    assert full_rerankers.main(["--dataset", "annotated", "--data-dir", str(tmp_path), "--seeds", "0,1",
                                "--systems", "bce,udcg,listnet", "--out", str(tmp_path / "o"),
                                "--n-bootstrap", "200"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("udcg@5_test: retriever=0.5") and " p_udcg_vs_retriever=" in last
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    means = summary["means"]
    # seeds 0 and 1 averaged per question
    assert means["udcg"]["udcg@5"] == pytest.approx(means["retriever"]["udcg@5"] + 0.0205)
    assert means["bce"]["udcg@5"] == pytest.approx(means["retriever"]["udcg@5"] + 0.0005)
    assert means["udcg_alone"]["udcg@5"] == pytest.approx(means["retriever"]["udcg@5"] - 0.01)
    assert math.isnan(means["udcg"]["erag@5"])
    udcg_vs_bce = next(r for r in summary["paired"]
                       if r["comparison"] == "udcg - bce" and r["metric"] == "udcg@5")
    assert udcg_vs_bce["diff"] == pytest.approx(0.02) and udcg_vs_bce["n"] == 40
    # the other losses also against direct UDCG; BCE and UDCG themselves are not (they are the headline's pair)
    against_udcg = {r["comparison"]: r["diff"] for r in summary["paired"]
                    if r["comparison"].endswith(" - udcg") and r["metric"] == "udcg@5"}
    assert against_udcg == {"listnet - udcg": pytest.approx(-0.02)}
    # the best system is read on val (the fused system at its chosen weight, mean over seeds), not on test
    assert summary["val_udcg"] == pytest.approx({"bce": 0.5005, "udcg": 0.5105, "listnet": 0.5205})
    assert summary["best_on_val"] == "listnet" and "best on val: **listnet**" in (tmp_path / "o" / "table.md").read_text()
    assert summary["jobs"]["bce_seed1"]["command"][2] == "experiment=squad_bce"
    for name in ("table.md", "table.csv", "paired_udcg@5.png", "paired_hits@5.png"):
        assert (tmp_path / "o" / name).is_file(), name

    # --compare pairs the trained systems with another finished job (here the first run's BCE, seed 0)
    assert full_rerankers.main(["--dataset", "annotated", "--data-dir", str(tmp_path), "--seeds", "0",
                                "--systems", "udcg", "--out", str(tmp_path / "o2"), "--n-bootstrap", "200",
                                "--compare", f"bce0={tmp_path / 'o' / 'bce_seed0'}"]) == 0
    summary = json.loads((tmp_path / "o2" / "summary.json").read_text())
    vs = next(r for r in summary["paired"] if r["comparison"] == "udcg - bce0" and r["metric"] == "udcg@5")
    assert vs["diff"] == pytest.approx(0.02) and summary["val_udcg"]["bce0"] == pytest.approx(0.50)
    assert summary["best_on_val"] == "udcg"  # a compared run is shown, never chosen
    with pytest.raises(SystemExit):
        full_rerankers.main(["--dataset", "annotated", "--data-dir", str(tmp_path), "--systems", "udcg",
                             "--out", str(tmp_path / "o3"), "--compare", "udcg=elsewhere"])


def test_an_unchanged_subsample_is_not_rewritten(tmp_path):
    src = tmp_path / "src" / "annotated_full"
    src.mkdir(parents=True)
    lines = [json.dumps({"qid": f"{s}{i}", "split": s}) for s in ("train", "val", "test") for i in range(4)]
    for name, rows in (("squad_top10.jsonl.gz", lines), ("squad_contexts.jsonl.gz", lines)):
        with gzip.open(src / name, "wt", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
    write_subsample(tmp_path / "src", tmp_path / "dst", 6, seed=0)
    files = sorted((tmp_path / "dst" / "annotated_full").iterdir())
    stamps = [(os.stat(f).st_ino, os.stat(f).st_mtime_ns) for f in files]  # an atomic rewrite is a new inode
    write_subsample(tmp_path / "src", tmp_path / "dst", 6, seed=0)
    # unchanged files keep their modification time, part of the jobs' config hash: finished jobs are reused
    assert [(os.stat(f).st_ino, os.stat(f).st_mtime_ns) for f in files] == stamps
    write_subsample(tmp_path / "src", tmp_path / "dst", 9, seed=0)
    assert all(os.stat(f).st_ino != ino for f, (ino, _) in zip(files, stamps))
