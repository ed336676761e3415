"""Hydra multirun sweeps: one W&B offline run per job with its config and final metrics, a summary table,
and a restarted sweep that skips its finished jobs (issue: sweeps over datasets, LLMs and models)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from udcg_ltr.data.contexts import write_context_runs
from udcg_ltr.data.jsonl import write_records
from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data
from udcg_ltr.sweeps import collect_jobs, offline_runs

ROOT = Path(__file__).resolve().parent.parent


def _tiny_dataset(folder: Path, name: str, seed: int) -> None:
    """A dataset config (in a Hydra search path) over synthetic annotated records + ready-made runs."""
    records, runs = synthetic_study_data(24, n_contexts=4, k=5, pool_size=8, seed=seed)
    write_records(folder / f"{name}.jsonl", records)
    write_context_runs(folder / f"{name}_runs.jsonl", runs)
    conf = folder / "conf" / "dataset"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / f"{name}.yaml").write_text(
        "defaults:\n  - jsonl\n  - _self_\n"
        f"name: {name}\nreader:\n  path: {folder / f'{name}.jsonl'}\ncontexts_path: {folder / f'{name}_runs.jsonl'}\n")


def _sweep(tmp_path: Path, sweep_dir: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "train.py"), "-m",
           f"hydra.searchpath=[file://{tmp_path / 'conf'}]", f"hydra.sweep.dir={sweep_dir}",
           "dataset=tiny_a,tiny_b", "model=udcg_theta", "model.udcg_theta.variant=full,binary",
           f"llm.name={SYNTHETIC_LLM}", "evaluation.end_to_end=false", "logger=wandb",
           f"paths.cache_dir={tmp_path / 'cache'}"]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_two_by_two_sweep_logs_four_wandb_runs_and_a_summary(tmp_path):
    _tiny_dataset(tmp_path, "tiny_a", seed=1)
    _tiny_dataset(tmp_path, "tiny_b", seed=2)
    sweep_dir = tmp_path / "multirun"
    proc = _sweep(tmp_path, sweep_dir)
    assert proc.returncode == 0, proc.stderr[-4000:]

    jobs = collect_jobs(sweep_dir)
    assert len(jobs) == 4
    combos = {tuple(sorted(j.overrides)) for j in jobs}
    assert len(combos) == 4
    runs = offline_runs(sweep_dir)
    assert len(runs) == 4, [r.path for r in runs]
    for run in runs:
        # each W&B run: its own config (dataset, variant) and the job's final metrics, grouped by the sweep
        assert run.config["dataset"]["name"] in {"tiny_a", "tiny_b"}
        assert run.config["model"]["udcg_theta"]["variant"] in {"full", "binary"}
        assert 0.0 < run.summary["test/udcg@5"] < 1.0
        assert "udcg_theta/n_pairs" in run.summary
        assert run.group == "train/default"
        assert any(t.startswith("dataset:") for t in run.tags)
    assert len({(r.config["dataset"]["name"], r.config["model"]["udcg_theta"]["variant"]) for r in runs}) == 4

    summary = subprocess.run([sys.executable, "-m", "udcg_ltr.sweeps", str(sweep_dir), "--metric", "test/udcg@5"],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert summary.returncode == 0, summary.stderr
    table = (sweep_dir / "sweep_summary.md").read_text().strip().splitlines()
    assert len(table) == 2 + 4  # header, rule, one row per job
    assert all("dataset=tiny_" in row for row in table[2:])
    assert (sweep_dir / "sweep_summary.csv").is_file() and (sweep_dir / "sweep_summary.png").stat().st_size > 0

    # Restarting the same sweep skips every finished job: no new W&B run, same results.
    again = _sweep(tmp_path, sweep_dir)
    assert again.returncode == 0, again.stderr[-4000:]
    assert (again.stdout + again.stderr).count("already finished") == 4
    assert len(offline_runs(sweep_dir)) == 4


@pytest.mark.parametrize(("name", "target"), [("local_parallel", "hydra_joblib_launcher"),
                                            ("slurm", "hydra_submitit_launcher"), ("basic", "BasicLauncher")])
def test_launcher_configs_compose(name, target):
    """The local-parallel (joblib) and SLURM (submitit) launchers are selectable: their plugins are installed."""
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--cfg", "hydra", f"hydra/launcher={name}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launcher = proc.stdout[proc.stdout.index("launcher:"):]
    assert target in launcher.split("sweeper:")[0]


def test_optuna_search_config_composes():
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--cfg", "hydra", "hparams_search=optuna",
                           "model=cross_encoder"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OptunaSweeper" in proc.stdout and "model.cross_encoder.lr" in proc.stdout
