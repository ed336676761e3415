"""The fast paths of the cross-encoder loop: tokenise once, epoch-seeded shuffling, precision, token budgets, no host syncs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from model_fixtures import tiny_bert
from test_cross_encoder import LLM, toy_records

from udcg_ltr import hardware
from udcg_ltr.batching import length_batches
from udcg_ltr.losses.base import masked_mean_over_queries
from udcg_ltr.models import precision as prec
from udcg_ltr.models.datamodule import (
    EpochShuffleSampler,
    LoaderConfig,
    SlateCollator,
    SlateDataModule,
    build_slates,
)
from udcg_ltr.models.reranker import Reranker


class CountingTokenizer:
    """Wraps a tokenizer and counts the pairs it is asked to encode."""

    def __init__(self, tok):
        self.tok, self.pairs = tok, 0
        self.pad_token_id, self.padding_side, self.name_or_path = tok.pad_token_id, tok.padding_side, "counting"

    def __call__(self, questions, texts, **kwargs):
        self.pairs += len(questions)
        return self.tok(questions, texts, **kwargs)


def test_data_module_tokenises_every_pair_once():
    _, tok = tiny_bert()
    counting = CountingTokenizer(tok)
    train, val = toy_records(7, seed=1), toy_records(3, seed=2, split="val")
    n_pairs = sum(len(r.passages) for r in train + val)
    dm = SlateDataModule(train, val, tokenizer=counting, llm=LLM, max_length=24, loader=LoaderConfig(batch_size=2))
    assert counting.pairs == n_pairs  # all splits, once, when the data module is built
    for _ in range(2):  # two epochs of training batches and a validation pass
        batches = list(dm.train_dataloader()) + list(dm.val_dataloader())
    assert counting.pairs == n_pairs  # the collator only pads
    # ... and what it pads are the pairs tokenised on their own
    batch = batches[0]
    rows = [row[row != tok.pad_token_id].tolist() for c in batch["chunks"] for row in c["input_ids"]]
    flat = [rows[i] for i in batch["inverse"].tolist()]
    slates = {s.qid: s for s in build_slates(train, llm=LLM)}
    expected = [tok(slates[q].question, t, truncation=True, max_length=24)["input_ids"]
                for q in batch["qids"] for t in slates[q].texts]
    assert flat == expected


def test_a_collator_with_another_max_length_retokenises():
    _, tok = tiny_bert()
    slates = build_slates(toy_records(3, seed=3), llm=LLM)
    long = SlateCollator(tok, 32)(slates)
    short = SlateCollator(tok, 8)(slates)
    assert max(c["input_ids"].shape[1] for c in short["chunks"]) <= 8
    assert max(c["input_ids"].shape[1] for c in long["chunks"]) > 8


@given(st.integers(1, 40), st.integers(0, 50), st.integers(0, 5))
@settings(max_examples=50, deadline=None)
def test_epoch_shuffle_depends_only_on_seed_and_epoch(n, seed, epoch):
    a, b = EpochShuffleSampler(n, seed), EpochShuffleSampler(n, seed)
    a.set_epoch(epoch)
    b.set_epoch(0)
    list(b)  # drawing an earlier epoch first changes nothing
    b.set_epoch(epoch)
    assert list(a) == list(b)
    assert sorted(a) == list(range(n))


def test_epoch_shuffle_differs_between_epochs():
    s = EpochShuffleSampler(30, seed=1)
    orders = []
    for e in range(3):
        s.set_epoch(e)
        orders.append(list(s))
    assert orders[0] != orders[1] != orders[2]


def test_resolve_precision(monkeypatch):
    assert prec.resolve_precision("32") == "32-true"
    assert prec.resolve_precision("bf16-mixed", "cpu") == "bf16-mixed"
    monkeypatch.setattr(prec, "cpu_has_bf16", lambda: True)
    assert prec.resolve_precision("auto", "cpu") == "bf16-mixed"
    monkeypatch.setattr(prec, "cpu_has_bf16", lambda: False)
    assert prec.resolve_precision("auto", "cpu") == "32-true"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert prec.resolve_precision("auto", "gpu") == "16-mixed"
    with pytest.raises(ValueError, match="precision must be one of"):
        prec.resolve_precision("64-true")


def test_cpu_flags_are_read_from_cpuinfo(monkeypatch, tmp_path):
    for flags, expected in (("fpu avx512f avx512_bf16 sse", True), ("fpu avx512f sse", False)):
        info = tmp_path / "cpuinfo"
        info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        real = hardware.Path

        monkeypatch.setattr(hardware, "Path", lambda p, real=real, info=info: real(info) if p == "/proc/cpuinfo" else real(p))
        hardware.cpu_has_bf16.cache_clear()
        assert hardware.cpu_has_bf16() is expected
    hardware.cpu_has_bf16.cache_clear()


@given(st.lists(st.integers(1, 300), min_size=0, max_size=60), st.integers(1, 16),
       st.one_of(st.none(), st.integers(1, 2000)))
@settings(max_examples=100, deadline=None)
def test_length_batches_cover_rows_longest_first_within_budget(lengths, max_rows, max_tokens):
    batches = list(length_batches(lengths, max_rows, max_tokens))
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))  # every row once
    assert flat == sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))  # longest first, stable
    for b in batches:
        assert 1 <= len(b) <= max_rows
        if max_tokens is not None and len(b) > 1:
            assert len(b) * max(lengths[i] for i in b) <= max_tokens


def _reranker(**kw) -> Reranker:
    model, tok = tiny_bert(layers=2, seed=1)
    return Reranker(model, tok, device="cpu", max_length=32, **kw)


def test_reranker_token_budget_and_bf16_inference():
    records = toy_records(6, seed=5)
    plain = np.concatenate(_reranker(batch_size=64).score_records(records).aligned(records))
    budget = np.concatenate(_reranker(batch_size=64, max_tokens=40).score_records(records).aligned(records))
    np.testing.assert_allclose(budget, plain, atol=1e-5)  # batching changes nothing but the padding
    bf16 = np.concatenate(_reranker(batch_size=64, precision="bf16-mixed").score_records(records).aligned(records))
    assert not np.array_equal(bf16, plain)  # it really ran in bf16 ...
    np.testing.assert_allclose(bf16, plain, atol=0.05)  # ... and stays close


@given(st.lists(st.tuples(st.floats(-5, 5), st.booleans()), min_size=1, max_size=12))
@settings(max_examples=100, deadline=None)
def test_masked_mean_over_queries_is_the_mean_of_the_defined(rows):
    values = torch.tensor([v for v, _ in rows], dtype=torch.float32, requires_grad=True)
    defined = torch.tensor([d for _, d in rows])
    got = masked_mean_over_queries(values, defined, values)
    expected = float(np.mean([v for v, d in rows if d])) if any(defined) else 0.0
    assert float(got) == pytest.approx(expected, abs=1e-5)
    got.backward()  # a graph-carrying value even when nothing is defined
    assert values.grad is not None


def test_direct_udcg_loss_has_no_host_synchronisation():
    """The loss traces as one graph: no ``float(tensor)`` / ``bool(tensor)`` that would stall a GPU every step."""
    from udcg_ltr.losses import get_loss

    loss = get_loss("udcg", k=3, tau=0.5)
    scores, targets = torch.randn(4, 8), torch.rand(4, 8) * 2 - 1
    mask = torch.ones(4, 8, dtype=torch.bool)
    mask[0, 6:] = False
    explained = torch._dynamo.explain(loss)(scores, targets, mask)
    assert explained.graph_break_count == 0, explained.break_reasons
