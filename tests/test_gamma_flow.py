"""One spec for ``k``, ``gamma``, the relevance threshold and the LLM: set on the command line, it reaches every consumer.

Issue 17: ``python train.py gamma=0.5`` trained the direct-UDCG loss with gamma = 1/3 (``conf/loss/udcg_direct.yaml``
passed ``k`` but not ``gamma``, and ``CrossEncoderModule`` built the loss from the loss config alone) while the
validation metrics and the report used 0.5. Here the train job runs on a tiny test-built data set with a tiny BERT,
composed by Hydra with ``gamma=0.5 k=3``, and spies record what the loss, the validation metrics and the report were
built with.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from job_fixtures import CONF, LLM, compose, run_train_job, tiny_job_config, tiny_records

from udcg_ltr.losses import DirectUDCGLoss, LambdaUDCGLoss, get_loss, with_spec
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA

GAMMA, K, THRESHOLD = 0.5, 3, 2    # none of them the default (1/3, 5, 1)


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
    cfg = tiny_job_config(tmp_path, monkeypatch, tiny_records({"train": 6, "val": 3, "test": 3}), [
        f"gamma={GAMMA}", f"k={K}", f"dataset.relevance_threshold={THRESHOLD}", "loss=udcg_direct",
        "model.cross_encoder.batch_size=3", "trainer=debug", "trainer.precision=32-true", "trainer.num_threads=1",
        "logger=none"])
    metrics = run_train_job(cfg)

    # the loss the job trained with
    assert spies["loss"], "the job built no direct-UDCG loss"
    assert all(loss.gamma == GAMMA and loss.k == K for loss in spies["loss"]), \
        [(loss.gamma, loss.k) for loss in spies["loss"]]
    # the training targets: utilities of the configured LLM at the configured relevance threshold
    assert spies["data"] and all(d["llm"] == LLM and d["relevance_threshold"] == THRESHOLD for d in spies["data"])
    # the validation metrics during training (and the monitored val/udcg@k)
    assert spies["val"], "no validation metric table was computed"
    assert all(v["options"].gamma == GAMMA and v["options"].k == K and v["relevance_threshold"] == THRESHOLD
               for v in spies["val"])
    assert f"cross_encoder/val/udcg@{K}" in metrics
    # the test metrics of the report
    assert spies["report"] and all(r["options"].gamma == GAMMA and r["options"].k == K for r in spies["report"])
    assert all(s["llm"] == LLM and s["relevance_threshold"] == THRESHOLD for s in spies["report_slates"])
    assert f"test/udcg@{K}" in metrics
    assert Path(tmp_path / "run" / "results.md").is_file()


def test_default_gamma_is_the_papers():
    """Without an override the whole chain uses the paper's gamma = 1/3 (the bug hid behind this default)."""
    cfg = compose(["loss=udcg_direct"])
    assert float(cfg.gamma) == pytest.approx(DEFAULT_GAMMA) and float(cfg.loss.gamma) == pytest.approx(DEFAULT_GAMMA)
