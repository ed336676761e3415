"""The metric library: pure, vectorised functions over padded ``[n_queries, k]`` arrays with masks.

Conventions (ranked order, masks, cutoffs, NA, ties): :mod:`udcg_ltr.metrics._common`. The torch twins
for the losses (:mod:`~udcg_ltr.metrics.torch_ops`) and the trec_eval / ranx references of the TREC
table (:mod:`~udcg_ltr.metrics.reference`) are imported on demand.
"""

from udcg_ltr.metrics._common import as_padded, cutoff_mask, mean, rank_by_scores, take_ranked, top_k_mask
from udcg_ltr.metrics.classic import (
    average_precision,
    dcg,
    hits,
    ideal_dcg,
    mrr,
    ndcg,
    precision,
    recall,
    reciprocal_rank,
)
from udcg_ltr.metrics.distractor import (
    AssessmentThresholds,
    HeuristicConfig,
    assess,
    best_k,
    dcg_without_distractors,
    distractor_analysis,
    distractor_aware_dcg,
    distractor_harm,
    distractor_rate,
    dynamic_k_curve,
    harm_share,
    heuristic_utilities,
)
from udcg_ltr.metrics.erag import erag, erag_labels, erag_mask, erag_score, graded_precision, max_label
from udcg_ltr.metrics.setbased import (
    harm_at_k,
    n_recall_4plus,
    n_recall_5,
    pct_proc,
    precision_4plus,
    proc,
    ra_nwg,
    rarity_weights,
)
from udcg_ltr.metrics.table import (
    METRIC_NAMES,
    ERAGLabels,
    GradedLabels,
    JudgedPool,
    MetricOptions,
    RankedRows,
    display_name,
    metric_key,
    metric_table,
    summarize,
    trec_table,
)
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, udcg, udcg_equivalent_weights, udcg_logit, udcg_theta
from udcg_ltr.metrics.utility import negative_part, passage_utility, positive_part

__all__ = [
    "DEFAULT_GAMMA", "METRIC_NAMES", "AssessmentThresholds", "ERAGLabels", "GradedLabels", "HeuristicConfig",
    "JudgedPool", "MetricOptions", "RankedRows", "as_padded", "assess",
    "average_precision", "best_k", "cutoff_mask", "dcg", "dcg_without_distractors", "display_name",
    "distractor_analysis", "distractor_aware_dcg", "distractor_harm", "distractor_rate", "dynamic_k_curve",
    "erag", "erag_labels", "erag_mask", "erag_score", "graded_precision", "harm_at_k",
    "harm_share", "heuristic_utilities", "hits", "ideal_dcg", "max_label", "mean", "metric_key",
    "metric_table", "mrr", "n_recall_4plus", "n_recall_5", "ndcg", "negative_part", "passage_utility",
    "pct_proc", "positive_part", "precision", "precision_4plus", "proc", "ra_nwg", "rank_by_scores",
    "rarity_weights", "recall", "reciprocal_rank", "summarize", "take_ranked", "top_k_mask", "trec_table", "udcg",
    "udcg_equivalent_weights", "udcg_logit", "udcg_theta"]
