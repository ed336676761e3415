"""``fit_reranker``: train a cross-encoder on query records and save the best model.

Targets are the utilities of ``llm`` (Eq. 2); validation every epoch reports ``val/{monitor_metric}@{k}``.
The ``pl.Trainer`` and its callbacks come from Hydra's ``trainer`` / ``callbacks`` ``_target_`` configs or are
built from the keyword arguments. The best checkpoint is exported to ``output_dir/model`` with a model card.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
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
from udcg_ltr.losses import loss_versions
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.models.cross_encoder import CrossEncoderModule, OptimConfig, default_model_path
from udcg_ltr.models.datamodule import DEFAULT_TEMPLATE, LoaderConfig, SlateDataModule
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
#: out before the Trainer is instantiated. The DataLoaders' settings are not among them: ``fit_reranker(loader=)``.
HOST_SIDE_KEYS = ("num_threads", "checkpoint_minutes")

#: ``fit_reranker(loader=...)``'s keys (conf/loader) and, for a key left None, its value (on a CPU, on a GPU).
#: Pairs are tokenised once up front, so CPU workers would only add process start-up; length buckets cut a CPU
#: encoder's padding, while a GPU is fastest with one large matrix product per layer.
LOADER_DEFAULTS: dict[str, tuple[Any, Any]] = {"num_workers": (0, 4), "pin_memory": (False, True), "buckets": (4, 1)}

#: ``checkpoint_minutes`` when not set: ``last.ckpt`` is also written mid-epoch this often (0: at epoch ends only).
DEFAULT_CHECKPOINT_MINUTES = 10.0

#: ``fit_reranker``'s keyword arguments that set the Trainer (``epochs`` is its ``max_epochs``), with their defaults.
TRAINER_DEFAULTS: dict[str, Any] = {"epochs": 3, "accelerator": "cpu", "devices": 1, "precision": "32-true",
                                    "gradient_clip_val": 1.0, "deterministic": False, "enable_progress_bar": True}
TRAINER_KEYWORDS = tuple(TRAINER_DEFAULTS)
#: ``fit_reranker``'s keyword arguments that set the default callbacks, with their defaults.
CALLBACK_DEFAULTS: dict[str, Any] = {"early_stopping_patience": 2, "save_weights_only": True}


def _finite(name: str, value: Any, low: float | None = None, high: float | None = None, *,
            optional: bool = False) -> None:
    """A number, finite (NaN fails every comparison, so it is refused first) and within ``[low, high]``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or (low is not None and value < low) or (high is not None and value > high):
        bounds = f" in [{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
        raise ValueError(f"{name} must be a finite number{bounds}, got {value!r}")


@dataclass(frozen=True)
class FitConfig:
    """What a cross-encoder learns and how, apart from the Trainer and its callbacks: the typed form of the train
    job's ``model.cross_encoder`` / ``loss`` / top-level ``k``, ``gamma``, ``seed`` settings.

    ``loss`` / ``loss_kwargs``: registry of :mod:`udcg_ltr.losses`; ``llm``: whose utilities (Eq. 2) are the targets;
    ``batch_size``: queries per step. Checked when made (every number finite and in range), before any stage runs.
    """

    llm: str | None = None
    model_name_or_path: str | None = None
    loss: str = "udcg"
    loss_kwargs: Mapping[str, Any] = field(default_factory=dict)
    target: str | None = None
    k: int = 5
    gamma: float = DEFAULT_GAMMA
    batch_size: int = 8
    eval_batch_size: int | None = None
    lr: float = 3e-5
    weight_decay: float = 0.01
    warmup: float = 0.1
    schedule: str = "linear"
    max_length: int = 256
    max_slate: int | None = None
    slate_sampling: str = "head"
    relevance_threshold: int = 1
    template: str = DEFAULT_TEMPLATE
    seed: int = 0
    monitor_metric: str = "udcg"
    shuffle: bool = True

    def __post_init__(self) -> None:
        for name, low in (("k", 1), ("batch_size", 1), ("max_length", 1), ("relevance_threshold", 0)):
            _finite(name, getattr(self, name), low)
        for name in ("eval_batch_size", "max_slate"):
            _finite(name, getattr(self, name), 1, optional=True)
        _finite("gamma", self.gamma, 0.0)
        _finite("lr", self.lr, 0.0)
        _finite("weight_decay", self.weight_decay, 0.0)
        _finite("warmup", self.warmup, 0.0, 1.0)
        _finite("seed", self.seed)
        if self.schedule not in ("linear", "constant"):
            raise ValueError(f"schedule must be 'linear' or 'constant', got {self.schedule!r}")
        if self.slate_sampling not in ("head", "random"):
            raise ValueError(f"slate_sampling must be 'head' or 'random', got {self.slate_sampling!r}")

    @classmethod
    def split(cls, keywords: Mapping[str, Any]) -> tuple[FitConfig, dict[str, Any]]:
        """``(config of the keywords that are its fields, the other keywords)``: ``fit_reranker``'s keyword form."""
        names = {f.name for f in fields(cls)}
        config = cls(**{k: v for k, v in keywords.items() if k in names and (v is not None or k in _NULLABLE)})
        return config, {k: v for k, v in keywords.items() if k not in names}


_NULLABLE = ("llm", "model_name_or_path", "target", "eval_batch_size", "max_slate")


def _plain(node: Mapping[str, Any]) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)


def _refuse_both(config_name: str, given: Mapping[str, Any]) -> None:
    """The keyword arguments a ``trainer_config`` / ``callback_configs`` replaces must keep their defaults."""
    defaults = {**TRAINER_DEFAULTS, **CALLBACK_DEFAULTS}
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
    misplaced = sorted(set(node) & set(LOADER_DEFAULTS))
    if misplaced:  # pl.Trainer would refuse them with a message that does not say where they belong
        raise TypeError(f"fit_reranker: {misplaced} are DataLoader settings: pass them as loader={{...}}")
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


def plan_trainer(config: FitConfig, trainer_config: Mapping[str, Any] | None,
                 callback_configs: Mapping[str, Any] | None, keywords: Mapping[str, Any], *,
                 loader: Mapping[str, Any] | None = None,
                 validates: bool) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]]]:
    """``(Trainer config, host-side settings, callback configs)`` of a run: from ``trainer_config`` /
    ``callback_configs``, or from the keywords (:data:`TRAINER_DEFAULTS`, :data:`CALLBACK_DEFAULTS`, any other
    ``pl.Trainer`` argument and :data:`HOST_SIDE_KEYS`); the host side's ``loader`` is the :class:`LoaderConfig`
    of ``loader`` (:func:`loader_config`), checked here, before any model loads. Nothing is instantiated."""
    rest = dict(keywords)
    trainer_keywords = {name: rest.pop(name, default) for name, default in TRAINER_DEFAULTS.items()}
    callback_keywords = {name: rest.pop(name, default) for name, default in CALLBACK_DEFAULTS.items()}
    settings, host = trainer_settings(trainer_config, trainer_keywords, rest)
    nodes = callback_settings(callback_configs, monitor=CrossEncoderModule.monitor_key(config.monitor_metric, config.k),
                              **callback_keywords)
    host["loader"] = loader_config(config, loader, gpu=on_gpu(settings.get("accelerator")))
    settings = {"enable_model_summary": False, "num_sanity_val_steps": 0, "log_every_n_steps": 10, **settings}
    if not validates:  # no validation loop at all (the data module has no val loader): final weights
        settings["limit_val_batches"] = 0
    return settings, host, nodes


def fit_fingerprint(config: FitConfig, settings: Mapping[str, Any], callback_nodes: Mapping[str, Any],
                    train_records: Sequence[QueryRecord], val_records: Sequence[QueryRecord] | None) -> dict[str, Any]:
    """What a finished (``fit_arguments.json``) or resumable (``last.ckpt``) run must match to be reused.

    ``versions``: the loss classes' ``VERSION`` stamps (:func:`udcg_ltr.losses.loss_versions`), changed when a
    loss's results would change, so that such a change retrains; only stamps above 1 enter, so the fingerprint of
    a run finished before the stamps existed is unchanged. The host side (threads, DataLoader workers, pinned memory,
    length buckets) is left out, as it always was: it changes the speed (buckets: the padding, so at most the float
    rounding), not what is learned, and a run resumed on another machine keeps its checkpoint."""
    fingerprint = {"model": resolved_model_path(config), "loss": config.loss, "loss_kwargs": dict(config.loss_kwargs),
                   "target": config.target, "k": config.k, "gamma": config.gamma, "epochs": settings.get("max_epochs"),
                   "batch_size": config.batch_size, "lr": config.lr, "weight_decay": config.weight_decay,
                   "warmup": config.warmup, "schedule": config.schedule, "max_length": config.max_length,
                   "max_slate": config.max_slate, "sampling": config.slate_sampling, "seed": config.seed,
                   "precision": settings["precision"], "llm": config.llm, "train": [r.qid for r in train_records],
                   "val": [r.qid for r in val_records or []], "trainer": dict(settings), "callbacks": callback_nodes}
    versions = {name: v for name, v in loss_versions(config.loss, config.loss_kwargs).items() if v != 1}
    if versions:
        fingerprint["versions"] = versions
    return fingerprint


def resolved_model_path(config: FitConfig) -> str:
    return str(config.model_name_or_path or default_model_path())


def build_module(config: FitConfig) -> CrossEncoderModule:
    optim = OptimConfig(lr=config.lr, weight_decay=config.weight_decay, warmup=config.warmup,
                        schedule=config.schedule)
    return CrossEncoderModule(resolved_model_path(config), loss=config.loss, loss_kwargs=dict(config.loss_kwargs),
                              target=config.target, k=config.k, gamma=config.gamma, optim=optim,
                              relevance_threshold=config.relevance_threshold, monitor_metric=config.monitor_metric,
                              seed=config.seed)


def loader_config(config: FitConfig, loader: Mapping[str, Any] | None, *, gpu: bool) -> LoaderConfig:
    """The run's :class:`LoaderConfig`: ``loader``'s settings (:data:`LOADER_DEFAULTS` keys), those left ``None``
    chosen for the accelerator; the batch sizes and the shuffling are ``config``'s."""
    given = dict(loader or {})
    unknown = sorted(set(given) - set(LOADER_DEFAULTS))
    if unknown:
        raise TypeError(f"fit_reranker: loader has unknown keys {unknown} (known: {list(LOADER_DEFAULTS)})")
    chosen = {key: defaults[gpu] if given.get(key) is None else given[key] for key, defaults in LOADER_DEFAULTS.items()}
    return LoaderConfig(batch_size=config.batch_size, eval_batch_size=config.eval_batch_size, shuffle=config.shuffle,
                        **chosen)


def build_data(config: FitConfig, train_records: Sequence[QueryRecord], val_records: Sequence[QueryRecord] | None,
               tokenizer: Any, loader: LoaderConfig) -> SlateDataModule:
    """The slate data module, batched and loaded as ``loader`` says (:func:`loader_config`)."""
    return SlateDataModule(train_records, val_records, tokenizer=tokenizer, llm=config.llm, template=config.template,
                           seed=config.seed, max_length=config.max_length, max_slate=config.max_slate,
                           sampling=config.slate_sampling, relevance_threshold=config.relevance_threshold,
                           loader=loader)


def build_trainer(settings: Mapping[str, Any], host: Mapping[str, Any], callback_nodes: Mapping[str, Any], *,
                  out: Path, callbacks: Sequence[pl.Callback] | None, logger: Any, validates: bool,
                  monitor: str, k: int) -> tuple[pl.Trainer, ModelCheckpoint | None]:
    """``(the Trainer, the callback keeping the best checkpoint or None)``; checkpoints go to ``out/checkpoints``."""
    ckpt_dir = out / "checkpoints"
    cbs: list[pl.Callback] = list(callbacks or [])
    cbs += build_callbacks(callback_nodes, checkpoint_dir=ckpt_dir, validates=validates, has_logger=bool(logger))
    best = next((cb for cb in cbs if isinstance(cb, ModelCheckpoint) and cb.monitor), None)
    # The full training state after every epoch, for resuming (its own callback: the best one holds weights only),
    # and every checkpoint_minutes within an epoch (Lightning allows one trigger per callback, so a second one).
    last = dict(dirpath=ckpt_dir, filename="last", monitor=None, save_top_k=1, enable_version_counter=False)
    cbs.append(ModelCheckpoint(**last))
    minutes = DEFAULT_CHECKPOINT_MINUTES if host["checkpoint_minutes"] is None else float(host["checkpoint_minutes"])
    if minutes > 0:
        cbs.append(MidEpochCheckpoint(**last, train_time_interval=timedelta(minutes=minutes)))
    if not settings.get("enable_progress_bar", True):
        cbs.append(EpochSummary(monitor, k))
    # _partial_: the config's arguments bound, the run's objects passed as they are (instantiate would copy them).
    make_trainer = instantiate(dict(settings), _partial_=True)
    trainer = make_trainer(logger=logger, callbacks=cbs, default_root_dir=str(out), plugins=[AtomicCheckpointIO()])
    return trainer, best


def _quiet_lightning() -> None:
    # The "does not have many workers" hint is wrong for this in-process tokenising loader.
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*`isinstance\\(treespec, LeafSpec\\)`.*")
    # The folder holds our fit_arguments.json stamp (and last.ckpt when resuming): expected, not a stale run.
    warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)


def best_epoch_metrics(best: ModelCheckpoint | None, module: CrossEncoderModule, trainer: pl.Trainer) -> dict[str, float]:
    """Load the best checkpoint's weights into ``module`` (when one was kept); its epoch and score."""
    metrics: dict[str, float] = {}
    if best is not None and best.best_model_path:
        checkpoint = torch.load(best.best_model_path, map_location="cpu", weights_only=True)
        module.load_state_dict(checkpoint["state_dict"])
        metrics["best_epoch"] = float(checkpoint["epoch"])
        metrics[f"best_{best.monitor}"] = float(best.best_model_score)
    metrics["epochs_run"] = float(trainer.current_epoch)
    return metrics


def validate_exported(module: CrossEncoderModule, data: SlateDataModule, settings: Mapping[str, Any]) -> dict[str, float]:
    """Validation metrics of the module's (exported) weights on one device, with the training's precision."""
    evaluator = pl.Trainer(accelerator=settings.get("accelerator", "auto"), devices=1, precision=settings["precision"],
                           logger=False, enable_progress_bar=bool(settings.get("enable_progress_bar", True)),
                           enable_model_summary=False)
    res = evaluator.validate(module, datamodule=data, verbose=False)
    return {name: float(v) for name, v in res[0].items()}


def fit_reranker(train_records: Sequence[QueryRecord], val_records: Sequence[QueryRecord] | None = None,
                 config: FitConfig | None = None, *, output_dir: str | os.PathLike = "outputs/cross_encoder",
                 trainer_config: Mapping[str, Any] | None = None, callback_configs: Mapping[str, Any] | None = None,
                 callbacks: Sequence[pl.Callback] | None = None, logger: Any = False, resume: bool = True,
                 loader: Mapping[str, Any] | None = None, **keywords: Any) -> tuple[str, dict[str, float]]:
    """Train a cross-encoder reranker as ``config`` says; return ``(path of the saved best model, metrics)``.

    The Trainer comes from ``trainer_config`` (a ``pl.Trainer`` ``_target_`` config and :data:`HOST_SIDE_KEYS`),
    the callbacks from ``callback_configs``, the DataLoaders from ``loader`` (:func:`plan_trainer`). Without
    ``config``, keywords that are its fields make it; the others (:data:`TRAINER_DEFAULTS`,
    :data:`CALLBACK_DEFAULTS`, ``pl.Trainer`` arguments) are refused beside a config that sets them.

    ``checkpoints/last.ckpt`` is written atomically after every epoch and every ``checkpoint_minutes`` within one:
    the same call resumes from it (``resume=True``) and ends with the model of an uninterrupted run. A finished run
    leaves ``fit_arguments.json`` (:func:`fit_fingerprint`, written last) beside ``model``: the same call again
    returns that model and its metrics without training.
    """
    if config is None:
        config, keywords = FitConfig.split(keywords)
    _quiet_lightning()
    settings, host, callback_nodes = plan_trainer(config, trainer_config, callback_configs, keywords,
                                                  loader=loader, validates=bool(val_records))
    if host["num_threads"]:
        torch.set_num_threads(int(host["num_threads"]))
    pl.seed_everything(config.seed, workers=True, verbose=False)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = fit_fingerprint(config, settings, callback_nodes, train_records, val_records)
    saved, finished = out / "model", out / "fit_arguments.json"
    # Checked before the model is loaded and the data tokenised: a reused run costs neither.
    if resume and read_json_dict(finished) == json_safe(fingerprint):
        log.info("%s holds a finished run of the same arguments: its model is reused", out)
        return str(saved), read_json_dict(out / "metrics.json")
    finished.unlink(missing_ok=True)  # the model below is about to be replaced

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolved_model_path(config))
    module = build_module(config)
    data = build_data(config, train_records, val_records, tokenizer, host["loader"])
    trainer, best = build_trainer(settings, host, callback_nodes, out=out, callbacks=callbacks, logger=logger,
                                  validates=bool(val_records), monitor=module.monitor, k=config.k)
    trainer.fit(module, datamodule=data, weights_only=True,
                ckpt_path=_resume_from(out / "checkpoints", fingerprint) if resume else None)
    metrics = best_epoch_metrics(best, module, trainer)
    if trainer.is_global_zero:  # export first (rank 0 only under DDP), then evaluate the exported weights
        module.save_pretrained(saved, tokenizer, extra={
            "max_length": config.max_length, "template": config.template, "llm": config.llm, "seed": config.seed,
            "relevance_threshold": config.relevance_threshold, "gamma": config.gamma,
            "base_model": base_model_name(resolved_model_path(config))})
    if val_records:
        metrics.update(validate_exported(module, data, settings))
    if trainer.is_global_zero:
        atomic_write_json(out / "metrics.json", metrics)
        # The model card (README.md) needs the metrics, so it follows them; the other facts are in the side file.
        write_model_card(saved, metrics=metrics, dataset=f"{len(train_records)} training / "
                         f"{len(val_records or [])} validation queries")
        atomic_write_json(finished, fingerprint)
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
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

