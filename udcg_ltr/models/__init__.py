"""Cross-encoder rerankers: the LightningModule, the slate data module, training and inference.

* :class:`~udcg_ltr.models.cross_encoder.CrossEncoderModule` -- one logit per (question, passage);
* :class:`~udcg_ltr.models.datamodule.SlateDataModule` -- variable-length slates, one tokenizer call per batch;
* :func:`~udcg_ltr.models.training.fit_reranker` -- the entry point ``train.py`` calls;
* :class:`~udcg_ltr.models.reranker.Reranker` -- ``from_pretrained`` / ``predict`` / ``rank`` (sentence-transformers'
  shapes) / ``rank_passages`` / ``rank_records`` / ``write_run``; ``format_passage`` for CrossEncoder users;
* :func:`~udcg_ltr.models.hub.write_model_card` / :func:`~udcg_ltr.models.hub.push_to_hub` -- sharing a model;
* :func:`~udcg_ltr.models.evaluation.evaluate_reranker` -- the metric table (and end-to-end rates) of top-k contexts.

Imports are lazy: ``from udcg_ltr.models import Reranker`` does not pull in the training stack's
callbacks until they are used.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CrossEncoderModule": "cross_encoder",
    "default_model_path": "cross_encoder",
    "load_sequence_classifier": "cross_encoder",
    "SlateDataModule": "datamodule",
    "SlateCollator": "datamodule",
    "SlateDataset": "datamodule",
    "Slate": "datamodule",
    "build_slates": "datamodule",
    "passage_text": "datamodule",
    "scatter_scores": "datamodule",
    "fit_reranker": "training",
    "AtomicCheckpointIO": "training",
    "Reranker": "reranker",
    "RankedPassage": "reranker",
    "save_reranker": "reranker",
    "write_run": "reranker",
    "format_passage": "reranker",
    "read_template": "reranker",
    "write_model_card": "hub",
    "push_to_hub": "hub",
    "evaluate_reranker": "evaluation",
    "slate_metrics": "evaluation",
    "top_k_by": "evaluation",
    "per_query_udcg": "evaluation",
    "per_query_metrics": "evaluation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"udcg_ltr.models.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'udcg_ltr.models' has no attribute {name!r}")
