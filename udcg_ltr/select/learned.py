"""Base class of the learned selectors: features -> standardisation -> a small torch module -> k.

Subclasses (:class:`~udcg_ltr.select.gate.GateSelector`,
:class:`~udcg_ltr.select.kclassifier.KClassifierSelector`) provide ``_build_module(n_features)``;
this class does the rest: labels-free features of the ranked rows
(:func:`~udcg_ltr.select.features.passage_features`), a :class:`~udcg_ltr.select.features.FeatureScaler`
fitted on the training rows, the training targets (``table[q, k]`` = UDCG of the top-k set,
Eq. 4, :func:`~udcg_ltr.select.base.prefix_udcg`, and the oracle ``k``), Lightning training
(:func:`~udcg_ltr.select.nn.train_module`), inference, and the state for saving (scaler + module
weights as flat float32 arrays).

``n_seeds > 1`` trains that many modules from seeds ``seed, seed + 1, ...`` (same data, same
validation rule) and averages their soft outputs before deciding (the gates' inclusion weights, or
the k-classifier's ``p(k)``): on a few hundred training queries the seed alone moves the chosen k
of borderline queries, and the average is steadier.

Train on *held-out* scores: a reranker's scores on its own training queries are over-confident,
so features computed from them do not look like test-time features (see
:mod:`udcg_ltr.select.training`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.base import RankedSlates, Selector, oracle_k, prefix_udcg
from udcg_ltr.select.features import DEFAULT_FEATURES, FeatureScaler, feature_names, passage_features
from udcg_ltr.select.nn import SelectorModule, as_tensors, train_module

TRAINING_KEYS = ("batch_size", "max_epochs", "patience", "monitor", "seed", "enable_progress_bar", "num_threads")


class LearnedSelector(Selector):
    """Common configuration: features, temperature, gamma, ``max_k`` and the optimisation settings."""

    def __init__(self, *, features: Sequence[str] = DEFAULT_FEATURES, extra_features: Sequence[str] = (),
                 temperature: float = 1.0, gamma: float = DEFAULT_GAMMA, max_k: int | None = None,
                 lr: float = 1e-2, weight_decay: float = 1e-3, batch_size: int = 32, max_epochs: int = 150,
                 patience: int | None = 30, monitor: str = "val/objective", seed: int = 0, n_seeds: int = 1,
                 enable_progress_bar: bool = False, num_threads: int | None = None):
        self.features = list(features)
        self.extra_features = list(extra_features)
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

    # ---- to implement ------------------------------------------------------------------------
    def _build_module(self, n_features: int) -> SelectorModule:
        raise NotImplementedError

    def _module_config(self) -> dict[str, Any]:
        raise NotImplementedError

    # ---- data ----------------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return len(feature_names(self.features, self.extra_features))

    def _width(self, ranked: RankedSlates) -> int:
        return ranked.width

    def _fit_or_align(self, ranked: RankedSlates) -> RankedSlates:
        """Rows cut or padded to the width the module expects (only the k-classifier has one)."""
        w = self._width(ranked)
        if w == ranked.width:
            return ranked
        if w < ranked.width:
            return RankedSlates(ranked.scores[:, :w], ranked.mask[:, :w],
                                None if ranked.utility is None else ranked.utility[:, :w],
                                {k: v[:, :w] for k, v in ranked.extra.items()}, ranked.order, ranked.qids)
        pad = w - ranked.width
        low = ranked.scores.min(axis=1, keepdims=True) if ranked.width else np.zeros((len(ranked), 1))
        grow = lambda a, fill: np.concatenate([a, np.broadcast_to(fill, (a.shape[0], pad))], axis=1)  # noqa: E731
        return RankedSlates(grow(ranked.scores, low), grow(ranked.mask, False),
                            None if ranked.utility is None else grow(ranked.utility, 0.0),
                            {k: grow(v, 0.0) for k, v in ranked.extra.items()}, ranked.order, ranked.qids)

    def arrays(self, ranked: RankedSlates, *, targets: bool = False, fit_scaler: bool = False) -> dict[str, np.ndarray]:
        """Model inputs ``x [Q, W, F]`` (standardised) and ``mask``; with ``targets`` also ``utility``,
        ``table [Q, W + 1]`` (UDCG of each prefix) and ``oracle_k``."""
        ranked = self._fit_or_align(ranked)
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

    # ---- fit / select ----------------------------------------------------------------------------
    def fit(self, ranked: RankedSlates, *, gamma: float | None = None, val: RankedSlates | None = None) -> LearnedSelector:
        """Train on ``ranked`` (held-out scores + gold utilities); ``val`` picks the best epoch."""
        if gamma is not None:
            self.gamma = float(gamma)
        if self.max_k is None and isinstance(self, _FixedWidth):
            self.max_k = ranked.width
        train = self.arrays(ranked, targets=True, fit_scaler=True)
        val_arrays = None if val is None or len(val) == 0 else self.arrays(val, targets=True)
        self.modules, histories = [], []
        for j in range(self.n_seeds):
            seed = self.seed + j
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
        outs = []
        for module in self.modules:
            module.eval()
            outs.append(module.soft_output(batch))
        return torch.stack(outs).mean(0), batch

    @torch.no_grad()
    def select(self, ranked: RankedSlates) -> np.ndarray:
        if not self.modules:
            raise RuntimeError(f"{self.kind} selector is not trained: fit it or load it")
        if len(ranked) == 0:
            return np.zeros(0, dtype=np.int64)
        soft, batch = self.soft_output(ranked)
        k = self.modules[0].k_from_soft(soft, batch).cpu().numpy()
        return self._clip(k, ranked)

    def inclusion(self, ranked: RankedSlates) -> np.ndarray:
        """Averaged soft output: per-passage inclusion weights (gate) or ``p(k)`` (k-classifier)."""
        return self.soft_output(ranked)[0].numpy()

    # ---- persistence ---------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        return {"features": list(self.features), "extra_features": list(self.extra_features),
                "temperature": self.temperature, "gamma": self.gamma, "max_k": self.max_k, "lr": self.lr,
                "weight_decay": self.weight_decay, "batch_size": self.batch_size, "max_epochs": self.max_epochs,
                "patience": self.patience, "monitor": self.monitor, "seed": self.seed, "n_seeds": self.n_seeds,
                "enable_progress_bar": self.enable_progress_bar, "num_threads": self.num_threads,
                **self._module_config()}

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


class _FixedWidth:
    """Marker: the selector's module has a fixed number of positions (``max_k`` set from the training width)."""


__all__ = ["LearnedSelector", "TRAINING_KEYS"]
