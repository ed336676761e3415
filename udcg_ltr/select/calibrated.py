"""The calibrated expected-UDCG selector: a ranker-free relevance prior, calibrated on the deployed ranker.

The Bayes rule of :mod:`udcg_ltr.select.expected` needs *calibrated* ``pi_i``, but a reranker is
over-confident on its own training queries and cross-fitted rerankers rank differently from the full model
(annotated SQuAD: an answer-bearing passage first for 23% of the train questions with the 2-fold models,
67% of test with the full one). So the **prior** (train rows) is a logit ``z_i = h(x_i)`` of *ranker-free*
``extra_features`` only (retriever score, reader probes; a constant without them), and the
**calibration** is a Platt-style L2 logistic regression on the val rows ranked by the deployed ranker::

    pi_i = sigmoid( w_0 z_i + sum_f w_f phi_f(i) + b )      (phi: its list features calibration_features)

with magnitudes ``m_i = 1 - P(NO-RESPONSE | q, p_i)``, exactly ``|u_i|`` by Eq. 2, when ``p_no_response``
is an extra feature (else the prior's magnitude head). The in-sample val UDCG is optimistic, so ``fit`` also
reports a **cross-fitted** ``val/udcg`` (each of ``calibration_folds`` folds decided by the others' fit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from udcg_ltr.metrics.udcg import sigmoid
from udcg_ltr.select.base import RankedSlates, udcg_of_kept
from udcg_ltr.select.expected import MAX_EXACT_K, ExpectedUtilitySelector, expected_prefix_udcg
from udcg_ltr.select.features import FeatureScaler, feature_names, passage_features

#: Default list features of the deployed ranker's scores that the calibration reads.
CALIBRATION_FEATURES = ("score", "gap_top", "inv_rank")


def fit_calibration(x: np.ndarray, y: np.ndarray, mask: np.ndarray, c: float) -> tuple[FeatureScaler, np.ndarray, float]:
    """Standardise ``x [Q, W, F]`` on the real passages, then fit ``P(y = 1)`` by L2 logistic regression
    (scikit-learn, lbfgs): ``(scaler, coef, intercept)``; a constant when ``y`` has one class."""
    scaler = FeatureScaler().fit(x, mask)
    y = y[mask]
    if y.min() == y.max():  # one class only: the calibrated probability is that class (clipped in use)
        p = float(np.clip(y.mean(), 1e-3, 1 - 1e-3))
        return scaler, np.zeros(x.shape[-1]), float(np.log(p / (1 - p)))
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=float(c), max_iter=5000).fit(scaler.transform(x, mask)[mask], y)
    return scaler, model.coef_[0].astype(np.float64), float(model.intercept_[0])


def calibrated_probability(x: np.ndarray, mask: np.ndarray, scaler: FeatureScaler, coef: np.ndarray,
                           intercept: float) -> np.ndarray:
    """``[Q, W]`` ``pi_i = sigmoid(w . x_i + b)`` on the standardised inputs (0 on padding)."""
    return np.where(mask, sigmoid(scaler.transform(x, mask) @ coef + intercept), 0.0)


class CalibratedUtilitySelector(ExpectedUtilitySelector):
    """Calibrated expected-UDCG selector (module doc); ``fit`` requires the ``val`` rows. ``features`` (ranker
    list features inside the prior) default to none: the ranker's train-split scores are not trustworthy."""

    kind = "calibrated_utility"
    #: ``fit`` learns from the val rows: report a cross-fitted val UDCG (module doc).
    fits_on_val = True

    def __init__(self, *, features: Sequence[str] = (), calibration_features: Sequence[str] = CALIBRATION_FEATURES,
                 calibration_c: float = 1.0, calibration_folds: int = 5, exact_magnitude: bool = True, **kwargs: Any):
        super().__init__(features=features, **kwargs)
        self.calibration_features = list(calibration_features)
        feature_names(self.calibration_features)  # validates the names
        if float(calibration_c) <= 0:
            raise ValueError(f"calibration_c must be > 0, got {calibration_c}")
        if int(calibration_folds) < 2:
            raise ValueError(f"calibration_folds must be >= 2, got {calibration_folds}")
        self.calibration_c, self.calibration_folds = float(calibration_c), int(calibration_folds)
        self.exact_magnitude = bool(exact_magnitude)
        self.calibration_scaler = FeatureScaler()
        self.calibration_coef: np.ndarray | None = None
        self.calibration_intercept = 0.0
        self.crossfit_metrics: dict[str, float] = {}

    @property
    def has_prior(self) -> bool:
        return self.n_features > 0

    @torch.no_grad()
    def _prior(self, ranked: RankedSlates) -> tuple[np.ndarray, np.ndarray]:
        """``(z, m)``, both ``[Q, W]``: the prior's relevance logit and magnitude, averaged over seeds."""
        if not self.has_prior:
            return np.zeros(ranked.mask.shape), np.full(ranked.mask.shape, 0.5)
        modules, batch = self._inference(ranked)
        z, m = zip(*(module.predictions(batch["x"]) for module in modules))
        return torch.stack(z).mean(0).double().numpy(), torch.stack(m).mean(0).double().numpy()

    def _calibration_inputs(self, ranked: RankedSlates, z: np.ndarray) -> np.ndarray:
        """``[Q, W, 1 + F]``: the prior logit (when there is a prior), then the ranker's list features."""
        phi = passage_features(ranked, self.calibration_features, temperature=self.temperature)
        return np.concatenate([z[:, :, None], phi], axis=-1) if self.has_prior else phi

    def _magnitude(self, ranked: RankedSlates, prior_magnitude: np.ndarray) -> np.ndarray:
        if self.exact_magnitude and "p_no_response" in ranked.extra:
            return np.clip(1.0 - ranked.extra["p_no_response"], 0.0, 1.0)  # |u_i| exactly (Eq. 2)
        return prior_magnitude

    def _expected_udcg(self, ranked: RankedSlates, relevance_prob: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
        """``[Q, max_k + 1]`` expected UDCG of every prefix; ``-1`` where ``k`` exceeds the row's passages."""
        max_k = min(self.max_k or MAX_EXACT_K, MAX_EXACT_K)
        e = expected_prefix_udcg(torch.as_tensor(relevance_prob), torch.as_tensor(magnitude),
                                 torch.as_tensor(ranked.mask), max_k=max_k, gamma=self.gamma).numpy()
        return np.where(np.arange(e.shape[1])[None, :] <= ranked.n_real[:, None], e, -1.0)

    def fit(self, ranked: RankedSlates, *, gamma=None, val: RankedSlates | None = None):
        """Prior on ``ranked`` (train rows; ``val`` picks its best epoch), calibration on ``val``."""
        if val is None or len(val) == 0:
            raise ValueError("a calibrated_utility selector needs calibration rows ranked by the deployed ranker: "
                             "pass val scores and slates (fit_selector(kind, train_scores, train_slates, val_scores, "
                             "val_slates)); the train rows only teach the ranker-free prior")
        if val.utility is None:
            raise ValueError("calibrated_utility: the val rows need gold utilities (Eq. 2) to fit the calibration")
        if gamma is not None:
            self.gamma = float(gamma)
        if self.max_k is None:
            self.max_k = min(ranked.width, MAX_EXACT_K)
        if self.has_prior:
            super().fit(ranked, gamma=gamma, val=val)
        else:
            self.modules, self.history = [], {}
        z, prior_m = self._prior(val)
        x = self._calibration_inputs(val, z)
        y = (val.utility > 0).astype(np.float64)
        self.calibration_scaler, self.calibration_coef, self.calibration_intercept = fit_calibration(
            x, y, val.mask, self.calibration_c)
        self.crossfit_metrics = self._crossfit(val, x, y, self._magnitude(val, prior_m))
        self.history |= {f"calibration/{k.split('/', 1)[1]}": v for k, v in self.crossfit_metrics.items()}
        return self

    def _crossfit(self, val: RankedSlates, x: np.ndarray, y: np.ndarray, magnitude: np.ndarray) -> dict[str, float]:
        """Val metrics with each fold's rows decided by a calibration fitted on the other folds."""
        folds = min(self.calibration_folds, len(val))
        if folds < 2:
            return {}
        order = np.random.default_rng(self.training.seed).permutation(len(val))
        k = np.zeros(len(val), dtype=np.int64)
        for held in np.array_split(order, folds):
            rest = np.setdiff1d(order, held)
            calibration = fit_calibration(x[rest], y[rest], val.mask[rest], self.calibration_c)
            pi = calibrated_probability(x[held], val.mask[held], *calibration)
            k[held] = self._expected_udcg(val.subset(held), pi, magnitude[held]).argmax(axis=1)
        udcg = udcg_of_kept(val.utility, val.mask, k, gamma=self.gamma)
        return {"val/udcg": float(udcg.mean()), "val/mean_k": float(k.mean()), "val/k0_rate": float((k == 0).mean())}

    def _calibrated(self, ranked: RankedSlates) -> tuple[np.ndarray, np.ndarray]:
        """``(pi, m)``, both ``[Q, W]``: calibrated relevance probabilities and the magnitudes the decision uses."""
        if self.calibration_coef is None:
            raise RuntimeError("calibrated_utility selector is not fitted: fit it or load it")
        z, prior_m = self._prior(ranked)  # the prior's modules run once for both
        pi = calibrated_probability(self._calibration_inputs(ranked, z), ranked.mask, self.calibration_scaler,
                                    self.calibration_coef, self.calibration_intercept)
        return pi, self._magnitude(ranked, prior_m)

    def relevance_probability(self, ranked: RankedSlates) -> np.ndarray:
        """``[Q, W]`` calibrated ``pi_i`` of the ranked passages (0 on padding)."""
        return self._calibrated(ranked)[0]

    def expected_udcg(self, ranked: RankedSlates) -> np.ndarray:
        """``[Q, max_k + 1]``: ``E[UDCG(top-k)]`` under the calibrated model (-1 past a row's passages)."""
        return self._expected_udcg(ranked, *self._calibrated(ranked))

    def soft_output(self, ranked: RankedSlates):
        """``(E[UDCG(top-k)] [Q, max_k + 1], {})``: the soft output of this kind (not the prior's modules')."""
        return torch.as_tensor(self.expected_udcg(ranked)), {}

    def select(self, ranked: RankedSlates) -> np.ndarray:
        if len(ranked) == 0:
            return np.zeros(0, dtype=np.int64)
        return self._clip(self.expected_udcg(ranked).argmax(axis=1), ranked)

    def get_state(self) -> dict[str, np.ndarray]:
        """The prior's state (when it has features) plus ``calibration.{coef,intercept,mean,std}``."""
        if self.calibration_coef is None:
            raise RuntimeError("calibrated_utility selector is not fitted: nothing to save")
        return {**(super().get_state() if self.has_prior else {}),
                "calibration.coef": self.calibration_coef.astype(np.float64),
                "calibration.intercept": np.array([self.calibration_intercept], dtype=np.float64),
                "calibration.mean": self.calibration_scaler.mean.astype(np.float64),
                "calibration.std": self.calibration_scaler.std.astype(np.float64)}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        if self.has_prior:
            super().set_state(state)
        else:
            self.modules = []
        self.calibration_coef = np.asarray(state["calibration.coef"], dtype=np.float64)
        self.calibration_intercept = float(np.asarray(state["calibration.intercept"]).reshape(-1)[0])
        self.calibration_scaler = FeatureScaler(state["calibration.mean"], state["calibration.std"])
