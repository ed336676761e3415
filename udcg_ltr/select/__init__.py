"""Dynamic-k selectors: give the LLM as many of the reranker's top passages as help, no more.

Every selector returns a kept count ``k_q in 0..n_q`` per query; the kept set is the top-``k_q``
prefix of the ranking and ``k_q = 0`` means "no passage" (the LLM abstains; UDCG of the empty set
is ``sigmoid(0) = 0.5``). Quality is UDCG (Eq. 4) of the kept set.

* :mod:`~udcg_ltr.select.base`: ranked inputs, UDCG of every prefix, the :class:`Selector` API;
* :mod:`~udcg_ltr.select.features`: labels-free list features (plus extra arrays such as the reader
  probes of :mod:`udcg_ltr.data.probes`);
* :mod:`~udcg_ltr.select.baselines`: fixed k, absolute / relative score thresholds, the
  cumulative-utility rule of the dynamic-k analysis (labels-free), the oracle;
* :mod:`~udcg_ltr.select.gate`: per-passage gate trained through a smooth UDCG of a soft prefix;
* :mod:`~udcg_ltr.select.kclassifier`: a softmax over ``k = 0..K`` trained on expected UDCG or
  cross-entropy to the oracle k;
* :mod:`~udcg_ltr.select.expected`: per-passage relevance and utility-magnitude model, then the
  prefix with the best expected UDCG (a plug-in Bayes rule);
* :mod:`~udcg_ltr.select.calibrated`: the same rule with a ranker-free relevance prior (train rows)
  calibrated on the deployed ranker's scores (val rows);
* :mod:`~udcg_ltr.select.training`: ``fit_selector`` / ``load_selector`` (Hydra-friendly),
  model selection on val, grouped k-fold for cross-fitting;
* :mod:`~udcg_ltr.select.evaluation`: per-selector table, k histograms, end to end with an LLM;
* :mod:`~udcg_ltr.select.report`: the dynamic-k / distractor analysis table of several rankings.
"""

from udcg_ltr.select.base import (
    RankedSlates,
    Selector,
    kept_mask,
    oracle_k,
    prefix_udcg,
    rank_slates,
    udcg_of_kept,
)
from udcg_ltr.select.baselines import (
    CumulativeUtilityRule,
    FixedK,
    OracleK,
    RelativeThreshold,
    ScoreThreshold,
)
from udcg_ltr.select.calibrated import CalibratedUtilitySelector
from udcg_ltr.select.evaluation import (
    end_to_end_selection,
    evaluate_selectors,
    format_rows_markdown,
    plot_k_histograms,
    write_rows_csv,
)
from udcg_ltr.select.expected import ExpectedUtilitySelector
from udcg_ltr.select.features import FeatureScaler, feature_names, passage_features
from udcg_ltr.select.gate import GateSelector
from udcg_ltr.select.io import load_selector, make_selector, save_selector
from udcg_ltr.select.kclassifier import KClassifierSelector
from udcg_ltr.select.report import dynamic_k_report
from udcg_ltr.select.training import fit_best_selector, fit_selector, group_kfold

__all__ = [
    "CalibratedUtilitySelector", "CumulativeUtilityRule", "ExpectedUtilitySelector", "FeatureScaler", "FixedK", "GateSelector", "KClassifierSelector", "OracleK",
    "RankedSlates", "RelativeThreshold", "ScoreThreshold", "Selector", "dynamic_k_report", "end_to_end_selection",
    "evaluate_selectors", "feature_names", "fit_best_selector", "fit_selector", "format_rows_markdown",
    "group_kfold", "kept_mask", "load_selector", "make_selector", "oracle_k", "passage_features",
    "plot_k_histograms", "prefix_udcg", "rank_slates", "save_selector", "udcg_of_kept", "write_rows_csv",
]
