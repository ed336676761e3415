"""Experiment tracking behind one small interface: Weights & Biases (offline by default), CSV, or nothing.

Every job (train.py, evaluate.py, the studies) logs through a :class:`RunLogger`:

* ``log_metrics(dict, step=None)`` scalar metrics; ``summary(dict)`` final metrics;
* ``log_table(name, rows, columns)`` result tables (also written as CSV in the run folder);
* ``log_image(name, path)`` PNG plots;
* ``lightning()`` the matching Lightning logger for trainers, so a training run and its job share one
  W&B run;
* ``finish()`` closes the run cleanly so the next job of a sweep starts a new one.

W&B runs in offline mode unless ``mode: online`` is configured: it never asks for a key, and runs
can be uploaded later with ``wandb sync <run folder>/wandb/offline-run-*``.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from udcg_ltr.io import atomic_open, atomic_write_json


def _plain(value: Any) -> Any:
    """JSON-safe scalars (numpy numbers, NaN -> None)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RunLogger:
    """Base logger: writes metrics and tables into ``run_dir`` (always), nothing else."""

    backend = "none"

    def __init__(self, run_dir: str | os.PathLike, *, config: Mapping[str, Any] | None = None, **_: Any):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config = dict(config or {})
        self._summary: dict[str, Any] = {}

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        pass

    def summary(self, metrics: Mapping[str, Any]) -> None:
        self._summary.update({k: _plain(v) for k, v in metrics.items()})
        atomic_write_json(self.run_dir / "metrics.json", self._summary)

    def log_table(self, name: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> Path:
        path = self.run_dir / f"{name.replace('/', '_')}.csv"
        with atomic_open(path, "w") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            writer.writerows([[_plain(v) for v in row] for row in rows])
        return path

    def log_image(self, name: str, path: str | os.PathLike) -> None:
        pass

    def lightning(self):
        return False  # Lightning: no logger

    def finish(self) -> None:
        pass


class CSVRunLogger(RunLogger):
    """Metrics appended to ``metrics.csv`` in the run folder; Lightning gets its CSVLogger."""

    backend = "csv"

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        path = self.run_dir / "metrics_log.jsonl"
        with open(path, "a", encoding="utf-8") as f:  # append-only log; a torn last line is harmless
            f.write(json.dumps({"step": step, **{k: _plain(v) for k, v in metrics.items()}}) + "\n")

    def lightning(self):
        from pytorch_lightning.loggers import CSVLogger

        return CSVLogger(save_dir=str(self.run_dir), name="lightning", version="")


class WandbRunLogger(RunLogger):
    """A W&B run (offline unless ``mode='online'``), grouped and tagged for sweeps."""

    backend = "wandb"

    def __init__(self, run_dir, *, config=None, project: str = "udcg-ltr", mode: str = "offline",
                 group: str | None = None, tags: Sequence[str] = (), name: str | None = None,
                 job_type: str | None = None, entity: str | None = None, **_: Any):
        super().__init__(run_dir, config=config)
        import wandb

        if mode == "offline":
            os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        self._wandb = wandb
        self.run = wandb.init(
            project=project, entity=entity, mode=mode, dir=str(self.run_dir), group=group,
            tags=[str(t) for t in tags], name=name, job_type=job_type, config=self.config,
            reinit="finish_previous", settings=wandb.Settings(console="off", x_disable_stats=True),
        )

    def log_metrics(self, metrics, step=None):
        self.run.log({k: _plain(v) for k, v in metrics.items()}, step=step)

    def summary(self, metrics):
        super().summary(metrics)
        for k, v in metrics.items():
            self.run.summary[k] = _plain(v)

    def log_table(self, name, rows, columns):
        path = super().log_table(name, rows, columns)
        self.run.log({name: self._wandb.Table(columns=list(columns),
                                              data=[[_plain(v) for v in r] for r in rows])})
        return path

    def log_image(self, name, path):
        self.run.log({name: self._wandb.Image(str(path))})

    def lightning(self):
        from pytorch_lightning.loggers import WandbLogger

        # Re-uses the active run (wandb.run) instead of starting a second one.
        return WandbLogger(experiment=self.run, save_dir=str(self.run_dir))

    def finish(self):
        if self.run is not None:
            self.run.finish()
            self.run = None


BACKENDS = {"none": RunLogger, "csv": CSVRunLogger, "wandb": WandbRunLogger}


def make_logger(backend: str, run_dir, **kwargs: Any) -> RunLogger:
    try:
        cls = BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown logger backend {backend!r}; choose from {sorted(BACKENDS)}") from None
    return cls(run_dir, **kwargs)
