"""Inference with a trained cross-encoder: score, rank, rerank record sets, write TREC runs.

>>> rr = Reranker.from_pretrained("outputs/.../model", device="cpu", batch_size=64, max_length=256)
>>> rr.rank("who wrote Hamlet?", ["Hamlet is a tragedy by Shakespeare.", "Paris is in France."], top_k=1)
[RankedPassage(index=0, pid=None, text='Hamlet is ...', score=3.1, rank=1)]

Pairs are tokenised once, sorted by tokenised length and scored in batches of at most
``batch_size`` pairs and ``max_tokens`` padded tokens (little padding; on a GPU a large token
budget keeps it busy), under the autocast of ``precision`` (``"bf16-mixed"`` where the hardware
has bf16 units, see :mod:`udcg_ltr.models.precision`), on ``device`` (default: CUDA when
available), with a tqdm bar for large inputs; results come back in input order. Weights are read
from ``model.safetensors`` only (no pickle). Passages given as :class:`Passage` are formatted
with the template the model was trained with (saved next to the weights in
``udcg_ltr_reranker.json``); plain strings are scored as they are. A saved model directory is an
ordinary transformers checkpoint (``AutoModelForSequenceClassification``, ``num_labels=1``) that
sentence-transformers' ``CrossEncoder`` also loads; its tokenizer's ``model_max_length`` is the
training ``max_length``, so CrossEncoder truncates the same way (it applies a sigmoid to the
logit by default: same order).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from udcg_ltr.batching import length_batches
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.io import atomic_directory, atomic_write_json
from udcg_ltr.models.datamodule import DEFAULT_TEMPLATE, encode_pairs, pad_rows, passage_text
from udcg_ltr.models.precision import autocast, resolve_precision

#: Side file of a saved reranker: how passages were formatted and truncated in training.
RERANKER_CONFIG = "udcg_ltr_reranker.json"


@dataclass(frozen=True)
class RankedPassage:
    """One passage of a reranked list: its input position, id (if known), text, score and 1-based rank."""

    index: int
    pid: str | None
    text: str
    score: float
    rank: int


def save_reranker(model, tokenizer, path: str | os.PathLike, *, max_length: int | None = None,
                  template: str = DEFAULT_TEMPLATE, extra: Mapping[str, Any] | None = None) -> str:
    """Write model + tokenizer + :data:`RERANKER_CONFIG` to ``path`` atomically (a whole-directory swap).

    Everything goes to a temporary sibling directory first, which then replaces ``path`` by
    rename: a crash leaves either the previous model or the new one, never a mix.
    """
    path = Path(path)
    with atomic_directory(path) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        cfg = {"template": template, **dict(extra or {})}
        if tokenizer is not None:
            if max_length is None:
                max_length = (extra or {}).get("max_length")
            if max_length is not None:
                tokenizer.model_max_length = int(max_length)
            tokenizer.save_pretrained(tmp)
        if max_length is not None:
            cfg["max_length"] = int(max_length)
        atomic_write_json(tmp / RERANKER_CONFIG, cfg)
    return str(path)


def _resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


class Reranker:
    """Batched cross-encoder scoring and ranking (see the module docstring)."""

    def __init__(self, model, tokenizer, *, device: str | torch.device | None = None, batch_size: int = 64,
                 max_length: int = 256, template: str = DEFAULT_TEMPLATE, progress_threshold: int = 2000,
                 precision: str = "32-true", max_tokens: int | None = None):
        self.device = _resolve_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size, self.max_length, self.template = int(batch_size), int(max_length), template
        self.max_tokens = None if max_tokens is None else int(max_tokens)
        self.precision = resolve_precision(precision, "gpu" if self.device.type == "cuda" else "cpu")
        self.progress_threshold = progress_threshold

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, *, device: str | torch.device | None = None,
                        batch_size: int = 64, max_length: int | None = None, dtype: torch.dtype | None = None,
                        **kwargs: Any) -> Reranker:
        """Load a saved reranker (or any one-logit sequence-classification checkpoint) from safetensors weights.

        ``device=None`` takes CUDA when available; ``precision`` / ``max_tokens`` and the rest go to the constructor.
        """
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(path)
        cfg: dict[str, Any] = {}
        if (path / RERANKER_CONFIG).is_file():
            cfg = json.loads((path / RERANKER_CONFIG).read_text(encoding="utf-8"))
        # safetensors only: a pickled pytorch_model.bin can run code when loaded.
        model = AutoModelForSequenceClassification.from_pretrained(str(path), use_safetensors=True,
                                                                   **({"dtype": dtype} if dtype else {}))
        if model.config.num_labels != 1:
            raise ValueError(f"{path}: expected a one-logit model (num_labels=1), got {model.config.num_labels}")
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        max_length = max_length or cfg.get("max_length") or min(int(tokenizer.model_max_length), 512)
        return cls(model, tokenizer, device=device, batch_size=batch_size, max_length=max_length,
                   template=cfg.get("template", DEFAULT_TEMPLATE), **kwargs)

    # ---- scoring ------------------------------------------------------------------------
    def _text(self, p: Passage | str) -> str:
        return passage_text(p, self.template)

    @torch.inference_mode()
    def score_pairs(self, questions: Sequence[str], texts: Sequence[str], *, progress: bool | None = None,
                    desc: str = "scoring") -> np.ndarray:
        """Logits for aligned (question, passage text) pairs, in input order (float64)."""
        if len(questions) != len(texts):
            raise ValueError(f"{len(questions)} questions but {len(texts)} passages")
        n = len(texts)
        if n == 0:
            return np.zeros(0)
        enc = encode_pairs(self.tokenizer, questions, texts, self.max_length)
        lengths = [len(ids) for ids in enc["input_ids"]]
        show = progress if progress is not None else n >= self.progress_threshold
        from tqdm.auto import tqdm

        bar = tqdm(total=n, desc=desc, unit="pair", disable=not show)
        pad_values = {"input_ids": self.tokenizer.pad_token_id or 0}
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        logits, index = [], []
        with autocast(self.device, self.precision):
            # longest first: a memory error shows up at once
            for rows in length_batches(lengths, self.batch_size, self.max_tokens):
                batch = {key: pad_rows([ids[i] for i in rows], pad_values.get(key, 0), left).to(self.device,
                                                                                               non_blocking=True)
                         for key, ids in enc.items()}
                logits.append(self.model(**batch).logits.reshape(-1).float())  # stays on the device: no sync
                index.append(rows)
                bar.update(len(rows))
        bar.close()
        out = np.empty(n, dtype=np.float64)
        out[np.concatenate(index)] = torch.cat(logits).cpu().numpy()
        return out

    def scores(self, question: str, passages: Sequence[Passage | str]) -> np.ndarray:
        """One score per passage (higher = ranks higher)."""
        return self.score_pairs([question] * len(passages), [self._text(p) for p in passages], progress=False)

    def rank(self, question: str, passages: Sequence[Passage | str], top_k: int | None = None) -> list[RankedPassage]:
        """Passages by descending score (ties: input order), cut to ``top_k``."""
        return _ranked(passages, self.scores(question, passages), top_k, self._text)

    def score_records(self, records: Sequence[QueryRecord], *, progress: bool | None = None) -> list[np.ndarray]:
        """Per record, one score per passage in ``record.passages`` order; all pairs batched together."""
        questions = [r.question for r in records for _ in r.passages]
        texts = [self._text(p) for r in records for p in r.passages]
        flat = self.score_pairs(questions, texts, progress=progress, desc="reranking")
        out, start = [], 0
        for r in records:
            out.append(flat[start:start + len(r.passages)])
            start += len(r.passages)
        return out

    def rank_records(self, records: Sequence[QueryRecord], top_k: int | None = None, *,
                     progress: bool | None = None) -> list[list[RankedPassage]]:
        """:meth:`rank` for every record, batched across records."""
        return [_ranked(r.passages, s, top_k, self._text)
                for r, s in zip(records, self.score_records(records, progress=progress))]

    def write_run(self, records: Sequence[QueryRecord], path: str | os.PathLike, tag: str = "udcg_ltr",
                  *, progress: bool | None = None) -> Path:
        """Rerank ``records`` and write the TREC run."""
        return write_run(records, self.score_records(records, progress=progress), path, tag)


def _ranked(passages, scores, top_k, fmt) -> list[RankedPassage]:
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    if top_k is not None:
        order = order[:top_k]
    return [RankedPassage(index=int(i), pid=getattr(passages[i], "pid", None), text=fmt(passages[i]),
                          score=float(scores[i]), rank=r) for r, i in enumerate(order, start=1)]


def write_run(records: Sequence[QueryRecord], scores, path: str | os.PathLike, tag: str = "udcg_ltr") -> Path:
    """Write a 6-column TREC run (``qid Q0 pid rank score tag``) of ``scores`` over ``records``, atomically.

    ``scores``: per-record arrays aligned with ``record.passages`` or ``{qid: {pid: score}}``.
    Ranks follow descending score, ties in passage order (as :func:`udcg_ltr.metrics.rank_by_scores`).
    """
    from udcg_ltr.data.readers.trec import write_trec_run
    from udcg_ltr.models.evaluation import align_scores

    run = {r.qid: {p.pid: float(v) for p, v in zip(r.passages, s)}
           for r, s in zip(records, align_scores(records, scores))}
    return write_trec_run(path, run, tag=tag)
