"""Passage utility, UDCG paper Eq. 2: ``u(q, p) = R(q, p) * (1 - P_LLM(NO-RESPONSE | q, p))``, ``R = +-1``.

A relevant passage the LLM would answer from has ``u`` near +1; an irrelevant one it would still
answer from (a distractor) near -1; a passage that makes the LLM abstain near 0 whatever its relevance.
"""

from __future__ import annotations

import numpy as np

from udcg_ltr.metrics._common import as_padded, check_not_nan


def passage_utility(relevant, p_no_response, mask=None) -> np.ndarray:
    """Eq. 2, elementwise over ``[n_queries, k]``: ``u = (+1 if relevant > 0 else -1) * (1 - p_no_response)``;
    padding gets 0."""
    p, mask = as_padded(p_no_response, mask)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p_no_response must lie in [0, 1]")
    rel = np.asarray(relevant)
    rel = rel[None, :] if rel.ndim == 1 else rel
    if rel.shape == mask.shape:
        check_not_nan(rel, mask, "relevant")  # a NaN label is not "not relevant"
    return np.where(mask, np.where(rel > 0, 1.0, -1.0) * (1.0 - p), 0.0)


def positive_part(utilities, mask=None) -> np.ndarray:
    """``u+``: the utilities of relevant passages (``u >= 0``), zero elsewhere."""
    u, mask = as_padded(utilities, mask)
    return np.where(mask & (u > 0), u, 0.0)


def negative_part(utilities, mask=None) -> np.ndarray:
    """``u-``: the (negative) utilities of irrelevant passages, zero elsewhere. Kept signed, never clamped."""
    u, mask = as_padded(utilities, mask)
    return np.where(mask & (u < 0), u, 0.0)
