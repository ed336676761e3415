"""The train job on a tiny test-built data set with a tiny BERT: composed by Hydra as ``python train.py`` would be,
trained in seconds (``test_gamma_flow.py``, ``test_trainer_config.py``, ``test_fusion.py``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from model_fixtures import save_tiny_bert

from udcg_ltr.data.jsonl import write_records
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.paths import PROJECT_ROOT, data_dir

CONF = PROJECT_ROOT / "conf"
LLM = "smollm2-135m-instruct"  # conf/llm/smollm2.yaml's name: the data carries its annotations, so it never loads


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


def tiny_job_config(tmp_path: Path, monkeypatch, records: Sequence[QueryRecord], overrides: Sequence[str]):
    """The train job's config over ``records`` (written to a JSONL file) with a tiny BERT as the cross-encoder,
    its outputs, caches and W&B under ``tmp_path``, no end-to-end answers; ``overrides`` come last."""
    data = tmp_path / "tiny.jsonl"
    write_records(data, records)
    model_dir = save_tiny_bert(tmp_path / "bert")
    # prepare_environment exports these; monkeypatch puts the originals back afterwards.
    monkeypatch.setenv("UDCG_LTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UDCG_LTR_DATA", os.environ.get("UDCG_LTR_DATA", str(data_dir())))
    return compose(["dataset=jsonl", f"dataset.reader.path={data}", "llm=smollm2", "model=cross_encoder",
                    f"model.cross_encoder.pretrained={model_dir}", "end_to_end=false",
                    f"paths.output_dir={tmp_path / 'run'}", f"paths.annotation_cache_dir={tmp_path / 'annotations'}",
                    *overrides])


def run_train_job(cfg) -> dict[str, float]:
    """``train(cfg)``, then torch's thread count put back (the job sets ``trainer.num_threads``)."""
    import torch

    from udcg_ltr.jobs.train_job import train

    threads = torch.get_num_threads()
    try:
        return train(cfg)
    finally:
        torch.set_num_threads(threads)
