"""The calibrated expected-UDCG selector: a ranker-free relevance prior, calibrated on the deployed ranker.

The plug-in Bayes rule of :mod:`udcg_ltr.select.expected` keeps ``argmax_k E[UDCG(top-k)]``
and needs *calibrated* relevance probabilities ``pi_i`` for the passages the deployed ranker puts
on top. Learning them from the ranker's scores needs held-out scores of the deployed model on many
training queries, which a reranker fine-tuned on the same small split cannot give: its scores on
its own training queries are over-confident, and cross-fitted rerankers (trained on a fraction of
the split) rank differently from the full model (on the annotated SQuAD set the 2-fold models put
an answer-bearing passage first for 23% of the train questions, the full model for 67% of test).
So the model is split by what each part may learn from:

1. **Prior** (trained with Lightning on the ``train`` rows, :class:`~udcg_ltr.select.expected.UtilityModelModule`):
   ``z_i = h(x_i)``, a relevance logit from *ranker-free* per-passage arrays only
   (``extra_features``: the first-stage retriever's score and rank, the reader probes of
   :mod:`udcg_ltr.data.probes`), so it may learn from any annotated split, including the
   reranker's own training questions. With no ``extra_features`` the prior is a constant.
2. **Calibration** (Platt-style logistic regression, fitted on the ``val`` rows ranked by the
   deployed ranker)::

       pi_i = sigmoid( w_0 z_i + sum_f w_f phi_f(i) + b )

   with ``phi`` the deployed ranker's list features of :mod:`udcg_ltr.select.features`
   (``calibration_features``, by default the score, its gap to the top score and ``1 / rank``);
   L2-regularised with inverse strength ``calibration_c`` (scikit-learn's ``C``), inputs
   standardised on the val rows.
3. **Decision** (Eq. 4 in expectation, :func:`~udcg_ltr.select.expected.expected_prefix_udcg`):
   ``k = argmax_k E[UDCG(top-k)]`` with magnitudes ``m_i = 1 - P(NO-RESPONSE | q, p_i)``, exactly
   ``|u_i|`` by Eq. 2, when ``p_no_response`` is among the ``extra_features`` (a label-free reader
   probe), else the prior's magnitude head.

Because the calibration learns from the val rows, its in-sample val UDCG is optimistic: ``fit``
also computes a **cross-fitted** val UDCG (``calibration_folds`` folds of the val rows, each
scored by a calibration fitted on the others), which :func:`~udcg_ltr.select.training.fit_selector`
reports as ``val/udcg`` so that model selection compares it fairly with selectors that only
early-stop on val.
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
from udcg_ltr.select.nn import as_tensors

#: Default list features of the deployed ranker's scores that the calibration reads.
CALIBRATION_FEATURES = ("score", "gap_top", "inv_rank")


def _fit_logistic(x: np.ndarray, y: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    """L2 logistic regression (scikit-learn, lbfgs); ``(coef, intercept)``; a constant when ``y`` has one class."""
    if y.min() == y.max():  # one class only: the calibrated probability is that class (clipped in use)
        p = float(np.clip(y.mean(), 1e-3, 1 - 1e-3))
        return np.zeros(x.shape[1]), float(np.log(p / (1 - p)))
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=float(c), max_iter=5000).fit(x, y)
    return model.coef_[0].astype(np.float64), float(model.intercept_[0])


def fit_calibration(x: np.ndarray, y: np.ndarray, mask: np.ndarray, c: float) -> tuple[FeatureScaler, np.ndarray, float]:
    """Standardise ``x [Q, W, F]`` on the real passages, then fit ``P(y = 1)``: ``(scaler, coef, intercept)``."""
    scaler = FeatureScaler().fit(x, mask)
    coef, intercept = _fit_logistic(scaler.transform(x, mask)[mask], y[mask], c)
    return scaler, coef, intercept


def calibrated_probability(x: np.ndarray, mask: np.ndarray, scaler: FeatureScaler, coef: np.ndarray,
                           intercept: float) -> np.ndarray:
    """``[Q, W]`` ``pi_i = sigmoid(w . x_i + b)`` on the standardised inputs (0 on padding)."""
    return np.where(mask, sigmoid(scaler.transform(x, mask) @ coef + intercept), 0.0)


class CalibratedUtilitySelector(ExpectedUtilitySelector):
    """Calibrated expected-UDCG selector (module doc).

    ``extra_features`` feed the ranker-free prior (trained on the ``train`` rows like
    :class:`~udcg_ltr.select.expected.ExpectedUtilitySelector`, with its ``hidden``, ``lr`` ...);
    ``calibration_features`` (list features of the deployed ranker's scores), ``calibration_c`` and
    ``calibration_folds`` configure the calibration on the ``val`` rows, which ``fit`` requires.
    ``features`` (ranker list features inside the prior) default to none: the prior must not depend
    on the ranker whose train-split scores are not trustworthy.
    """

    kind = "calibrated_utility"
    #: ``fit`` learns from the val rows: report a cross-fitted val UDCG (module doc).
    fits_on_val = True

    def __init__(self, *, features: Sequence[str] = (), calibration_features: Sequence[str] = CALIBRATION_FEATURES,
                 calibration_c: float = 1.0, calibration_folds: int = 5, exact_magnitude: bool = True,
                 **kwargs: Any):
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

    # ---- the two stages ----------------------------------------------------------------------------
    @property
    def has_prior(self) -> bool:
        return self.n_features > 0

    @torch.no_grad()
    def _prior(self, ranked: RankedSlates) -> tuple[np.ndarray, np.ndarray]:
        """``(z, m)``, both ``[Q, W]``: the prior's relevance logit and magnitude, averaged over seeds."""
        shape = ranked.mask.shape
        if not self.has_prior:
            return np.zeros(shape), np.full(shape, 0.5)
        batch = as_tensors(self.arrays(ranked))
        logits, magnitudes = [], []
        for module in self.modules:
            module.eval()
            z, m = module.predictions(batch["x"])
            logits.append(z)
            magnitudes.append(m)
        return torch.stack(logits).mean(0).double().numpy(), torch.stack(magnitudes).mean(0).double().numpy()

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
        valid = np.arange(e.shape[1])[None, :] <= ranked.n_real[:, None]
        return np.where(valid, e, -1.0)

    # ---- fit / select ----------------------------------------------------------------------------------
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
        magnitude = self._magnitude(val, prior_m)
        self.calibration_scaler, self.calibration_coef, self.calibration_intercept = fit_calibration(
            x, y, val.mask, self.calibration_c)
        self.crossfit_metrics = self._crossfit(val, x, y, magnitude)
        self.history = {**self.history, **{f"calibration/{k.split('/', 1)[1]}": v
                                           for k, v in self.crossfit_metrics.items()}}
        return self

    def _crossfit(self, val: RankedSlates, x: np.ndarray, y: np.ndarray, magnitude: np.ndarray) -> dict[str, float]:
        """Val metrics with each fold's rows decided by a calibration fitted on the other folds."""
        n = len(val)
        folds = min(self.calibration_folds, n)
        if folds < 2:
            return {}
        order = np.random.default_rng(self.seed).permutation(n)
        k = np.zeros(n, dtype=np.int64)
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
        """``(E[UDCG(top-k)] [Q, max_k + 1], {})``: what :meth:`inclusion` returns for this kind."""
        return torch.as_tensor(self.expected_udcg(ranked)), {}

    def select(self, ranked: RankedSlates) -> np.ndarray:
        if len(ranked) == 0:
            return np.zeros(0, dtype=np.int64)
        return self._clip(self.expected_udcg(ranked).argmax(axis=1), ranked)

    # ---- persistence -------------------------------------------------------------------------------------
    def _module_config(self) -> dict[str, Any]:
        return {**super()._module_config(), "calibration_features": list(self.calibration_features),
                "calibration_c": self.calibration_c, "calibration_folds": self.calibration_folds,
                "exact_magnitude": self.exact_magnitude}

    def get_state(self) -> dict[str, np.ndarray]:
        """The prior's state (when it has features) plus ``calibration.{coef,intercept,mean,std}``."""
        if self.calibration_coef is None:
            raise RuntimeError("calibrated_utility selector is not fitted: nothing to save")
        state = super().get_state() if self.has_prior else {}
        state.update({"calibration.coef": self.calibration_coef.astype(np.float64),
                      "calibration.intercept": np.array([self.calibration_intercept], dtype=np.float64),
                      "calibration.mean": self.calibration_scaler.mean.astype(np.float64),
                      "calibration.std": self.calibration_scaler.std.astype(np.float64)})
        return state

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        if self.has_prior:
            super().set_state(state)
        else:
            self.modules = []
        self.calibration_coef = np.asarray(state["calibration.coef"], dtype=np.float64)
        self.calibration_intercept = float(np.asarray(state["calibration.intercept"]).reshape(-1)[0])
        self.calibration_scaler = FeatureScaler(state["calibration.mean"], state["calibration.std"])


__all__ = ["CALIBRATION_FEATURES", "CalibratedUtilitySelector", "calibrated_probability", "fit_calibration"]
