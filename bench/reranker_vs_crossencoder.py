"""Reranker vs sentence-transformers' CrossEncoder on the same saved folder: the largest score difference.

Scores every (question, passage) pair of the shared annotated SQuAD set's test split (66 questions x 10
titled passages) twice: with :class:`udcg_ltr.models.reranker.Reranker` (passages as records, formatted
with the folder's saved template) and with ``sentence_transformers.CrossEncoder`` loaded from the same
folder, given the passages the one documented way (``format_passage(title, text, read_template(folder))``).
Both in float32 on the same device. Also printed: the difference when CrossEncoder gets the raw passage
texts instead (what a user who skips the template sees) and whether the two agree on every top-1.

``--model``: a saved reranker folder (``<run>/cross_encoder/model``). Without it the packaged
all-MiniLM-L6-v2 start (a fresh one-logit head, seed 0) is saved as a reranker folder under
``outputs/bench/reranker_vs_crossencoder/minilm_start`` and used. A folder saved before the reranker
wrote CrossEncoder's activation into its ``config.json`` is loaded with ``activation_fn=Identity()``
(said in the output).

    .venv/bin/python bench/reranker_vs_crossencoder.py [--model DIR] [--threads 2] [--batch-size 32]

Last line: ``max_abs_diff_vs_crossencoder: X`` (the goal: <= 1e-5).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="saved reranker folder (default: the packaged MiniLM start)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default="outputs/bench/reranker_vs_crossencoder")
    args = parser.parse_args()

    import numpy as np
    import torch
    from sentence_transformers import CrossEncoder

    from udcg_ltr.data.readers.annotated import annotated_dir, read_annotated_squad
    from udcg_ltr.io import atomic_write_json
    from udcg_ltr.jobs.common import select_split
    from udcg_ltr.models.cross_encoder import default_model_path, load_sequence_classifier
    from udcg_ltr.models.reranker import (
        CROSS_ENCODER_ACTIVATION,
        Reranker,
        format_passage,
        read_template,
        save_reranker,
    )

    data = annotated_dir() / "squad_top10.jsonl.gz"
    if not data.is_file():
        print(f"shared annotated set not found: {data}", file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    if args.model is None:
        from transformers import AutoTokenizer

        folder = out / "minilm_start"
        torch.manual_seed(0)  # the fresh one-logit head
        save_reranker(load_sequence_classifier(default_model_path()), AutoTokenizer.from_pretrained(default_model_path()),
                      folder, max_length=256)
        print(f"model: packaged all-MiniLM-L6-v2 start (fresh head, seed 0), saved to {folder}")
    else:
        folder = Path(args.model)
        print(f"model: {folder}")

    records = select_split(read_annotated_squad(data), args.split)
    pairs = [(r.question, p) for r in records for p in r.passages]
    titled = np.array([bool(p.title) for _, p in pairs])
    print(f"data: {data.name} split={args.split} questions={len(records)} pairs={len(pairs)} titled={int(titled.sum())}")

    reranker = Reranker.from_pretrained(folder, device=args.device, batch_size=args.batch_size, precision="32-true")
    t0 = time.perf_counter()
    ours = reranker.predict(pairs)
    seconds_ours = time.perf_counter() - t0

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    saved_activation = (config.get("sentence_transformers") or {}).get("activation_fn")
    kwargs = {}
    if saved_activation != CROSS_ENCODER_ACTIVATION:
        print(f"note: {folder / 'config.json'} names activation {saved_activation!r} (saved before the identity entry): "
              "loading CrossEncoder with activation_fn=torch.nn.Identity()")
        kwargs["activation_fn"] = torch.nn.Identity()
    cross_encoder = CrossEncoder(str(folder), device=args.device, **kwargs)
    template = read_template(folder)
    formatted = [(q, format_passage(p.title, p.text, template)) for q, p in pairs]
    t0 = time.perf_counter()
    theirs = cross_encoder.predict(formatted, batch_size=args.batch_size, show_progress_bar=False)
    seconds_theirs = time.perf_counter() - t0
    untemplated = cross_encoder.predict([(q, p.text) for q, p in pairs], batch_size=args.batch_size,
                                        show_progress_bar=False)

    diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    diff_raw = np.abs(ours.astype(np.float64) - untemplated.astype(np.float64))
    start, same_top1 = 0, 0
    for r in records:
        n = len(r.passages)
        same_top1 += int(np.argmax(ours[start:start + n]) == np.argmax(theirs[start:start + n]))
        start += n
    result = {
        "model": str(folder), "template": template, "split": args.split, "questions": len(records),
        "pairs": len(pairs), "titled_pairs": int(titled.sum()), "score_range": [float(ours.min()), float(ours.max())],
        "max_abs_diff_vs_crossencoder": float(diff.max()), "mean_abs_diff": float(diff.mean()),
        "max_abs_diff_without_template": float(diff_raw.max()), "same_top1": f"{same_top1}/{len(records)}",
        "seconds_reranker": seconds_ours, "seconds_crossencoder": seconds_theirs,
        "crossencoder_activation": type(cross_encoder.activation_fn).__name__,
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "results.json", result)
    print(f"template: {template!r}  scores in [{ours.min():.4f}, {ours.max():.4f}]  "
          f"seconds: reranker {seconds_ours:.1f}, CrossEncoder {seconds_theirs:.1f}")
    print(f"mean_abs_diff: {diff.mean():.3e}")
    print(f"max_abs_diff_without_template: {diff_raw.max():.3e}")
    print(f"same_top1: {same_top1}/{len(records)}")
    print(f"max_abs_diff_vs_crossencoder: {diff.max():.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
