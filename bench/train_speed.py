"""Training throughput (pairs/s) of our cross-encoder module vs sentence-transformers' CrossEncoderTrainer.

Same model (the packaged all-MiniLM-L6-v2 with a new one-logit head), same loss (binary
cross-entropy with logits on relevance labels), same optimiser (AdamW, gradient clipping at 1.0),
same batches (slates of the annotated SQuAD train split flattened in the same order: a batch of
``--queries`` slates of 10 passages is ``10 * queries`` pairs for both), same ``max_length`` with
dynamic padding, same threads (``torch.set_num_threads``), float32 for both.

* ours: :class:`udcg_ltr.models.cross_encoder.CrossEncoderModule` under ``pytorch_lightning.Trainer``
  (slates packed into one tokenizer call per batch, logits scattered back to ``[Q, n]``);
* baseline: ``sentence_transformers.cross_encoder.CrossEncoderTrainer`` with ``BinaryCrossEntropyLoss``
  (v6 trainer API, which needs the ``datasets`` package), fed the same pairs in the same order.

Each framework runs ``--rounds`` times in ABBA order (ours, theirs, theirs, ours, ...) to cancel
drift on a shared machine; a round trains ``--warmup + --steps`` steps and times the last
``--steps`` (data loading, tokenisation, forward, backward, clipping, optimiser step: everything
between the end of the last warm-up step and the end of the last step). Optionally (``--bf16``)
our module also runs with ``bf16-mixed`` autocast, reported separately (not in the speed-up).

Last line: ``speedup_vs_sentence_transformers: X`` (pairs/s ours / pairs/s theirs).
"""

from __future__ import annotations

import argparse
import statistics
import time

import _offline  # noqa: E402,F401  (environment first: offline hubs, W&B offline)
import torch  # noqa: E402

from udcg_ltr.data.schema import Passage, QueryRecord  # noqa: E402


def load_records(n: int) -> list[QueryRecord]:
    """The first ``n`` annotated SQuAD train questions, or a synthetic stand-in when the data is absent."""
    try:
        from udcg_ltr.data.readers.annotated import read_annotated_squad

        recs = [r for r in read_annotated_squad() if r.split == "train" and len(r.passages) == 10]
        if len(recs) >= n:
            return recs[:n]
    except (FileNotFoundError, OSError):
        pass
    import random

    rng = random.Random(0)
    words = "the of a in river city war king music science history church army law water".split()
    return [QueryRecord(qid=str(q), question=" ".join(rng.choices(words, k=10)),
                        passages=[Passage(pid=f"{q}-{j}", title="T", text=" ".join(rng.choices(words, k=110)),
                                          rank=j + 1, relevance=int(j == 0)) for j in range(10)])
            for q in range(n)]


class _LightningTimer:
    def __init__(self, warmup: int):
        import pytorch_lightning as pl

        outer = self

        class Cb(pl.Callback):
            def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
                if trainer.global_step == warmup:
                    outer.t0 = time.perf_counter()
                outer.t1 = time.perf_counter()

        self.callback = Cb()
        self.t0 = self.t1 = None


def run_ours(records, *, queries: int, steps: int, warmup: int, max_length: int, lr: float,
             precision: str = "32-true") -> float:
    """Seconds for ``steps`` timed steps of our Lightning module."""
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer

    from udcg_ltr.models.cross_encoder import CrossEncoderModule, default_model_path
    from udcg_ltr.models.datamodule import SlateCollator, SlateDataset, build_slates
    from udcg_ltr.models.training import _quiet_lightning

    _quiet_lightning()
    pl.seed_everything(0, verbose=False)
    tok = AutoTokenizer.from_pretrained(default_model_path())
    module = CrossEncoderModule(loss="bce", lr=lr, warmup=0, schedule="constant")
    loader = DataLoader(SlateDataset(build_slates(records)), batch_size=queries, shuffle=False,
                        collate_fn=SlateCollator(tok, max_length))
    timer = _LightningTimer(warmup)
    trainer = pl.Trainer(max_steps=warmup + steps, accelerator="cpu", devices=1, precision=precision, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         gradient_clip_val=1.0, deterministic=True, callbacks=[timer.callback],
                         num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(module, train_dataloaders=loader)
    return timer.t1 - timer.t0


def run_sentence_transformers(records, *, queries: int, steps: int, warmup: int, max_length: int, lr: float,
                              out_dir: str) -> float:
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

    from udcg_ltr.models.cross_encoder import default_model_path
    from udcg_ltr.models.datamodule import build_slates

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    slates = build_slates(records)
    data = Dataset.from_dict({
        "query": [s.question for s in slates for _ in s.texts],
        "passage": [t for s in slates for t in s.texts],
        "label": [float(r) for s in slates for r in s.relevance],
    })
    model = CrossEncoder(default_model_path(), num_labels=1, max_length=max_length, device="cpu",
                         local_files_only=True)
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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=4, help="slates (of 10 pairs) per batch")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per framework (ABBA order)")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--bf16", action="store_true", help="also time our module under bf16-mixed autocast")
    ap.add_argument("--out-dir", default="/tmp/udcg_ltr_train_speed")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    n_batches = args.warmup + args.steps
    records = load_records(args.queries * n_batches)
    pairs = args.steps * args.queries * 10
    kw = dict(queries=args.queries, steps=args.steps, warmup=args.warmup, max_length=args.max_length, lr=args.lr)
    ours: list[float] = []
    theirs: list[float] = []
    for r in range(args.rounds):
        order = ("ours", "st") if r % 2 == 0 else ("st", "ours")
        for who in order:
            if who == "ours":
                ours.append(run_ours(records, **kw))
            else:
                theirs.append(run_sentence_transformers(records, out_dir=args.out_dir, **kw))
            print(f"round {r + 1} {who}: {pairs / (ours if who == 'ours' else theirs)[-1]:.2f} pairs/s", flush=True)
    ours_pps = pairs * len(ours) / sum(ours)
    st_pps = pairs * len(theirs) / sum(theirs)
    print(f"setup: {args.queries} slates x 10 pairs per batch, max_length {args.max_length}, "
          f"{args.steps} timed steps x {args.rounds} rounds, {args.threads} threads, float32")
    print(f"ours_pairs_per_s: {ours_pps:.3f}")
    print(f"sentence_transformers_pairs_per_s: {st_pps:.3f}")
    print(f"ours_round_spread: {statistics.pstdev([pairs / t for t in ours]):.3f}")
    if args.bf16:
        bf = run_ours(records, precision="bf16-mixed", **kw)
        print(f"ours_bf16_pairs_per_s: {pairs / bf:.3f}")
        print(f"bf16_speedup_vs_fp32: {(pairs / bf) / ours_pps:.3f}")
    print(f"speedup_vs_sentence_transformers: {ours_pps / st_pps:.3f}")


if __name__ == "__main__":
    main()
