"""Context sampling for the metric / end-to-end accuracy study (the UDCG paper's protocol).

For each query, ``n_contexts`` contexts of ``k`` passages are drawn from its top-``top_n``
candidates (retrieval order). The set is *balanced*: about ``positive_fraction`` of the contexts hold
at least one relevant passage ("positive") and the rest none ("negative"), so that the end-to-end
outcomes of one query vary and the per-query correlation is defined. The order inside a context is a
uniformly random permutation, and **it is the prompt order** (document ``[1]`` first).

Positive contexts are uniform over the ``k``-subsets with a relevant passage: the number ``j >= 1``
of relevant passages follows the truncated hypergeometric law ``P(j) ~ C(R, j) C(N, k - j)``, then
``j`` relevant and ``k - j`` non-relevant passages are drawn without replacement. Negative contexts
are uniform ``k``-subsets of the non-relevant ones. Fallbacks (:attr:`SampledContext.kind`): no
relevant candidate: every context is negative (the study reports the query's missing correct
outcome rather than hiding it); fewer than ``k`` non-relevant candidates: "min_relevant" contexts of
every non-relevant candidate plus the fewest relevant ones needed; fewer than ``k`` candidates: the
whole pool in random orders.

Contexts of one query are distinct as ordered tuples when the pool allows (up to ``max_tries``
redraws each). Ids interleave as in the shared SQuAD set: even ``context_id`` positive, odd negative
(while both remain). Everything is seeded per query from ``(seed, crc32(qid))``, so a query's
contexts do not depend on which other queries are sampled or in which order.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from udcg_ltr.data.schema import Passage, QueryRecord


@dataclass(frozen=True)
class ContextSamplingConfig:
    """The sampling protocol's parameters (Hydra group ``fit.sampling`` mirrors these fields)."""

    n_contexts: int = 10
    k: int = 5
    top_n: int = 25
    positive_fraction: float = 0.5
    seed: int = 0
    relevance_threshold: int = 1
    max_tries: int = 50

    def __post_init__(self):
        if self.n_contexts < 1 or self.k < 1 or self.top_n < 1:
            raise ValueError(f"n_contexts, k and top_n must be >= 1: {self}")
        if not 0.0 <= self.positive_fraction <= 1.0:
            raise ValueError(f"positive_fraction must lie in [0, 1], got {self.positive_fraction}")


@dataclass(frozen=True)
class SampledContext:
    """One context: passage ids in prompt order. Duck-compatible with :class:`ContextRun` (qid, context_id, pids)."""

    qid: str
    context_id: int
    pids: tuple[str, ...]
    has_relevant: bool
    kind: str  # "positive", "negative" or "min_relevant" (see the module docstring)

    def to_dict(self) -> dict:
        return {**asdict(self), "pids": list(self.pids)}


def query_rng(seed: int, qid: str, salt: str | None = None) -> np.random.Generator:
    """The per-query generator: independent of the other queries and of their order; ``salt`` (a study's
    name) gives each user of the same seed its own stream."""
    key = [int(seed) & 0xFFFFFFFF, zlib.crc32(qid.encode("utf-8"))]
    return np.random.default_rng(key if salt is None else [*key, zlib.crc32(salt.encode("utf-8"))])


def retrieval_order(record: QueryRecord) -> list[Passage]:
    """The pool in retrieval order (rank, then descending score, then input order)."""
    return sorted(record.passages, key=lambda p: (p.rank if p.rank is not None else math.inf,
                                                 -(p.score if p.score is not None else -math.inf)))  # stable


def candidates(record: QueryRecord, top_n: int) -> list[Passage]:
    """The query's top-``top_n`` passages in retrieval order."""
    return retrieval_order(record)[:top_n]


def _positive_subset(rng: np.random.Generator, rel: np.ndarray, non: np.ndarray, k: int) -> np.ndarray:
    """A uniform ``k``-subset with >= 1 relevant index (truncated hypergeometric count, then draws)."""
    js = np.arange(max(1, k - len(non)), min(k, len(rel)) + 1)
    logw = np.array([math.lgamma(len(rel) + 1) - math.lgamma(j + 1) - math.lgamma(len(rel) - j + 1)
                     + math.lgamma(len(non) + 1) - math.lgamma(k - j + 1) - math.lgamma(len(non) - k + j + 1)
                     for j in js])
    p = np.exp(logw - logw.max())
    j = int(rng.choice(js, p=p / p.sum()))
    return np.concatenate([rng.choice(rel, size=j, replace=False), rng.choice(non, size=k - j, replace=False)])


def sample_query_contexts(record: QueryRecord, config: ContextSamplingConfig = ContextSamplingConfig()
                          ) -> list[SampledContext]:
    """The balanced contexts of one query (see the module docstring for the protocol and fallbacks)."""
    cands = candidates(record, config.top_n)
    if not cands:
        return []
    rng = query_rng(config.seed, record.qid)
    is_rel = np.array([p.is_relevant(config.relevance_threshold) for p in cands])
    rel, non = np.flatnonzero(is_rel), np.flatnonzero(~is_rel)
    k = min(config.k, len(cands))
    if len(rel) == 0:
        n_pos = 0  # no relevant candidate: all negative
    elif len(non) == 0:
        n_pos = config.n_contexts  # nothing but relevant candidates: all positive
    else:
        # round half up: 10 x 0.5 -> 5, 5 x 0.5 -> 3
        n_pos = int(math.floor(config.n_contexts * config.positive_fraction + 0.5))
    neg_kind = "negative" if len(non) >= k else "min_relevant"
    # Interleave: even ids positive, odd ids negative while both kinds remain.
    pairs = itertools.zip_longest(["positive"] * n_pos, [neg_kind] * (config.n_contexts - n_pos))
    kinds = [kind for pair in pairs for kind in pair if kind is not None]

    seen: set[tuple[int, ...]] = set()
    out = []
    for cid, kind in enumerate(kinds):
        for _ in range(max(1, config.max_tries)):
            if kind == "positive":
                subset = _positive_subset(rng, rel, non, k)
            elif kind == "negative":
                subset = rng.choice(non, size=k, replace=False)
            else:  # every non-relevant candidate plus the fewest relevant ones needed
                subset = np.concatenate([non, rng.choice(rel, size=k - len(non), replace=False)])
            order = tuple(int(i) for i in rng.permutation(subset))
            if order not in seen:
                break
        seen.add(order)
        out.append(SampledContext(qid=record.qid, context_id=cid, pids=tuple(cands[i].pid for i in order),
                                  has_relevant=bool(is_rel[list(order)].any()), kind=kind))
    return out


def sample_contexts(records: Iterable[QueryRecord], config: ContextSamplingConfig | None = None,
                    **overrides) -> list[SampledContext]:
    """Balanced contexts for every query, in record order then context id; ``overrides`` replace fields of
    ``config`` (e.g. ``sample_contexts(records, k=3, seed=1)``)."""
    config = config or ContextSamplingConfig()
    if overrides:
        config = ContextSamplingConfig(**{**asdict(config), **overrides})
    return [c for record in records for c in sample_query_contexts(record, config)]


def truncate_contexts(contexts: Sequence, k: int, records_by_qid: dict[str, QueryRecord] | None = None,
                      relevance_threshold: int = 1) -> list[SampledContext]:
    """The "first ``k`` passages" variant: every context cut to its first ``k`` passages in prompt order."""
    out = []
    for c in contexts:
        pids = tuple(c.pids[:k])
        if records_by_qid is not None:
            rec = records_by_qid[c.qid]
            has_rel = any(rec.passage(p).is_relevant(relevance_threshold) for p in pids)
        else:
            has_rel = bool(getattr(c, "has_relevant", False))
        out.append(SampledContext(qid=c.qid, context_id=int(c.context_id), pids=pids, has_relevant=has_rel,
                                  kind="truncated"))
    return out


def sampling_summary(contexts: Sequence[SampledContext]) -> dict[str, int]:
    """Counts by kind and the number of queries that needed a fallback (for the study's report)."""
    queries = {c.qid for c in contexts}
    return {"contexts": len(contexts), "queries": len(queries), **Counter(c.kind for c in contexts),
            "queries_min_relevant_fallback": len({c.qid for c in contexts if c.kind == "min_relevant"}),
            "queries_without_relevant": len(queries - {c.qid for c in contexts if c.has_relevant})}
