"""Experiment tracking behind one small interface: Weights & Biases (offline by default), CSV, or nothing.

Every job (train.py, evaluate.py, the studies) logs through a :class:`RunLogger`; ``log_results`` logs a whole
report in one W&B step, ``lightning()`` gives the matching Lightning logger (a training run and its job share
one W&B run) and ``finish()`` closes the run, so the next job of a sweep starts a new one.

W&B runs offline unless ``mode: online`` is configured (no key asked; upload later with ``wandb sync``).
A W&B run is meant to be shared, so it holds no machine paths: every string logged to it goes through
:func:`redact_paths` (run folder -> ``<run>``, data -> ``<data>``, home -> ``~``, any other absolute path
-> ``<path>/<its file name>`` ...), and W&B's own machine metadata (host, program path, git state) is not
collected. The run folder's local files keep the real paths.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from argparse import Namespace
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from udcg_ltr.io import atomic_write_json, json_safe
from udcg_ltr.paths import PROJECT_ROOT, cache_dir, data_dir
from udcg_ltr.report import table_data, write_csv

_ABS_PATH = re.compile(r"(?<![\w.~<>:/-])/(?:[^/\s'\"<>:,;()\[\]{}|]+/)*([^/\s'\"<>:,;()\[\]{}|]+)")


def path_placeholders(run_dir: str | os.PathLike | None = None,
                      config: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """``(machine prefix, placeholder)`` pairs, most specific first, for :func:`redact_paths`."""
    paths = (config or {}).get("paths") or {}
    pairs = [(run_dir, "<run>"), (paths.get("output_dir"), "<run>"), (paths.get("data_dir"), "<data>"),
             (data_dir(), "<data>"), (paths.get("cache_dir"), "<cache>"), (cache_dir(), "<cache>"),
             (paths.get("root_dir"), "<project>"), (PROJECT_ROOT, "<project>"), (sys.prefix, "<python>"),
             (sys.base_prefix, "<python>"), (tempfile.gettempdir(), "<tmp>"), (os.path.expanduser("~"), "~")]
    out: dict[str, str] = {}  # the first label of a prefix wins
    for prefix, label in pairs:
        if prefix and isinstance(prefix, (str, os.PathLike)):
            for variant in {os.path.abspath(prefix).rstrip("/"), os.path.realpath(prefix).rstrip("/")}:
                if variant:  # not the root folder
                    out.setdefault(variant, label)
    return sorted(out.items(), key=lambda pair: -len(pair[0]))


def redact_paths(value: Any, placeholders: Sequence[tuple[str, str]]) -> Any:
    """``value`` (nested dicts / lists / strings) with machine paths replaced by placeholders (module doc)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        for prefix, label in placeholders:
            value = re.sub(re.escape(prefix) + r"(?![\w.\-])", label, value)
        return _ABS_PATH.sub(lambda m: f"<path>/{m.group(1)}", value)
    if isinstance(value, Mapping):
        return {k: redact_paths(v, placeholders) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_paths(v, placeholders) for v in value]
    return value


class RunLogger:
    """Base logger: writes metrics and tables into ``run_dir``, nothing else (``run_dir=None``: no local files)."""

    backend = "none"

    def __init__(self, run_dir: str | os.PathLike | None, *, config: Mapping[str, Any] | None = None, **_: Any):
        self.run_dir = None if run_dir is None else Path(run_dir)
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config = dict(config or {})
        self._summary: dict[str, Any] = {}

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        pass

    def summary(self, metrics: Mapping[str, Any]) -> None:
        self._summary.update({k: json_safe(v) for k, v in metrics.items()})
        if self.run_dir is not None:
            atomic_write_json(self.run_dir / "metrics.json", self._summary)

    def log_results(self, tables: Mapping[str, Sequence[Mapping[str, Any]]] = {},  # noqa: B006
                    images: Mapping[str, str | os.PathLike] = {}, scalars: Mapping[str, Any] = {},  # noqa: B006
                    *, prefix: str = "") -> dict[str, Any]:
        """A report: row-dict tables (:meth:`log_table`), PNG files (:meth:`log_image`) and headline scalars (the
        :meth:`summary`), each named ``prefix + name``. Returns what was logged by name."""
        for name, rows in tables.items():
            columns, data = table_data(rows)
            self.log_table(prefix + name, data, columns)
        for name, path in images.items():
            self.log_image(prefix + name, path)
        self.summary({prefix + k: v for k, v in scalars.items()})
        return {prefix + k: v for part in (tables, images, scalars) for k, v in part.items()}

    def log_table(self, name: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> Path | None:
        if self.run_dir is None:
            return None
        return write_csv(self.run_dir / f"{name.replace('/', '_')}.csv", [dict(zip(columns, row)) for row in rows],
                         list(columns))

    def log_image(self, name: str, path: str | os.PathLike) -> None:
        pass

    def lightning(self):
        return False  # Lightning: no logger

    def finish(self, exit_code: int = 0) -> None:
        """Close the run; ``exit_code != 0`` marks it failed where the backend records that."""


class CSVRunLogger(RunLogger):
    """Metrics appended to ``metrics_log.jsonl`` in the run folder; Lightning gets its CSVLogger."""

    backend = "csv"

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        path = self.run_dir / "metrics_log.jsonl"
        with open(path, "a", encoding="utf-8") as f:  # append-only log; a torn last line is harmless
            f.write(json.dumps({"step": step, **{k: json_safe(v) for k, v in metrics.items()}}) + "\n")

    def lightning(self):
        from pytorch_lightning.loggers import CSVLogger

        return CSVLogger(save_dir=str(self.run_dir), name="lightning", version="")


class WandbRunLogger(RunLogger):
    """A W&B run (offline unless ``mode='online'``), grouped and tagged for sweeps."""

    backend = "wandb"

    def __init__(self, run_dir, *, config=None, project: str = "udcg-ltr", mode: str = "offline",
                 group: str | None = None, tags: Sequence[str] = (), name: str | None = None,
                 job_type: str | None = None, entity: str | None = None, run: Any = None, **_: Any):
        """A new W&B run in ``run_dir``; with ``run``, the logger of that run, started elsewhere (:func:`as_run_logger`)."""
        super().__init__(run_dir, config=config)
        import wandb

        self._wandb = wandb
        self._placeholders = path_placeholders(self.run_dir, self.config)
        self.run, self._owns_run = run, run is None  # a run started elsewhere is finished there, not here
        if run is not None:
            return
        if mode == "offline":
            os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        # No machine metadata (host, user, program and Python paths, git state) in a run meant to be shared.
        settings = wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True,
                                  x_disable_machine_info=True, disable_git=True, disable_code=True, save_code=False)
        self.run = wandb.init(project=project, entity=entity, mode=mode, dir=str(self.run_dir), group=group,
                              tags=[self.redact(str(t)) for t in tags], name=name, job_type=job_type,
                              config=self.redact(self.config), reinit="finish_previous", settings=settings)

    @property
    def run_folder(self) -> str | None:
        """This run's offline folder relative to the run folder (``wandb/offline-run-...``), if under it."""
        if self.run is None or self.run_dir is None:
            return None
        try:
            return Path(self.run.dir).parent.resolve().relative_to(self.run_dir.resolve()).as_posix()
        except ValueError:
            return None

    def redact(self, value: Any) -> Any:
        """``value`` without machine paths (:func:`redact_paths`)."""
        return redact_paths(value, self._placeholders)

    def log_metrics(self, metrics, step=None):
        self.run.log({k: self.redact(json_safe(v)) for k, v in metrics.items()}, step=step)

    def summary(self, metrics):
        super().summary(metrics)
        for k, v in metrics.items():
            self.run.summary[k] = self.redact(json_safe(v))

    def _table(self, name, rows, columns):
        table = self._wandb.Table(columns=list(columns), data=[[self.redact(json_safe(v)) for v in r] for r in rows],
                                  allow_mixed_types=True)
        # Bound to the run first, the table is logged as a media file of the run (a relative path) instead of a
        # table artifact, whose manifest records W&B's absolute staging path under the home folder.
        if isinstance(self.run, self._wandb.Run):
            table.bind_to_run(self.run, name, self.run.step)
        return table

    def log_table(self, name, rows, columns):
        path = super().log_table(name, rows, columns)
        self.run.log({name: self._table(name, rows, columns)})
        return path

    def log_image(self, name, path):
        self.run.log({name: self._wandb.Image(str(path))})

    def log_results(self, tables={}, images={}, scalars={}, *, prefix=""):  # noqa: B006
        """As :meth:`RunLogger.log_results`, in one ``log`` call (one W&B step): tables as ``wandb.Table``, PNGs as
        ``wandb.Image``; returns that payload."""
        payload: dict[str, Any] = {}
        for name, rows in tables.items():
            columns, data = table_data(rows)
            RunLogger.log_table(self, prefix + name, data, columns)  # the local CSV
            payload[prefix + name] = self._table(prefix + name, data, columns)
        payload.update({prefix + name: self._wandb.Image(str(path)) for name, path in images.items()})
        payload.update({prefix + k: self.redact(json_safe(v)) for k, v in scalars.items()})
        RunLogger.summary(self, {prefix + k: v for k, v in scalars.items()})  # metrics.json in the run folder
        self.run.log(payload)
        return payload

    def lightning(self):
        from pytorch_lightning.loggers import WandbLogger

        redact = self.redact

        class RedactingWandbLogger(WandbLogger):
            """Lightning's W&B logger whose hyperparameters (model paths ...) are redacted like the config."""

            def log_hyperparams(self, params, *args, **kwargs):
                params = vars(params) if isinstance(params, Namespace) else dict(params)
                return super().log_hyperparams(redact(params), *args, **kwargs)

        # Re-uses the active run (wandb.run) instead of starting a second one.
        return RedactingWandbLogger(experiment=self.run, save_dir=str(self.run_dir))

    def finish(self, exit_code: int = 0):
        if self.run is not None and self._owns_run:
            self.run.finish(exit_code=exit_code)
            self.run = None
            # run.finish() returns before W&B's service process has written the offline run log (read right
            # after it, 4 of 5 logs held only their 7-byte header); teardown waits for the service, so a
            # finished job's W&B run is on disk. The next run starts a fresh service (~0.1-0.5 s).
            self._wandb.teardown()


_ARTIFACT_NAME_JUNK = re.compile(r"[^\w.-]+")


def log_artifact(run: Any, path: str | os.PathLike, name: str, type: str = "model",
                 metadata: Mapping[str, Any] | None = None) -> Any:
    """Log the file or folder ``path`` as a W&B artifact ``name`` (W&B's characters only, others become ``-``)
    with redacted ``metadata``; returns it, or None unless ``run`` (a :class:`RunLogger` or a ``wandb`` run)
    is W&B. The files are referenced where they are (W&B's ``immutable`` policy: saved model folders are
    written once), not copied into a staging folder under the home folder, so an offline run's artifact stays
    in the run folder and ``wandb sync`` uploads it from there."""
    if run is None or (isinstance(run, RunLogger) and not isinstance(run, WandbRunLogger)):
        return None
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"artifact {name!r}: {path} does not exist")
    logger = as_run_logger(run)
    if logger.run is None:
        raise RuntimeError(f"cannot log artifact {name!r}: the W&B run is already finished")
    clean = _ARTIFACT_NAME_JUNK.sub("-", name).strip("-.") or "artifact"
    artifact = logger._wandb.Artifact(clean, type=type, metadata=logger.redact(json_safe(dict(metadata or {}))))
    (artifact.add_dir if path.is_dir() else artifact.add_file)(str(path), policy="immutable")
    return logger.run.log_artifact(artifact)


def as_run_logger(logger: Any) -> RunLogger:
    """``logger`` itself when it is a :class:`RunLogger`, else a W&B run started elsewhere (a ``wandb`` run, a
    Lightning ``WandbLogger``, anything with ``.log(dict)``) as a :class:`WandbRunLogger` (no run folder)."""
    if isinstance(logger, RunLogger):
        return logger
    experiment = getattr(logger, "experiment", None)
    run = experiment if hasattr(experiment, "log") else logger
    if not hasattr(run, "log"):
        raise TypeError(f"cannot log to {type(logger).__name__}: expected a RunLogger, a W&B run or a WandbLogger")
    return WandbRunLogger(None, run=run)


BACKENDS = {"none": RunLogger, "csv": CSVRunLogger, "wandb": WandbRunLogger}


def make_logger(backend: str, run_dir, **kwargs: Any) -> RunLogger:
    if backend not in BACKENDS:
        raise ValueError(f"unknown logger backend {backend!r}; choose from {sorted(BACKENDS)}")
    return BACKENDS[backend](run_dir, **kwargs)
