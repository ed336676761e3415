"""The project's ranking losses as sentence-transformers cross-encoder losses (``CrossEncoderTrainer``).

Each adapter has the shape of sentence-transformers' listwise ``ListNetLoss`` / ``LambdaLoss``: built
as ``Loss(model, ..., activation_fn=None, mini_batch_size=None)``, called with ``inputs = [queries,
docs_lists]`` and one list of labels per query (the ``CrossEncoderDataCollator``'s batches of a
``{"query", "docs", "labels"}`` data set), it calls the project's loss: the Lightning trainer's value.

**Labels are signed utilities** (UDCG paper, Eq. 2, in [-1, 1]; a harmful distractor has ``u < 0``),
never clamped, unlike sentence-transformers' own ``LambdaLoss`` (at 0, erasing the distractor signal).
They are checked on the host, where the collator leaves them, so no training step waits for a GPU.

Example::

    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer
    from udcg_ltr.losses.sentence_transformers import DirectUDCGLoss

    model = CrossEncoder("cross-encoder/ms-marco-MiniLM-L6-v2", num_labels=1)
    train = Dataset.from_dict({"query": ["who wrote Hamlet?"],
                               "docs": [["Shakespeare wrote Hamlet.", "Hamlet is a Danish prince.", "Marlowe ..."]],
                               "labels": [[0.93, -0.41, -0.05]]})   # signed utilities of one LLM
    CrossEncoderTrainer(model=model, train_dataset=train, loss=DirectUDCGLoss(model, k=2, tau=0.5)).train()

The direct loss's temperature annealing (``tau_end``) is driven by training progress: call
``loss.ranking_loss.anneal(state.global_step / state.max_steps)`` from a ``TrainerCallback``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from sentence_transformers.cross_encoder import CrossEncoder
from sentence_transformers.util import batch_to_device, fullname
from torch import Tensor, nn

from udcg_ltr.losses import direct, listwise
from udcg_ltr.losses.base import RankingLoss

UDCG_CITATION = """
@article{trappolini2025redefining,
    title={Redefining Retrieval Evaluation in the Era of LLMs},
    author={Trappolini, Giovanni and Cuconasu, Florin and Filice, Simone and Maarek, Yoelle and Silvestri, Fabrizio},
    journal={arXiv preprint arXiv:2510.21440},
    year={2025}
}
"""


def padded_targets(labels: Sequence[Tensor | Sequence[float]], docs_per_query: Sequence[int]) -> tuple[Tensor, Tensor]:
    """``(targets [Q, n] float32, mask [Q, n] bool)`` from per-query label lists, padding 0; ``ValueError``
    names the query and position of a label that is not a finite utility in [-1, 1]."""
    if isinstance(labels, Tensor):
        raise ValueError("expected one list of labels per query (a listwise data set: query, docs, labels), "
                         "got a single value per sample")
    counts = [len(lbls) for lbls in labels]
    if list(docs_per_query) != counts:
        raise ValueError(f"number of documents per query in inputs ({list(docs_per_query)}) does not match "
                         f"number of labels per query ({counts})")
    width = max(counts, default=0)
    targets = torch.zeros((len(counts), width), dtype=torch.float32)
    mask = torch.arange(width)[None, :] < torch.tensor(counts, dtype=torch.long)[:, None]
    for q, lbls in enumerate(labels):
        row = torch.as_tensor(lbls, dtype=torch.float32).reshape(-1)
        bad = ~torch.isfinite(row) | (row.abs() > 1.0)
        if bool(bad.any()):
            j = int(torch.nonzero(bad)[0])
            raise ValueError(f"labels of query {q} (batch position), document {j}: {float(row[j])!r} is not a "
                             "signed utility in [-1, 1] (Eq. 2: u = R * (1 - P(NO-RESPONSE)))")
        targets[q, :len(row)] = row
    return targets, mask


class UtilityListLoss(nn.Module):
    """Base adapter: score the pairs, pad to ``[Q, n]`` with a mask, call ``ranking_loss(scores, targets,
    mask)`` (a project loss on signed utilities). ``activation_fn`` defaults to identity (the losses want
    raw scores); ``mini_batch_size`` (pairs per forward pass, as sentence-transformers' ListNetLoss):
    ``None`` = the number of queries, ``<= 0`` = all."""

    #: BibTeX of the adapted loss's own paper, cited after the UDCG paper's.
    method_citation = ""

    def __init__(self, model: CrossEncoder, ranking_loss: RankingLoss, activation_fn: nn.Module | None = None,
                 mini_batch_size: int | None = None) -> None:
        super().__init__()
        if ranking_loss.target != "utility":
            raise ValueError(f"{type(ranking_loss).__name__} reads {ranking_loss.target!r} targets; the adapters "
                             "pass signed utilities")
        self.model, self.ranking_loss = model, ranking_loss
        self.activation_fn, self.mini_batch_size = activation_fn or nn.Identity(), mini_batch_size
        if self.model.num_labels != 1:
            raise ValueError(f"{type(self).__name__} supports a model with 1 output label, but got a model with "
                             f"{self.model.num_labels} output labels.")

    def pair_logits(self, pairs: list[tuple[str, str]], batch_size: int, prompt: str | None = None,
                    task: str | None = None) -> Tensor:
        """The model's logit for every pair, in order (``[len(pairs)]`` float32)."""
        step = self.mini_batch_size or batch_size
        if step <= 0:
            step = len(pairs)
        out = []
        for start in range(0, len(pairs), step):
            chunk = pairs[start:start + step]
            if hasattr(self.model, "preprocess"):  # sentence-transformers >= 6: features -> {"scores"}
                features = batch_to_device(self.model.preprocess(chunk, prompt=prompt, task=task), self.model.device)
                logits = self.model(features)["scores"]
            else:  # sentence-transformers 4 and 5: tokenizer, model(**tokens)[0]
                tokens = self.model.tokenizer(chunk, padding=True, truncation=True, return_tensors="pt")
                logits = self.model(**batch_to_device(tokens, self.model.device))[0]
            out.append(logits.view(-1))
        return self.activation_fn(torch.cat(out).float())

    def forward(self, inputs: list[list[str] | list[list[str]]], labels: list[Tensor], prompt: str | None = None,
                task: str | None = None) -> Tensor:
        if len(inputs) != 2:
            raise ValueError(f"{type(self).__name__} expects two inputs (queries, documents_list), but got "
                             f"{len(inputs)} inputs.")
        queries, docs_list = inputs
        targets, mask = padded_targets(labels, [len(docs) for docs in docs_list])
        pairs = [(query, doc) for query, docs in zip(queries, docs_list) for doc in docs]
        logits = self.pair_logits(pairs, len(queries), prompt=prompt, task=task)
        device = logits.device
        # Real slots, row-major, are the pairs' order (host indices: no GPU sync); padding 0 is masked out.
        idx = tuple(i.to(device) for i in mask.nonzero(as_tuple=True))
        scores = torch.zeros(mask.shape, dtype=logits.dtype, device=device).index_put(idx, logits)
        return self.ranking_loss(scores, targets.to(device), mask.to(device))

    def get_config_dict(self) -> dict[str, Any]:
        """The loss's parameters (sentence-transformers writes them into the model card)."""
        return {**self.ranking_loss.plain_fields(), "activation_fn": fullname(self.activation_fn),
                "mini_batch_size": self.mini_batch_size}

    @property
    def citation(self) -> str:
        return UDCG_CITATION + self.method_citation


class DirectUDCGLoss(UtilityListLoss):
    """Loss ``-UDCG@k`` (Eq. 4; UDCG_theta, Eq. 3, with ``alpha``/``beta``) of a smooth top-k selection of
    each query's documents: keyword arguments go to :class:`udcg_ltr.losses.direct.DirectUDCGLoss`."""

    def __init__(self, model: CrossEncoder, *, activation_fn: nn.Module | None = None,
                 mini_batch_size: int | None = None, **loss_kwargs: Any) -> None:
        super().__init__(model, direct.DirectUDCGLoss(**loss_kwargs), activation_fn, mini_batch_size)

    def get_config_dict(self) -> dict[str, Any]:
        config = super().get_config_dict()
        if self.ranking_loss.alpha is not None:  # UDCG_theta: the positional weights say which metric is optimised
            config["alpha"] = [round(float(a), 6) for a in self.ranking_loss.alpha]
            config["beta"] = [round(float(b), 6) for b in self.ranking_loss.beta]
        return config


class LambdaUDCGLoss(UtilityListLoss):
    """LambdaLoss with ``|Delta UDCG@k|`` pair weights (Wang et al. 2018, Eq. 4's swap deltas): keyword
    arguments go to :class:`udcg_ltr.losses.listwise.LambdaUDCGLoss`."""

    method_citation = """
@inproceedings{wang2018lambdaloss,
    title={The LambdaLoss Framework for Ranking Metric Optimization},
    author={Wang, Xuanhui and Li, Cheng and Golbandi, Nadav and Bendersky, Michael and Najork, Marc},
    booktitle={Proceedings of the 27th ACM International Conference on Information and Knowledge Management},
    pages={1313--1322},
    year={2018}
}
"""

    def __init__(self, model: CrossEncoder, *, activation_fn: nn.Module | None = None,
                 mini_batch_size: int | None = None, **loss_kwargs: Any) -> None:
        super().__init__(model, listwise.LambdaUDCGLoss(**loss_kwargs), activation_fn, mini_batch_size)


class SignedListNetLoss(UtilityListLoss):
    """ListNet on signed utilities, ``softmax(u / tau)`` against ``softmax(s)`` (Cao et al. 2007,
    :class:`udcg_ltr.losses.listwise.ListNetLoss`): a harmful document gets less mass than a neutral one."""

    method_citation = """
@inproceedings{cao2007learning,
    title={Learning to Rank: From Pairwise Approach to Listwise Approach},
    author={Cao, Zhe and Qin, Tao and Liu, Tie-Yan and Tsai, Ming-Feng and Li, Hang},
    booktitle={Proceedings of the 24th International Conference on Machine Learning},
    pages={129--136},
    year={2007}
}
"""

    def __init__(self, model: CrossEncoder, tau: float = 0.1, activation_fn: nn.Module | None = None,
                 mini_batch_size: int | None = None) -> None:
        if not (isinstance(tau, (int, float)) and math.isfinite(tau)):
            raise ValueError(f"tau must be a finite number, got {tau!r}")
        super().__init__(model, listwise.ListNetLoss(tau=tau), activation_fn, mini_batch_size)
