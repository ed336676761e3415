"""P(NO-RESPONSE) throughput: our scorer against the reference method, demo LLM, 64 prompts.

* reference: one unbatched float32 forward pass per prompt (every position through the LM head, no
  prefix reuse) -- ``LLMScorer.score_reference``, the way the UDCG authors' script scores;
* exact: our scorer in float32 (length-bucketed batches of 8, left padding, the instruction prefix's
  KV cache reused, LM head on the last position only, inference mode); must agree within 1e-4;
* fast: the same scorer with ``quantize="bf16-linear"``: the decoder's Linear layers run with
  bfloat16 weights and inputs (this CPU has AVX512-BF16), the residual stream, norms, attention and
  LM head stay float32, and the last 16 prompt tokens use the exact weights; must agree within 0.01.
  (Plain bfloat16 weights, ``--fast-dtype bfloat16 --fast-quantize none``, are a little faster but
  drift by ~0.03; ``--fast-quantize int8-dynamic`` is slower than float32 on this CPU.)

The prompts are the first 64 (question, passage) pairs of the shared annotated SQuAD set (or of the
demo world when the shared folder is absent). Timing is interleaved: the prompts are split into two
halves and the three methods run on each half in rotated order, so load from other processes hits
all three alike; each method is warmed up first (prefix cache, oneDNN kernels).

    .venv/bin/python bench/annotate_speed.py [--n 64] [--threads 2] [--batch-size 8]

Last lines: ``speedup_exact``, ``max_abs_diff_exact``, ``speedup_fast``, ``max_abs_diff_fast``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)


def load_prompts(n: int):
    from udcg_ltr.annotate.prompts import PromptItem
    from udcg_ltr.data.readers.annotated import annotated_dir, read_annotated_squad

    if (annotated_dir() / "squad_top10.jsonl.gz").is_file():
        records, source = read_annotated_squad(), "annotated SQuAD"
    else:
        from udcg_ltr.data.demo_world import generate_demo_world
        records, source = generate_demo_world(seed=0), "demo world"
    items = [PromptItem(r.question, [(p.title, p.text)]) for r in records for p in r.passages][:n]
    if len(items) < n:
        raise SystemExit(f"only {len(items)} prompts available from {source}")
    return items, source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--fast-dtype", default="float32")
    parser.add_argument("--fast-quantize", default="bf16-linear", help="bf16-linear | int8-dynamic | none")
    parser.add_argument("--exact-tail", type=int, default=16)
    parser.add_argument("--fast-batch-size", type=int, default=None)
    args = parser.parse_args()

    import torch

    from udcg_ltr.annotate.llms import load_llm
    from udcg_ltr.annotate.prompts import PromptConfig

    torch.set_num_threads(args.threads)
    items, source = load_prompts(args.n)
    prompt = PromptConfig()  # the paper's prompt = annotated/meta.json
    exact = load_llm("demo", dtype="float32", batch_size=args.batch_size, prompt=prompt, progress=False)
    quantize = None if str(args.fast_quantize).lower() in ("none", "null", "") else args.fast_quantize
    fast = load_llm("demo", dtype=args.fast_dtype, quantize=quantize, prompt=prompt, progress=False,
                    batch_size=args.fast_batch_size or args.batch_size, exact_tail=args.exact_tail)
    lengths = [len(exact.encode(it)) for it in items]
    print(f"prompts: {len(items)} from {source}; tokens min/mean/max {min(lengths)}/"
          f"{sum(lengths) / len(lengths):.0f}/{max(lengths)}; shared prefix {len(exact.prefix_ids())} tokens; "
          f"threads {torch.get_num_threads()}")

    methods = {
        "reference": lambda chunk: [r.p_no_response for r in exact.score_reference(chunk)],
        "exact": lambda chunk: [r.p_no_response for r in exact.score(chunk)],
        "fast": lambda chunk: [r.p_no_response for r in fast.score(chunk)],
    }
    for fn in methods.values():  # warm-up: prefix cache + its one-off check, kernel selection
        fn(items[:2])

    half = len(items) // 2
    chunks = [items[:half], items[half:]]
    orders = [["reference", "exact", "fast"], ["fast", "exact", "reference"]]
    seconds = {m: 0.0 for m in methods}
    probs: dict[str, list[float]] = {m: [] for m in methods}
    for chunk, order in zip(chunks, orders):
        got = {}
        for m in order:
            t0 = time.perf_counter()
            got[m] = methods[m](chunk)
            seconds[m] += time.perf_counter() - t0
        for m in methods:
            probs[m].extend(got[m])

    ref = probs["reference"]
    diff = {m: max(abs(a - b) for a, b in zip(probs[m], ref)) for m in ("exact", "fast")}
    for m in methods:
        print(f"{m:>9}: {seconds[m]:7.1f} s  {len(items) / seconds[m]:.2f} prompts/s")
    print(f"fast mode: dtype={args.fast_dtype} quantize={quantize} exact_tail={args.exact_tail}")
    ok_exact, ok_fast = diff["exact"] < 1e-4, diff["fast"] <= 0.01
    print(f"exact within 1e-4: {ok_exact}; fast within 0.01: {ok_fast}")
    print(f"speedup_exact: {seconds['reference'] / seconds['exact']:.2f}")
    print(f"max_abs_diff_exact: {diff['exact']:.2e}")
    print(f"speedup_fast: {seconds['reference'] / seconds['fast']:.2f}")
    print(f"max_abs_diff_fast: {diff['fast']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
