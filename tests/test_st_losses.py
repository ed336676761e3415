"""The project's losses as sentence-transformers cross-encoder losses (issue 18, item 2).

* each adapter's value is the project loss on the same scores, signed targets and mask (any padding);
* labels are signed utilities: a negative label changes the loss (never clamped), bad labels are clear errors;
* a tiny random BERT ``CrossEncoder`` trained with ``CrossEncoderTrainer`` and the direct UDCG adapter
  lifts validation UDCG@k (computed with :mod:`udcg_ltr.metrics`) from its untrained value to the oracle's.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

from datasets import Dataset  # noqa: E402
from model_fixtures import save_tiny_bert  # noqa: E402
from sentence_transformers.cross_encoder import (  # noqa: E402
    CrossEncoder,
    CrossEncoderTrainer,
    CrossEncoderTrainingArguments,
)

from udcg_ltr.losses import direct, listwise  # noqa: E402
from udcg_ltr.losses.pointwise import BCELoss  # noqa: E402
from udcg_ltr.losses.sentence_transformers import (  # noqa: E402
    DirectUDCGLoss,
    LambdaUDCGLoss,
    SignedListNetLoss,
    UtilityListLoss,
    padded_targets,
)
from udcg_ltr.metrics import rank_by_scores, take_ranked, udcg  # noqa: E402

ADAPTERS = {
    "direct": (lambda m: DirectUDCGLoss(m, k=2, tau=0.5), lambda: direct.DirectUDCGLoss(k=2, tau=0.5)),
    "direct_theta": (lambda m: DirectUDCGLoss(m, k=2, tau=0.5, alpha=[0.9, 0.4], beta=[0.5, 0.2]),
                     lambda: direct.DirectUDCGLoss(k=2, tau=0.5, alpha=[0.9, 0.4], beta=[0.5, 0.2])),
    "lambda": (lambda m: LambdaUDCGLoss(m, k=2, sigma=1.5), lambda: listwise.LambdaUDCGLoss(k=2, sigma=1.5)),
    "listnet": (lambda m: SignedListNetLoss(m, tau=0.2), lambda: listwise.ListNetLoss(tau=0.2)),
}


class StubCrossEncoder(nn.Module):
    """A one-label "cross-encoder" whose logit for ``(query, "d<i>")`` is the parameter ``table[i]``: it exposes
    the sentence-transformers v6 surface the adapters use (``preprocess``, ``forward -> {"scores"}``)."""

    num_labels = 1

    def __init__(self, logits):
        super().__init__()
        self.table = nn.Parameter(torch.as_tensor(logits, dtype=torch.float32))
        self.device = torch.device("cpu")

    def preprocess(self, pairs, prompt=None, task=None):
        return {"ids": torch.tensor([int(doc[1:]) for _, doc in pairs])}

    def forward(self, features):
        return {"scores": self.table[features["ids"]][:, None]}


def _batch(counts, utilities):
    """Inputs and labels for queries with ``counts`` documents each (documents ``d0, d1, ...`` in order)."""
    docs, labels, start = [], [], 0
    for n in counts:
        docs.append([f"d{start + j}" for j in range(n)])
        labels.append(torch.tensor(utilities[start:start + n]))
        start += n
    return [[f"q{i}" for i in range(len(counts))], docs], labels


def _padded(values, counts, fill):
    out = torch.full((len(counts), max(counts)), fill, dtype=torch.float32)
    mask = torch.zeros(out.shape, dtype=torch.bool)
    start = 0
    for q, n in enumerate(counts):
        out[q, :n] = torch.as_tensor(values[start:start + n], dtype=torch.float32)
        mask[q, :n] = True
        start += n
    return out, mask


@settings(max_examples=40, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(ADAPTERS)))
def test_each_adapter_equals_the_project_loss_on_padded_slates(data, name):
    counts = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    total = sum(counts)
    floats = st.floats(-1.0, 1.0, allow_nan=False, width=32)
    utilities = data.draw(st.lists(floats, min_size=total, max_size=total))
    logits = data.draw(st.lists(st.floats(-4.0, 4.0, allow_nan=False, width=32), min_size=total, max_size=total))
    make_adapter, make_project = ADAPTERS[name]
    model = StubCrossEncoder(logits)
    inputs, labels = _batch(counts, utilities)
    got = make_adapter(model)(inputs, labels)
    # the project loss on padded tensors whose padding holds junk: only the mask may decide what is real
    scores, mask = _padded(logits, counts, fill=123.0)
    targets, _ = _padded(utilities, counts, fill=-7.0)
    want = make_project()(scores, targets, mask)
    assert float(got) == pytest.approx(float(want), rel=1e-5, abs=1e-6)
    got.backward()  # the loss reaches the model's parameters
    assert model.table.grad is not None and torch.isfinite(model.table.grad).all()


def test_negative_utilities_are_not_clamped():
    counts, logits = [4], [0.3, 1.2, -0.4, 0.8]
    signed = [0.9, -0.8, -0.05, 0.0]
    clamped = [max(u, 0.0) for u in signed]
    for name, (make_adapter, _) in ADAPTERS.items():
        loss = make_adapter(StubCrossEncoder(logits))
        a = float(loss(*_batch(counts, signed)))
        b = float(loss(*_batch(counts, clamped)))
        assert a != pytest.approx(b, abs=1e-6), name  # a harmful passage is not a neutral one


def test_bad_labels_are_clear_errors():
    with pytest.raises(ValueError, match=r"query 1 .* document 2: 3.0 is not a signed utility"):
        padded_targets([[0.1, 0.2], [0.5, -0.5, 3.0]], [2, 3])
    with pytest.raises(ValueError, match="not a signed utility"):
        padded_targets([[float("nan")]], [1])
    with pytest.raises(ValueError, match=r"does not match number of labels per query \(\[1\]\)"):
        padded_targets([[0.1]], [2])
    with pytest.raises(ValueError, match="one list of labels per query"):
        padded_targets(torch.tensor([0.1, 0.2]), [1, 1])
    loss = DirectUDCGLoss(StubCrossEncoder([0.0]))
    with pytest.raises(ValueError, match="two inputs"):
        loss([["q"]], [torch.tensor([0.5])])

    class TwoLabels(StubCrossEncoder):
        num_labels = 2

    with pytest.raises(ValueError, match="1 output label"):
        SignedListNetLoss(TwoLabels([0.0]))
    with pytest.raises(ValueError, match="reads 'relevance' targets"):
        UtilityListLoss(StubCrossEncoder([0.0]), BCELoss())


def test_config_and_citation():
    loss = DirectUDCGLoss(StubCrossEncoder([0.0]), k=3, tau=0.25, alpha=[1.0, 0.5, 0.25], beta=[0.3, 0.2, 0.1])
    config = loss.get_config_dict()
    assert config["k"] == 3 and config["tau"] == 0.25 and config["relaxation"] == "neuralsort"
    assert config["alpha"] == [1.0, 0.5, 0.25] and config["activation_fn"] == "torch.nn.modules.linear.Identity"
    assert "arXiv:2510.21440" in loss.citation and "lambdaloss" in LambdaUDCGLoss(StubCrossEncoder([0.0])).citation


# ---- a real CrossEncoder ------------------------------------------------------------------------------------
KEYS = ["apple", "river", "mountain", "guitar", "window", "forest", "rocket", "pencil"]
FILLER = ["the", "a", "story", "about", "old", "new", "small", "large", "city", "day", "night", "music"]
K = 2


def utility_world(n_queries: int, seed: int):
    """Queries about a key word, five passages each, all naming the key: one states a fact (utility +0.9), two
    spread a myth or rumour (distractors, -0.6), two say nothing (-0.05). Learnable from the passage's words."""
    rng = random.Random(seed)
    queries, docs, labels = [], [], []
    for _ in range(n_queries):
        key = rng.choice(KEYS)
        filler = lambda: " ".join(rng.choice(FILLER) for _ in range(3))  # noqa: E731
        slate = [(f"{filler()} {key} {rng.choice(['fact', 'true'])} {filler()}", 0.9)]
        slate += [(f"{filler()} {key} {rng.choice(['myth', 'rumor'])} {filler()}", -0.6) for _ in range(2)]
        slate += [(f"{filler()} {key} {filler()}", -0.05) for _ in range(2)]
        rng.shuffle(slate)
        queries.append(f"tell me about the {key}")
        docs.append([text for text, _ in slate])
        labels.append([u for _, u in slate])
    return queries, docs, labels


def validation_udcg(model, queries, docs, labels, k: int = K) -> float:
    """Mean UDCG@k (Eq. 4) of each query's top k by the model's score."""
    scores = np.array([model.predict([(q, d) for d in ds], activation_fn=nn.Identity(), batch_size=64,
                                     show_progress_bar=False) for q, ds in zip(queries, docs)])
    utilities = np.asarray(labels, dtype=np.float64)
    return float(np.mean(udcg(take_ranked(utilities, rank_by_scores(scores, k=k)), k=k)))


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    path = save_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), layers=2, seed=0)
    return lambda: CrossEncoder(path, num_labels=1, max_length=32, device="cpu")


def test_adapter_scores_pairs_like_the_cross_encoder(tiny_cross_encoder):
    """The adapter's logits are CrossEncoder.predict's, through the v6 path and the v4/v5 (tokenizer) path."""
    model = tiny_cross_encoder().eval()
    queries, docs, labels = utility_world(3, seed=9)
    docs[1] = docs[1][:3]  # a shorter slate: padding
    labels[1] = labels[1][:3]
    pairs = [(q, d) for q, ds in zip(queries, docs) for d in ds]
    expected = torch.as_tensor(model.predict(pairs, activation_fn=nn.Identity(), show_progress_bar=False))
    loss = DirectUDCGLoss(model, k=K, tau=0.5, mini_batch_size=4)
    with torch.no_grad():
        logits = loss.pair_logits(pairs, len(queries))
        torch.testing.assert_close(logits, expected.float(), atol=1e-5, rtol=1e-5)

        class V5CrossEncoder(nn.Module):  # sentence-transformers 4/5: tokenizer + model(**tokens)[0]
            num_labels = 1

            def __init__(self, inner):
                super().__init__()
                self.inner, self.tokenizer, self.device = inner.model, inner.tokenizer, inner.device

            def forward(self, **tokens):
                return self.inner(**tokens)

        old = DirectUDCGLoss(V5CrossEncoder(model).eval(), k=K, tau=0.5)
        torch.testing.assert_close(old.pair_logits(pairs, len(queries)), expected.float(), atol=1e-5, rtol=1e-5)
        value = loss([queries, docs], [torch.tensor(x) for x in labels])
        scores, mask = _padded(expected.tolist(), [len(d) for d in docs], fill=0.0)
        targets, _ = _padded([u for lab in labels for u in lab], [len(d) for d in docs], fill=0.0)
        want = direct.DirectUDCGLoss(k=K, tau=0.5)(scores, targets, mask)
    assert float(value) == pytest.approx(float(want), abs=1e-5)


def test_cross_encoder_trainer_with_direct_udcg_raises_validation_udcg(tiny_cross_encoder, tmp_path):
    model = tiny_cross_encoder()
    train_q, train_d, train_l = utility_world(64, seed=1)
    val_q, val_d, val_l = utility_world(32, seed=2)
    before = validation_udcg(model, val_q, val_d, val_l)
    oracle = float(np.mean(udcg(take_ranked(np.asarray(val_l), rank_by_scores(np.asarray(val_l), k=K)), k=K)))
    args = CrossEncoderTrainingArguments(
        output_dir=str(tmp_path / "out"), num_train_epochs=5, per_device_train_batch_size=8, learning_rate=3e-3,
        report_to="none", save_strategy="no", logging_strategy="no", seed=0, use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0)
    train = Dataset.from_dict({"query": train_q, "docs": train_d, "labels": train_l})
    CrossEncoderTrainer(model=model, args=args, train_dataset=train, loss=DirectUDCGLoss(model, k=K, tau=0.5)).train()
    after = validation_udcg(model, val_q, val_d, val_l)
    # untrained: about a random top 2; trained: (nearly) the utility oracle's top 2
    print(f"val UDCG@{K}: before {before:.4f} after {after:.4f} oracle {oracle:.4f}")
    assert after > before + 0.05, (before, after, oracle)
    assert after > oracle - 0.02, (before, after, oracle)
