"""The metric library: pure, vectorised functions over padded ``[n_queries, k]`` arrays with masks.

See :mod:`udcg_ltr.metrics._common` for the conventions (ranked order, masks, cutoffs, NA, ties).
"""

from udcg_ltr.metrics._common import MeanResult, as_padded, cutoff_mask, mean, positions, rank_by_scores, take_ranked
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
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, udcg, udcg_equivalent_weights, udcg_logit, udcg_theta
from udcg_ltr.metrics.utility import negative_part, passage_utility, positive_part

__all__ = [
    "DEFAULT_GAMMA", "MeanResult", "as_padded", "average_precision", "cutoff_mask", "dcg", "hits",
    "ideal_dcg", "mean", "mrr", "ndcg", "negative_part", "passage_utility", "positions", "positive_part",
    "precision", "rank_by_scores", "recall", "reciprocal_rank", "take_ranked", "udcg",
    "udcg_equivalent_weights", "udcg_logit", "udcg_theta",
]
