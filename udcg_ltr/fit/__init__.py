"""Context sampling, UDCG_theta fitting (pairwise hinge SVM-rank as a LightningModule) and gamma calibration.

Modules: :mod:`~udcg_ltr.fit.sampling` (balanced contexts), :mod:`~udcg_ltr.fit.pairs` (context table,
Eq. 3 features, within-query pairs), :mod:`~udcg_ltr.fit.svmrank` (the LightningModule),
:mod:`~udcg_ltr.fit.reference` (scikit-learn LinearSVC reference), :mod:`~udcg_ltr.fit.theta`
(fitting entry points), :mod:`~udcg_ltr.fit.weights` (UDCGThetaWeights: score, save, load, plot),
:mod:`~udcg_ltr.fit.gamma` (gamma grid search) and :mod:`~udcg_ltr.fit.synthetic` (a seeded
generative world for benches and tests). Names are imported lazily (torch / Lightning load on demand).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ContextSamplingConfig": "sampling", "SampledContext": "sampling", "sample_contexts": "sampling",
    "sample_query_contexts": "sampling", "truncate_contexts": "sampling",
    "ContextTable": "pairs", "build_context_table": "pairs", "context_features": "pairs", "build_pairs": "pairs",
    "make_pairs": "pairs", "FEATURE_VARIANTS": "pairs",
    "PairwiseSVMRank": "svmrank", "fit_pairwise_svm": "svmrank",
    "fit_reference_sklearn": "reference",
    "ThetaFitConfig": "theta", "fit_udcg_theta": "theta", "fit_udcg_theta_per_k": "theta",
    "fit_udcg_theta_records": "theta",
    "UDCGThetaWeights": "weights", "save_weights": "weights", "load_weights": "weights", "load_weight": "weights",
    "plot_weights": "weights",
    "DEFAULT_GAMMA_GRID": "gamma", "GammaCalibration": "gamma", "calibrate_gamma": "gamma",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"udcg_ltr.fit.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'udcg_ltr.fit' has no attribute {name!r}")
