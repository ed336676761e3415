"""Inference with a trained cross-encoder: score, rank, rerank record sets, write TREC runs.

>>> rr = Reranker.from_pretrained("outputs/.../model", device="cpu")
>>> rr.rank_passages("who wrote Hamlet?", record.passages, top_k=1)
[RankedPassage(index=0, pid='d7', text='Hamlet. Hamlet is ...', score=3.1, rank=1)]

``predict`` and ``rank`` take and return what sentence-transformers' ``CrossEncoder`` does; scores are the
model's raw logits. Weights are read from ``model.safetensors`` only (no pickle). A saved folder is a
transformers checkpoint that ``CrossEncoder`` loads with the same scores (``config.json`` names the identity
as its activation; a folder saved before that entry existed needs ``activation_fn=torch.nn.Identity()``),
titled passages formatted with the template the model was trained with::

    CrossEncoder(folder).predict([(q, format_passage(t, x, read_template(folder))) for t, x in docs])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from udcg_ltr.batching import length_batches, progress_bar
from udcg_ltr.data.jsonl import loads_json
from udcg_ltr.data.readers.trec import write_trec_run
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.data.scores import PassageScores, as_passage_scores
from udcg_ltr.io import DataError, atomic_directory, atomic_write_json
from udcg_ltr.models.datamodule import DEFAULT_TEMPLATE, encode_pairs, pad_rows, passage_text
from udcg_ltr.models.fusion import check_weight, fuse_scores
from udcg_ltr.models.precision import autocast, resolve_precision

#: Side file of a saved reranker: how passages were formatted and truncated in training.
RERANKER_CONFIG = "udcg_ltr_reranker.json"

#: The activation sentence-transformers' ``CrossEncoder`` applies to the logit of a saved reranker (read from
#: ``config.json`` -> ``sentence_transformers.activation_fn``): the identity, so it returns our scores.
CROSS_ENCODER_ACTIVATION = "torch.nn.modules.linear.Identity"


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
    """Write model + tokenizer + :data:`RERANKER_CONFIG` to ``path`` atomically (a whole-directory swap: a
    crash leaves either the previous model or the new one, never a mix)."""
    path = Path(path)
    # CrossEncoder reads its activation from config.json: the identity makes its scores our logits.
    st_config = dict(getattr(model.config, "sentence_transformers", None) or {})
    model.config.sentence_transformers = {**st_config, "activation_fn": CROSS_ENCODER_ACTIVATION}
    cfg = {"template": template, **dict(extra or {})}
    if max_length is not None or (tokenizer is not None and cfg.get("max_length") is not None):
        cfg["max_length"] = int(max_length if max_length is not None else cfg["max_length"])
    with atomic_directory(path) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            if cfg.get("max_length") is not None:  # CrossEncoder truncates the same way
                tokenizer.model_max_length = cfg["max_length"]
            tokenizer.save_pretrained(tmp)
        atomic_write_json(tmp / RERANKER_CONFIG, cfg)
    return str(path)


def read_reranker_config(model_dir: str | os.PathLike) -> dict[str, Any]:
    """The side file :data:`RERANKER_CONFIG` of a saved reranker (``{}`` without one; a malformed one is a
    :class:`DataError` naming it)."""
    side = Path(model_dir) / RERANKER_CONFIG
    if not side.is_file():
        return {}
    try:
        cfg = loads_json(side.read_text(encoding="utf-8"))
    except DataError as err:  # a NaN or infinite number
        raise DataError(err.reason, path=str(side), field=err.field) from None
    except (ValueError, UnicodeDecodeError) as err:
        raise DataError(f"not valid JSON: {err}", path=str(side)) from None
    if not isinstance(cfg, dict):
        raise DataError(f"expected a JSON object, got {type(cfg).__name__}", path=str(side))
    return cfg


def save_retriever_fusion(model_dir: str | os.PathLike, weight: float) -> Path:
    """Record the retriever-fusion weight (:func:`udcg_ltr.models.fusion.fit_fusion_weight`) in a saved reranker's
    :data:`RERANKER_CONFIG`, atomically; :meth:`Reranker.from_pretrained` applies it."""
    side = Path(model_dir) / RERANKER_CONFIG
    atomic_write_json(side, {**read_reranker_config(model_dir), "retriever_fusion": check_weight(weight)})
    return side


def read_template(model_dir: str | os.PathLike) -> str:
    """The passage template a saved reranker was trained with (:data:`RERANKER_CONFIG`; the default without one)."""
    template = read_reranker_config(model_dir).get("template", DEFAULT_TEMPLATE)
    if not isinstance(template, str) or "{text}" not in template:
        raise DataError(f"expected a template string containing '{{text}}', got {template!r:.60}",
                        path=str(Path(model_dir) / RERANKER_CONFIG), field="template")
    return template


def format_passage(title: str, text: str, template: str = DEFAULT_TEMPLATE) -> str:
    """The text a reranker scores for a titled passage (just ``text`` when untitled), as in training: with
    :func:`read_template` it gives a ``CrossEncoder`` the inputs, hence the scores, of :class:`Reranker`."""
    return passage_text(Passage(pid="-", title=title or "", text=text), template)


class Reranker:
    """Batched cross-encoder scoring and ranking (see the module docstring)."""

    #: Inputs of at least this many pairs get a progress bar unless ``progress`` says otherwise.
    PROGRESS_THRESHOLD = 2000

    def __init__(self, model, tokenizer, *, device: str | torch.device | None = None, batch_size: int = 64,
                 max_length: int = 256, template: str = DEFAULT_TEMPLATE, precision: str = "32-true",
                 max_tokens: int | None = None, retriever_fusion: float = 0.0):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size, self.max_length, self.template = int(batch_size), int(max_length), template
        self.max_tokens = None if max_tokens is None else int(max_tokens)
        self.precision = resolve_precision(precision, "gpu" if self.device.type == "cuda" else "cpu")
        #: Weight of the retriever's evidence in :meth:`score_records` (:mod:`udcg_ltr.models.fusion`; 0: none).
        self.retriever_fusion = check_weight(retriever_fusion)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, *, device: str | torch.device | None = None, batch_size: int = 64,
                        max_length: int | None = None, dtype: torch.dtype | None = None, **kwargs: Any) -> Reranker:
        """Load a saved reranker (or any one-logit sequence-classification checkpoint) from safetensors
        weights, with its saved retriever-fusion weight unless ``retriever_fusion`` is given."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(path)
        cfg = read_reranker_config(path)
        # safetensors only: a pickled pytorch_model.bin can run code when loaded.
        model = AutoModelForSequenceClassification.from_pretrained(str(path), use_safetensors=True,
                                                                   **({"dtype": dtype} if dtype else {}))
        if model.config.num_labels != 1:
            raise ValueError(f"{path}: expected a one-logit model (num_labels=1), got {model.config.num_labels}")
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        max_length = max_length or cfg.get("max_length") or min(int(tokenizer.model_max_length), 512)
        try:
            kwargs.setdefault("retriever_fusion", check_weight(cfg.get("retriever_fusion", 0.0)))
        except ValueError as err:  # bad input in a file: name the file and the field
            raise DataError(str(err), path=str(path / RERANKER_CONFIG), field="retriever_fusion") from None
        return cls(model, tokenizer, device=device, batch_size=batch_size, max_length=max_length,
                   template=read_template(path), **kwargs)

    def _text(self, p: Passage | str) -> str:
        return passage_text(p, self.template)

    @torch.inference_mode()
    def score_pairs(self, questions: Sequence[str], texts: Sequence[str], *, progress: bool | None = None,
                    desc: str = "scoring", batch_size: int | None = None) -> np.ndarray:
        """Logits for aligned (question, passage text) pairs, in input order (float64 holding float32 values),
        scored by length in batches of at most ``batch_size`` pairs and ``max_tokens`` padded tokens."""
        if len(questions) != len(texts):
            raise ValueError(f"{len(questions)} questions but {len(texts)} passages")
        n = len(texts)
        if n == 0:
            return np.zeros(0)
        enc = encode_pairs(self.tokenizer, questions, texts, self.max_length)
        lengths = [len(ids) for ids in enc["input_ids"]]
        bar = progress_bar(n, desc, progress if progress is not None else n >= self.PROGRESS_THRESHOLD, unit="pair")
        pad_id = self.tokenizer.pad_token_id or 0
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        logits, index = [], []
        with autocast(self.device, self.precision):
            # longest first: a memory error shows up at once
            for rows in length_batches(lengths, int(batch_size or self.batch_size), self.max_tokens):
                batch = {key: pad_rows([ids[i] for i in rows], pad_id if key == "input_ids" else 0, left)
                         .to(self.device, non_blocking=True) for key, ids in enc.items()}
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

    def rank_passages(self, question: str, passages: Sequence[Passage | str],
                      top_k: int | None = None) -> list[RankedPassage]:
        """Passages by descending score (ties: input order), cut to ``top_k``, with ids, texts and 1-based ranks."""
        return _ranked(passages, self.scores(question, passages), top_k, self._text)

    # ---- sentence-transformers' CrossEncoder interface ------------------------------------------
    def predict(self, pairs, batch_size: int | None = None, show_progress_bar: bool | None = False,
                activation_fn: Callable[[torch.Tensor], torch.Tensor] | None = None, convert_to_numpy: bool = True,
                convert_to_tensor: bool = False):
        """Scores of ``(query, passage)`` pairs, as ``CrossEncoder.predict``: a float32 array (a tensor with
        ``convert_to_tensor``, a list of 0-d tensors with ``convert_to_numpy=False``; one pair in, one score
        out). ``activation_fn`` (none by default) is applied to the logits."""
        # one (query, passage) pair rather than a sequence of them: sentence-transformers' rule
        single = isinstance(pairs, (tuple, list)) and len(pairs) == 2 and not isinstance(pairs[0], (tuple, list))
        pairs = [pairs] if single else list(pairs)
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"pairs[{i}]: expected a (query, passage) pair, got {pair!r:.80}")
        scores = torch.from_numpy(self.score_pairs([str(q) for q, _ in pairs], [self._text(p) for _, p in pairs],
                                                   progress=show_progress_bar, batch_size=batch_size,
                                                   desc="predicting").astype(np.float32))
        if activation_fn is not None:
            scores = activation_fn(scores)
        out = scores if convert_to_tensor else scores.numpy() if convert_to_numpy else list(scores)
        return out[0] if single else out

    def rank(self, query: str, documents: Sequence[Passage | str], top_k: int | None = None,
             return_documents: bool = False, batch_size: int | None = None, show_progress_bar: bool | None = False,
             activation_fn: Callable[[torch.Tensor], torch.Tensor] | None = None) -> list[dict[str, Any]]:
        """``CrossEncoder.rank``: ``[{"corpus_id": i, "score": s}, ...]`` (+ ``"text"``: the text scored) by
        descending score, ties in input order, cut to ``top_k``; :meth:`rank_passages` adds ids and ranks."""
        scores = self.predict([(query, d) for d in documents], batch_size=batch_size,
                              show_progress_bar=show_progress_bar, activation_fn=activation_fn)
        return [{"corpus_id": r.index, "score": r.score, **({"text": r.text} if return_documents else {})}
                for r in _ranked(documents, scores, top_k, self._text)]

    def score_records(self, records: Sequence[QueryRecord], *, progress: bool | None = None,
                      fuse: bool = True) -> PassageScores:
        """Per record (by question id), one score per passage, all pairs batched together: the fused score with a
        retriever-fusion weight (:mod:`udcg_ltr.models.fusion`), the logits with ``fuse=False``."""
        questions = [r.question for r in records for _ in r.passages]
        texts = [self._text(p) for r in records for p in r.passages]
        flat = self.score_pairs(questions, texts, progress=progress, desc="reranking")
        out = PassageScores.of(records, np.split(flat, np.cumsum([len(r.passages) for r in records])[:-1])
                               if records else [])
        return fuse_scores(records, out, self.retriever_fusion) if fuse and self.retriever_fusion > 0 else out

    def rank_records(self, records: Sequence[QueryRecord], top_k: int | None = None, *,
                     progress: bool | None = None) -> list[list[RankedPassage]]:
        """:meth:`rank_passages` for every record, batched across records."""
        return [_ranked(r.passages, s, top_k, self._text)
                for r, s in zip(records, self.score_records(records, progress=progress).aligned(records))]

    def write_run(self, records: Sequence[QueryRecord], path: str | os.PathLike, tag: str = "udcg_ltr",
                  *, progress: bool | None = None) -> Path:
        """Rerank ``records`` and write the TREC run."""
        return write_run(records, self.score_records(records, progress=progress), path, tag)


def _ranked(passages, scores, top_k, fmt) -> list[RankedPassage]:
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:top_k]
    return [RankedPassage(index=int(i), pid=getattr(passages[i], "pid", None), text=fmt(passages[i]),
                          score=float(scores[i]), rank=r) for r, i in enumerate(order, start=1)]


def write_run(records: Sequence[QueryRecord], scores, path: str | os.PathLike, tag: str = "udcg_ltr") -> Path:
    """Write a 6-column TREC run (``qid Q0 pid rank score tag``) of ``scores`` (:class:`PassageScores` or what
    :func:`~udcg_ltr.data.scores.as_passage_scores` takes) over ``records``, atomically; ranks by descending score,
    ties in passage order."""
    return write_trec_run(path, as_passage_scores(records, scores).to_run(records), tag=tag)
