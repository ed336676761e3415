"""One spec for ``k``, ``gamma``, the relevance threshold and the LLM: set on the command line, it reaches every consumer.

Issue 17: ``python train.py gamma=0.5`` trained the direct-UDCG loss with gamma = 1/3 (``conf/loss/udcg_direct.yaml``
passed ``k`` but not ``gamma``, and ``CrossEncoderModule`` built the loss from the loss config alone) while the
validation metrics and the report used 0.5. Here the train job runs on a tiny test-built data set with a tiny BERT,
composed by Hydra with ``gamma=0.5 k=3``, and spies record what the loss, the validation metrics and the report were
built with.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from model_fixtures import save_tiny_bert

from udcg_ltr.data.jsonl import write_records
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.losses import DirectUDCGLoss, LambdaUDCGLoss, get_loss, with_spec
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.paths import PROJECT_ROOT, data_dir

CONF = PROJECT_ROOT / "conf"
LLM = "smollm2-135m-instruct"  # conf/llm/smollm2.yaml's name: the data carries its annotations, so it never loads
GAMMA, K, THRESHOLD = 0.5, 3, 2    # none of them the default (1/3, 5, 1)


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    # Outside a Hydra run there is no ${hydra:runtime...}: pin the paths the config derives from it.
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="train", overrides=[f"paths.root_dir={PROJECT_ROOT}", *overrides])


def tiny_records(n_per_split: dict[str, int], seed: int = 0) -> list[QueryRecord]:
    """Pools of 5 graded passages (grade 2 = relevant at threshold 2) with utilities of both signs."""
    rng = np.random.default_rng(seed)
    records = []
    for split, n in n_per_split.items():
        for q in range(n):
            passages = []
            for j in range(5):
                grade = int(rng.integers(0, 3)) if j else 2
                text = f"the thing {q} is {'red' if grade == 2 else 'blue'} and {j}"
                passages.append(Passage(pid=f"{split}{q}-p{j}", text=text, rank=j + 1, relevance=grade,
                                        annotations={LLM: {"p_no_response": float(rng.uniform(0.0, 0.6)),
                                                           "answer_alone": "red" if grade == 2 else "blue"}}))
            records.append(QueryRecord(qid=f"{split}{q}", question=f"what colour is thing {q}?", answers=["red"],
                                       passages=passages, split=split))
    return records


# ---- the loss alone: the Python API (fit_reranker / CrossEncoderModule) and the config ------------------------
@pytest.mark.parametrize(("name", "kwargs"), [("udcg", {"tau": 0.5}), ("lambda_udcg", {}), ("udcg+listnet", {}),
                                              ("combined", {"terms": [{"name": "udcg", "weight": 1.0}]})])
def test_spec_fills_every_term_that_takes_it(name, kwargs):
    loss = get_loss(name, **with_spec(name, kwargs, k=K, gamma=GAMMA))
    terms = list(getattr(loss, "terms", [loss]))
    udcg_terms = [t for t in terms if isinstance(t, (DirectUDCGLoss, LambdaUDCGLoss))]
    assert udcg_terms and all(t.gamma == GAMMA and t.k == K for t in udcg_terms)


def test_loss_config_wins_over_the_spec():
    """``loss.gamma=0.2`` is an explicit choice (train with one gamma, report another): it is kept."""
    loss = get_loss("udcg", **with_spec("udcg", {"gamma": 0.2}, k=K, gamma=GAMMA))
    assert loss.gamma == 0.2 and loss.k == K


@pytest.mark.parametrize("loss", [p.stem for p in sorted((CONF / "loss").glob("*.yaml"))])
def test_every_loss_config_takes_gamma_and_k_from_the_command_line(loss):
    from omegaconf import OmegaConf

    cfg = compose([f"loss={loss}", f"gamma={GAMMA}", f"k={K}"])
    node = OmegaConf.to_container(cfg.loss, resolve=True)
    name = node.pop("name")
    built = get_loss(name, **with_spec(name, node, k=int(cfg.k), gamma=float(cfg.gamma)))
    if hasattr(built, "gamma"):
        assert built.gamma == GAMMA and node.get("gamma", GAMMA) == GAMMA, (loss, node)
    if hasattr(built, "k"):
        assert built.k == K, (loss, node)


# ---- the train job, end to end ---------------------------------------------------------------------------
@pytest.fixture()
def spies(monkeypatch):
    """Record the arguments of every loss, data module, validation metric table and report metric table built."""
    import udcg_ltr.jobs.systems as systems
    import udcg_ltr.models.cross_encoder as cross_encoder
    import udcg_ltr.models.datamodule as datamodule

    seen: dict[str, list] = {"loss": [], "data": [], "val": [], "report": [], "report_slates": []}

    original_loss_init = DirectUDCGLoss.__init__

    def loss_init(self, *args, **kwargs):
        original_loss_init(self, *args, **kwargs)
        seen["loss"].append(self)

    original_data_init = datamodule.SlateDataModule.__init__

    def data_init(self, *args, **kwargs):
        seen["data"].append(kwargs)
        original_data_init(self, *args, **kwargs)

    def spy(key, fn):
        def wrapped(*args, **kwargs):
            seen[key].append(kwargs)
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(DirectUDCGLoss, "__init__", loss_init)
    monkeypatch.setattr(datamodule.SlateDataModule, "__init__", data_init)
    monkeypatch.setattr(cross_encoder, "slate_metrics", spy("val", cross_encoder.slate_metrics))
    monkeypatch.setattr(systems, "metric_table", spy("report", systems.metric_table))
    monkeypatch.setattr(systems, "pad_records", spy("report_slates", systems.pad_records))
    return seen


def test_command_line_gamma_reaches_loss_validation_and_report(tmp_path, monkeypatch, spies):
    import torch

    from udcg_ltr.jobs.train_job import train

    data = tmp_path / "tiny.jsonl"
    write_records(data, tiny_records({"train": 6, "val": 3, "test": 3}))
    model_dir = save_tiny_bert(tmp_path / "bert")
    # prepare_environment exports these; monkeypatch puts the originals back afterwards.
    monkeypatch.setenv("UDCG_LTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UDCG_LTR_DATA", os.environ.get("UDCG_LTR_DATA", str(data_dir())))
    cfg = compose([
        f"gamma={GAMMA}", f"k={K}", "dataset=jsonl", f"dataset.reader.path={data}",
        f"dataset.relevance_threshold={THRESHOLD}", "llm=smollm2", "model=cross_encoder", "loss=udcg_direct",
        f"model.cross_encoder.pretrained={model_dir}", "model.cross_encoder.batch_size=3", "trainer=debug",
        "trainer.precision=32-true", "trainer.num_threads=1", "logger=none", "evaluation.end_to_end=false",
        f"paths.output_dir={tmp_path / 'run'}", f"annotate.cache_dir={tmp_path / 'annotations'}"])
    threads = torch.get_num_threads()
    try:
        metrics = train(cfg)
    finally:
        torch.set_num_threads(threads)

    # the loss the job trained with
    assert spies["loss"], "the job built no direct-UDCG loss"
    assert all(loss.gamma == GAMMA and loss.k == K for loss in spies["loss"]), \
        [(loss.gamma, loss.k) for loss in spies["loss"]]
    # the training targets: utilities of the configured LLM at the configured relevance threshold
    assert spies["data"] and all(d["llm"] == LLM and d["relevance_threshold"] == THRESHOLD for d in spies["data"])
    # the validation metrics during training (and the monitored val/udcg@k)
    assert spies["val"], "no validation metric table was computed"
    assert all(v["gamma"] == GAMMA and v["k"] == K and v["relevance_threshold"] == THRESHOLD for v in spies["val"])
    assert f"cross_encoder/val/udcg@{K}" in metrics
    # the test metrics of the report
    assert spies["report"] and all(r["gamma"] == GAMMA and r["k"] == K for r in spies["report"])
    assert all(s["llm"] == LLM and s["relevance_threshold"] == THRESHOLD for s in spies["report_slates"])
    assert f"test/udcg@{K}" in metrics
    assert Path(tmp_path / "run" / "results.md").is_file()


def test_default_gamma_is_the_papers():
    """Without an override the whole chain uses the paper's gamma = 1/3 (the bug hid behind this default)."""
    cfg = compose(["loss=udcg_direct"])
    assert float(cfg.gamma) == pytest.approx(DEFAULT_GAMMA) and float(cfg.loss.gamma) == pytest.approx(DEFAULT_GAMMA)
