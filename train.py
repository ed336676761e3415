"""Train: the main job and every model family (``model=pipeline|udcg_theta|cross_encoder|dynamic_k``).

    python train.py                                  # the main job on the embedded demo world
    python train.py dataset=annotated_squad model=cross_encoder loss=bce
    python train.py -m dataset=demo,annotated_squad loss=bce,udcg_direct   # a sweep

Configuration: conf/train.yaml and the groups under conf/. Returns the value of ``optimized_metric``
for Hydra sweepers.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from udcg_ltr.jobs.common import get_metric_value
    from udcg_ltr.jobs.train_job import train

    metrics = train(cfg)
    return get_metric_value(metrics, cfg.get("optimized_metric"))


if __name__ == "__main__":
    main()
