"""Kill test for a sweep (issue 16): a Hydra multirun killed with SIGKILL during its second job and restarted
with the same command ends with the same results as an uninterrupted sweep: the finished job is skipped (not
rewritten), the killed one reruns cleanly (one W&B run, not two) and the rest run.

Three ``model=udcg_theta`` jobs on a tiny synthetic annotated dataset with ready-made end-to-end runs
(``contexts_path``), so no LLM is loaded and each job takes seconds; W&B logs offline.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wandb_offline import offline_runs

from udcg_ltr.data.contexts import write_context_runs
from udcg_ltr.data.jsonl import write_records
from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data
from udcg_ltr.sweeps import collect_jobs

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("full", "binary", "relevance_only")


def _dataset(folder: Path) -> None:
    records, runs = synthetic_study_data(30, n_contexts=4, k=5, pool_size=8, seed=7)
    write_records(folder / "tiny.jsonl", records)
    write_context_runs(folder / "tiny_runs.jsonl", runs)
    conf = folder / "conf" / "dataset"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "tiny.yaml").write_text("defaults:\n  - jsonl\n  - _self_\n"
                                    f"name: tiny\nreader:\n  path: {folder / 'tiny.jsonl'}\n"
                                    f"contexts_path: {folder / 'tiny_runs.jsonl'}\n")


def _command(tmp_path: Path, sweep_dir: Path) -> list[str]:
    return [sys.executable, str(ROOT / "train.py"), "-m", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            f"hydra.sweep.dir={sweep_dir}", "dataset=tiny", "model=udcg_theta",
            f"model.udcg_theta.variant={','.join(VARIANTS)}", f"llm.name={SYNTHETIC_LLM}",
            "end_to_end=false", "logger=wandb", f"paths.cache_dir={tmp_path / 'cache'}"]


ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1"}


def _state(job_dir: Path) -> dict | None:
    try:
        return json.loads((job_dir / "job_result.json").read_text())
    except (OSError, ValueError):
        return None


def _kill_during_second_job(cmd: list[str], cwd: Path, sweep_dir: Path) -> None:
    """Start the sweep and SIGKILL its process group once job 1 finished and job 2 is inside its work."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the sweep ended before it could be killed: {proc.stderr.read()[-3000:]}")
            states = {d.name: _state(d) for d in sweep_dir.iterdir() if d.is_dir()} if sweep_dir.is_dir() else {}
            finished = [n for n, s in states.items() if s and s["status"] == "finished"]
            # the W&B run file itself, not just its folder: a kill between the two leaves no run to count
            running = [n for n, s in states.items() if s and s["status"] == "running"
                       and any((sweep_dir / n / "wandb").glob("offline-run-*/run-*.wandb"))]
            if len(finished) == 1 and running:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                return
            time.sleep(0.02)
        pytest.fail("the second job never started")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        proc.stderr.close()


def _results(sweep_dir: Path) -> dict[str, dict[str, float]]:
    """Job folder -> its metrics without wall-clock times."""
    return {j.job_dir.name: {k: v for k, v in j.metrics.items() if not k.startswith("time/")}
            for j in collect_jobs(sweep_dir)}


def _summary(sweep_dir: Path) -> list[dict[str, str]]:
    proc = subprocess.run([sys.executable, "-m", "udcg_ltr.sweeps", str(sweep_dir)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(sweep_dir / "sweep_summary.csv", encoding="utf-8") as f:
        return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in csv.DictReader(f)]


def test_sweep_killed_in_its_second_job_resumes_to_the_uninterrupted_results(tmp_path):
    _dataset(tmp_path)
    reference = tmp_path / "reference"
    proc = subprocess.run(_command(tmp_path, reference), cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    expected = _results(reference)
    assert len(expected) == 3

    killed = tmp_path / "killed"
    cmd = _command(tmp_path, killed)
    _kill_during_second_job(cmd, tmp_path, killed)
    states = {d.name: _state(d) for d in killed.iterdir() if d.is_dir()}
    assert sorted(s["status"] for s in states.values()) == ["finished", "running"], states
    first = next(n for n, s in states.items() if s["status"] == "finished")
    second = next(n for n, s in states.items() if s["status"] == "running")
    first_written = (killed / first / "job_result.json").stat().st_mtime_ns
    assert len(offline_runs(killed / second)) == 1  # the killed job's W&B run, never finished

    again = subprocess.run(cmd, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-4000:]
    log = again.stdout + again.stderr
    assert log.count("already finished") == 1, log[-4000:]  # job 1 skipped ...
    assert "last attempt running" in log  # ... job 2 recognised as killed and rerun
    assert (killed / first / "job_result.json").stat().st_mtime_ns == first_written

    assert _same(_results(killed), expected)
    runs = offline_runs(killed)
    assert len(runs) == 3 and all(r.exit_code == 0 for r in runs), [(r.path, r.exit_code) for r in runs]
    assert _summary(killed) == _summary(reference)


def _same(got: dict[str, dict[str, float]], expected: dict[str, dict[str, float]]) -> bool:
    assert got.keys() == expected.keys()
    for job, metrics in expected.items():
        assert got[job].keys() == metrics.keys(), job
        for name, value in metrics.items():
            assert got[job][name] == pytest.approx(value, abs=1e-12, nan_ok=True), (job, name)
    return True
