"""What every dynamic-k selector shares: ranked inputs, UDCG of every prefix, the :class:`Selector` API.

UDCG of a kept set is Eq. 4 on the top-k prefix of signed utilities (Eq. 2; ``sigmoid(0) = 0.5`` for ``k = 0``);
:func:`prefix_udcg` gives it for every ``k`` at once: the exact reward of the oracle and the k-classifier's objective.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from udcg_ltr import metrics as M
from udcg_ltr.data.padded import pad_scores
from udcg_ltr.data.scores import PassageScores
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, sigmoid


@dataclass
class RankedSlates:
    """Rows sorted by descending score: ``scores``/``mask``/``utility``/``extra`` share that column order.
    ``scores`` are finite (padding gets the row's lowest real score: features never see ``-inf``);
    ``utility`` (Eq. 2, 0 on padding) is None at inference; ``order`` permutes the caller's columns."""

    scores: np.ndarray
    mask: np.ndarray
    utility: np.ndarray | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    order: np.ndarray | None = None
    qids: list[str] | None = None

    @property
    def n_real(self) -> np.ndarray:
        return self.mask.sum(axis=1).astype(np.int64)

    @property
    def width(self) -> int:
        return int(self.mask.shape[1])

    def __len__(self) -> int:
        return int(self.mask.shape[0])

    def subset(self, rows) -> RankedSlates:
        """The rows ``rows`` (an index array or boolean mask), e.g. one cross-validation fold."""
        rows = np.asarray(rows)
        pick = (lambda a: None if a is None else a[rows])  # noqa: E731
        qids = None if self.qids is None else list(np.asarray(self.qids, dtype=object)[rows])
        return RankedSlates(scores=self.scores[rows], mask=self.mask[rows], utility=pick(self.utility),
                            extra={k: v[rows] for k, v in self.extra.items()}, order=pick(self.order), qids=qids)

    def resized(self, width: int) -> RankedSlates:
        """The rows cut or padded to ``width`` columns (padding: mask False, lowest score, else 0)."""
        pad = max(width - self.width, 0)
        low = self.scores.min(axis=1, keepdims=True) if self.width else np.zeros((len(self), 1))

        def fit(a, fill=0.0):
            if a is None:
                return None
            return np.concatenate([a[:, :width], np.broadcast_to(fill, (len(a), pad))], axis=1)

        return RankedSlates(fit(self.scores, low), fit(self.mask, False), fit(self.utility),
                            {k: fit(v) for k, v in self.extra.items()}, self.order, self.qids)


def rank_slates(scores, slates: Any = None, *, mask=None, utility=None, extra: Mapping[str, Any] | None = None,
                extra_fields: tuple[str, ...] = (), qids=None) -> RankedSlates:
    """Sort every row by descending ``scores`` (ties: earlier column first), carrying the aligned arrays.

    ``scores``: ``[Q, W]`` aligned with the columns of ``slates`` (a PaddedSlates, optional), a list of per-row
    arrays, or :class:`~udcg_ltr.data.scores.PassageScores` (rows looked up by ``slates.qids``). ``mask`` and
    ``utility`` default to the slates' (``utility`` only when ``p_no_response`` is annotated on every real passage).
    ``extra_fields`` names slates fields or ``slates.probes`` to carry; ``extra`` adds explicit ``[Q, W]`` arrays.
    """
    if isinstance(scores, PassageScores):  # the one place keyed scores become the selectors' [Q, W] rows
        if slates is None:
            raise ValueError("PassageScores need the slates: their qids order the rows")
        scores = scores.padded(slates)
    per_row = isinstance(scores, (list, tuple)) and (slates is not None or scores and np.ndim(scores[0]) == 1)
    if per_row and mask is None:  # per-record score arrays: padded to the slates' width
        scores, mask = pad_scores(scores, None if slates is None else slates.mask.shape[1])
        mask = mask if slates is None else mask & slates.mask
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must be [n_queries, width], got shape {s.shape}")
    mask = getattr(slates, "mask", None) if mask is None else mask
    m = np.ones(s.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if m.shape != s.shape:
        raise ValueError(f"mask shape {m.shape} differs from scores shape {s.shape}")
    if utility is None and slates is not None:
        pnr = getattr(slates, "p_no_response", None)
        if pnr is not None and m.any() and np.isfinite(np.where(m, pnr, 0.0)).all():
            utility = slates.utility
    if np.isnan(np.where(m, s, 0.0)).any():
        raise ValueError("scores of real passages must not be NaN")
    s = np.where(m, s, -np.inf)
    order = M.rank_by_scores(s, m)
    rs = np.take_along_axis(s, order, axis=1)
    rm = np.take_along_axis(m, order, axis=1)
    low = np.where(rm, rs, np.inf).min(axis=1, initial=np.inf)
    rs = np.where(rm, rs, np.where(np.isfinite(low), low, 0.0)[:, None])
    if not np.isfinite(rs).all():
        raise ValueError("scores of real passages must be finite")

    def carry(value, label: str, finite_only: bool = False) -> np.ndarray:
        v = np.asarray(value, dtype=np.float64)
        if v.shape != s.shape:
            raise ValueError(f"{label} shape {v.shape} differs from scores shape {s.shape}")
        v = np.take_along_axis(np.where(m, v, 0.0), order, axis=1)
        return np.where(rm & np.isfinite(v) if finite_only else rm, v, 0.0)

    named: dict[str, Any] = {}
    probes = getattr(slates, "probes", None) or {}  # reader probes and lexical features live in a dict
    for name in extra_fields:
        value = getattr(slates, name, None)
        named[name] = probes.get(name) if value is None else value
        if named[name] is None:
            raise ValueError(f"slates have no field {name!r} (probes: {sorted(probes)}; the reader probes need "
                             "answer_alone annotations on every passage)")
    named.update(dict(extra or {}))
    qids = getattr(slates, "qids", None) if qids is None else qids
    extra = {name: carry(v, f"extra {name!r}", True) for name, v in named.items()}
    return RankedSlates(scores=rs, mask=rm, utility=None if utility is None else carry(utility, "utility"),
                        extra=extra, order=order, qids=None if qids is None else list(qids))


def prefix_udcg(utility: np.ndarray, mask: np.ndarray, *, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """UDCG (Eq. 4) of the top-k set for every ``k = 0..W``: ``[Q, W + 1]``, column 0 = 0.5 (empty context).
    Rows are ranked, real entries first; past a row's ``n_q`` passages it stays that of the whole row."""
    u = np.where(mask, np.asarray(utility, dtype=np.float64), 0.0)
    pos = np.cumsum(np.where(u > 0, u, 0.0), axis=1)
    neg = np.cumsum(np.where(u < 0, u, 0.0), axis=1)
    count = np.cumsum(mask, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(count > 0, (pos + gamma * neg) / np.maximum(count, 1), 0.0)
    return sigmoid(np.concatenate([np.zeros((u.shape[0], 1)), z], axis=1))


def valid_k(mask: np.ndarray, max_k: int | None = None) -> np.ndarray:
    """``[Q, K + 1]`` boolean: which ``k`` a row can take (``k <= n_q`` and ``k <= max_k``)."""
    w = mask.shape[1] if max_k is None else min(int(max_k), mask.shape[1])
    return np.arange(w + 1)[None, :] <= np.minimum(mask.sum(axis=1), w)[:, None]


def kept_mask(mask: np.ndarray, k) -> np.ndarray:
    """Boolean ``[Q, W]``: the first ``k_q`` real entries of each ranked row."""
    k = np.asarray(k, dtype=np.int64).reshape(-1)
    if k.shape[0] != mask.shape[0]:
        raise ValueError(f"{mask.shape[0]} rows but {k.shape[0]} k values")
    return mask & (np.cumsum(mask, axis=1) <= k[:, None])


def udcg_of_kept(utility: np.ndarray, mask: np.ndarray, k, *, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """UDCG (Eq. 4) of each row's kept set top-``k_q`` (0.5 for ``k_q = 0``), via :func:`udcg_ltr.metrics.udcg`."""
    return M.udcg(utility, kept_mask(mask, k), gamma=gamma)


#: UDCG values closer than this count as ties for the oracle k (UDCG lies in (0, 1)).
ORACLE_TIE_TOL = 1e-12


def oracle_k(utility: np.ndarray, mask: np.ndarray, *, gamma: float = DEFAULT_GAMMA,
             max_k: int | None = None) -> np.ndarray:
    """The ``k`` maximising each row's UDCG of the top-k set: the smallest ``k`` within ``ORACLE_TIE_TOL`` of the
    best (fewer passages cost less, and float noise such as a utility of 1e-15 must not buy a passage)."""
    table = prefix_udcg(utility, mask, gamma=gamma)
    ok = valid_k(mask, max_k)
    table = np.where(ok, table[:, :ok.shape[1]], -np.inf)
    return (table >= table.max(axis=1, keepdims=True) - ORACLE_TIE_TOL).argmax(axis=1).astype(np.int64)


def mean_udcg_per_k(utility: np.ndarray, mask: np.ndarray, ks: np.ndarray, *,
                    gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """Mean UDCG for many candidate selections at once: ``ks`` is ``[n_candidates, Q]`` -> ``[n_candidates]``."""
    table = prefix_udcg(utility, mask, gamma=gamma)
    ks = np.clip(np.asarray(ks, dtype=np.int64), 0, table.shape[1] - 1)
    return np.take_along_axis(table, ks.T, axis=1).mean(axis=0)


class Selector:
    """A dynamic-k selector: ``select(ranked) -> k`` per query (int64, ``0 <= k_q <= n_q``).

    Subclasses set ``kind`` (the registry name), implement :meth:`select` and, when they learn, :meth:`fit`.
    Constructor arguments are kept as attributes of the same name, which :meth:`get_config` reads back;
    those named in :attr:`setting_groups` are settings objects, written flat.
    """

    kind: ClassVar[str] = "selector"
    #: True when :meth:`select` reads the gold utilities (the oracle): never for a deployable selector.
    needs_labels: ClassVar[bool] = False
    #: Constructor arguments that are settings dataclasses, by name: :meth:`get_config` writes their fields
    #: flat (as ``selector.json`` and the configurations' ``hparams`` hold them), :meth:`from_config` groups them.
    setting_groups: ClassVar[Mapping[str, type]] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Selector:
        """A selector from flat constructor arguments (:meth:`get_config`'s form): the fields of each
        :attr:`setting_groups` class become that settings object, the rest are passed as they are."""
        config = dict(config)
        groups = {name: group(**{f.name: config.pop(f.name) for f in fields(group) if f.name in config})
                  for name, group in cls.setting_groups.items()}
        return cls(**config, **groups)

    def select(self, ranked: RankedSlates) -> np.ndarray:
        raise NotImplementedError

    def fit(self, ranked: RankedSlates, *, gamma: float = DEFAULT_GAMMA) -> Selector:
        return self

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments of every class in the hierarchy (bases first), from the attributes."""
        names: dict[str, None] = {}
        for cls in reversed(type(self).__mro__):
            if "__init__" in vars(cls) and issubclass(cls, Selector):
                names.update((p.name, None) for p in inspect.signature(cls.__init__).parameters.values()
                             if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
        out: dict[str, Any] = {}
        for name in names:
            value = getattr(self, name)
            out.update(asdict(value) if name in self.setting_groups else {name: value})
        return out

    def get_state(self) -> dict[str, np.ndarray]:
        return {}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        if state:
            raise ValueError(f"{self.kind} selector has no weights, got {sorted(state)}")

    def _clip(self, k: np.ndarray, ranked: RankedSlates) -> np.ndarray:
        return np.clip(np.asarray(k, dtype=np.int64), 0, ranked.n_real)

    def __repr__(self) -> str:
        cfg = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({cfg})"
