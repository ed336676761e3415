"""An LLM's fast CPU mode against its float32 self: P(NO-RESPONSE) and the greedy answer on the same prompts.

The prompts are single-passage prompts of the shared annotated SQuAD set (the first two passages of evenly
spaced questions, :func:`~udcg_ltr.annotate.agreement.spread_sample`). ``--llm NAME`` names ``conf/llm/NAME.yaml``
(float32) and ``conf/llm/NAME_fast.yaml``, whose ``quantize: auto`` is forced to ``bf16-linear`` here: the bench
measures the bf16 numerics the fast mode runs where bfloat16 is native, on any machine. The bar is the demo LLM's:
at least 18 of 20 (90%) within 0.01, and as many with the same greedy answer.

Resumable: both modes score through the annotation cache (keyed apart by precision), one batch at a time, so a
killed run loses at most one batch and a rerun continues. The speed ratio (fast / float32 prompts per second) is
taken over the prompts each mode computed; ``--rates FILE`` keeps those counts and seconds across resumed runs,
and the last line says how many runs they span (a ratio from one uninterrupted run is the clean one).

    .venv/bin/python bench/llm_agreement.py --llm qwen2.5-coder-1.5b [--n 100] [--threads 2]

Last line: ``llm_agreement: llm=L n=N within_0.01=W/N same_answer=A/N max_abs_diff=D float32_prompts_per_s=..
fast_prompts_per_s=.. fast_vs_float32=..x runs=R bar=met|not met``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)

EXACT_KEY = "float32"  # the float32 run's results, stored beside the shared annotations for the comparison


class RateLog:
    """Prompts computed and seconds spent per mode, summed over resumed runs (a JSON file, written atomically)."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {"runs": 0}
        self.data["runs"] += 1

    def add(self, mode: str, prompts: int, seconds: float) -> None:
        entry = self.data.setdefault(mode, {"prompts": 0, "seconds": 0.0})
        entry["prompts"] += prompts
        entry["seconds"] += seconds
        from udcg_ltr.io import atomic_write_json

        atomic_write_json(self.path, self.data)

    def rate(self, mode: str) -> float:
        entry = self.data.get(mode, {})
        return entry["prompts"] / entry["seconds"] if entry.get("seconds") else float("nan")


def cached_scorer(llm: str, threads: int, **overrides):
    """``llm`` in the default annotation cache: every batch is kept, so a rerun resumes where a run stopped."""
    from udcg_ltr.annotate.annotator import CachedScorer
    from udcg_ltr.annotate.cache import open_cache
    from udcg_ltr.annotate.llms import load_llm

    scorer = load_llm(llm, num_threads=threads, progress=False, **overrides)
    return CachedScorer(scorer, open_cache(True, scorer.name))


def timed_score(scorer, items, rates: RateLog, mode: str):
    """Score ``items`` with answers; the prompts computed (not cached) and their seconds go to ``rates``."""
    t0 = time.perf_counter()
    results = scorer.score(items, generate=True, progress=True)
    computed = scorer.stats.by_task.get("score", {}).get("computed", 0)
    rates.add(mode, computed, time.perf_counter() - t0 if computed else 0.0)
    return results


def score_exact(llm: str, pairs, items, threads: int, rates: RateLog) -> None:
    """Score ``items`` (the prompts of ``pairs``) in float32 and store the results under :data:`EXACT_KEY` beside
    each passage."""
    from udcg_ltr.annotate import llms

    results = timed_score(cached_scorer(llm, threads), items, rates, "float32")
    for (_, passage), res in zip(pairs, results):
        passage.annotations[EXACT_KEY] = {"p_no_response": res.p_no_response, "answer_alone": res.answer}
    llms._LOADED.clear()  # frees the float32 weights before the fast copy loads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm", default="qwen2.5-coder-1.5b", help="conf/llm stem; NAME_fast must exist too")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--rates", type=Path, default=None,
                        help="JSON of computed prompts and seconds per mode (default outputs/llm_agreement/LLM_nN.json)")
    args = parser.parse_args()

    from udcg_ltr.annotate.agreement import AgreementReport, AgreementRow, spread_sample
    from udcg_ltr.annotate.llms import llm_config
    from udcg_ltr.annotate.prompts import PromptItem
    from udcg_ltr.data.readers.annotated import read_annotated_squad

    if llm_config(args.llm) is None or llm_config(f"{args.llm}_fast") is None:
        parser.error(f"conf/llm/{args.llm}.yaml and conf/llm/{args.llm}_fast.yaml must both exist")
    rates_path = args.rates or Path("outputs/llm_agreement") / f"{args.llm}_n{args.n}.json"
    rates_path.parent.mkdir(parents=True, exist_ok=True)
    rates = RateLog(rates_path)
    pairs = spread_sample(read_annotated_squad(), args.n, per_question=2)
    print(f"llm_agreement: {len(pairs)} prompts, float32 then fast mode ({args.llm}); about 5-40 s a prompt on a "
          "2-core CPU; cached prompts are not recomputed", flush=True)
    items = [PromptItem(r.question, [(p.title, p.text)]) for r, p in pairs]
    score_exact(args.llm, pairs, items, args.threads, rates)
    print(f"llm_agreement: float32 done at {rates.rate('float32'):.3f} prompts/s; now the fast mode", flush=True)
    fast = timed_score(cached_scorer(f"{args.llm}_fast", args.threads, quantize="bf16-linear"), items, rates, "fast")
    report = AgreementReport([AgreementRow(r.qid, p.pid, p.annotations[EXACT_KEY]["p_no_response"], res.p_no_response,
                                           p.annotations[EXACT_KEY]["answer_alone"], res.answer)
                              for (r, p), res in zip(pairs, fast)], args.tolerance)
    met = min(report.within, report.same_answer) >= 0.9 * report.n  # 18 of 20, on both counts
    exact_rate, fast_rate = rates.rate("float32"), rates.rate("fast")
    print(f"llm_agreement: llm={args.llm} n={report.n} within_{args.tolerance:g}={report.within}/{report.n} "
          f"same_answer={report.same_answer}/{report.n} max_abs_diff={report.max_abs_diff:.4f} "
          f"float32_prompts_per_s={exact_rate:.3f} fast_prompts_per_s={fast_rate:.3f} "
          f"fast_vs_float32={fast_rate / exact_rate:.2f}x runs={rates.data['runs']} bar={'met' if met else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
