"""Training throughput of our cross-encoder loop vs sentence-transformers' CrossEncoderTrainer, and bf16 quality.

Same model, same loss (binary cross-entropy with logits on relevance labels), same optimiser
(AdamW, weight decay 0.01, constant learning rate, gradient clipping at 1.0), same batches (slates
of the annotated SQuAD train split in the same order: a batch of ``--queries`` slates of 10
passages is ``10 * queries`` pairs for both), same ``max_length`` with dynamic padding, same threads.

* ours: :func:`udcg_ltr.models.training.fit_reranker`, exactly as ``train.py`` calls it (the
  pairs tokenised once when the data module is built, length buckets, Lightning), in float32
  (``32-true``) and in ``bf16-mixed`` (autocast: float32 master weights, bf16 matrix products);
* baseline: ``sentence_transformers.cross_encoder.CrossEncoderTrainer`` with ``BinaryCrossEntropyLoss``
  (v6 trainer API; it tokenises in its collator), float32, fed the same pairs in the same order.

Each configuration runs ``--rounds`` times in ABBA order to cancel drift on a shared machine; a
round trains ``--warmup + --steps`` steps and times the last ``--steps`` (data loading,
tokenisation where the framework does it per batch, forward, backward, clipping, optimiser step).

Three comparisons, all in one run:

1. MiniLM-L6 (the packaged all-MiniLM-L6-v2 with a new one-logit head): pairs/s of ours fp32,
   ours bf16 and sentence-transformers fp32;
2. host overhead: a tiny cross-encoder (2 layers, hidden 128, random weights, MiniLM's tokenizer)
   whose model costs almost nothing, so steps/s measures the training loop itself (what decides
   whether a GPU would be host-bound);
3. quality (``--quality-steps``, 0 to skip): the direct-UDCG MiniLM trained for the same steps from
   the same seed in fp32 and in bf16 on the full annotated set's train split, each validated
   (float32 inference) on a fixed sample of its val split: UDCG@5 of both and the difference.

Last lines (read by machine)::

    speedup_vs_sentence_transformers: X       # ours fp32 / ST fp32, pairs/s
    speedup_bf16_vs_sentence_transformers: Y  # ours bf16 / ST fp32, pairs/s
    host_overhead_ratio: Z                    # tiny model: ours steps/s / ST steps/s
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)
import numpy as np
import pytorch_lightning as pl
import torch

from udcg_ltr.data.readers.annotated import read_annotated_squad
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.models.cross_encoder import default_model_path
from udcg_ltr.models.datamodule import build_slates
from udcg_ltr.models.evaluation import evaluate_reranker
from udcg_ltr.models.reranker import Reranker
from udcg_ltr.models.training import fit_reranker
from udcg_ltr.paths import data_dir

ANNOTATED_LLM = "qwen2.5-coder-0.5b-instruct"


def load_records(n: int, split: str = "train", path: str | None = None) -> list[QueryRecord]:
    """The first ``n`` annotated SQuAD questions of ``split`` with 10 passages, or a synthetic stand-in without data."""
    try:
        recs = [r for r in read_annotated_squad(path) if r.split == split and len(r.passages) == 10]
        if len(recs) >= n:
            return recs[:n]
    except (FileNotFoundError, OSError):
        pass
    rng = random.Random(0)
    words = "the of a in river city war king music science history church army law water".split()
    return [QueryRecord(qid=str(q), question=" ".join(rng.choices(words, k=10)),
                        passages=[Passage(pid=f"{q}-{j}", title="T", text=" ".join(rng.choices(words, k=110)),
                                          rank=j + 1, relevance=int(j == 0)) for j in range(10)])
            for q in range(n)]


class StepTimer(pl.Callback):
    """Wall time from the end of optimizer step ``warmup`` to the end of the last step."""

    def __init__(self, warmup: int):
        self.warmup, self.t0, self.t1 = warmup, None, None

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if trainer.global_step == self.warmup:
            self.t0 = time.perf_counter()
        self.t1 = time.perf_counter()


def run_ours(records, model_dir: str, *, queries: int, steps: int, warmup: int, max_length: int, lr: float,
             precision: str, out_dir: str) -> float:
    """Seconds for ``steps`` timed steps of :func:`fit_reranker` (BCE, no validation, constant lr)."""
    timer = StepTimer(warmup)
    fit_reranker(records, None, model_name_or_path=model_dir, loss="bce", epochs=1_000, max_steps=warmup + steps,
                 batch_size=queries, lr=lr, warmup=0, schedule="constant", max_length=max_length, seed=0,
                 output_dir=out_dir, precision=precision, enable_progress_bar=False, callbacks=[timer],
                 resume=False, shuffle=False)
    return timer.t1 - timer.t0


def run_sentence_transformers(records, model_dir: str, *, queries: int, steps: int, warmup: int, max_length: int,
                              lr: float, out_dir: str) -> float:
    """Seconds for ``steps`` timed steps of sentence-transformers' CrossEncoderTrainer."""
    from datasets import Dataset
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from sentence_transformers.cross_encoder import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from torch.utils.data import SequentialSampler
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    slates = build_slates(records)
    data = Dataset.from_dict({
        "query": [s.question for s in slates for _ in s.texts],
        "passage": [t for s in slates for t in s.texts],
        "label": [float(r) for s in slates for r in s.relevance],
    })
    model = CrossEncoder(model_dir, num_labels=1, max_length=max_length, device="cpu", local_files_only=True)
    pairs_per_batch = queries * len(slates[0])

    def same_order(dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):
        return DefaultBatchSampler(SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last,
                                   valid_label_columns=valid_label_columns, generator=generator, seed=seed)

    times: dict[str, float] = {}

    class Timer(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == warmup:
                times["t0"] = time.perf_counter()
            times["t1"] = time.perf_counter()

    args = CrossEncoderTrainingArguments(
        output_dir=out_dir, per_device_train_batch_size=pairs_per_batch, max_steps=warmup + steps,
        learning_rate=lr, warmup_steps=0, lr_scheduler_type="constant", max_grad_norm=1.0, weight_decay=0.01,
        logging_steps=10_000, save_strategy="no", report_to="none", dataloader_num_workers=0, use_cpu=True,
        seed=0, batch_sampler=same_order, disable_tqdm=True,
    )
    trainer = CrossEncoderTrainer(model=model, args=args, train_dataset=data, loss=BinaryCrossEntropyLoss(model),
                                  callbacks=[Timer()])
    trainer.train()
    return times["t1"] - times["t0"]


def tiny_cross_encoder(path: Path) -> str:
    """A 2-layer, hidden-128 BERT with one logit and MiniLM's tokenizer (random weights): the loop's own cost."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(default_model_path())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=512, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def abba(runs: dict, rounds: int) -> dict[str, list[float]]:
    """Run each named zero-argument timer ``rounds`` times, alternating the order each round (ABBA)."""
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            times[name].append(runs[name]())
            print(f"round {r + 1} {name}: {times[name][-1]:.2f} s", flush=True)
    return times


def quality(train, val, *, steps: int, queries: int, max_length: int, out_dir: str) -> dict[str, float]:
    """Val UDCG@5 (float32 inference) of the direct-UDCG MiniLM after ``steps`` steps in fp32 and in bf16."""
    out = {}
    for precision in ("32-true", "bf16-mixed"):
        path, _ = fit_reranker(train, None, llm=ANNOTATED_LLM, loss="udcg", loss_kwargs={"tau": 0.5}, k=5,
                               epochs=1_000, max_steps=steps, batch_size=queries, lr=5e-5, warmup=0.1,
                               max_length=max_length, seed=0, output_dir=f"{out_dir}/{precision}",
                               precision=precision, enable_progress_bar=False, resume=False)
        rr = Reranker.from_pretrained(path, device="cpu", precision="32-true")
        table = evaluate_reranker(val, rr.score_records(val), llm=ANNOTATED_LLM, k=5, gamma=DEFAULT_GAMMA)
        out[precision] = float(table["udcg@5"])
        print(f"quality {precision}: val udcg@5 {out[precision]:.4f} after {steps} steps", flush=True)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=4, help="slates (of 10 pairs) per batch")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per configuration (ABBA order)")
    ap.add_argument("--tiny-steps", type=int, default=30, help="timed steps per round of the tiny model")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--quality-steps", type=int, default=60, help="steps of the bf16-vs-fp32 quality check (0: skip)")
    ap.add_argument("--quality-val", type=int, default=400, help="val questions of the full set scored in the check")
    ap.add_argument("--out-dir", default="outputs/bench/train_speed")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    records = load_records(args.queries * (args.warmup + args.steps))
    tiny_records = load_records(args.queries * (args.warmup + args.tiny_steps))
    pairs = args.steps * args.queries * 10
    kw = dict(queries=args.queries, warmup=args.warmup, max_length=args.max_length, lr=args.lr)
    out = Path(args.out_dir)
    minilm = default_model_path()

    times = abba({
        "ours_fp32": lambda: run_ours(records, minilm, steps=args.steps, precision="32-true",
                                      out_dir=str(out / "ours"), **kw),
        "st_fp32": lambda: run_sentence_transformers(records, minilm, steps=args.steps, out_dir=str(out / "st"), **kw),
        "ours_bf16": lambda: run_ours(records, minilm, steps=args.steps, precision="bf16-mixed",
                                      out_dir=str(out / "ours"), **kw),
    }, args.rounds)
    pps = {name: pairs * len(t) / sum(t) for name, t in times.items()}

    with tempfile.TemporaryDirectory() as tmp:
        tiny = tiny_cross_encoder(Path(tmp) / "tiny")
        tiny_times = abba({
            "tiny_ours": lambda: run_ours(tiny_records, tiny, steps=args.tiny_steps, precision="32-true",
                                          out_dir=str(out / "tiny"), **kw),
            "tiny_st": lambda: run_sentence_transformers(tiny_records, tiny, steps=args.tiny_steps,
                                                         out_dir=str(out / "tiny_st"), **kw),
        }, args.rounds)
    sps = {name: args.tiny_steps * len(t) / sum(t) for name, t in tiny_times.items()}

    print(f"setup: {args.queries} slates x 10 pairs per batch, max_length {args.max_length}, "
          f"{args.steps} timed steps x {args.rounds} rounds (tiny model: {args.tiny_steps}), {args.threads} threads")
    for name, value in pps.items():
        spread = statistics.pstdev([pairs / t for t in times[name]])
        print(f"{name}_pairs_per_s: {value:.3f} (round spread {spread:.3f})")
    for name, value in sps.items():
        print(f"{name}_steps_per_s: {value:.3f}")
    print(f"bf16_speedup_vs_fp32: {pps['ours_bf16'] / pps['ours_fp32']:.3f}")

    if args.quality_steps > 0:
        full = data_dir() / "annotated_full" / "squad_top10.jsonl.gz"
        if full.is_file():
            train = load_records(args.quality_steps * args.queries, "train", str(full))
            val_all = [r for r in read_annotated_squad(str(full)) if r.split == "val"]
            val = [val_all[i] for i in sorted(np.random.default_rng(0).choice(len(val_all), args.quality_val,
                                                                                replace=False))]
            q = quality(train, val, steps=args.quality_steps, queries=args.queries, max_length=args.max_length,
                        out_dir=str(out / "quality"))
            print(f"quality: {args.quality_steps} steps x {args.queries} train questions, {len(val)} val questions "
                  f"(annotated_full), fp32 {q['32-true']:.4f} bf16 {q['bf16-mixed']:.4f}")
            print(f"bf16_val_udcg@5_abs_diff: {abs(q['bf16-mixed'] - q['32-true']):.4f}")
        else:
            print(f"quality check skipped: {full} not found")

    print(f"speedup_vs_sentence_transformers: {pps['ours_fp32'] / pps['st_fp32']:.3f}")
    print(f"speedup_bf16_vs_sentence_transformers: {pps['ours_bf16'] / pps['st_fp32']:.3f}")
    print(f"host_overhead_ratio: {sps['tiny_ours'] / sps['tiny_st']:.3f}")


if __name__ == "__main__":
    main()
