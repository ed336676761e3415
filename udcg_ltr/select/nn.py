"""Shared machinery of the learned selectors: tensors, the smooth UDCG of a soft kept set, Lightning training.

**Soft UDCG of a soft prefix** (what the gate's ``soft_mask`` objective maximises). Passage ``i``
enters the context with weight ``w_i in [0, 1]`` and Eq. 4 becomes, with ``n = sum_i w_i``::

    UDCG_soft = sigmoid( (sum_i w_i u_i+ + gamma sum_i w_i u_i-) / max(n, 1) )

On hard 0/1 weights it is exactly Eq. 4 for ``k >= 1`` and ``sigmoid(0) = 0.5`` for the empty set;
the ``max(n, 1)`` makes the relaxation continuous as every weight goes to 0 (dividing by ``n`` alone
would keep the logit at the mean utility of an almost empty context instead of moving it to 0).

**Training** (:func:`train_module`): full tensors in memory (a few hundred queries), shuffled
mini-batches, AdamW, a validation pass over the whole validation set every epoch, the best state by
the monitored value kept in memory (no checkpoint files) and restored at the end, early stopping on
the same value. Lightning runs it, seeded.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from udcg_ltr.fit.svmrank import quiet_lightning
from udcg_ltr.metrics.torch_ops import udcg_logit_torch
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA


def soft_udcg(utility: torch.Tensor, weights: torch.Tensor, *, gamma: float = DEFAULT_GAMMA) -> torch.Tensor:
    """``sigmoid((sum w u+ + gamma sum w u-) / max(sum w, 1))`` per query (module doc): Eq. 4 on a soft kept set."""
    n = weights.sum(-1)
    # udcg_logit_torch's soft-mask logit divides by n: rescale to a division by max(n, 1)
    z = udcg_logit_torch(utility, weights, gamma=gamma) * (n / n.clamp(min=1.0))
    return torch.sigmoid(z)


def mlp(n_in: int, n_out: int, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0) -> torch.nn.Module:
    """A linear map (``hidden=0`` or ``n_layers=0``) or an MLP with ``n_layers`` GELU hidden layers."""
    if hidden <= 0 or n_layers <= 0:
        return torch.nn.Linear(n_in, n_out)
    layers: list[torch.nn.Module] = []
    width = n_in
    for _ in range(n_layers):
        layers += [torch.nn.Linear(width, hidden), torch.nn.GELU()]
        if dropout > 0:
            layers.append(torch.nn.Dropout(dropout))
        width = hidden
    layers.append(torch.nn.Linear(width, n_out))
    return torch.nn.Sequential(*layers)


def as_tensors(arrays: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Arrays as tensors: booleans stay bool, integers become int64, everything else float32."""
    out = {}
    for k, v in arrays.items():
        v = np.asarray(v)
        out[k] = torch.as_tensor(v, dtype=torch.bool if v.dtype == bool else
                                 (torch.long if np.issubdtype(v.dtype, np.integer) else torch.float32))
    return out


def _loader(arrays: Mapping[str, np.ndarray], batch_size: int, **kwargs: Any) -> DataLoader:
    """Batches of queries: dicts of aligned tensors (``x [Q, W, F]``, ``mask``, ``utility``, ``table``...)."""
    tensors = as_tensors(arrays)
    sizes = {v.shape[0] for v in tensors.values()}
    if len(sizes) != 1:
        raise ValueError(f"tensors disagree on the number of queries: {sizes}")
    return DataLoader(range(sizes.pop()), batch_size=batch_size, **kwargs,
                      collate_fn=lambda rows: {k: v[rows] for k, v in tensors.items()})


class SelectorModule(pl.LightningModule):
    """Base LightningModule: subclasses implement ``objective(batch) -> [Q]`` (to maximise),
    ``soft_output(batch)`` (a tensor that can be averaged across modules: inclusion weights or class
    probabilities) and ``k_from_soft(soft, batch) -> [Q]``. The validation metric ``val/udcg`` is the
    mean of ``table[q, k_q]`` (exact UDCG of the hard selection), ``val/objective`` the smooth
    objective (without any training-only bonus)."""

    def __init__(self, lr: float = 1e-2, weight_decay: float = 1e-4):
        super().__init__()
        self.lr, self.weight_decay = float(lr), float(weight_decay)

    def objective(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def soft_output(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def k_from_soft(self, soft: torch.Tensor, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def training_step(self, batch, batch_idx):
        loss = -self.objective(batch).mean()
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["mask"].shape[0])
        return loss

    def validation_step(self, batch, batch_idx):
        obj = self.objective(batch).mean()
        k = self.k_from_soft(self.soft_output(batch), batch)
        hard = torch.gather(batch["table"], 1, k[:, None].clamp(max=batch["table"].shape[1] - 1))[:, 0].mean()
        n = batch["mask"].shape[0]
        self.log("val/objective", obj, prog_bar=True, batch_size=n)
        self.log("val/udcg", hard, prog_bar=True, batch_size=n)
        self.log("val/mean_k", k.float().mean(), batch_size=n)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)


class KeepBest(pl.Callback):
    """Copies the module's state when the monitored value improves; restores the best at the end of fit."""

    def __init__(self, monitor: str, min_delta: float = 0.0):
        self.monitor, self.min_delta = monitor, float(min_delta)
        self.best_value = -float("inf")
        self.best_epoch = -1
        self.state: dict[str, torch.Tensor] | None = None

    def on_validation_end(self, trainer, module):
        value = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or value is None:
            return
        if float(value) > self.best_value + self.min_delta:
            self.best_value, self.best_epoch = float(value), trainer.current_epoch
            self.state = copy.deepcopy(module.state_dict())

    def on_fit_end(self, trainer, module):
        if self.state is not None:
            module.load_state_dict(self.state)


def train_module(module: SelectorModule, train: Mapping[str, np.ndarray], val: Mapping[str, np.ndarray] | None = None,
                 *, batch_size: int = 32, max_epochs: int = 100, patience: int | None = 20,
                 monitor: str = "val/objective", seed: int = 0, enable_progress_bar: bool = False,
                 num_threads: int | None = None, logger: Any = False) -> dict[str, float]:
    """Fit ``module`` with Lightning on in-memory arrays (queries on axis 0); return the history summary.
    With ``val`` the best epoch by ``monitor`` is restored (early stop: ``patience`` epochs), else the last.
    """
    for message in (".*does not have many workers.*", ".*The number of training batches.*",
                    ".*`isinstance\\(treespec, LeafSpec\\)`.*"):
        warnings.filterwarnings("ignore", message=message)
    if num_threads:
        torch.set_num_threads(int(num_threads))
    pl.seed_everything(seed, workers=True, verbose=False)
    train_loader = _loader(train, batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
    val_loader, keep, callbacks = None, None, []
    if val is not None:
        val_loader = _loader(val, max(int(np.asarray(val["mask"]).shape[0]), 1), shuffle=False)
        keep = KeepBest(monitor)
        callbacks.append(keep)
        if patience is not None and patience > 0:
            callbacks.append(pl.callbacks.EarlyStopping(monitor=monitor, mode="max", patience=patience))
    with quiet_lightning():
        trainer = pl.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=logger,
                             enable_checkpointing=False, enable_progress_bar=enable_progress_bar,
                             enable_model_summary=False, callbacks=callbacks, num_sanity_val_steps=0,
                             deterministic=True, log_every_n_steps=max(1, len(train_loader)))
        trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader)
    module.eval()
    out = {"epochs_run": float(trainer.current_epoch)}
    if keep is not None:
        out["best_epoch"] = float(keep.best_epoch)
        out[f"best_{monitor}"] = float(keep.best_value)
    return out
