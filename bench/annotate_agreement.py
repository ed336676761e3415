"""Re-annotate 20 passages of the shared annotated SQuAD set with the demo LLM and compare.

The scorer is configured as ``annotated/meta.json`` says (prompt texts and templates, float32 on CPU,
greedy decoding with at most 24 new tokens, batches of 8 prompts sorted by length, left padding).
The passages are the first two of every 40th question (spread over the file and its splits).

    .venv/bin/python bench/annotate_agreement.py [--n 20] [--threads 2]

Last line: ``agreement: within_0.01=N/20 same_answer=M/20``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args()

    import torch

    from udcg_ltr.annotate.agreement import reannotate_shared, spread_sample
    from udcg_ltr.annotate.llms import load_llm
    from udcg_ltr.annotate.prompts import PromptConfig
    from udcg_ltr.data.readers.annotated import (
        ANNOTATED_LLM,
        annotated_dir,
        read_annotated_squad,
        read_annotation_meta,
    )

    if not (annotated_dir() / "squad_top10.jsonl.gz").is_file():
        print(f"shared annotated set not found under {annotated_dir()}", file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    meta = read_annotation_meta()
    scorer = load_llm("demo", prompt=PromptConfig.from_meta(meta), dtype="float32", device="cpu",
                      batch_size=8, max_new_tokens=24)
    pairs = spread_sample(read_annotated_squad(), args.n)
    t0 = time.perf_counter()
    report = reannotate_shared(scorer, pairs, ANNOTATED_LLM, tolerance=args.tolerance)
    seconds = time.perf_counter() - t0
    for row in report.rows:
        mark = " " if row.abs_diff < args.tolerance else "*"
        same = "=" if row.same_answer else "!"
        print(f"{mark}{same} {row.pid:>10}  stored {row.stored_p:.4f}  ours {row.ours_p:.4f}  "
              f"diff {row.ours_p - row.stored_p:+.4f}  answer {row.ours_answer!r:.60}"
              + ("" if row.same_answer else f"  (stored {row.stored_answer!r:.60})"))
    print(f"llm: {scorer.name} prompt_version={scorer.prompt_version} threads={args.threads} "
          f"seconds={seconds:.1f}")
    print(f"max_abs_diff: {report.max_abs_diff:.4f}")
    print(f"mean_diff: {report.mean_diff:+.4f}")
    print(report.summary_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
