"""From graded contexts to UDCG_theta features (Eq. 3) and SVM-rank training pairs.

A context ``C = (p_1, ..., p_k)`` (prompt order, left-aligned, zero-padded) is described by the
single-passage utilities (Eq. 2) of its passages, ``u_i+ = max(u_i, 0)`` and ``u_i- = min(u_i, 0)``::

    x(C) = [u_1+, ..., u_k+, u_1-, ..., u_k-]       so that  w . x(C) = sum alpha_i u_i+ + sum beta_i u_i-

Training pairs: within each query, every pair of contexts with different outcomes (correct 2 > abstained 1
> wrong 0) gives ``x_i - x_j`` (better minus worse), which should score positive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from udcg_ltr.annotate.grading import Outcome
from udcg_ltr.data.schema import DataError, QueryRecord, records_by_qid
from udcg_ltr.stats.groups import group_index, to_padded

FEATURE_VARIANTS = ("full", "relevance_only", "binary")


@dataclass
class ContextTable:
    """Aligned per-context arrays (one row per context, columns = prompt positions, left-aligned); the
    per-passage ones come from the single-passage annotations of ``llm``."""

    qids: np.ndarray  # object [n]
    context_ids: np.ndarray  # int [n]
    pids: np.ndarray  # object [n, k], "" for padding
    mask: np.ndarray  # bool [n, k]
    utility: np.ndarray  # float [n, k] (0 for padding)
    relevant: np.ndarray  # bool [n, k]
    outcome: np.ndarray  # float [n]: 2 / 1 / 0 for correct / abstained / wrong, NaN when ungraded
    llm: str

    def __len__(self) -> int:
        return len(self.qids)

    @property
    def k(self) -> int:
        return self.mask.shape[1]

    def subset(self, rows) -> ContextTable:
        rows = np.asarray(rows)
        return self._map(lambda a: a[rows])

    def truncate(self, k: int) -> ContextTable:
        """The first ``k`` prompt positions of every context (the "truncate" variant; outcomes unchanged)."""
        return self._map(lambda a: a[:, :k] if a.ndim == 2 else a)

    def _map(self, per_array) -> ContextTable:
        """A new table with ``per_array`` applied to every array field (``llm`` kept)."""
        return replace(self, **{f.name: per_array(getattr(self, f.name)) for f in fields(self) if f.name != "llm"})


def outcome_score(outcome) -> float:
    """:attr:`Outcome.score <udcg_ltr.annotate.grading.Outcome.score>` of an ``Outcome`` or its value as a float
    (2 / 1 / 0 for correct / abstained / wrong; ``ValueError`` for anything else); NaN for None (ungraded)."""
    return float("nan") if outcome is None else float(Outcome(outcome).score)


def build_context_table(records: Sequence[QueryRecord] | Mapping[str, QueryRecord], contexts: Sequence, llm: str, *,
                        k: int | None = None, relevance_threshold: int = 1) -> ContextTable:
    """Stack contexts (anything with ``qid``, ``context_id``, ``pids`` and optionally ``outcome``) into a
    :class:`ContextTable` (``k``: default the longest context); :class:`DataError` for an unknown query or
    passage, or a context longer than ``k``."""
    by_qid = records_by_qid(records)
    width = k if k is not None else max((len(c.pids) for c in contexts), default=0)
    lookups: dict[str, dict] = {}
    chosen = []  # each context's passages, in prompt order
    for c in contexts:
        rec = by_qid.get(c.qid)
        if rec is None:
            raise DataError(f"context {c.context_id} refers to unknown query {c.qid!r}", field="qid")
        if len(c.pids) > width:
            raise DataError(f"context ({c.qid!r}, {c.context_id}) has {len(c.pids)} passages > k={width}; "
                            "truncate it first (ContextTable.truncate / sampling.truncate_contexts)", field="pids")
        table = lookups.get(c.qid)
        if table is None:
            table = lookups[c.qid] = {p.pid: p for p in rec.passages}
        for pid in c.pids:
            if pid not in table:
                raise DataError(f"query {c.qid!r} has no passage {pid!r}", field="pids")
        chosen.append([table[pid] for pid in c.pids])

    def grid(value, fill, dtype=np.float64) -> np.ndarray:
        out = np.full((len(chosen), width), fill, dtype=dtype)
        for row, passages in enumerate(chosen):
            out[row, :len(passages)] = [value(p) for p in passages]
        return out

    outcome = np.array([outcome_score(getattr(c, "outcome", None)) for c in contexts], dtype=np.float64)
    return ContextTable(qids=np.array([c.qid for c in contexts], dtype=object),
                        context_ids=np.array([int(c.context_id) for c in contexts], dtype=np.int64), llm=llm,
                        pids=grid(lambda p: p.pid, "", object), mask=grid(lambda p: True, False, bool),
                        relevant=grid(lambda p: p.is_relevant(relevance_threshold), False, bool),
                        utility=grid(lambda p: p.utility(llm, relevance_threshold), 0.0), outcome=outcome)


def context_features(utility: np.ndarray, mask: np.ndarray | None = None, *, relevant: np.ndarray | None = None,
                     variant: str = "full") -> np.ndarray:
    """Eq. 3 features per context: ``full`` ``[u+, u-]``; ``relevance_only`` ``[u+]`` (``beta = 0``);
    ``binary`` ``[R, u-]`` with ``R`` the binary relevance (``relevant``; default ``u > 0``, which misses a
    relevant passage with P(NO-RESPONSE) = 1)."""
    u = np.asarray(utility, dtype=np.float64)
    m = np.ones(u.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    u = np.where(m, u, 0.0)
    pos = np.where(u > 0, u, 0.0)
    neg = np.where(u < 0, u, 0.0)
    if variant == "full":
        return np.concatenate([pos, neg], axis=1)
    if variant == "relevance_only":
        return pos
    if variant == "binary":
        rel = (u > 0) if relevant is None else (np.asarray(relevant, dtype=bool) & m)
        return np.concatenate([rel.astype(np.float64), neg], axis=1)
    raise ValueError(f"unknown feature variant {variant!r} (use one of {FEATURE_VARIANTS})")


def table_features(table: ContextTable, variant: str = "full") -> np.ndarray:
    return context_features(table.utility, table.mask, relevant=table.relevant, variant=variant)


def make_pairs(qids: Sequence, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All within-query pairs ``(i, j)`` with ``scores[i] > scores[j]`` (NaN scores take part in none),
    comparing the ``[G, m]`` query layout as ``[G, m, m]``."""
    scores = np.asarray(scores, dtype=np.float64)
    _, idx = group_index(qids)
    if idx.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    s = to_padded(scores, idx)
    g, a, b = np.nonzero(s[:, :, None] > s[:, None, :])  # NaN (padding, ungraded) compares False
    return idx[g, a], idx[g, b]


@dataclass
class PairSet:
    """Training pairs: ``diffs[p] = x[i_p] - x[j_p]`` with context ``i_p`` better than ``j_p``."""

    diffs: np.ndarray  # float [P, d]
    n_queries: int  # queries contributing at least one pair

    def __len__(self) -> int:
        return len(self.diffs)


def build_pairs(features: np.ndarray, qids: Sequence, scores: np.ndarray) -> PairSet:
    i, j = make_pairs(qids, scores)
    features = np.asarray(features, dtype=np.float64)
    qids = np.asarray(qids, dtype=object)
    return PairSet(diffs=features[i] - features[j], n_queries=len(set(qids[i].tolist())))
