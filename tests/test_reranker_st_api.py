"""Reranker speaks sentence-transformers (predict / rank shapes) and scores exactly as ``CrossEncoder`` on the same
saved folder, titled passages included (issue 18, item 1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from model_fixtures import tiny_bert

from udcg_ltr.data.schema import DataError, Passage
from udcg_ltr.models.datamodule import DEFAULT_TEMPLATE
from udcg_ltr.models.reranker import (
    CROSS_ENCODER_ACTIVATION,
    RERANKER_CONFIG,
    Reranker,
    format_passage,
    read_template,
    save_reranker,
)

st = pytest.importorskip("sentence_transformers")

QUESTION = "who founded the abbey of saint gall?"
WORDS = "abbey monk founded river valley gallus irish church library manuscript century king".split()


def titled_passages(n: int = 12, seed: int = 0) -> list[Passage]:
    """Passages of 1..60 words (longer ones are truncated at max_length), most of them titled."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 60))))
        title = "" if i % 4 == 3 else " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4)))).title()
        out.append(Passage(pid=f"p{i}", title=title, text=text))
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A saved tiny reranker (2 layers, hidden 32; MiniLM's tokenizer) with the default template."""
    model, tok = tiny_bert(layers=2, seed=7)
    with torch.no_grad():  # a random 32-wide head scores ~1e-3 everywhere: spread the scores so texts differ
        model.classifier.weight.mul_(100.0)
    path = tmp_path_factory.mktemp("st") / "model"
    save_reranker(model, tok, path, max_length=32)
    return path


@pytest.fixture(scope="module")
def reranker(folder):
    return Reranker.from_pretrained(folder, device="cpu", batch_size=5)


@pytest.fixture(scope="module")
def cross_encoder(folder):
    return st.CrossEncoder(str(folder), device="cpu")


def test_crossencoder_on_the_same_folder_gives_the_same_scores_on_titled_passages(folder, reranker, cross_encoder):
    passages = titled_passages()
    template = read_template(folder)
    assert template == DEFAULT_TEMPLATE
    ours = reranker.predict([(QUESTION, p) for p in passages])
    theirs = cross_encoder.predict([(QUESTION, format_passage(p.title, p.text, template)) for p in passages])
    assert ours.dtype == theirs.dtype == np.float32 and ours.shape == (len(passages),)
    assert np.max(np.abs(ours - theirs)) <= 1e-5
    # the template matters: unformatted texts score differently for the titled passages
    plain = cross_encoder.predict([(QUESTION, p.text) for p in passages])
    titled = np.array([bool(p.title) for p in passages])
    assert np.max(np.abs(plain[titled] - ours[titled])) > 1e-4
    assert np.max(np.abs(plain[~titled] - ours[~titled])) <= 1e-5
    # the same numbers as the rest of the Reranker API (logits)
    np.testing.assert_allclose(ours, reranker.scores(QUESTION, passages), atol=1e-6)


def test_the_saved_config_names_the_identity_activation_and_old_folders_have_a_documented_fallback(folder, tmp_path,
                                                                                                  cross_encoder):
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["sentence_transformers"]["activation_fn"] == CROSS_ENCODER_ACTIVATION
    assert isinstance(cross_encoder.activation_fn, torch.nn.Identity)
    # a folder saved before the entry existed: CrossEncoder falls back to its sigmoid ...
    old = tmp_path / "old"
    old.mkdir()
    for f in folder.iterdir():
        (old / f.name).write_bytes(f.read_bytes())
    del cfg["sentence_transformers"]
    (old / "config.json").write_text(json.dumps(cfg))
    pairs = [(QUESTION, format_passage(p.title, p.text)) for p in titled_passages(4)]
    ours = Reranker.from_pretrained(old, device="cpu").predict(pairs)
    sigmoid = st.CrossEncoder(str(old), device="cpu").predict(pairs)
    np.testing.assert_allclose(sigmoid, 1 / (1 + np.exp(-ours)), atol=1e-6)
    # ... and activation_fn=Identity() restores the logits
    identity = st.CrossEncoder(str(old), device="cpu", activation_fn=torch.nn.Identity()).predict(pairs)
    assert np.max(np.abs(identity - ours)) <= 1e-5


def test_rank_has_sentence_transformers_shape_and_order(folder, reranker, cross_encoder):
    passages = titled_passages(9, seed=1)
    texts = [format_passage(p.title, p.text, read_template(folder)) for p in passages]
    ours = reranker.rank(QUESTION, passages, return_documents=True)
    theirs = cross_encoder.rank(QUESTION, texts, return_documents=True)
    assert [set(h) for h in ours] == [{"corpus_id", "score", "text"}] * len(passages)
    assert [h["corpus_id"] for h in ours] == [h["corpus_id"] for h in theirs]
    assert [h["text"] for h in ours] == [h["text"] for h in theirs]
    assert max(abs(a["score"] - b["score"]) for a, b in zip(ours, theirs)) <= 1e-5
    assert all(a["score"] >= b["score"] for a, b in zip(ours, ours[1:]))
    top = reranker.rank(QUESTION, texts, top_k=3)
    assert [set(h) for h in top] == [{"corpus_id", "score"}] * 3
    assert [h["corpus_id"] for h in top] == [h["corpus_id"] for h in ours[:3]]
    # strings are returned as given; ties keep input order (as sorted(..., reverse=True) in sentence-transformers)
    tied = reranker.rank("q", ["same", "other", "same"], return_documents=True)
    assert [h["corpus_id"] for h in tied if h["text"] == "same"] == [0, 2]


def test_predict_options(reranker, cross_encoder):
    pairs = [(QUESTION, format_passage(p.title, p.text)) for p in titled_passages(7, seed=2)]
    base = reranker.predict(pairs)
    one = reranker.predict(pairs[0])
    assert isinstance(one, np.float32) and one == pytest.approx(float(base[0]), abs=1e-6)
    assert cross_encoder.predict(pairs[0]) == pytest.approx(float(one), abs=1e-5)
    tensor = reranker.predict(pairs, convert_to_tensor=True)
    assert isinstance(tensor, torch.Tensor) and tensor.shape == (7,)
    as_list = reranker.predict(pairs, convert_to_numpy=False)
    assert isinstance(as_list, list) and len(as_list) == 7
    np.testing.assert_allclose(reranker.predict(pairs, batch_size=1, show_progress_bar=False), base, atol=1e-5)
    sig = reranker.predict([list(p) for p in pairs], activation_fn=torch.nn.Sigmoid())
    np.testing.assert_allclose(sig, cross_encoder.predict(pairs, activation_fn=torch.nn.Sigmoid()), atol=1e-6)
    assert reranker.predict([]).shape == (0,)
    with pytest.raises(TypeError, match=r"pairs\[1\]"):
        reranker.predict([("q", "a"), ("q", "b", "c")])


def test_template_is_saved_and_read_back_and_format_passage_follows_it(tmp_path, reranker):
    dest = tmp_path / "custom"
    save_reranker(reranker.model, reranker.tokenizer, dest, max_length=32, template="{title} | {text}")
    assert read_template(dest) == "{title} | {text}"
    assert format_passage("Rome", "Capital of Italy.", read_template(dest)) == "Rome | Capital of Italy."
    assert format_passage("", "untitled text", read_template(dest)) == "untitled text"
    assert read_template(tmp_path) == DEFAULT_TEMPLATE  # no side file: the training default
    custom = Reranker.from_pretrained(dest, device="cpu")
    p = Passage(pid="x", title="Rome", text="Capital of Italy.")
    ce = st.CrossEncoder(str(dest), device="cpu")
    assert ce.predict(("q", format_passage(p.title, p.text, read_template(dest)))) == \
        pytest.approx(float(custom.predict(("q", p))), abs=1e-5)


def test_malformed_side_file_names_the_file_and_field(tmp_path):
    (tmp_path / RERANKER_CONFIG).write_text('{"template": 3}')
    with pytest.raises(DataError, match=r"udcg_ltr_reranker\.json.*field 'template'"):
        read_template(tmp_path)
    (tmp_path / RERANKER_CONFIG).write_text('{"template": ')
    with pytest.raises(DataError, match=r"udcg_ltr_reranker\.json: not valid JSON"):
        read_template(tmp_path)
