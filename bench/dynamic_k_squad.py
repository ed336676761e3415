"""Dynamic-k selectors on the 400-question annotated SQuAD set: how many passages should the LLM read?

``bench/full_dynamic_k.py --dataset annotated``: the named Hydra experiment ``evaluate.py
experiment=dynamic_k_squad`` (the retriever's order; ``--order reranker``: ``dynamic_k_squad_reranker``), whose
job (``mode=selectors``) fits the rule selectors (best fixed k, score and relative thresholds, cumulative utility)
on train + val, trains the grid of learned ones (gate, k-classifier, expected and calibrated utility; list
features, lexical coverage, reader probes) on the 274 train questions with epoch and configuration chosen on the
60 val ones, and scores every selector and the oracle by the UDCG (Eq. 4) of the kept top-k on the 66 test
questions; the bench adds bootstrap CIs, paired tests against ``best_fixed`` and the gap closed. In the reranker
order the held-out scores come the way ``full_dynamic_k.py`` gets them: the reranker is a run of
``bench/reranker_squad.py`` (best on val in its ``summary.json``, or ``--reranker-run``) and its own train / val
questions are left out, so it must have trained on part of each split (``reranker_squad.py --train-questions 137
--val-questions 30``). Outputs in ``outputs/bench/dynamic_k_squad``; every option of ``full_dynamic_k.py`` passes
through (``--max-queries 45 --grid quick --no-probes --max-epochs 1``: a seconds-long check of the plumbing).

Ends with ``udcg_test: best_fixed=A relative_threshold=B learned=C oracle=D gap_closed=G p=P``
(``udcg_test_reranker_order: ...`` with ``--order reranker``).
"""

from __future__ import annotations

import sys

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)
import full_dynamic_k

DEFAULTS = ["--dataset", "annotated", "--out", str(_offline.ROOT / "outputs" / "bench" / "dynamic_k_squad")]


def main(argv: list[str] | None = None) -> int:
    # argparse keeps the last value of a repeated option: the caller's options override these
    return full_dynamic_k.main(DEFAULTS + list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
