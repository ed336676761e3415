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

# Trains the tiny BERT on toy slates (test_cross_encoder.toy_records; 3 passages a slate, drawn afresh each
# epoch) for 5 epochs, 3 optimizer steps each, and prints "STEP <global step>" after each. KILL_AT=<step>: the
# process SIGKILLs itself after that optimizer step, before that step's checkpoints (Lightning runs checkpoint
# callbacks last). KILL_IN_VAL=<epoch>: it SIGKILLs itself when that epoch's validation starts. CHECKPOINT_MINUTES: how often last.ckpt is written mid-epoch
# (0: at epoch ends only; a tiny value: after every step).
SCRIPT = r"""
import os, signal, sys, json
import pytorch_lightning as pl
import torch
from test_cross_encoder import LLM, toy_records
from udcg_ltr.models import fit_reranker

class Kill(pl.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"STEP {trainer.global_step}", flush=True)
        if trainer.global_step == int(os.environ["KILL_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)

    def on_validation_start(self, trainer, module):
        if not trainer.sanity_checking and trainer.current_epoch == int(os.environ["KILL_IN_VAL"]):
            os.kill(os.getpid(), signal.SIGKILL)

    def on_train_end(self, trainer, module):  # the last epoch's weights (the exported model is the best epoch's)
        torch.save(module.state_dict(), os.path.join(sys.argv[2], "final_weights.pt"))

model_dir, out = sys.argv[1], sys.argv[2]
train, val = toy_records(8, seed=3), toy_records(4, seed=4, split="val")
path, metrics = fit_reranker(train, val, llm=LLM, model_name_or_path=model_dir, loss="udcg",
                             loss_kwargs={"k": 2, "tau": 0.5}, k=2, epochs=5, batch_size=3, lr=2e-3,
                             max_length=32, max_slate=3, slate_sampling="random", seed=0, output_dir=out,
                             enable_progress_bar=False, early_stopping_patience=None, num_threads=1, callbacks=[Kill()],
                             checkpoint_minutes=float(os.environ["CHECKPOINT_MINUTES"]))
print("METRICS " + json.dumps(metrics))
"""


def _run(model_dir: str, out: Path, kill_at: int = -1, kill_in_val: int = -1,
         checkpoint_minutes: float = 0.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "KILL_AT": str(kill_at), "KILL_IN_VAL": str(kill_in_val),
           "CHECKPOINT_MINUTES": str(checkpoint_minutes)}
    return subprocess.run([sys.executable, "-c", SCRIPT, model_dir, str(out)], env=env, capture_output=True,
                          text=True, timeout=600)


def _metrics(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("METRICS ")][-1]
    return json.loads(line[len("METRICS "):])


def _weights(model_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(model_dir / "model.safetensors"))


def _final_weights(run_dir: Path) -> dict[str, np.ndarray]:
    import torch

    return {name: t.float().numpy() for name, t in torch.load(run_dir / "final_weights.pt").items()}


def _steps(proc: subprocess.CompletedProcess) -> list[int]:
    return [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("STEP ")]


def _assert_same_run(straight: dict, resumed: dict, straight_dir: Path, resumed_dir: Path) -> None:
    assert set(resumed) == set(straight)
    for name, value in straight.items():
        assert resumed[name] == pytest.approx(value, abs=1e-5, nan_ok=True), name  # NaN: a column no query defines
    for a, b in ((_weights(straight_dir / "model"), _weights(resumed_dir / "model")),
                 (_final_weights(straight_dir), _final_weights(resumed_dir))):
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_allclose(a[name], b[name], atol=1e-6, err_msg=name)
    assert not (resumed_dir / "checkpoints").exists()  # cleaned up once finished


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> tuple[str, dict, Path]:
    """The tiny model and an uninterrupted run: what every killed and resumed run must end with."""
    tmp = tmp_path_factory.mktemp("straight")
    model_dir = save_tiny_bert(tmp / "tiny", layers=2, seed=0)
    proc = _run(model_dir, tmp / "run")
    assert _steps(proc) == list(range(1, 16))
    return model_dir, _metrics(proc), tmp / "run"


@pytest.mark.timeout(900)
def test_training_killed_mid_epoch_resumes_from_the_last_epoch_end(straight, tmp_path):
    model_dir, metrics, straight_dir = straight
    # 8 queries / 3 per batch = 3 steps an epoch: step 8 is inside epoch 2 (0-based), after epoch 1's last.ckpt.
    killed = _run(model_dir, tmp_path / "killed", kill_at=8)
    assert killed.returncode == -signal.SIGKILL
    assert (tmp_path / "killed" / "checkpoints" / "last.ckpt").is_file()
    assert not (tmp_path / "killed" / "model").exists()
    resumed = _run(model_dir, tmp_path / "killed")
    epochs = [line.split(":")[0] for line in resumed.stdout.splitlines() if line.startswith("epoch ")]
    assert epochs == ["epoch 2", "epoch 3", "epoch 4"]  # resumed after the last finished epoch, not from 0
    assert _steps(resumed) == list(range(7, 16))
    _assert_same_run(metrics, _metrics(resumed), straight_dir, tmp_path / "killed")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kill", [{"kill_at": 8}, {"kill_in_val": 1}], ids=["inside_epoch_2", "in_epoch_1_validation"])
def test_training_killed_mid_epoch_resumes_from_the_step_it_checkpointed(straight, tmp_path, kill):
    """With last.ckpt written after every step (checkpoint_minutes tiny), the run resumes at the next batch of
    the epoch: the loader skips the batches taken, the random state (dropout) is the saved one."""
    model_dir, metrics, straight_dir = straight
    killed = _run(model_dir, tmp_path / "killed", checkpoint_minutes=1e-9, **kill)
    assert killed.returncode == -signal.SIGKILL
    # killed after step 8 (before its checkpoint): saved after step 7, one batch into epoch 2. Killed as epoch 1's
    # validation started: saved after step 5, not after 6, epoch 1's last batch (resumed from there, Lightning
    # would go on to epoch 2 without validating epoch 1).
    done = 7 if "kill_at" in kill else 5
    assert _steps(killed)[-1] == (8 if "kill_at" in kill else 6)
    resumed = _run(model_dir, tmp_path / "killed", checkpoint_minutes=1e-9)
    assert _steps(resumed) == list(range(done + 1, 16))  # no batch twice, none left out
    epochs = [line.split(":")[0] for line in resumed.stdout.splitlines() if line.startswith("epoch ")]
    assert epochs[0] == f"epoch {2 if 'kill_at' in kill else 1}"  # the interrupted epoch is validated once
    _assert_same_run(metrics, _metrics(resumed), straight_dir, tmp_path / "killed")


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


def test_a_changed_loss_version_stamp_trains_again(tmp_path, monkeypatch):
    """A loss whose code changed (its VERSION raised) retrains a finished run of the same settings; other losses'
    stamps leave it finished."""
    import pytorch_lightning as pl
    from test_cross_encoder import LLM, toy_records

    from udcg_ltr.losses import DirectUDCGLoss, ListNetLoss
    from udcg_ltr.models import fit_reranker

    class Refuse(pl.Callback):
        def on_fit_start(self, trainer, module):
            raise RuntimeError("trained again")

    model_dir = save_tiny_bert(tmp_path / "tiny", layers=2, seed=0)
    train, val = toy_records(6, seed=3), toy_records(3, seed=4, split="val")
    kwargs = dict(llm=LLM, model_name_or_path=model_dir, loss="udcg", loss_kwargs={"k": 2, "tau": 0.5}, k=2,
                  epochs=1, batch_size=3, lr=2e-3, max_length=32, seed=0, output_dir=tmp_path / "run",
                  enable_progress_bar=False, early_stopping_patience=None, num_threads=1)
    fit_reranker(train, val, **kwargs)
    monkeypatch.setattr(ListNetLoss, "VERSION", ListNetLoss.VERSION + 1)  # not this run's loss: still finished
    fit_reranker(train, val, **kwargs, callbacks=[Refuse()])
    monkeypatch.setattr(DirectUDCGLoss, "VERSION", DirectUDCGLoss.VERSION + 1)
    with pytest.raises(RuntimeError, match="trained again"):
        fit_reranker(train, val, **kwargs, callbacks=[Refuse()])
