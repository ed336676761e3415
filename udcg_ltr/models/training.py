"""``fit_reranker``: train a cross-encoder on query records and save the best model.

Targets are the utilities of ``llm`` (Eq. 2); validation every epoch reports ``val/{monitor_metric}@{k}``.
The ``pl.Trainer`` and its callbacks come from Hydra's ``trainer`` / ``callbacks`` ``_target_`` configs or are
built from the keyword arguments. The best checkpoint is exported to ``output_dir/model`` with a model card.
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
import time
import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import get_class, instantiate
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint

from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.io import atomic_open, atomic_write_json, json_safe, read_json_dict
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.models.cross_encoder import CrossEncoderModule, default_model_path
from udcg_ltr.models.datamodule import DEFAULT_TEMPLATE, SlateDataModule
from udcg_ltr.models.hub import base_model_name, write_model_card
from udcg_ltr.models.precision import on_gpu, resolve_precision

log = logging.getLogger(__name__)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Local checkpoints via :func:`udcg_ltr.io.atomic_open` (temp file, fsync, rename); remote URLs as Lightning does."""

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        if storage_options is not None or "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        with atomic_open(path, "wb") as f:
            torch.save(checkpoint, f)


class MidEpochCheckpoint(ModelCheckpoint):
    """``last.ckpt`` every ``train_time_interval`` within an epoch, but not after its last batch: Lightning resumes
    such a checkpoint at the next epoch, without the validation the epoch still owed (the epoch-end one follows)."""

    def on_train_batch_end(self, trainer, *args, **kwargs):
        if not trainer.is_last_batch:
            super().on_train_batch_end(trainer, *args, **kwargs)


class EpochSummary(pl.Callback):
    """One line per validation epoch (monitored metric, nDCG, train loss, pairs/s), for runs without a bar."""

    def __init__(self, monitor: str, k: int):
        self.monitor, self.k = monitor, k
        self._t0, self._t1, self._pairs = None, None, 0

    def on_train_epoch_start(self, trainer, module):
        self._t0, self._pairs = time.perf_counter(), 0

    on_train_start = on_train_epoch_start  # a run resumed mid-epoch has no epoch start

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self._pairs += int(batch.get("n_pairs", 0))
        self._t1 = time.perf_counter()

    def on_validation_end(self, trainer, module):  # after the module's epoch-end hook has logged
        if trainer.sanity_checking or not trainer.is_global_zero or self._t1 is None:
            return
        m = trainer.callback_metrics
        get = lambda name: float(m[name]) if name in m else float("nan")  # noqa: E731
        rate = self._pairs / max(self._t1 - self._t0, 1e-9)
        print(f"epoch {trainer.current_epoch}: {self.monitor}={get(self.monitor):.4f} "
              f"val/ndcg@{self.k}={get(f'val/ndcg@{self.k}'):.4f} train/loss={get('train/loss'):.4f} "
              f"({rate:.1f} pairs/s)", flush=True)


#: Keys of the ``trainer`` config that are not ``pl.Trainer`` arguments but the host side of the loop, taken
#: out before the Trainer is instantiated (``None``: chosen for the accelerator).
HOST_SIDE_KEYS = ("num_threads", "num_workers", "pin_memory", "length_buckets", "checkpoint_minutes")

#: ``checkpoint_minutes`` when not set: ``last.ckpt`` is also written mid-epoch this often (0: at epoch ends only).
DEFAULT_CHECKPOINT_MINUTES = 10.0

#: ``fit_reranker``'s keyword arguments that set the Trainer (``epochs`` is its ``max_epochs``).
TRAINER_KEYWORDS = ("epochs", "accelerator", "devices", "precision", "gradient_clip_val", "deterministic",
                    "enable_progress_bar")


def _plain(node: Mapping[str, Any]) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)


def _refuse_both(config_name: str, given: Mapping[str, Any]) -> None:
    """The keyword arguments a ``trainer_config`` / ``callback_configs`` replaces must keep their defaults."""
    defaults = {name: p.default for name, p in inspect.signature(fit_reranker).parameters.items()}
    clash = sorted(name for name, value in given.items() if value != defaults.get(name))
    if clash:
        raise TypeError(f"fit_reranker: {clash} are set by {config_name}=...; set them there, not as keyword arguments")


def trainer_settings(trainer_config: Mapping[str, Any] | None, keywords: Mapping[str, Any],
                     extra: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(Trainer config with _target_, host-side settings)`` from a trainer config or from the keyword
    arguments; ``precision`` resolved for the accelerator, so training and the scoring after it use one."""
    if trainer_config is None:
        node = {"_target_": "pytorch_lightning.Trainer",
                **{("max_epochs" if name == "epochs" else name): value for name, value in keywords.items()
                   if value is not None}, **extra}
    else:
        _refuse_both("trainer_config", {**keywords, **dict.fromkeys(extra, object())})
        node = _plain(trainer_config)
    host = {key: node.pop(key, None) for key in HOST_SIDE_KEYS}
    node["precision"] = resolve_precision(node.get("precision"), node.get("accelerator", "auto"))
    return node, host


def callback_settings(callback_configs: Mapping[str, Any] | None, *, monitor: str,
                      early_stopping_patience: int | None, save_weights_only: bool) -> dict[str, dict[str, Any]]:
    """``{name: _target_ config}`` of the callbacks: Hydra's ``callbacks`` group, or built from the keyword arguments
    (best checkpoint on ``monitor``, early stopping after ``early_stopping_patience`` epochs, learning-rate monitor)."""
    if callback_configs is not None:
        _refuse_both("callback_configs", {"early_stopping_patience": early_stopping_patience,
                                          "save_weights_only": save_weights_only})
        return {str(name): _plain(node) for name, node in _plain(callback_configs).items() if node}
    nodes = {"model_checkpoint": {"_target_": "pytorch_lightning.callbacks.ModelCheckpoint", "dirpath": None,
                                  "monitor": monitor, "mode": "max", "save_top_k": 1,
                                  "save_weights_only": save_weights_only, "auto_insert_metric_name": False,
                                  "filename": "best-epoch{epoch:02d}-step{step}"}}
    if early_stopping_patience is not None and early_stopping_patience > 0:
        nodes["early_stopping"] = {"_target_": "pytorch_lightning.callbacks.EarlyStopping", "monitor": monitor,
                                   "mode": "max", "patience": early_stopping_patience}
    nodes["lr_monitor"] = {"_target_": "pytorch_lightning.callbacks.LearningRateMonitor", "logging_interval": "step"}
    return nodes


def build_callbacks(nodes: Mapping[str, Mapping[str, Any]], *, checkpoint_dir: Path, validates: bool,
                    has_logger: bool) -> list[pl.Callback]:
    """Instantiate the callback configs (a checkpoint without ``dirpath`` writes to ``checkpoint_dir``),
    leaving out what Lightning refuses: monitors without validation, learning-rate monitors without logger."""
    out = []
    for name, node in nodes.items():
        cls = get_class(str(node["_target_"]))
        if (issubclass(cls, (ModelCheckpoint, EarlyStopping)) and node.get("monitor") and not validates) \
                or (issubclass(cls, LearningRateMonitor) and not has_logger):
            continue
        overrides = {"dirpath": str(checkpoint_dir)} if issubclass(cls, ModelCheckpoint) \
            and node.get("dirpath") is None else {}
        callback = instantiate(node, **overrides)
        if not isinstance(callback, pl.Callback):
            raise TypeError(f"callbacks.{name}: {node['_target_']} is not a Lightning callback")
        out.append(callback)
    return out


def fit_reranker(train_records: Sequence[QueryRecord], val_records: Sequence[QueryRecord] | None = None, *,
                 llm: str | None = None, model_name_or_path: str | None = None, loss: str = "udcg",
                 loss_kwargs: dict[str, Any] | None = None, target: str | None = None, k: int = 5,
                 gamma: float = DEFAULT_GAMMA, epochs: int = 3, batch_size: int = 8, eval_batch_size: int | None = None,
                 lr: float = 3e-5, weight_decay: float = 0.01, warmup: float = 0.1, schedule: str = "linear",
                 max_length: int = 256, max_slate: int | None = None, slate_sampling: str = "head",
                 relevance_threshold: int = 1, template: str = DEFAULT_TEMPLATE, seed: int = 0,
                 output_dir: str | os.PathLike = "outputs/cross_encoder", precision: str | int = "32-true",
                 accelerator: str = "cpu", devices: int | str | Sequence[int] = 1, logger: Any = False,
                 gradient_clip_val: float | None = 1.0, early_stopping_patience: int | None = 2,
                 monitor_metric: str = "udcg", deterministic: bool = False, enable_progress_bar: bool = True,
                 save_weights_only: bool = True, callbacks: Sequence[pl.Callback] | None = None, shuffle: bool = True,
                 resume: bool = True, trainer_config: Mapping[str, Any] | None = None,
                 callback_configs: Mapping[str, Any] | None = None,
                 **trainer_kwargs: Any) -> tuple[str, dict[str, float]]:
    """Train a cross-encoder reranker; return ``(path of the saved best model, metrics)``.

    ``loss`` / ``loss_kwargs``: registry of :mod:`udcg_ltr.losses`; ``llm``: whose utilities are the targets;
    ``batch_size``: queries per step; ``deterministic`` is off by default (it slows GPU kernels and changes nothing on a
    CPU). Extra keyword arguments go to ``pl.Trainer``, except :data:`HOST_SIDE_KEYS` (``num_workers`` / ``pin_memory``:
    0 / off on a CPU, 4 / on with a GPU; ``length_buckets``: 4 on a CPU, 1 on a GPU,
    :class:`~.datamodule.SlateCollator`; ``checkpoint_minutes``: :data:`DEFAULT_CHECKPOINT_MINUTES`).

    ``checkpoints/last.ckpt`` is written atomically after every epoch and every ``checkpoint_minutes`` within one
    (with the data loader's position and the random state): a call with the same arguments and ``output_dir``
    resumes from it (``resume=True``) and ends with the model of an uninterrupted run. A finished
    run leaves ``fit_arguments.json`` beside ``model`` (written last): the same call again returns that model and
    its metrics without training (a job that failed after this stage reruns without retraining).

    ``trainer_config`` (a ``pl.Trainer`` ``_target_`` config, host-side keys included) replaces
    :data:`TRAINER_KEYWORDS` and the extra keywords; ``callback_configs`` replaces ``early_stopping_patience``
    / ``save_weights_only``: setting both a config and a keyword it replaces is an error.
    """
    arguments = dict(locals())  # first statement: the call's arguments and nothing else
    # The "does not have many workers" hint is wrong for this in-process tokenising loader.
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*`isinstance\\(treespec, LeafSpec\\)`.*")
    # The folder holds our fit_arguments.json stamp (and last.ckpt when resuming): expected, not a stale run.
    warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)
    settings, host = trainer_settings(trainer_config, {name: arguments[name] for name in TRAINER_KEYWORDS},
                                      trainer_kwargs)
    if host["num_threads"]:
        torch.set_num_threads(int(host["num_threads"]))
    pl.seed_everything(seed, workers=True, verbose=False)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_path = str(model_name_or_path or default_model_path())
    precision, accelerator = settings["precision"], settings.get("accelerator", "auto")
    progress = bool(settings.get("enable_progress_bar", True))
    gpu = on_gpu(accelerator)
    monitor = CrossEncoderModule.monitor_key(monitor_metric, k)
    callback_nodes = callback_settings(callback_configs, monitor=monitor,
                                       early_stopping_patience=early_stopping_patience,
                                       save_weights_only=save_weights_only)
    settings = {"enable_model_summary": False, "num_sanity_val_steps": 0, "log_every_n_steps": 10, **settings}
    if not val_records:  # no validation loop at all (the data module has no val loader): final weights
        settings["limit_val_batches"] = 0
    fingerprint = {"model": model_path, "loss": loss, "loss_kwargs": loss_kwargs or {}, "target": target, "k": k,
                   "gamma": gamma, "epochs": settings.get("max_epochs"), "batch_size": batch_size, "lr": lr,
                   "weight_decay": weight_decay, "warmup": warmup, "schedule": schedule,
                   "max_length": max_length, "max_slate": max_slate, "sampling": slate_sampling, "seed": seed,
                   "precision": precision, "llm": llm, "train": [r.qid for r in train_records],
                   "val": [r.qid for r in val_records or []], "trainer": settings, "callbacks": callback_nodes}
    saved, finished = out / "model", out / "fit_arguments.json"
    # Checked before the model is loaded and the data tokenised: a reused run costs neither.
    if resume and read_json_dict(finished) == json_safe(fingerprint):
        log.info("%s holds a finished run of the same arguments: its model is reused", out)
        return str(saved), read_json_dict(out / "metrics.json")
    finished.unlink(missing_ok=True)  # the model below is about to be replaced

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    module = CrossEncoderModule(model_path, loss=loss, loss_kwargs=loss_kwargs, target=target, k=k, gamma=gamma,
                                lr=lr, weight_decay=weight_decay, warmup=warmup, schedule=schedule,
                                relevance_threshold=relevance_threshold, monitor_metric=monitor_metric, seed=seed)
    data = SlateDataModule(train_records, val_records, tokenizer=tokenizer, llm=llm, template=template, seed=seed,
                           batch_size=batch_size, eval_batch_size=eval_batch_size, max_length=max_length,
                           max_slate=max_slate, sampling=slate_sampling, relevance_threshold=relevance_threshold,
                           num_workers=(4 if gpu else 0) if host["num_workers"] is None else host["num_workers"],
                           pin_memory=gpu if host["pin_memory"] is None else host["pin_memory"], shuffle=shuffle,
                           buckets=(1 if gpu else 4) if host["length_buckets"] is None else host["length_buckets"])

    ckpt_dir = out / "checkpoints"
    cbs: list[pl.Callback] = list(callbacks or [])
    cbs += build_callbacks(callback_nodes, checkpoint_dir=ckpt_dir, validates=bool(val_records),
                           has_logger=bool(logger))
    best = next((cb for cb in cbs if isinstance(cb, ModelCheckpoint) and cb.monitor), None)
    # The full training state after every epoch, for resuming (its own callback: the best one holds weights only),
    # and every checkpoint_minutes within an epoch (Lightning allows one trigger per callback, so a second one).
    last = dict(dirpath=ckpt_dir, filename="last", monitor=None, save_top_k=1, enable_version_counter=False)
    cbs.append(ModelCheckpoint(**last))
    minutes = DEFAULT_CHECKPOINT_MINUTES if host["checkpoint_minutes"] is None else float(host["checkpoint_minutes"])
    if minutes > 0:
        cbs.append(MidEpochCheckpoint(**last, train_time_interval=timedelta(minutes=minutes)))
    if not progress:
        cbs.append(EpochSummary(monitor, k))
    # _partial_: the config's arguments bound, the run's objects passed as they are (instantiate would copy them).
    make_trainer = instantiate(settings, _partial_=True)
    trainer = make_trainer(logger=logger, callbacks=cbs, default_root_dir=str(out), plugins=[AtomicCheckpointIO()])
    trainer.fit(module, datamodule=data, ckpt_path=_resume_from(ckpt_dir, fingerprint) if resume else None,
                weights_only=True)

    metrics: dict[str, float] = {}
    if best is not None and best.best_model_path:
        checkpoint = torch.load(best.best_model_path, map_location="cpu", weights_only=True)
        module.load_state_dict(checkpoint["state_dict"])
        metrics["best_epoch"] = float(checkpoint["epoch"])
        metrics[f"best_{best.monitor}"] = float(best.best_model_score)
    metrics["epochs_run"] = float(trainer.current_epoch)
    # Export first (rank 0 only under DDP), then evaluate the exported weights.
    if trainer.is_global_zero:
        module.save_pretrained(saved, tokenizer, extra={"max_length": max_length, "template": template, "llm": llm,
                                                        "relevance_threshold": relevance_threshold, "seed": seed,
                                                        "gamma": gamma, "base_model": base_model_name(model_path)})
    if val_records:
        evaluator = pl.Trainer(accelerator=accelerator, devices=1, precision=precision, logger=False,
                               enable_progress_bar=progress, enable_model_summary=False)
        res = evaluator.validate(module, datamodule=data, verbose=False)
        metrics.update({name: float(v) for name, v in res[0].items()})
    if trainer.is_global_zero:
        atomic_write_json(out / "metrics.json", metrics)
        # The model card (README.md) needs the metrics, so it follows them; the other facts are in the side file.
        write_model_card(saved, metrics=metrics, dataset=f"{len(train_records)} training / "
                         f"{len(val_records or [])} validation queries")
        atomic_write_json(finished, fingerprint)
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    return str(saved), metrics


def _resume_from(ckpt_dir: Path, fingerprint: dict[str, Any]) -> str | None:
    """``last.ckpt`` when it was written by a run of the same arguments; records the arguments for the next call."""
    last, stamp = ckpt_dir / "last.ckpt", ckpt_dir / "fit_arguments.json"
    if last.is_file() and read_json_dict(stamp) == json_safe(fingerprint):
        log.info("resuming from %s", last)
        return str(last)
    if last.is_file():
        log.warning("%s was written with other arguments: training from the start", last)
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    atomic_write_json(stamp, fingerprint)
    return None

