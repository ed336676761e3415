"""The distractor-aware view: heuristic signed utilities, DCG over them, distractor rate and harm,
and the dynamic-k analysis with a SAFE / RISKY / DANGEROUS assessment.

From the practitioner post "Why Your RAG Metrics Are Lying to You" (S. Roopa, 2026) only DCG over
negative utilities is taken, so that distractors (related but wrong passages) cost instead of counting
as 0: its example ``u = (+1, +0.5, -0.5, +1, 0)`` has DCG 1.49614 (log2 discount), 1.74614 without the
distractor (the post rounds each term: 1.497, 1.747). The utility heuristic follows the project brief;
the rate, harm, dynamic-k and assessment definitions are **ours**, stated here in full.

Heuristic utilities (:func:`heuristic_utilities`), first matching rule wins, per real passage: 1. relevant (label
``> 0``, or ``>= relevant_threshold``): ``+1``; 2. known distractor (``is_distractor``): ``-1``; 3. non-relevant with
retriever score above ``score_fraction`` of the row's top score: ``-0.5`` (``score_rule="ratio"``: ``s > f * s_top``,
for positive scores; ``"range"``: ``(s - s_min) / (s_top - s_min) > f``, shift-invariant, for logits); 4. non-relevant
in the top ``top_n = 3`` positions: ``-0.5``; 5. anything else: ``0``.

Measures at cutoff ``k`` (discount ``d_i = 1/log2(i+1)``, or 1 with ``discount=None``):

* distractor-aware DCG@k = ``sum_{i<=k} u_i d_i`` (signed); DCG without distractors: the same with
  every negative utility set to 0; distractor harm@k = ``sum_{i<=k} |u_i-| d_i`` (their difference);
* distractor rate@k = ``#{i <= k: u_i < 0} / #{i <= k}`` (NA for an empty context);
* harm share@k = ``harm / (harm + sum_{i<=k} u_i+ d_i)`` (0 for an all-zero context);
* dynamic k: ``score(j) = sum_{i<=j} u_i+ d_i - harm_weight * sum_{i<=j} |u_i-| d_i``, ``j = min_k..n``
  (``score(0) = 0``); best k = the smallest maximiser (fewer passages cost less). Default
  ``discount=None`` there: the LLM reads the whole context;
* assessment: ``DANGEROUS`` when harm share >= ``dangerous_share`` (0.5: the harm at least cancels
  the utility), ``RISKY`` when >= ``risky_share`` (0.2), ``SAFE`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from udcg_ltr.metrics._common import _as_2d, _as_mask, as_padded, discounted, masked, n_real, prepare, ratio
from udcg_ltr.metrics.classic import dcg

SAFE, RISKY, DANGEROUS = "SAFE", "RISKY", "DANGEROUS"


@dataclass(frozen=True)
class HeuristicConfig:
    """Rules and utilities of :func:`heuristic_utilities` (all thresholds relative to the row)."""

    relevant_utility: float = 1.0
    distractor_utility: float = -1.0
    high_score_utility: float = -0.5
    score_fraction: float = 0.8
    score_rule: str = "ratio"  # "ratio": s > f * top; "range": (s - min) / (top - min) > f
    top_n: int = 3
    top_n_utility: float = -0.5
    neutral_utility: float = 0.0


@dataclass(frozen=True)
class AssessmentThresholds:
    """Harm-share thresholds of the SAFE / RISKY / DANGEROUS assessment."""

    risky_share: float = 0.2
    dangerous_share: float = 0.5


def heuristic_utilities(labels, scores=None, mask=None, *, is_distractor=None, relevant_threshold: float | None = None,
                        config: HeuristicConfig = HeuristicConfig()) -> np.ndarray:
    """Signed utilities ``[n_queries, k]`` from relevance labels and retriever scores (module doc's rules;
    ``scores`` None, or non-finite for a row, skips rule 3). Padding gets 0."""
    y = _as_2d(labels)
    m = np.ones(y.shape, dtype=bool) if mask is None else _as_mask(mask, y.shape)
    rel = (y >= relevant_threshold) if relevant_threshold is not None else (y > 0)
    distractor = np.zeros(y.shape, bool) if is_distractor is None else _as_2d(is_distractor).astype(bool)
    if distractor.shape != y.shape:
        raise ValueError(f"is_distractor shape {distractor.shape} differs from labels shape {y.shape}")
    high = np.zeros(y.shape, bool) if scores is None else _high_score(_as_2d(scores, np.float64), m, config)
    in_top = m & (np.cumsum(m, axis=1) <= config.top_n)  # the first top_n real passages
    u = np.select([rel, distractor, high, in_top], [config.relevant_utility, config.distractor_utility,
                                                    config.high_score_utility, config.top_n_utility],
                  default=config.neutral_utility)
    return np.where(m, u, 0.0)


def _row_top(s: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Each row's top real, finite score (``[Q, 1]``; -inf where there is none)."""
    return np.where(m & np.isfinite(s), s, -np.inf).max(axis=1, initial=-np.inf)[:, None]


def default_heuristic(scores, mask) -> HeuristicConfig:
    """Default config for ``scores``: rule ``"ratio"``, or ``"range"`` if some top score is not positive."""
    if scores is not None:
        top = _row_top(_as_2d(scores, np.float64), mask)
        if (top[np.isfinite(top)] <= 0).any():
            return HeuristicConfig(score_rule="range")
    return HeuristicConfig()


def _high_score(s: np.ndarray, m: np.ndarray, config: HeuristicConfig) -> np.ndarray:
    if s.shape != m.shape:
        raise ValueError(f"scores shape {s.shape} differs from labels shape {m.shape}")
    ok = m & np.isfinite(s)
    top = _row_top(s, m)
    f = config.score_fraction
    with np.errstate(invalid="ignore", divide="ignore"):
        if config.score_rule == "ratio":
            if (top[np.isfinite(top)] <= 0).any():
                raise ValueError("score_rule='ratio' needs a positive top score in every row; use 'range'")
            high = s > f * top
        elif config.score_rule == "range":
            low = np.where(ok, s, np.inf).min(axis=1, initial=np.inf)[:, None]
            spread = top - low
            high = np.where(spread > 0, (s - low) / spread > f, False)
        else:
            raise ValueError(f"score_rule must be 'ratio' or 'range', got {config.score_rule!r}")
    return ok & high


def distractor_aware_dcg(utilities, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """DCG@k over signed utilities: ``sum_{i<=k} u_i / log2(i + 1)``, distractors counting negatively."""
    return dcg(utilities, mask, k=k, discount=discount)


def dcg_without_distractors(utilities, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """The same DCG with every negative utility replaced by 0 (the distractors removed, positions kept)."""
    u = _as_2d(utilities, np.float64)
    return dcg(np.where(u > 0, u, 0.0), mask, k=k, discount=discount)


def _harm_and_gain(utilities, mask, k, discount) -> tuple[np.ndarray, np.ndarray]:
    """``(sum |u_i-| d_i, sum u_i+ d_i)`` over the top k, per query."""
    u, m = prepare(utilities, mask, k, dtype=np.float64)
    d = discounted(u, m, discount)
    return np.where(d < 0, -d, 0.0).sum(axis=1), np.where(d > 0, d, 0.0).sum(axis=1)


def distractor_harm(utilities, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """Harm@k in DCG units: ``sum_{i<=k} |u_i-| d_i`` (= DCG without distractors - DCG), >= 0."""
    return _harm_and_gain(utilities, mask, k, discount)[0]


def distractor_rate(utilities, mask=None, *, k: int | None = None) -> np.ndarray:
    """Share of the top-k real passages with negative utility; NA (NaN) for an empty context."""
    u, m = prepare(utilities, mask, k, dtype=np.float64)
    return ratio((masked(u, m) < 0).sum(axis=1), n_real(u, m), np.nan)


def harm_share(utilities, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """``harm / (harm + gain)`` at cutoff k, in [0, 1]; 0 for a context whose utilities are all 0."""
    harm, gain = _harm_and_gain(utilities, mask, k, discount)
    return ratio(harm, harm + gain)


def dynamic_k_curve(utilities, mask=None, *, discount: str | None = None, harm_weight: float = 1.0) -> np.ndarray:
    """``score(j)`` for ``j = 0..width`` (``[n_queries, width + 1]``): cumulative utility minus weighted harm;
    entries past a row's real count repeat its last value (padding adds nothing)."""
    u, m = prepare(utilities, mask, None, dtype=np.float64)
    d = discounted(u, m, discount)
    step = np.where(d > 0, d, harm_weight * d)  # padding is 0
    if m is not None:  # real entries to the front: column j of the curve is "the first j real passages"
        step = np.take_along_axis(step, np.argsort(~m, axis=1, kind="stable"), axis=1)
    return np.concatenate([np.zeros((u.shape[0], 1)), np.cumsum(step, axis=1)], axis=1)


def best_k(utilities, mask=None, *, discount: str | None = None, harm_weight: float = 1.0, min_k: int = 1,
           max_k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic k: ``(best_k, best_score)`` (int64, float64 ``[n_queries]``), the smallest ``j`` in ``[min_k,
    min(n, max_k)]`` maximising :func:`dynamic_k_curve` (a row of fewer than ``min_k`` real passages: n)."""
    curve = dynamic_k_curve(utilities, mask, discount=discount, harm_weight=harm_weight)
    n = n_real(*prepare(utilities, mask))
    hi = n if max_k is None else np.minimum(n, max_k)
    lo = np.minimum(min_k, hi)
    j = np.arange(curve.shape[1])[None, :]
    scored = np.where((j >= lo[:, None]) & (j <= hi[:, None]), curve, -np.inf)
    k_best = scored.argmax(axis=1)  # argmax returns the first (smallest) maximiser
    return k_best.astype(np.int64), np.take_along_axis(curve, k_best[:, None], axis=1)[:, 0]


def assess(utilities, mask=None, *, k: int | None = None, discount: str | None = "log2",
           thresholds: AssessmentThresholds = AssessmentThresholds()) -> np.ndarray:
    """SAFE / RISKY / DANGEROUS per query (object array) from the harm share of the top-k context."""
    share = harm_share(utilities, mask, k=k, discount=discount)
    return np.where(share >= thresholds.dangerous_share, DANGEROUS,
                    np.where(share >= thresholds.risky_share, RISKY, SAFE)).astype(object)


@dataclass(frozen=True)
class DistractorReport:
    """The distractor-aware analysis of one query's context."""

    qid: str | None
    utilities: tuple[float, ...]
    dcg: float
    dcg_without_distractors: float
    distractor_harm: float
    distractor_rate: float
    harm_share: float
    best_k: int
    best_k_score: float
    assessment: str


@dataclass(frozen=True)
class DistractorAnalysis:
    """Vectorised :func:`distractor_analysis`: the fields of :class:`DistractorReport`, one per query."""

    dcg: np.ndarray
    dcg_without_distractors: np.ndarray
    distractor_harm: np.ndarray
    distractor_rate: np.ndarray
    harm_share: np.ndarray
    best_k: np.ndarray
    best_k_score: np.ndarray
    assessment: np.ndarray

    def reports(self, utilities, mask=None, qids=None) -> list[DistractorReport]:
        """One :class:`DistractorReport` per query (``utilities`` listed in ranked order, padding dropped: NaN
        under a False mask, e.g. an unannotated passage, is padding; at a real entry it raises, as in
        :func:`distractor_analysis`)."""
        u, m = as_padded(utilities, mask)
        columns = {f.name: np.asarray(getattr(self, f.name)).tolist() for f in fields(self)}  # Python scalars
        return [DistractorReport(qid=None if qids is None else qids[i], utilities=tuple(u[i][m[i]].tolist()),
                                 **{name: values[i] for name, values in columns.items()})
                for i in range(u.shape[0])]


def distractor_analysis(utilities, mask=None, *, k: int | None = None, discount: str | None = "log2",
                        dynamic_discount: str | None = None, harm_weight: float = 1.0, min_k: int = 1,
                        thresholds: AssessmentThresholds = AssessmentThresholds()) -> DistractorAnalysis:
    """Every distractor-aware measure at cutoff ``k``; dynamic k searches ``min_k..k`` (all real entries when None)."""
    bk, bs = best_k(utilities, mask, discount=dynamic_discount, harm_weight=harm_weight, min_k=min_k, max_k=k)
    return DistractorAnalysis(
        dcg=distractor_aware_dcg(utilities, mask, k=k, discount=discount),
        dcg_without_distractors=dcg_without_distractors(utilities, mask, k=k, discount=discount),
        distractor_harm=distractor_harm(utilities, mask, k=k, discount=discount),
        distractor_rate=distractor_rate(utilities, mask, k=k),
        harm_share=harm_share(utilities, mask, k=k, discount=discount), best_k=bk, best_k_score=bs,
        assessment=assess(utilities, mask, k=k, discount=discount, thresholds=thresholds))
