"""Rerankers on the full annotated SQuAD set: retriever order vs BCE vs direct UDCG (issue 15).

A thin wrapper over :mod:`reranker_squad` with the full set's defaults: ``--dataset annotated_full``, the whole
test split (1,643 questions) for every number, paired per-query bootstrap CIs and p-values on UDCG@5, nDCG@5 and
hits@5, three seeds per trained system, bf16 autocast training where the CPU has bf16 units. Every trained
cross-encoder is interpolated with the retriever's score (``--fusion``: the weight chosen on the val questions by
UDCG@5, the same rule for BCE and direct UDCG, :mod:`udcg_ltr.models.fusion`); the ``*_alone`` rows show the
cross-encoders without it.

The 2-core CPU budget (90 minutes from a fresh clone) sets the default training budget: a seeded subsample of
``--train-questions 600`` of the 6,468 train questions for ``--epochs 1``, epochs selected on 200 val questions;
each model then costs about 5 min of training and 5 min of scoring the test split here. On a GPU pass
``--train-questions 0`` (all of them) and more epochs. Any other option of ``reranker_squad.py`` passes through.

Ends with ``udcg@5_test_full: retriever=A bce=B udcg=C p_udcg_vs_retriever=P1 p_udcg_vs_bce=P2``.
"""

from __future__ import annotations

import sys

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)
import reranker_squad

DEFAULTS = ["--dataset", "annotated_full", "--train-questions", "600", "--val-questions", "200", "--epochs", "1",
            "--seeds", "0,1,2", "--systems", "bce,udcg", "--precision", "auto", "--reuse", "--fusion",
            "--out-dir", "outputs/bench/full_rerankers"]


def main(argv: list[str] | None = None) -> dict:
    # argparse keeps the last value of a repeated flag: the caller's options override the defaults
    return reranker_squad.main(DEFAULTS + list(sys.argv[1:] if argv is None else argv))

if __name__ == "__main__":
    main()
