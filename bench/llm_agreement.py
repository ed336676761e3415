"""An LLM's fast CPU mode against its float32 self: P(NO-RESPONSE) and the greedy answer on the same prompts.

The prompts are single-passage prompts of the shared annotated SQuAD set (the first two passages of evenly
spaced questions, :func:`~udcg_ltr.annotate.agreement.spread_sample`). ``--llm NAME`` names ``conf/llm/NAME.yaml``
(float32) and ``conf/llm/NAME_fast.yaml`` (``quantize: bf16-linear``). The bar is the demo LLM's: at least 18 of
20 (90%) within 0.01, and as many with the same greedy answer. Both modes run on the same prompts in one process, so the
speed ratio (fast / float32 prompts per second) is measured under the same load.

    .venv/bin/python bench/llm_agreement.py --llm qwen2.5-coder-1.5b [--n 100] [--threads 2]

Last line: ``llm_agreement: llm=L n=N within_0.01=W/N same_answer=A/N max_abs_diff=D float32_prompts_per_s=..
fast_prompts_per_s=.. fast_vs_float32=..x bar=met|not met``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)

EXACT_KEY = "float32"  # the float32 run's results, stored beside the shared annotations for the comparison


def score_exact(llm: str, pairs, threads: int) -> float:
    """Score ``pairs`` in float32, store the results under :data:`EXACT_KEY`; returns prompts per second."""
    from udcg_ltr.annotate import llms
    from udcg_ltr.annotate.prompts import PromptItem

    scorer = llms.load_llm(llm, num_threads=threads, progress=False)
    t0 = time.perf_counter()
    results = scorer.score([PromptItem(r.question, [(p.title, p.text)]) for r, p in pairs], generate=True)
    rate = len(pairs) / (time.perf_counter() - t0)
    for (_, passage), res in zip(pairs, results):
        passage.annotations[EXACT_KEY] = {"p_no_response": res.p_no_response, "answer_alone": res.answer}
    llms._LOADED.clear()  # frees the float32 weights before the fast copy loads
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm", default="qwen2.5-coder-1.5b", help="conf/llm stem; NAME_fast must exist too")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args()

    from udcg_ltr.annotate.agreement import reannotate_shared, spread_sample
    from udcg_ltr.annotate.llms import llm_config, load_llm
    from udcg_ltr.data.readers.annotated import read_annotated_squad

    if llm_config(args.llm) is None or llm_config(f"{args.llm}_fast") is None:
        parser.error(f"conf/llm/{args.llm}.yaml and conf/llm/{args.llm}_fast.yaml must both exist")
    pairs = spread_sample(read_annotated_squad(), args.n, per_question=2)
    print(f"llm_agreement: {len(pairs)} prompts, float32 then fast mode ({args.llm}); about 5-40 s a prompt on a "
          "2-core CPU", flush=True)
    exact_rate = score_exact(args.llm, pairs, args.threads)
    print(f"llm_agreement: float32 done at {exact_rate:.3f} prompts/s; now the fast mode", flush=True)
    fast = load_llm(f"{args.llm}_fast", num_threads=args.threads, progress=False)
    t0 = time.perf_counter()
    report = reannotate_shared(fast, pairs, EXACT_KEY, tolerance=args.tolerance)
    fast_rate = len(pairs) / (time.perf_counter() - t0)
    met = min(report.within, report.same_answer) >= 0.9 * report.n  # 18 of 20, on both counts
    print(f"llm_agreement: llm={args.llm} n={report.n} within_{args.tolerance:g}={report.within}/{report.n} "
          f"same_answer={report.same_answer}/{report.n} max_abs_diff={report.max_abs_diff:.4f} "
          f"float32_prompts_per_s={exact_rate:.3f} fast_prompts_per_s={fast_rate:.3f} "
          f"fast_vs_float32={fast_rate / exact_rate:.2f}x bar={'met' if met else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
