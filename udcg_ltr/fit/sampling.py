"""Context sampling for the metric / end-to-end accuracy study (the UDCG paper's protocol).

Per query, ``n_contexts`` contexts of ``k`` passages from its top-``top_n`` candidates (retrieval order), *balanced*:
about ``positive_fraction`` hold a relevant passage, the rest none, so that one query's outcomes vary and its
correlation is defined. The order inside a context is a uniform permutation and **is the prompt order**. Positive
contexts are uniform over the ``k``-subsets with a relevant passage (relevant count ``j >= 1`` from the truncated
hypergeometric ``P(j) ~ C(R, j) C(N, k - j)``), negative ones uniform over the non-relevant ``k``-subsets. Fallbacks
(:attr:`SampledContext.kind`): no relevant candidate: all negative (the study reports the missing correct outcome rather
than hiding it); fewer than ``k`` non-relevant: "min_relevant", every non-relevant candidate plus the fewest relevant
ones; fewer than ``k`` candidates: the whole pool in random orders. Contexts are distinct when the pool allows
(``max_tries`` redraws), even ``context_id`` positive and odd negative while both remain, seeded from
``(seed, crc32(qid))`` so that they do not depend on the other queries.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

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
    w = [math.comb(len(rel), j) * math.comb(len(non), k - j) for j in js.tolist()]  # exact ints: no overflow
    total = sum(w)
    j = int(rng.choice(js, p=[x / total for x in w]))
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
    config = replace(config or ContextSamplingConfig(), **overrides)
    return [c for record in records for c in sample_query_contexts(record, config)]


def truncate_contexts(contexts: Sequence, k: int, records_by_qid: dict[str, QueryRecord],
                      relevance_threshold: int = 1) -> list[SampledContext]:
    """The "first ``k`` passages" variant: every context cut to its first ``k`` passages in prompt order."""
    out = []
    for c in contexts:
        pids = tuple(c.pids[:k])
        has_rel = any(records_by_qid[c.qid].passage(p).is_relevant(relevance_threshold) for p in pids)
        out.append(SampledContext(qid=c.qid, context_id=int(c.context_id), pids=pids, has_relevant=has_rel,
                                  kind="truncated"))
    return out


def sampling_summary(contexts: Sequence[SampledContext]) -> dict[str, int]:
    """Counts by kind and the number of queries that needed a fallback (for the study's report)."""
    queries = {c.qid for c in contexts}
    return {"contexts": len(contexts), "queries": len(queries), **Counter(c.kind for c in contexts),
            "queries_min_relevant_fallback": len({c.qid for c in contexts if c.kind == "min_relevant"}),
            "queries_without_relevant": len(queries - {c.qid for c in contexts if c.has_relevant})}
