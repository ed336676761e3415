"""The learned selectors' machinery: tensors, the smooth UDCG of a soft kept set, Lightning training and
:class:`LearnedSelector` (features -> standardisation -> a small torch module -> k).

**Soft UDCG** (the gate's ``soft_mask`` objective): passage ``i`` enters with weight ``w_i in [0, 1]``::

    UDCG_soft = sigmoid( (sum_i w_i u_i+ + gamma sum_i w_i u_i-) / max(n, 1) ),   n = sum_i w_i

exactly Eq. 4 on hard 0/1 weights (0.5 for the empty set); ``max(n, 1)`` keeps it continuous as every
weight goes to 0 (dividing by ``n`` alone would keep the logit at the mean utility of an almost empty
context). :class:`LearnedSelector` trains on ``table[q, k]`` (UDCG of the top-k set, Eq. 4) and the oracle
``k``; ``n_seeds > 1`` averages the soft outputs of modules seeded ``seed, seed + 1, ...``: on a few
hundred training queries the seed alone moves the chosen k of borderline queries.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from udcg_ltr.fit.svmrank import quiet_lightning
from udcg_ltr.metrics.torch_ops import udcg_logit_torch
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.base import RankedSlates, Selector, oracle_k, prefix_udcg
from udcg_ltr.select.features import PASSAGE_FEATURES, FeatureScaler, feature_names, passage_features


def soft_udcg(utility: torch.Tensor, weights: torch.Tensor, *, gamma: float = DEFAULT_GAMMA) -> torch.Tensor:
    """``sigmoid((sum w u+ + gamma sum w u-) / max(sum w, 1))`` per query (module doc): Eq. 4 on a soft kept set."""
    n = weights.sum(-1)
    # udcg_logit_torch's soft-mask logit divides by n: rescale to a division by max(n, 1)
    return torch.sigmoid(udcg_logit_torch(utility, weights, gamma=gamma) * (n / n.clamp(min=1.0)))


def mlp(n_in: int, n_out: int, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0) -> torch.nn.Module:
    """A linear map (``hidden=0`` or ``n_layers=0``) or an MLP with ``n_layers`` GELU hidden layers."""
    if hidden <= 0 or n_layers <= 0:
        return torch.nn.Linear(n_in, n_out)
    layers: list[torch.nn.Module] = []
    for width in [n_in] + [hidden] * (n_layers - 1):
        layers += [torch.nn.Linear(width, hidden), torch.nn.GELU()]
        if dropout > 0:
            layers.append(torch.nn.Dropout(dropout))
    return torch.nn.Sequential(*layers, torch.nn.Linear(hidden, n_out))


def as_tensors(arrays: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Arrays as tensors: booleans stay bool, integers become int64, everything else float32."""
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    return {k: torch.as_tensor(v, dtype=torch.bool if v.dtype == bool else torch.long
                               if np.issubdtype(v.dtype, np.integer) else torch.float32)
            for k, v in arrays.items()}


def _loader(arrays: Mapping[str, np.ndarray], batch_size: int, **kwargs: Any) -> DataLoader:
    """Batches of queries: dicts of aligned tensors (``x [Q, W, F]``, ``mask``, ``utility``, ``table``...)."""
    tensors = as_tensors(arrays)
    sizes = {v.shape[0] for v in tensors.values()}
    if len(sizes) != 1:
        raise ValueError(f"tensors disagree on the number of queries: {sizes}")
    return DataLoader(range(sizes.pop()), batch_size=batch_size, **kwargs,
                      collate_fn=lambda rows: {k: v[rows] for k, v in tensors.items()})


@dataclass(frozen=True)
class SelectorOptim:
    """AdamW's settings for a selector's module: learning rate ``lr`` and ``weight_decay``."""

    lr: float = 1e-2
    weight_decay: float = 1e-3

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", float(self.lr))
        object.__setattr__(self, "weight_decay", float(self.weight_decay))


@dataclass(frozen=True)
class SelectorTraining:
    """How a learned selector's modules are trained (:func:`train_module`): ``batch_size`` queries per step, at
    most ``max_epochs``, early stop after ``patience`` epochs without a better ``monitor`` value (None: never),
    ``n_seeds`` modules seeded ``seed, seed + 1, ...`` (their soft outputs averaged), Lightning's progress bar,
    torch's ``num_threads``."""

    batch_size: int = 32
    max_epochs: int = 150
    patience: int | None = 30
    monitor: str = "val/objective"
    seed: int = 0
    n_seeds: int = 1
    enable_progress_bar: bool = False
    num_threads: int | None = None

    def __post_init__(self) -> None:
        if int(self.n_seeds) < 1:
            raise ValueError(f"n_seeds must be >= 1, got {self.n_seeds}")
        for name in ("batch_size", "max_epochs", "seed", "n_seeds"):
            object.__setattr__(self, name, int(getattr(self, name)))
        object.__setattr__(self, "patience", None if self.patience is None else int(self.patience))
        object.__setattr__(self, "enable_progress_bar", bool(self.enable_progress_bar))


class SelectorModule(pl.LightningModule):
    """Base LightningModule: subclasses implement ``objective(batch) -> [Q]`` (to maximise),
    ``soft_output(batch)`` (averageable across modules: inclusion weights or class probabilities) and
    ``k_from_soft(soft, batch)``. ``val/udcg`` is the mean ``table[q, k_q]`` (exact UDCG of the hard
    selection), ``val/objective`` the smooth objective (without any training-only bonus)."""

    def __init__(self, optim: SelectorOptim | None = None):
        super().__init__()
        self.optim = optim or SelectorOptim()

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
        return torch.optim.AdamW(self.parameters(), lr=self.optim.lr, weight_decay=self.optim.weight_decay)


class KeepBest(pl.Callback):
    """Copies the module's state when the monitored value improves; restores the best at the end of fit."""

    def __init__(self, monitor: str, min_delta: float = 0.0):
        self.monitor, self.min_delta = monitor, float(min_delta)
        self.best_value, self.best_epoch = -float("inf"), -1
        self.state: dict[str, torch.Tensor] | None = None

    def on_validation_end(self, trainer, module):
        value = trainer.callback_metrics.get(self.monitor)
        if value is not None and float(value) > self.best_value + self.min_delta and not trainer.sanity_checking:
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
    With ``val`` rows, the best epoch by ``monitor`` is restored (early stop: ``patience``), else the last."""
    for message in (".*does not have many workers.*", ".*The number of training batches.*",
                    ".*`isinstance\\(treespec, LeafSpec\\)`.*"):
        warnings.filterwarnings("ignore", message=message)
    if num_threads:
        torch.set_num_threads(int(num_threads))
    pl.seed_everything(seed, workers=True, verbose=False)
    train_loader = _loader(train, batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
    val_loader, keep, callbacks = None, None, []
    n_val = 0 if val is None else int(np.asarray(val["mask"]).shape[0])
    if n_val:  # else nothing to pick a best epoch by (nor to stop early on): the last epoch's state stays
        val_loader = _loader(val, n_val, shuffle=False)
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


class LearnedSelector(Selector):
    """Common configuration: features, temperature, gamma, ``max_k``, the module's ``optim``
    (:class:`SelectorOptim`) and its ``training`` (:class:`SelectorTraining`)."""

    #: The torch module each seed trains.
    module_class: ClassVar[type[SelectorModule]]
    #: True when the module has a fixed number of positions (``max_k``, set from the training width).
    fixed_width: ClassVar[bool] = False
    setting_groups: ClassVar[Mapping[str, type]] = {"optim": SelectorOptim, "training": SelectorTraining}

    def __init__(self, *, features: Sequence[str] = PASSAGE_FEATURES, extra_features: Sequence[str] = (),
                 temperature: float = 1.0, gamma: float = DEFAULT_GAMMA, max_k: int | None = None,
                 optim: SelectorOptim | None = None, training: SelectorTraining | None = None):
        self.features, self.extra_features = list(features), list(extra_features)
        feature_names(self.features, self.extra_features)  # validates the names
        self.temperature, self.gamma = float(temperature), float(gamma)
        self.max_k = None if max_k is None else int(max_k)
        self.optim, self.training = optim or SelectorOptim(), training or SelectorTraining()
        self.scaler = FeatureScaler()
        self.modules: list[SelectorModule] = []
        self.history: dict[str, float] = {}

    @property
    def module(self) -> SelectorModule | None:
        """The first trained module (the only one unless ``n_seeds > 1``)."""
        return self.modules[0] if self.modules else None

    def _build_module(self, n_features: int) -> SelectorModule:
        """A new :attr:`module_class`, its keyword arguments read from the attributes of the same names."""
        names = [name for name in inspect.signature(self.module_class).parameters if name != "n_features"]
        return self.module_class(n_features, **{name: getattr(self, name) for name in names})

    @property
    def n_features(self) -> int:
        return len(feature_names(self.features, self.extra_features))

    def arrays(self, ranked: RankedSlates, *, targets: bool = False, fit_scaler: bool = False) -> dict[str, np.ndarray]:
        """Model inputs ``x [Q, W, F]`` (standardised) and ``mask``; with ``targets`` also ``utility``,
        ``table [Q, W + 1]`` (UDCG of each prefix) and ``oracle_k``."""
        if self.fixed_width and self.max_k is not None:
            ranked = ranked.resized(self.max_k)  # the module's positions
        x = passage_features(ranked, self.features, extra_features=self.extra_features, temperature=self.temperature)
        if fit_scaler:
            self.scaler.fit(x, ranked.mask)
        out = {"x": self.scaler.transform(x, ranked.mask).astype(np.float32), "mask": ranked.mask}
        if targets:
            if ranked.utility is None:
                raise ValueError(f"training a {self.kind} selector needs the gold utilities (Eq. 2)")
            table = prefix_udcg(ranked.utility, ranked.mask, gamma=self.gamma)
            cap = self.max_k if self.max_k is not None else ranked.width
            valid = np.arange(table.shape[1])[None, :] <= np.minimum(ranked.n_real, cap)[:, None]
            out["utility"] = ranked.utility.astype(np.float32)
            out["table"] = np.where(valid, table, 0.0).astype(np.float32)
            out["oracle_k"] = oracle_k(ranked.utility, ranked.mask, gamma=self.gamma, max_k=cap)
        return out

    def fit(self, ranked: RankedSlates, *, gamma: float | None = None, val: RankedSlates | None = None) -> LearnedSelector:
        """Train on ``ranked`` (held-out scores + gold utilities); ``val`` picks the best epoch."""
        if gamma is not None:
            self.gamma = float(gamma)
        if self.max_k is None and self.fixed_width:
            self.max_k = ranked.width
        train = self.arrays(ranked, targets=True, fit_scaler=True)
        val_arrays = None if val is None or len(val) == 0 else self.arrays(val, targets=True)
        t = self.training
        options = dict(batch_size=t.batch_size, max_epochs=t.max_epochs, patience=t.patience, monitor=t.monitor,
                       enable_progress_bar=t.enable_progress_bar, num_threads=t.num_threads)
        self.modules, histories = [], []
        for seed in range(t.seed, t.seed + t.n_seeds):
            torch.manual_seed(seed)  # the initial weights depend on the seed only
            module = self._build_module(self.n_features)
            histories.append(train_module(module, train, val_arrays, seed=seed, **options))
            self.modules.append(module)
        self.history = {k: float(np.mean([h[k] for h in histories])) for k in histories[0]}
        return self

    def _inference(self, ranked: RankedSlates) -> tuple[list[SelectorModule], dict[str, torch.Tensor]]:
        """The trained modules in eval mode (no dropout, wherever they were trained) and the input batch."""
        if not self.modules:
            raise RuntimeError(f"{self.kind} selector is not trained: fit it or load it")
        return [module.eval() for module in self.modules], as_tensors(self.arrays(ranked))

    @torch.no_grad()
    def soft_output(self, ranked: RankedSlates) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The modules' averaged soft output (see :meth:`SelectorModule.soft_output`: per-passage inclusion
        weights for the gate, ``p(k)`` for the k-classifier) and the input batch."""
        modules, batch = self._inference(ranked)
        return torch.stack([module.soft_output(batch) for module in modules]).mean(0), batch

    @torch.no_grad()
    def select(self, ranked: RankedSlates) -> np.ndarray:
        if not self.modules:
            raise RuntimeError(f"{self.kind} selector is not trained: fit it or load it")
        if len(ranked) == 0:
            return np.zeros(0, dtype=np.int64)
        soft, batch = self.soft_output(ranked)
        return self._clip(self.modules[0].k_from_soft(soft, batch).cpu().numpy(), ranked)

    def get_state(self) -> dict[str, np.ndarray]:
        """``modules.{j}.{parameter}`` (float32) for every seed's module, ``scaler.mean`` / ``scaler.std``."""
        if not self.modules or self.scaler.mean is None:
            raise RuntimeError(f"{self.kind} selector is not trained: nothing to save")
        state = {f"modules.{j}.{k}": v.detach().cpu().float().numpy()
                 for j, module in enumerate(self.modules) for k, v in module.state_dict().items()}
        state["scaler.mean"] = self.scaler.mean.astype(np.float64)
        state["scaler.std"] = self.scaler.std.astype(np.float64)
        return state

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self.scaler = FeatureScaler(state["scaler.mean"], state["scaler.std"])
        self.modules = []
        for j in range(self.training.n_seeds):
            prefix = f"modules.{j}."
            weights = {k[len(prefix):]: torch.as_tensor(np.asarray(v)) for k, v in state.items()
                       if k.startswith(prefix)}
            if not weights:
                raise ValueError(f"saved state has no weights for module {j} of {self.training.n_seeds}")
            module = self._build_module(self.n_features)
            module.load_state_dict(weights)
            self.modules.append(module)
