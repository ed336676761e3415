"""A training run killed with SIGKILL and started again with the same command ends where an uninterrupted run ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from model_fixtures import save_tiny_bert

TESTS = Path(__file__).parent

# Trains the tiny BERT on toy slates (test_cross_encoder.toy_records) for 5 epochs. With KILL_AT=<step>, the
# process SIGKILLs itself after that optimizer step: mid-epoch, after last.ckpt of the previous epoch was written.
SCRIPT = r"""
import os, signal, sys, json
import pytorch_lightning as pl
from test_cross_encoder import LLM, toy_records
from udcg_ltr.models import fit_reranker

class Kill(pl.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if trainer.global_step == int(os.environ.get("KILL_AT", "-1")):
            os.kill(os.getpid(), signal.SIGKILL)

model_dir, out = sys.argv[1], sys.argv[2]
train, val = toy_records(8, seed=3), toy_records(4, seed=4, split="val")
path, metrics = fit_reranker(train, val, llm=LLM, model_name_or_path=model_dir, loss="udcg",
                             loss_kwargs={"k": 2, "tau": 0.5}, k=2, epochs=5, batch_size=3, lr=2e-3,
                             max_length=32, seed=0, output_dir=out, enable_progress_bar=False,
                             early_stopping_patience=None, num_threads=1, callbacks=[Kill()])
print("METRICS " + json.dumps(metrics))
"""


def _run(model_dir: str, out: Path, kill_at: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "KILL_AT": str(-1 if kill_at is None else kill_at)}
    return subprocess.run([sys.executable, "-c", SCRIPT, model_dir, str(out)], env=env, capture_output=True,
                          text=True, timeout=600)


def _metrics(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("METRICS ")][-1]
    return json.loads(line[len("METRICS "):])


def _weights(model_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.mark.timeout(900)
def test_training_killed_mid_epoch_resumes_to_the_same_model(tmp_path):
    model_dir = save_tiny_bert(tmp_path / "tiny", layers=2, seed=0)
    straight = _metrics(_run(model_dir, tmp_path / "straight"))

    # 8 queries / 3 per batch = 3 steps an epoch: step 8 is inside epoch 2 (0-based), after epoch 1's last.ckpt.
    killed = _run(model_dir, tmp_path / "killed", kill_at=8)
    assert killed.returncode == -signal.SIGKILL
    assert (tmp_path / "killed" / "checkpoints" / "last.ckpt").is_file()
    assert not (tmp_path / "killed" / "model").exists()
    resumed = _run(model_dir, tmp_path / "killed")
    epochs = [line.split(":")[0] for line in resumed.stdout.splitlines() if line.startswith("epoch ")]
    assert epochs == ["epoch 2", "epoch 3", "epoch 4"]  # resumed after the last finished epoch, not from 0
    again = _metrics(resumed)

    assert set(again) == set(straight)
    for name, value in straight.items():
        assert again[name] == pytest.approx(value, abs=1e-5, nan_ok=True), name  # NaN: a column no query defines
    a, b = _weights(tmp_path / "straight" / "model"), _weights(tmp_path / "killed" / "model")
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], atol=1e-5, err_msg=name)
    assert not (tmp_path / "killed" / "checkpoints").exists()  # cleaned up once finished


def test_a_last_checkpoint_of_other_arguments_is_not_resumed(tmp_path):
    from test_cross_encoder import LLM, toy_records

    from udcg_ltr.models import fit_reranker

    model_dir = save_tiny_bert(tmp_path / "tiny", layers=2, seed=0)
    killed = _run(model_dir, tmp_path / "run", kill_at=4)
    assert killed.returncode == -signal.SIGKILL
    # same folder, another learning rate: a fresh start, not a resume of the other run
    train, val = toy_records(8, seed=3), toy_records(4, seed=4, split="val")
    _, metrics = fit_reranker(train, val, llm=LLM, model_name_or_path=model_dir, loss="udcg",
                              loss_kwargs={"k": 2, "tau": 0.5}, k=2, epochs=2, batch_size=3, lr=1e-3,
                              max_length=32, seed=0, output_dir=tmp_path / "run", enable_progress_bar=False,
                              early_stopping_patience=None, num_threads=1)
    assert metrics["epochs_run"] == 2.0


def test_a_finished_run_is_reused_and_other_arguments_train_again(tmp_path):
    """A job that failed after its training stage (its evaluation, say) reruns without training again."""
    import pytorch_lightning as pl
    from test_cross_encoder import LLM, toy_records

    from udcg_ltr.models import fit_reranker

    class Refuse(pl.Callback):
        def on_fit_start(self, trainer, module):
            raise RuntimeError("trained again")

    model_dir = save_tiny_bert(tmp_path / "tiny", layers=2, seed=0)
    train, val = toy_records(8, seed=3), toy_records(4, seed=4, split="val")
    kwargs = dict(llm=LLM, model_name_or_path=model_dir, loss="udcg", loss_kwargs={"k": 2, "tau": 0.5}, k=2,
                  epochs=1, batch_size=3, lr=2e-3, max_length=32, seed=0, output_dir=tmp_path / "run",
                  enable_progress_bar=False, early_stopping_patience=None, num_threads=1)
    path, first = fit_reranker(train, val, **kwargs)
    weights = _weights(Path(path))
    again_path, again = fit_reranker(train, val, **kwargs, callbacks=[Refuse()])
    assert again_path == path and again.keys() == first.keys()
    for name, value in first.items():
        assert again[name] == pytest.approx(value, nan_ok=True), name  # NaN: a column no query defines
    with pytest.raises(RuntimeError, match="trained again"):  # another learning rate: trains
        fit_reranker(train, val, **{**kwargs, "lr": 1e-3}, callbacks=[Refuse()])
    assert not (tmp_path / "run" / "fit_arguments.json").exists()  # the old model is no longer vouched for
    with pytest.raises(RuntimeError, match="trained again"):  # so the first arguments train again too
        fit_reranker(train, val, **kwargs, callbacks=[Refuse()])
    assert _weights(Path(path)).keys() == weights.keys()
