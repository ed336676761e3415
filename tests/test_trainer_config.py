"""The Lightning trainer and callbacks of the cross-encoder come from their ``_target_`` configs (conf/trainer,
conf/callbacks), and a command-line override reaches the objects the train job builds.

The train job runs on a tiny test-built data set with a tiny BERT (as ``test_gamma_flow.py``); ``Trainer.fit`` is
replaced by a spy that records the Trainer and its data module and stops the job, so nothing trains.
"""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
from job_fixtures import tiny_job_config, tiny_records

from udcg_ltr.models.training import (
    HOST_SIDE_KEYS,
    FitConfig,
    callback_settings,
    fit_reranker,
    loader_config,
    trainer_settings,
)


class StopBeforeTraining(Exception):
    """Raised by the spy in place of ``Trainer.fit``."""


@pytest.fixture()
def built(monkeypatch):
    """What ``Trainer.fit`` was called with: the Trainer and the data module."""
    seen: dict = {}

    def fit(self, model, *args, datamodule=None, **kwargs):
        import torch

        seen.update(trainer=self, datamodule=datamodule, num_threads=torch.get_num_threads())
        raise StopBeforeTraining

    monkeypatch.setattr(pl.Trainer, "fit", fit)
    return seen


def test_command_line_trainer_overrides_reach_the_trainer_the_job_builds(tmp_path, monkeypatch, built):
    import torch

    from udcg_ltr.jobs.train_job import train

    cfg = tiny_job_config(tmp_path, monkeypatch, tiny_records({"train": 4, "val": 2, "test": 2}), [
        "k=3", "loss=bce", "logger=csv",
        # the overrides under test: Trainer arguments, a new one, host-side settings, the loaders' and a callback's
        "trainer.max_epochs=2", "trainer.precision=32-true", "trainer.gradient_clip_val=0.25",
        "+trainer.accumulate_grad_batches=2", "trainer.num_threads=1", "loader.buckets=3",
        "loader.num_workers=0", "loader.pin_memory=true", "callbacks.early_stopping.patience=7"])
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the job must set 1 (the override), whatever it found
    try:
        with pytest.raises(StopBeforeTraining):
            train(cfg)
    finally:
        torch.set_num_threads(threads)

    trainer = built["trainer"]
    assert trainer.max_epochs == 2 and trainer.precision == "32-true"
    assert trainer.gradient_clip_val == 0.25 and trainer.accumulate_grad_batches == 2
    stopping = [c for c in trainer.callbacks if isinstance(c, pl.callbacks.EarlyStopping)]
    assert [(c.patience, c.monitor) for c in stopping] == [(7, "val/udcg@3")]
    best = [c for c in trainer.callbacks if isinstance(c, pl.callbacks.ModelCheckpoint) and c.monitor]
    assert [c.monitor for c in best] == ["val/udcg@3"]
    assert any(isinstance(c, pl.callbacks.LearningRateMonitor) for c in trainer.callbacks)  # logger=csv has one
    # the host side reached torch and the loader settings the data module, and never the Trainer
    data = built["datamodule"]
    assert data.collate.buckets == 3 and data.num_workers == 0 and data.pin_memory is True
    assert built["num_threads"] == 1


def test_trainer_settings_take_the_host_side_out_and_resolve_precision():
    node, host = trainer_settings({"_target_": "pytorch_lightning.Trainer", "accelerator": "cpu", "max_epochs": 2,
                                   "precision": "32", "num_threads": 1}, {}, {})
    assert node == {"_target_": "pytorch_lightning.Trainer", "accelerator": "cpu", "max_epochs": 2,
                    "precision": "32-true"}
    assert host == {"num_threads": 1, "checkpoint_minutes": None}
    assert set(host) == set(HOST_SIDE_KEYS)


@pytest.mark.parametrize("where", ["trainer_config", "keyword"])
def test_a_dataloader_setting_beside_the_trainer_is_refused(where):
    """The DataLoaders' settings travel as ``loader``: given as a Trainer setting they are refused, saying where."""
    config, keywords = ({"_target_": "pytorch_lightning.Trainer", "num_workers": 0}, {}) if where == "trainer_config" \
        else (None, {"num_workers": 0})
    with pytest.raises(TypeError, match=r"\['num_workers'\] are DataLoader settings: pass them as loader="):
        trainer_settings(config, {}, keywords)


def test_loader_settings_left_none_are_chosen_for_the_accelerator():
    config = FitConfig(batch_size=3, eval_batch_size=5, shuffle=False)
    on_cpu, on_gpu = loader_config(config, None, gpu=False), loader_config(config, {"buckets": None}, gpu=True)
    assert (on_cpu.num_workers, on_cpu.pin_memory, on_cpu.buckets) == (0, False, 4)
    assert (on_gpu.num_workers, on_gpu.pin_memory, on_gpu.buckets) == (4, True, 1)
    assert (on_gpu.batch_size, on_gpu.eval_batch_size, on_gpu.shuffle) == (3, 5, False)  # the model's, not loader's
    chosen = loader_config(config, {"num_workers": 2, "pin_memory": False, "buckets": 3}, gpu=True)
    assert (chosen.num_workers, chosen.pin_memory, chosen.buckets) == (2, False, 3)
    with pytest.raises(TypeError, match=r"unknown keys \['length_buckets'\]"):
        loader_config(config, {"length_buckets": 3}, gpu=False)


def test_keyword_arguments_build_the_same_trainer_config():
    """Benches call fit_reranker with plain keyword arguments: they become the trainer config the job would pass."""
    node, host = trainer_settings(None, {"epochs": 3, "accelerator": "cpu", "precision": "32-true", "num_threads": 2,
                                         "limit_train_batches": None}, {"log_every_n_steps": 5})
    assert node == {"_target_": "pytorch_lightning.Trainer", "max_epochs": 3, "accelerator": "cpu",
                    "precision": "32-true", "log_every_n_steps": 5}
    assert host["num_threads"] == 2
    nodes = callback_settings(None, monitor="val/udcg@5", early_stopping_patience=None, save_weights_only=True)
    assert sorted(nodes) == ["lr_monitor", "model_checkpoint"]  # no patience: no early stopping


@pytest.mark.parametrize("keywords", [{"epochs": 5}, {"precision": "bf16-mixed"}, {"early_stopping_patience": 9},
                                      {"max_time": "00:00:01:00"}])
def test_a_setting_given_twice_is_refused(keywords, tmp_path):
    """With trainer_config / callback_configs the keywords they replace stay unset: one setting, one place."""
    with pytest.raises(TypeError, match="set them there"):
        fit_reranker([], trainer_config={"_target_": "pytorch_lightning.Trainer"}, callback_configs={},
                     output_dir=tmp_path, **keywords)


def test_split_groups_take_a_name_a_list_or_every_record():
    """``splits`` may be one split, a list, or null (every record): the training job scores each of them."""
    from udcg_ltr.jobs.train_job import split_groups

    assert split_groups("test") == ["test"]  # not its letters
    assert split_groups(["val", "test"]) == ["val", "test"]
    assert split_groups(None) == [None]
