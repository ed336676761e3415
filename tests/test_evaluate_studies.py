"""`evaluate.py mode=<study>`: the paper's analyses from one command, with their parameters from the config.

Runs the real entry point in a subprocess on a tiny demo world with the SmolLM2 fixture (its answers mean
nothing; the wiring is what is checked: config -> study parameters, the run's annotation cache, the
study's files and the job's finished metrics).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_DEMO = ["dataset.reader.n_entities=16", "dataset.reader.n_questions=5", "dataset.reader.pool_size=7",
             "dataset.reader.seed=3", "splits=null"]


def _evaluate(tmp_path: Path, run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "evaluate.py"), "llm=smollm2", "llm.num_threads=1", "logger=csv", *TINY_DEMO,
           f"cache_dir={tmp_path / 'annotations'}", f"hydra.run.dir={run_dir}", *overrides]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "folder", "overrides", "table"), [
    ("oracle_contexts", "oracle", ["studies.oracle.ks=[3]", "studies.oracle.n_bootstrap=50"], "oracle.csv"),
    ("distractors", "distractors", ["k=3", "studies.distractors.n_bootstrap=50"], "distractors.csv"),
])
def test_study_mode_writes_its_tables_and_finishes(tmp_path, mode, folder, overrides, table):
    run_dir = tmp_path / "run"
    proc = _evaluate(tmp_path, run_dir, f"mode={mode}", *overrides)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = run_dir / folder
    for name in (table, "report.md", "summary.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert any(p.suffix == ".png" for p in out.iterdir())
    summary = json.loads((out / "summary.json").read_text())
    if mode == "oracle_contexts":
        assert {r["k"] for r in summary["rows"]} == {3}  # studies.oracle.ks reached the study
    else:
        assert summary["meta"]["config"]["k"] == 3  # the top-level k reached the study
    finished = json.loads((run_dir / "job_result.json").read_text())
    assert finished["metrics"]["time/total_s"] > 0
    # the LLM answered through the run's annotation cache (cache_dir=...)
    assert any((tmp_path / "annotations").rglob("*.jsonl"))


def test_study_recipes_compose():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["experiment=squad_studies", "mode=distractors"])
        assert cfg.mode == "distractors" and cfg.dataset.name == "annotated_squad"
        assert cfg.studies.distractors.max_queries == 150 and list(cfg.studies.oracle.ks) == [5, 3]
        assert cfg.llm.get("quantize") is None  # float32: the shared annotations' precision
        cfg = compose(config_name="evaluate", overrides=["experiment=demo_studies", "mode=position"])
        assert cfg.dataset.name == "demo" and cfg.studies.context_size.mode == "resample"
        cfg = compose(config_name="train", overrides=["experiment=squad_bce"])
        assert cfg.loss.name == "bce" and cfg.model.name == "cross_encoder" and list(cfg.evaluation.splits) == ["val", "test"]
