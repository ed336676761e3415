"""Slates for cross-encoder training: one query's candidates per item, packed per batch.

A :class:`Slate` is one question with its candidate passages and three aligned targets: ``utility``
(signed, Eq. 2, ``u = R (1 - P(NO-RESPONSE))`` of one LLM), ``relevance`` (binary ``R``) and ``graded`` (the
raw label, e.g. 0..3 for TREC DL). So that an accelerator never waits for Python, every pair is tokenised
once per data set (:func:`encode_slates`) and :class:`SlateCollator` only pads. Padding slots carry target 0
with ``mask = False`` (a 0 utility is a real "neutral" value: the mask, not the value, marks absence).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from udcg_ltr.data.schema import Passage, QueryRecord

#: How a passage is shown to the cross-encoder (the shared set's retriever embedded ``title + ". " + text``
#: too). Saved with the model so inference formats passages identically.
DEFAULT_TEMPLATE = "{title}. {text}"

#: Tokenizer outputs the sequence-classification model consumes.
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def passage_text(p: Passage | str, template: str = DEFAULT_TEMPLATE) -> str:
    """The text a passage is scored as: ``template`` with its title and text (just the text if untitled)."""
    if isinstance(p, str):
        return p
    return template.format(title=p.title, text=p.text) if p.title else p.text


@dataclass
class Slate:
    """One query's candidates with aligned targets (lists of equal length)."""

    qid: str
    question: str
    pids: list[str]
    texts: list[str]
    utility: list[float]
    relevance: list[float]
    graded: list[float]
    n_relevant: float = 0.0
    #: Token ids per model input (``input_ids``, ...), one row per passage, and the
    #: ``(tokenizer, max_length)`` they were made with (see :func:`encode_slates`).
    encoding: dict[str, list[list[int]]] | None = None
    encoded_with: tuple | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, idx: Sequence[int]) -> Slate:
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        enc = {key: pick(rows) for key, rows in self.encoding.items()} if self.encoding is not None else None
        return Slate(self.qid, self.question, pick(self.pids), pick(self.texts), pick(self.utility),
                     pick(self.relevance), pick(self.graded), self.n_relevant, enc, self.encoded_with)


def encode_pairs(tokenizer, questions: Sequence[str], texts: Sequence[str], max_length: int) -> dict[str, list]:
    """Token ids of (question, passage) pairs, truncated to ``max_length``, unpadded: the one tokenisation of
    training, validation and inference."""
    enc = tokenizer(list(questions), list(texts), truncation=True, max_length=int(max_length), padding=False)
    return {key: enc[key] for key in MODEL_INPUTS if key in enc}


def encode_slates(slates: Sequence[Slate], tokenizer, max_length: int) -> list[Slate]:
    """Tokenise every pair of ``slates`` that is not already tokenised this way, in one call; returns ``slates``."""
    # What the ids depend on, not the object's id(): a DataLoader worker started with "spawn" holds a copy of
    # the tokenizer, and an id-based key would make it tokenise every batch again.
    key = (getattr(tokenizer, "name_or_path", None), getattr(tokenizer, "vocab_size", None),
           getattr(tokenizer, "truncation_side", "right"), int(max_length))
    todo = [s for s in slates if s.encoded_with != key]
    if todo:
        enc = encode_pairs(tokenizer, [s.question for s in todo for _ in s.texts],
                           [t for s in todo for t in s.texts], max_length)
        start = 0
        for s in todo:
            s.encoding = {name: rows[start:start + len(s)] for name, rows in enc.items()}
            s.encoded_with = key
            start += len(s)
    return list(slates)


def pad_rows(rows: Sequence[Sequence[int]], value: int, left: bool = False) -> torch.Tensor:
    """Integer rows padded to the longest, on the tokenizer's padding side (``[len(rows), width]`` long)."""
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), value, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, slice(width - len(r), None) if left else slice(len(r))] = r
    return torch.from_numpy(out)


def build_slates(records: Sequence[QueryRecord], *, llm: str | None = None, relevance_threshold: int = 1,
                 template: str = DEFAULT_TEMPLATE) -> list[Slate]:
    """One :class:`Slate` per record, passages by retrieval rank (stable: equal ranks keep record order);
    ``utility`` from ``llm``'s annotations (zeros when ``llm`` is None)."""
    slates = []
    for rec in records:
        passages = sorted(rec.passages, key=lambda p: p.rank if p.rank is not None else float("inf"))
        slate = Slate(
            qid=rec.qid, question=rec.question, pids=[p.pid for p in passages],
            texts=[passage_text(p, template) for p in passages],
            utility=[p.utility(llm, relevance_threshold) if llm is not None else 0.0 for p in passages],
            relevance=[1.0 if p.is_relevant(relevance_threshold) else 0.0 for p in passages],
            graded=[float(p.relevance or 0) for p in passages],
            n_relevant=float(sum(p.is_relevant(relevance_threshold) for p in passages)))
        # The losses' one NaN check, on the host: inside the loss it would stall a GPU every step.
        for name in ("utility", "relevance", "graded"):
            if not all(math.isfinite(v) for v in getattr(slate, name)):
                raise ValueError(f"query {rec.qid}: non-finite {name} target {getattr(slate, name)}")
        slates.append(slate)
    return slates


class SlateDataset(Dataset):
    """Slates, optionally cut to ``max_slate`` candidates: the first ones (``sampling="head"``) or a fresh
    subset per ``(seed, epoch)`` that keeps a relevant passage when there is one (``"random"``)."""

    def __init__(self, slates: Sequence[Slate], *, max_slate: int | None = None, sampling: str = "head", seed: int = 0):
        if sampling not in ("head", "random"):
            raise ValueError(f"sampling must be 'head' or 'random', got {sampling!r}")
        self.slates = [s for s in slates if len(s) > 0]
        self.max_slate, self.sampling, self.seed, self.epoch = max_slate, sampling, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.slates)

    def __getitem__(self, i: int) -> Slate:
        s = self.slates[i]
        if self.max_slate is None or len(s) <= self.max_slate:
            return s
        if self.sampling == "head":
            return s.subset(range(self.max_slate))
        rng = random.Random(hash((self.seed, self.epoch, i)) & 0xFFFFFFFF)
        pos = [j for j, r in enumerate(s.relevance) if r > 0]
        keep = [rng.choice(pos)] if pos else []
        keep += rng.sample([j for j in range(len(s)) if j not in keep], self.max_slate - len(keep))
        return s.subset(sorted(keep))


class EpochShuffleSampler(Sampler[int]):
    """A random permutation of ``range(n)`` that depends only on ``(seed, epoch)``: a run resumed at an epoch
    boundary sees the batches of an uninterrupted one (one long-lived generator would replay epoch 0's)."""

    def __init__(self, n: int, seed: int = 0):
        self.n, self.seed, self.epoch = int(n), int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return iter(torch.randperm(self.n, generator=gen).tolist())


class ResumableDataLoader(DataLoader):
    """A DataLoader that skips, at the first batch of each pass, as many batches as ``skip()`` says: those a run
    resumed mid-epoch had already taken (:meth:`SlateDataModule.load_state_dict`). Asked at the first batch, not
    when the iterator is made: Lightning makes it before it restores the loops. Exact because the order is a
    function of ``(seed, epoch)`` (:class:`EpochShuffleSampler`, :class:`SlateDataset`); skipping by iterating
    costs only padding and holds for any sampler Lightning puts in (a distributed one included)."""

    def __init__(self, *args, skip: Callable[[], int], **kwargs):
        super().__init__(*args, **kwargs)
        self.skip = skip

    def __iter__(self):
        batches = super().__iter__()

        def resumed():
            for _ in range(self.skip()):
                next(batches, None)
            yield from batches

        return resumed()


class SlateCollator:
    """Collate slates into flat tokenised pairs plus padded ``[Q, n]`` targets and mask.

    Pairs are sorted by length and cut into ``buckets`` equal-count chunks, each padded to its own longest
    pair: with SQuAD top-10 pools (60..250 tokens) padding every pair to the batch's longest wastes ~60% of a
    CPU encoder's work, four buckets ~16%; ``buckets=1`` suits a GPU (one large matrix product per layer).
    """

    def __init__(self, tokenizer, max_length: int = 256, buckets: int = 4, min_bucket_pairs: int = 8):
        self.tokenizer, self.max_length = tokenizer, max_length
        self.buckets, self.min_bucket_pairs = max(1, int(buckets)), max(1, int(min_bucket_pairs))
        self.pad_id = getattr(tokenizer, "pad_token_id", None) or 0
        self.left = getattr(tokenizer, "padding_side", "right") == "left"

    def __call__(self, slates: Sequence[Slate]) -> dict:
        slates = encode_slates(slates, self.tokenizer, self.max_length)
        keys = list(slates[0].encoding)
        flat = {key: [row for s in slates for row in s.encoding[key]] for key in keys}
        n_pairs = len(flat["input_ids"])
        lengths = torch.tensor([len(ids) for ids in flat["input_ids"]])
        n_buckets = min(self.buckets, max(1, n_pairs // self.min_bucket_pairs))
        order = torch.argsort(lengths, descending=True, stable=True) if n_buckets > 1 else torch.arange(n_pairs)
        buckets = [idx.tolist() for idx in torch.tensor_split(order, n_buckets)]
        chunks = [{key: pad_rows([flat[key][i] for i in rows], self.pad_id if key == "input_ids" else 0,
                                 self.left) for key in keys} for rows in buckets]
        inverse = torch.argsort(order)  # the inverse permutation

        sizes = torch.tensor([len(s) for s in slates])
        q, n = len(slates), int(sizes.max())
        query_index = torch.repeat_interleave(torch.arange(q), sizes)
        slot_index = torch.cat([torch.arange(int(m)) for m in sizes])
        mask = torch.arange(n)[None, :] < sizes[:, None]

        def padded(attr):  # [Q, n] float32, 0 at padding; one scatter, as scatter_scores puts the logits back
            values = torch.tensor([v for s in slates for v in getattr(s, attr)], dtype=torch.float32)
            return torch.zeros(q, n, dtype=torch.float32).index_put((query_index, slot_index), values)

        return dict(chunks=chunks, inverse=inverse, n_pairs=n_pairs, n_tokens=int(lengths.sum()),
                    query_index=query_index, slot_index=slot_index, mask=mask, utility=padded("utility"),
                    relevance=padded("relevance"), graded=padded("graded"),
                    n_relevant=torch.tensor([s.n_relevant for s in slates], dtype=torch.float32),
                    qids=[s.qid for s in slates], pids=[list(s.pids) for s in slates])


def scatter_scores(logits: torch.Tensor, batch: dict, fill: float = 0.0) -> torch.Tensor:
    """Flat pair logits ``[P]`` -> padded ``[Q, n]`` slate scores (``fill`` at padding, see ``batch['mask']``)."""
    out = torch.full(batch["mask"].shape, fill, dtype=logits.dtype, device=logits.device)
    return out.index_put((batch["query_index"].to(logits.device), batch["slot_index"].to(logits.device)), logits)


@dataclass(frozen=True)
class LoaderConfig:
    """How the slates are batched and loaded: ``batch_size`` counts *queries* (``eval_batch_size``: validation's,
    default the same), ``buckets`` length buckets per batch (:class:`SlateCollator`), ``shuffle`` the training
    order each epoch; ``num_workers`` / ``pin_memory`` pay off on a GPU only (pairs come pre-tokenised)."""

    batch_size: int = 8
    eval_batch_size: int | None = None
    num_workers: int = 0
    pin_memory: bool = False
    buckets: int = 4
    shuffle: bool = True

    def __post_init__(self) -> None:
        for name in ("batch_size", "eval_batch_size"):
            if (value := getattr(self, name)) is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value!r}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {self.num_workers!r}")


class SlateDataModule(pl.LightningDataModule):
    """Train / val slates for :class:`~udcg_ltr.models.cross_encoder.CrossEncoderModule`: records to slates
    (``llm``'s utilities at ``relevance_threshold``, ``template``, ``max_length`` tokens; training slates cut to
    ``max_slate`` by ``sampling``, drawn with ``seed``), batched as ``loader`` says (:class:`LoaderConfig`)."""

    def __init__(self, train_records: Sequence[QueryRecord] | None = None,
                 val_records: Sequence[QueryRecord] | None = None, *, tokenizer, llm: str | None = None,
                 max_length: int = 256, max_slate: int | None = None, sampling: str = "head",
                 relevance_threshold: int = 1, template: str = DEFAULT_TEMPLATE, seed: int = 0,
                 loader: LoaderConfig | None = None):
        super().__init__()
        loader = loader or LoaderConfig()
        self.collate = SlateCollator(tokenizer, max_length, buckets=loader.buckets)
        kw = dict(llm=llm, relevance_threshold=relevance_threshold, template=template)

        def slates(records):
            return encode_slates(build_slates(records, **kw), tokenizer, max_length)

        self.train_set = (SlateDataset(slates(train_records), max_slate=max_slate, sampling=sampling, seed=seed)
                          if train_records else None)
        self.val_set = SlateDataset(slates(val_records)) if val_records else None
        self.batch_size, self.eval_batch_size = loader.batch_size, loader.eval_batch_size or loader.batch_size
        self.seed, self.num_workers = seed, int(loader.num_workers)
        self.pin_memory, self.shuffle = bool(loader.pin_memory), loader.shuffle
        self._resumed: dict[str, int] = {}

    def _loader(self, ds, batch_size, shuffle, loader=DataLoader, **extra):
        if ds is None:
            return None
        return loader(ds, batch_size=batch_size, sampler=EpochShuffleSampler(len(ds), self.seed) if shuffle else None,
                      collate_fn=self.collate, num_workers=self.num_workers, pin_memory=self.pin_memory,
                      persistent_workers=False,  # fresh workers each epoch see the dataset's epoch
                      # its own generator: making an iterator draws a seed, which would move the global random
                      # state (dropout) at a point that differs between a resumed run and an uninterrupted one
                      generator=torch.Generator().manual_seed(self.seed), **extra)

    def state_dict(self) -> dict[str, int]:
        """Saved in every checkpoint: the epoch and how many of its batches the optimizer has taken."""
        if self.trainer is None:
            return {}
        return {"epoch": self.trainer.current_epoch,
                "batches": self.trainer.fit_loop.epoch_loop.batch_progress.current.processed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resumed = dict(state)

    def _batches_taken(self) -> int:
        """Batches of this epoch a restored mid-epoch checkpoint had taken, once (0 after an epoch-end one)."""
        state, self._resumed = self._resumed, {}
        return int(state["batches"]) if state and state["epoch"] == self.trainer.current_epoch else 0

    def train_dataloader(self):
        if self.train_set is not None and self.trainer is not None:
            self.train_set.set_epoch(self.trainer.current_epoch)
        return self._loader(self.train_set, self.batch_size, self.shuffle, ResumableDataLoader,
                            skip=self._batches_taken)

    def val_dataloader(self):
        return self._loader(self.val_set, self.eval_batch_size, False)
