"""Rule-based dynamic-k selectors and the oracle. Each keeps the top-``k_q`` prefix of the ranking, and
``fit`` grid-searches its knobs for the highest mean UDCG of the kept set (Eq. 4) on the rows given.

:class:`RelativeThreshold` keeps passage ``i`` when its *normalised* score reaches ``fraction`` of the
top passage's (which always qualifies: never ``k = 0``); logits can be negative, so not ``s_i / s_1`` but

* ``"softmax"`` (default): ``p_i / p_1 = exp((s_i - s_1) / T) >= f``: shift invariant, sign agnostic;
* ``"minmax"``: ``(s_i - s_n) / (s_1 - s_n) >= f``: shift and scale invariant within the row;
* ``"sigmoid"``: ``sigmoid(s_i / T) / sigmoid(s_1 / T) >= f``, for calibrated logits.
"""

from __future__ import annotations

import itertools

import numpy as np

from udcg_ltr.metrics.distractor import HeuristicConfig, best_k, heuristic_utilities
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, sigmoid
from udcg_ltr.select.base import RankedSlates, Selector, mean_udcg_per_k, oracle_k, prefix_udcg
from udcg_ltr.select.features import row_minmax


def _need_utility(ranked: RankedSlates, who: str) -> np.ndarray:
    if ranked.utility is None:
        raise ValueError(f"{who} needs the gold utilities (Eq. 2) of the ranked slates")
    return ranked.utility


def _grid(values: np.ndarray, n: int, last: float) -> np.ndarray:
    """The distinct ``n``-quantiles of ``values`` plus ``last`` (sorted)."""
    return np.unique(np.concatenate([np.quantile(values, np.linspace(0.0, 1.0, n)), [last]]))


class FixedK(Selector):
    """``k_q = min(k, n_q)``; ``k=None`` until fitted (``fit`` picks the best k on the given rows)."""

    kind = "fixed_k"

    def __init__(self, k: int | None = None, max_k: int | None = None):
        if k is not None and k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        self.k, self.max_k = k, max_k

    def fit(self, ranked: RankedSlates, *, gamma: float = DEFAULT_GAMMA) -> FixedK:
        table = prefix_udcg(_need_utility(ranked, "FixedK.fit"), ranked.mask, gamma=gamma)
        self.curve = table[:, :None if self.max_k is None else self.max_k + 1].mean(axis=0)  # k = 0..max_k
        self.k = int(np.argmax(self.curve))
        return self

    def select(self, ranked: RankedSlates) -> np.ndarray:
        if self.k is None:
            raise RuntimeError("FixedK has no k: pass k= or fit it")
        return self._clip(np.full(len(ranked), self.k), ranked)


class ScoreThreshold(Selector):
    """Keep the passages with ``score >= threshold`` (absolute score units); ``fit``'s grid: quantiles of the
    real scores plus "above every score" (``k = 0``)."""

    kind = "score_threshold"

    def __init__(self, threshold: float | None = None, n_grid: int = 200):
        self.threshold, self.n_grid = threshold, int(n_grid)

    def _ks(self, ranked: RankedSlates, thresholds: np.ndarray) -> np.ndarray:
        return (ranked.mask[None] & (ranked.scores[None] >= thresholds[:, None, None])).sum(axis=2)

    def fit(self, ranked: RankedSlates, *, gamma: float = DEFAULT_GAMMA) -> ScoreThreshold:
        grid = _grid(ranked.scores[ranked.mask], self.n_grid, np.inf)  # inf: keep nothing (k = 0 everywhere)
        values = mean_udcg_per_k(_need_utility(ranked, "fit"), ranked.mask, self._ks(ranked, grid), gamma=gamma)
        self.threshold = float(grid[int(np.argmax(values))])
        return self

    def select(self, ranked: RankedSlates) -> np.ndarray:
        if self.threshold is None:
            raise RuntimeError("ScoreThreshold has no threshold: pass threshold= or fit it")
        return self._clip(self._ks(ranked, np.array([self.threshold]))[0], ranked)


def normalized_ratio(scores: np.ndarray, mask: np.ndarray, normalize: str, temperature: float = 1.0) -> np.ndarray:
    """Each ranked passage's normalised score relative to the top one (1 at rank 1; see :class:`RelativeThreshold`)."""
    top = scores[:, :1]
    if normalize == "softmax":
        r = np.exp((scores - top) / temperature)
    elif normalize == "minmax":
        # one min-max rule with the selector features: spreads at rounding-noise level count as a constant row
        r = row_minmax(scores, mask)
    elif normalize == "sigmoid":
        r = sigmoid(scores / temperature) / np.maximum(sigmoid(top / temperature), 1e-300)
    else:
        raise ValueError(f"normalize must be 'softmax', 'minmax' or 'sigmoid', got {normalize!r}")
    return np.where(mask, r, -np.inf)


class RelativeThreshold(Selector):
    """Keep passages whose normalised score is at least ``fraction`` of the top one's (module doc);
    ``normalize=None`` lets ``fit`` choose the normalisation too."""

    kind = "relative_threshold"
    NORMALIZERS = ("softmax", "minmax", "sigmoid")

    def __init__(self, fraction: float | None = None, normalize: str | None = "softmax", temperature: float = 1.0,
                 n_grid: int = 100):
        if normalize is not None and normalize not in self.NORMALIZERS:
            raise ValueError(f"normalize must be one of {self.NORMALIZERS} or None, got {normalize!r}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.fraction, self.normalize, self.temperature, self.n_grid = fraction, normalize, float(temperature), n_grid

    def _ks(self, ranked: RankedSlates, normalize: str, fractions: np.ndarray) -> np.ndarray:
        r = normalized_ratio(ranked.scores, ranked.mask, normalize, self.temperature)
        # padding has ratio -inf; rows are ranked, so ratios are non-increasing: the kept set is a prefix
        return (r[None] >= fractions[:, None, None] - 1e-12).sum(axis=2)

    def fit(self, ranked: RankedSlates, *, gamma: float = DEFAULT_GAMMA) -> RelativeThreshold:
        best = (-np.inf, None, None)
        for norm in ([self.normalize] if self.normalize else self.NORMALIZERS):
            grid = _grid(normalized_ratio(ranked.scores, ranked.mask, norm, self.temperature)[ranked.mask],
                         self.n_grid, 1.0)
            values = mean_udcg_per_k(_need_utility(ranked, "fit"), ranked.mask, self._ks(ranked, norm, grid),
                                     gamma=gamma)
            i = int(np.argmax(values))
            if values[i] > best[0]:
                best = (values[i], norm, float(grid[i]))
        _, self.normalize, self.fraction = best
        return self

    def select(self, ranked: RankedSlates) -> np.ndarray:
        if self.fraction is None or self.normalize is None:
            raise RuntimeError("RelativeThreshold has no fraction: pass fraction= or fit it")
        return self._clip(self._ks(ranked, self.normalize, np.array([self.fraction]))[0], ranked)


def relevance_values(scores: np.ndarray, mask: np.ndarray, rule: str, temperature: float = 1.0) -> np.ndarray:
    """What a pseudo-relevance ``rule`` thresholds: ``minmax`` ratio, ``sigmoid(s / T)`` or ``raw`` score."""
    if rule == "minmax":
        return normalized_ratio(scores, mask, "minmax")
    if rule == "sigmoid":
        return sigmoid(scores / temperature)
    if rule == "raw":
        return scores
    raise ValueError(f"relevant_rule must be 'minmax', 'sigmoid' or 'raw', got {rule!r}")


class CumulativeUtilityRule(Selector):
    """:func:`~udcg_ltr.metrics.distractor.best_k` (``sum_{i<=j} u_i+ - harm_weight sum_{i<=j} |u_i-|``,
    smallest maximiser, ``j = 0`` allowed) of labels-free heuristic utilities: a passage is *pseudo-relevant*
    when its :func:`relevance_values` under ``relevant_rule`` reach ``relevant_fraction``."""

    kind = "cumulative_utility"
    RULES = ("minmax", "sigmoid", "raw")
    #: The knobs ``fit`` searches (the arguments of the rule besides the scores).
    KNOBS = ("relevant_fraction", "relevant_rule", "score_fraction", "top_n", "harm_weight")

    def __init__(self, relevant_fraction: float | None = None, relevant_rule: str = "raw",
                 score_fraction: float = 0.8, top_n: int = 3, harm_weight: float = 1.0, temperature: float = 1.0,
                 search_rules: bool = True, n_grid: int = 40):
        if relevant_rule not in self.RULES:
            raise ValueError(f"relevant_rule must be one of {self.RULES}, got {relevant_rule!r}")
        self.relevant_fraction, self.relevant_rule = relevant_fraction, relevant_rule
        self.score_fraction, self.top_n, self.harm_weight = float(score_fraction), int(top_n), float(harm_weight)
        self.temperature, self.search_rules, self.n_grid = float(temperature), bool(search_rules), int(n_grid)

    def _ks(self, ranked: RankedSlates, *, relevant_fraction, relevant_rule, score_fraction, top_n,
            harm_weight) -> np.ndarray:
        values = relevance_values(ranked.scores, ranked.mask, relevant_rule, self.temperature)
        pseudo = ranked.mask & (values >= relevant_fraction)
        config = HeuristicConfig(score_fraction=score_fraction, score_rule="range", top_n=top_n)
        h = heuristic_utilities(pseudo.astype(np.float64), ranked.scores, ranked.mask, config=config)
        return best_k(h, ranked.mask, discount=None, harm_weight=harm_weight, min_k=0)[0]

    def fit(self, ranked: RankedSlates, *, gamma: float = DEFAULT_GAMMA) -> CumulativeUtilityRule:
        u = _need_utility(ranked, "CumulativeUtilityRule.fit")
        best = (-np.inf, None)
        for rule in (self.RULES if self.search_rules else (self.relevant_rule,)):
            values = relevance_values(ranked.scores, ranked.mask, rule, self.temperature)[ranked.mask]
            fractions = _grid(values, self.n_grid, np.inf)
            for rf, sf, tn, hw in itertools.product(fractions, (0.5, 0.8, 0.9), (0, 1, 3), (0.5, 1.0, 2.0)):
                params = dict(zip(self.KNOBS, (float(rf), rule, sf, tn, hw)))
                value = float(mean_udcg_per_k(u, ranked.mask, self._ks(ranked, **params)[None], gamma=gamma)[0])
                if value > best[0] + 1e-12:
                    best = (value, params)
        for name, value in best[1].items():
            setattr(self, name, value)
        return self

    def select(self, ranked: RankedSlates) -> np.ndarray:
        if self.relevant_fraction is None:
            raise RuntimeError("CumulativeUtilityRule has no relevant_fraction: pass it or fit it")
        return self._clip(self._ks(ranked, **{knob: getattr(self, knob) for knob in self.KNOBS}), ranked)


class OracleK(Selector):
    """The per-query UDCG-maximising ``k`` from the gold utilities (upper bound; smallest k on ties)."""

    kind = "oracle"
    needs_labels = True

    def __init__(self, gamma: float = DEFAULT_GAMMA, max_k: int | None = None):
        self.gamma, self.max_k = float(gamma), max_k

    def select(self, ranked: RankedSlates) -> np.ndarray:
        return oracle_k(_need_utility(ranked, "OracleK"), ranked.mask, gamma=self.gamma, max_k=self.max_k)

    def fit(self, ranked: RankedSlates, *, gamma: float = DEFAULT_GAMMA) -> OracleK:
        self.gamma = float(gamma)
        return self
