"""Evaluate and study: ``python evaluate.py mode=<metrics|correlation|reranker|selectors|...>``.

    python evaluate.py mode=correlation dataset=annotated_squad     # the real-data correlation table
    python evaluate.py mode=correlation                             # the same study on the demo world, demo LLM
    python evaluate.py mode=reranker dataset=annotated_squad reranker.path=outputs/train/.../cross_encoder/model
    python evaluate.py mode=sweep_summary sweep_dir=multirun/train/default

Configuration: conf/evaluate.yaml. Returns nothing (metrics go to the run folder and W&B).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    from udcg_ltr.jobs.evaluate_job import evaluate

    evaluate(cfg)


if __name__ == "__main__":
    main()
