"""A seeded generative model of utilities and end-to-end outcomes, for benches and tests.

Pool passages are relevant with probability ``p_relevant`` (at least one per query), with ``P(NO-RESPONSE)
~ Beta(1.5, 4)`` if relevant, else ``Beta(a_q, 2)`` (per-query ``a_q``: some queries have strong
distractors). A context's outcome is an ordinal logit of a hidden score with known positional weights::

    z = sum_i a_i u_i+ + sum_i b_i u_i-  (+ query effect + logistic noise / temperature)
    wrong if z < t1, abstained if t1 <= z < t2, correct if z >= t2 (and the context holds a relevant passage)

with ``a`` U-shaped over positions (lost in the middle) and ``b`` decreasing, for UDCG_theta to recover.
"""

from __future__ import annotations

import numpy as np

from udcg_ltr.data.contexts import ContextRun
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.fit.pairs import build_context_table
from udcg_ltr.fit.sampling import sample_contexts

SYNTHETIC_LLM = "synthetic-llm"
SPLITS = ("train", "val", "test")


def true_weights(k: int) -> tuple[np.ndarray, np.ndarray]:
    """The hidden positional weights: ``alpha`` U-shaped, ``beta`` decreasing with position (both > 0)."""
    x = np.linspace(-1.0, 1.0, k) if k > 1 else np.zeros(1)
    alpha = (1.2 + 1.0 * x ** 2) * 2.0 / k
    return alpha, np.linspace(1.4, 0.6, k) * 1.2 / k


def synthetic_records(n_queries: int, *, pool_size: int = 12, p_relevant: float = 0.25, seed: int = 0,
                      llm: str = SYNTHETIC_LLM) -> list[QueryRecord]:
    """Seeded query records with P(NO-RESPONSE), ``answer_alone`` and ``answer_logprob`` annotations
    (60 / 20 / 20 % of the queries in train / val / test)."""
    rng = np.random.default_rng(seed)
    cuts = np.cumsum((0.6, 0.2, 0.2))[:-1] * n_queries
    records = []
    for q in range(n_queries):
        rel = rng.random(pool_size) < p_relevant
        if not rel.any():
            rel[rng.integers(pool_size)] = True
        a_q = rng.uniform(1.0, 4.0)
        pnr = np.where(rel, rng.beta(1.5, 4.0, pool_size), rng.beta(a_q, 2.0, pool_size))
        answer = f"answer {q}"
        passages = []
        for i in range(pool_size):
            alone = (answer if rel[i] else f"distractor {q}-{i}") if rng.random() > pnr[i] else "NO-RESPONSE"
            logprob = float(np.log(np.clip((1 - pnr[i]) * (0.9 if rel[i] else 0.05), 1e-6, 1)))
            passages.append(Passage(
                pid=f"q{q}-p{i}", title=f"T{q}", text=f"passage {i} of query {q}" + (f" says {answer}" if rel[i] else ""),
                rank=i + 1, score=float(pool_size - i), relevance=int(rel[i]),
                annotations={llm: {"p_no_response": float(pnr[i]), "answer_alone": alone, "answer_logprob": logprob}}))
        split = SPLITS[int(np.searchsorted(cuts, q, side="right"))]
        records.append(QueryRecord(qid=f"q{q}", question=f"question {q}?", answers=[answer], passages=passages,
                                   split=split))
    return records


def synthetic_outcomes(utility: np.ndarray, mask: np.ndarray, has_relevant: np.ndarray, qids: np.ndarray, *,
                       alpha: np.ndarray, beta: np.ndarray, seed: int = 0, temperature: float = 0.35,
                       query_sd: float = 0.3, thresholds=(-0.25, 0.25)) -> np.ndarray:
    """Outcome strings (correct / abstained / wrong) from the ordinal logit model of the module docstring."""
    rng = np.random.default_rng(seed)
    u = np.where(mask, utility, 0.0)
    k = u.shape[1]
    z = (alpha[:k] * np.maximum(u, 0.0) + beta[:k] * np.minimum(u, 0.0)).sum(axis=1)
    uq, inv = np.unique(qids, return_inverse=True)
    z = z + rng.normal(0.0, query_sd, len(uq))[inv.ravel()]
    z = z + temperature * rng.logistic(size=len(z))
    out = np.where(z >= thresholds[1], "correct", np.where(z >= thresholds[0], "abstained", "wrong"))
    return np.where((out == "correct") & ~has_relevant, "wrong", out)


def synthetic_study_data(n_queries: int = 60, *, n_contexts: int = 10, k: int = 5, pool_size: int = 12,
                         p_relevant: float = 0.25, seed: int = 0, llm: str = SYNTHETIC_LLM, **outcome_kwargs
                         ) -> tuple[list[QueryRecord], list[ContextRun]]:
    """Records plus graded runs (balanced contexts of ``k`` passages) drawn from the generative model."""
    records = synthetic_records(n_queries, pool_size=pool_size, p_relevant=p_relevant, seed=seed, llm=llm)
    contexts = sample_contexts(records, n_contexts=n_contexts, k=k, top_n=pool_size, seed=seed)
    table = build_context_table(records, contexts, llm, k=k)
    alpha, beta = true_weights(k)
    outcomes = synthetic_outcomes(table.utility, table.mask, table.relevant.any(axis=1), table.qids,
                                  alpha=alpha, beta=beta, seed=seed + 1, **outcome_kwargs)
    answers = {r.qid: {"correct": r.answers[0], "abstained": "NO-RESPONSE", "wrong": "something else"} for r in records}
    return records, [ContextRun(qid=c.qid, context_id=c.context_id, pids=list(c.pids), llm=llm,
                                answer=answers[c.qid][str(o)], outcome=str(o))
                     for c, o in zip(contexts, outcomes)]
