"""Base class of the learned selectors: features -> standardisation -> a small torch module -> k.

Subclasses name their ``module_class``; this class does the rest: labels-free features
(:func:`~udcg_ltr.select.features.passage_features`) standardised on the training rows, the training
targets (``table[q, k]`` = UDCG of the top-k set, Eq. 4, and the oracle ``k``), Lightning training
(:func:`~udcg_ltr.select.nn.train_module`), inference, and the state for saving.

``n_seeds > 1`` trains that many modules from seeds ``seed, seed + 1, ...`` and averages their soft
outputs before deciding: on a few hundred training queries the seed alone moves the chosen k of
borderline queries, and the average is steadier. Train on *held-out* scores (:mod:`udcg_ltr.select.training`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np
import torch

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.base import RankedSlates, Selector, oracle_k, prefix_udcg
from udcg_ltr.select.features import DEFAULT_FEATURES, FeatureScaler, feature_names, passage_features
from udcg_ltr.select.nn import SelectorModule, as_tensors, train_module


class LearnedSelector(Selector):
    """Common configuration: features, temperature, gamma, ``max_k`` and the optimisation settings."""

    #: The torch module each seed trains.
    module_class: ClassVar[type[SelectorModule]]
    #: True when the module has a fixed number of positions (``max_k``, set from the training width).
    fixed_width: ClassVar[bool] = False

    def __init__(self, *, features: Sequence[str] = DEFAULT_FEATURES, extra_features: Sequence[str] = (),
                 temperature: float = 1.0, gamma: float = DEFAULT_GAMMA, max_k: int | None = None,
                 lr: float = 1e-2, weight_decay: float = 1e-3, batch_size: int = 32, max_epochs: int = 150,
                 patience: int | None = 30, monitor: str = "val/objective", seed: int = 0, n_seeds: int = 1,
                 enable_progress_bar: bool = False, num_threads: int | None = None):
        self.features, self.extra_features = list(features), list(extra_features)
        feature_names(self.features, self.extra_features)  # validates the names
        self.temperature, self.gamma = float(temperature), float(gamma)
        self.max_k = None if max_k is None else int(max_k)
        self.lr, self.weight_decay = float(lr), float(weight_decay)
        self.batch_size, self.max_epochs = int(batch_size), int(max_epochs)
        self.patience = None if patience is None else int(patience)
        self.monitor, self.seed = monitor, int(seed)
        if int(n_seeds) < 1:
            raise ValueError(f"n_seeds must be >= 1, got {n_seeds}")
        self.n_seeds = int(n_seeds)
        self.enable_progress_bar, self.num_threads = bool(enable_progress_bar), num_threads
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
        self.modules, histories = [], []
        for seed in range(self.seed, self.seed + self.n_seeds):
            torch.manual_seed(seed)  # the initial weights depend on the seed only
            module = self._build_module(self.n_features)
            histories.append(train_module(module, train, val_arrays, batch_size=self.batch_size,
                                          max_epochs=self.max_epochs, patience=self.patience, monitor=self.monitor,
                                          seed=seed, enable_progress_bar=self.enable_progress_bar,
                                          num_threads=self.num_threads))
            self.modules.append(module)
        self.history = {k: float(np.mean([h[k] for h in histories])) for k in histories[0]}
        return self

    @torch.no_grad()
    def soft_output(self, ranked: RankedSlates) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The modules' averaged soft output (see :meth:`SelectorModule.soft_output`) and the input batch."""
        if not self.modules:
            raise RuntimeError(f"{self.kind} selector is not trained: fit it or load it")
        batch = as_tensors(self.arrays(ranked))
        for module in self.modules:
            module.eval()
        return torch.stack([module.soft_output(batch) for module in self.modules]).mean(0), batch

    @torch.no_grad()
    def select(self, ranked: RankedSlates) -> np.ndarray:
        if not self.modules:
            raise RuntimeError(f"{self.kind} selector is not trained: fit it or load it")
        if len(ranked) == 0:
            return np.zeros(0, dtype=np.int64)
        soft, batch = self.soft_output(ranked)
        return self._clip(self.modules[0].k_from_soft(soft, batch).cpu().numpy(), ranked)

    def inclusion(self, ranked: RankedSlates) -> np.ndarray:
        """Averaged soft output: per-passage inclusion weights (gate) or ``p(k)`` (k-classifier)."""
        return self.soft_output(ranked)[0].numpy()

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
        for j in range(self.n_seeds):
            prefix = f"modules.{j}."
            weights = {k[len(prefix):]: torch.as_tensor(np.asarray(v)) for k, v in state.items()
                       if k.startswith(prefix)}
            if not weights:
                raise ValueError(f"saved state has no weights for module {j} of {self.n_seeds}")
            module = self._build_module(self.n_features)
            module.load_state_dict(weights)
            module.eval()
            self.modules.append(module)
