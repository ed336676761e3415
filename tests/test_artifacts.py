"""W&B artifacts (issue 18, item 4): the trained reranker folder and the UDCG_theta weights are logged as
``model`` artifacts of the job's W&B run, offline, without machine paths in what W&B would upload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from model_fixtures import save_tiny_bert
from wandb_offline import offline_runs

from udcg_ltr.data.contexts import write_context_runs
from udcg_ltr.data.jsonl import write_records
from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data
from udcg_ltr.tracking import CSVRunLogger, RunLogger, WandbRunLogger, log_artifact

ROOT = Path(__file__).resolve().parent.parent


def test_log_artifact_records_files_metadata_and_type(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = tmp_path / "run"
    model = run_dir / "cross_encoder" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"num_labels": 1}')
    (model / "model.safetensors").write_bytes(b"\0" * 100)
    weights = run_dir / "udcg_theta" / "weights_k5.json"
    weights.parent.mkdir(parents=True)
    weights.write_text('{"weights": []}')
    logger = WandbRunLogger(run_dir, config={"paths": {"output_dir": str(run_dir)}})
    log_artifact(logger, model, "reranker-demo world/udcg", type="model",
                 metadata={"k": 5, "base_model": str(tmp_path / "bert"), "val_udcg": 0.5})
    log_artifact(logger, weights, "udcg_theta-demo-k5", type="model", metadata={"k": 5})
    logger.finish()

    (run,) = offline_runs(run_dir)
    by_name = {a.name: a for a in run.artifacts}
    assert set(by_name) == {"reranker-demo-world-udcg", "udcg_theta-demo-k5"}  # W&B's name rule
    reranker, theta = by_name["reranker-demo-world-udcg"], by_name["udcg_theta-demo-k5"]
    assert reranker.type == theta.type == "model"
    assert reranker.files == {"config.json": 17, "model.safetensors": 100}
    assert theta.files == {"weights_k5.json": len('{"weights": []}')}
    assert reranker.metadata["k"] == 5 and reranker.metadata["val_udcg"] == 0.5
    assert str(tmp_path) not in json.dumps(reranker.metadata)  # redacted like the rest of the run
    # referenced in place (immutable policy): the offline run's upload list points into the run folder
    assert all(Path(p).resolve().is_relative_to(run_dir.resolve()) for p in reranker.local_paths.values())


def test_log_artifact_is_a_no_op_without_wandb_and_checks_its_input(tmp_path):
    (tmp_path / "m").mkdir()
    for logger in (RunLogger(tmp_path / "a"), CSVRunLogger(tmp_path / "b"), None):
        assert log_artifact(logger, tmp_path / "m", "reranker") is None
    assert not list(tmp_path.rglob("wandb"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        log_artifact(object(), tmp_path / "missing", "reranker")


def test_train_job_logs_the_reranker_and_the_udcg_theta_weights(tmp_path):
    """train.py with logger=wandb (offline), stages udcg_theta, cross_encoder, evaluate on a tiny synthetic set."""
    records, runs = synthetic_study_data(24, n_contexts=4, k=5, pool_size=6, seed=3)
    write_records(tmp_path / "tiny.jsonl", records)
    write_context_runs(tmp_path / "tiny_runs.jsonl", runs)
    conf = tmp_path / "conf" / "dataset"
    conf.mkdir(parents=True)
    (conf / "tiny.yaml").write_text("defaults:\n  - jsonl\n  - _self_\n"
                                    f"name: tiny\nreader:\n  path: {tmp_path / 'tiny.jsonl'}\n"
                                    f"contexts_path: {tmp_path / 'tiny_runs.jsonl'}\n")
    bert = save_tiny_bert(tmp_path / "bert", layers=1, seed=0)
    run_dir = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "train.py"), f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
           f"hydra.run.dir={run_dir}", "dataset=tiny", "model=pipeline", "model.stages=[udcg_theta,cross_encoder,evaluate]",
           f"model.cross_encoder.pretrained={bert}", "model.cross_encoder.batch_size=4",
           "model.cross_encoder.max_length=32", "loss=udcg_direct", "trainer=debug", "trainer.precision=32-true",
           "trainer.num_threads=1", f"llm.name={SYNTHETIC_LLM}", "end_to_end=false", "logger=wandb",
           f"paths.cache_dir={tmp_path / 'cache'}"]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]

    (run,) = offline_runs(run_dir)
    by_name = {a.name: a for a in run.artifacts}
    assert set(by_name) == {"reranker-tiny-udcg", "udcg_theta-tiny-k5"}, list(by_name)
    reranker, theta = by_name["reranker-tiny-udcg"], by_name["udcg_theta-tiny-k5"]
    assert reranker.type == theta.type == "model"
    saved = run_dir / "cross_encoder" / "model"
    assert reranker.files == {p.relative_to(saved).as_posix(): p.stat().st_size
                              for p in saved.rglob("*") if p.is_file()}
    assert "config.json" in reranker.files and any(f.endswith(".safetensors") for f in reranker.files)
    assert theta.files == {"weights_k5.json": (run_dir / "udcg_theta" / "weights_k5.json").stat().st_size}
    assert reranker.metadata["loss"] == "udcg" and reranker.metadata["k"] == 5
    assert reranker.metadata["llm"] == SYNTHETIC_LLM and reranker.metadata["dataset"] == "tiny"
    assert any(key.startswith("val/") for key in reranker.metadata)  # the validation metrics of the saved model
    assert theta.metadata["k"] == 5 and theta.metadata["variant"] == "full"
    for art in (reranker, theta):
        assert str(tmp_path) not in json.dumps(art.metadata)
