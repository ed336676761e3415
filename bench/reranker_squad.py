"""BCE vs direct-UDCG cross-encoders on the 400-question annotated SQuAD set (training included).

``bench/full_rerankers.py --dataset annotated``: one job per system and seed of the named train experiments
``squad_bce`` / ``squad_udcg`` (the packaged MiniLM, 6 epochs of the 274 train questions, 8 questions a step,
float32, best epoch on val UDCG@5, evaluated on val and test), then paired per-query bootstrap tests on test.
Outputs in ``outputs/bench/reranker_squad``; every option of ``full_rerankers.py`` passes through.

Ends with ``udcg@5_test: retriever=A bce=B udcg=C p_udcg_vs_retriever=P1 p_udcg_vs_bce=P2``.
"""

from __future__ import annotations

import sys

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)
import full_rerankers

DEFAULTS = ["--dataset", "annotated", "--out", str(_offline.ROOT / "outputs" / "bench" / "reranker_squad")]


def main(argv: list[str] | None = None) -> int:
    # argparse keeps the last value of a repeated option: the caller's options override these
    return full_rerankers.main(DEFAULTS + list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
