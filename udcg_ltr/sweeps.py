"""Sweep bookkeeping: read finished jobs of a Hydra multirun, read offline W&B runs, one summary table.

A multirun folder (``multirun/<task>/<sweep_name>/``) holds one sub-folder per job, named by its
overrides. A job that finished wrote ``job_result.json`` (status, hash of its resolved config,
metrics, the config itself) last and atomically, so a killed sweep restarted with the same command
skips exactly the jobs that completed *with the same configuration*: a folder name can stand for
several configurations (``paths.data_dir`` is not part of it), so the skip is keyed by the config
hash (:func:`udcg_ltr.jobs.common.config_hash`), and a killed or failed job reruns.

``python -m udcg_ltr.sweeps <sweep folder> [--metric test/udcg@5]`` writes ``sweep_summary.md``,
``sweep_summary.csv`` and ``sweep_summary.png`` into the sweep folder. The plot shows the metric the
sweep optimised (each job's ``optimized_metric``) unless ``--metric`` names another.
"""

from __future__ import annotations

import argparse
import json
import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udcg_ltr.io import atomic_open, atomic_write_text

RESULT_FILE = "job_result.json"


# ---- offline W&B runs ------------------------------------------------------------------------
@dataclass
class OfflineRun:
    """What an offline W&B run recorded: its id, group, tags, config and final summary."""

    path: Path
    run_id: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    n_history: int = 0
    exit_code: int | None = None  # None: the run never finished (killed)


def _wandb_chunks(path: Path) -> Iterator[bytes]:
    """Records of a ``run-*.wandb`` file (W&B's LevelDB-style log: 32 KiB blocks, 7-byte headers)."""
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B transaction log")
    block, offset, pending = 32768, 7, b""
    while offset + 7 <= len(data):
        left = block - offset % block
        if left < 7:  # block trailer padding
            offset += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[offset:offset + 7])
        offset += 7
        chunk = data[offset:offset + length]
        offset += length
        if kind == 1:  # FULL
            yield chunk
        elif kind == 2:  # FIRST
            pending = chunk
        elif kind == 3:  # MIDDLE
            pending += chunk
        elif kind == 4:  # LAST
            yield pending + chunk
            pending = b""
        else:  # zero padding at the end of a file being written
            break


def _set_nested(target: dict, keys: Sequence[str], value: Any) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def read_offline_run(run_dir: str | Path) -> OfflineRun:
    """Parse ``offline-run-*/run-*.wandb``: config, summary (last value wins), group and tags."""
    from wandb.proto import wandb_internal_pb2 as pb

    run_dir = Path(run_dir)
    files = sorted(run_dir.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}")
    out = OfflineRun(path=run_dir)
    for chunk in _wandb_chunks(files[0]):
        record = pb.Record()
        record.ParseFromString(chunk)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.run_id, out.group, out.tags = record.run.run_id, record.run.run_group, list(record.run.tags)
            for item in record.run.config.update:
                out.config[item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                keys = list(item.nested_key) or [item.key]
                _set_nested(out.config, keys, json.loads(item.value_json))
        elif kind == "summary":
            for item in record.summary.update:
                keys = list(item.nested_key) or [item.key]
                _set_nested(out.summary, keys, json.loads(item.value_json))
        elif kind == "history":
            out.n_history += 1
        elif kind == "exit":
            out.exit_code = int(record.exit.exit_code)
    return out


def offline_runs(folder: str | Path) -> list[OfflineRun]:
    """Every offline W&B run below ``folder``."""
    return [read_offline_run(p) for p in sorted(Path(folder).rglob("offline-run-*")) if p.is_dir()]


# ---- sweep summary ---------------------------------------------------------------------------
@dataclass
class JobResult:
    job_dir: Path
    overrides: list[str]
    metrics: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    config_hash: str | None = None

    @property
    def optimized_metric(self) -> str | None:
        """The metric this job was optimising (``optimized_metric`` of its config), if any."""
        name = self.config.get("optimized_metric")
        return str(name) if name else None


def _overrides(job_dir: Path) -> list[str]:
    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return []
    import yaml

    with open(path, encoding="utf-8") as f:
        return [str(o) for o in (yaml.safe_load(f) or [])]


def collect_jobs(sweep_dir: str | Path) -> list[JobResult]:
    """Finished jobs of a sweep folder (sub-folders holding ``job_result.json``), sorted by folder."""
    jobs = []
    for path in sorted(Path(sweep_dir).rglob(RESULT_FILE)):
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        if result.get("status") == "finished":
            jobs.append(JobResult(job_dir=path.parent, overrides=_overrides(path.parent),
                                  metrics=dict(result.get("metrics", {})), config=dict(result.get("config") or {}),
                                  config_hash=result.get("config_hash")))
    return jobs


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "NA" if math.isnan(value) else f"{value:.4f}"
    return "NA" if value is None else str(value)


def plotted_metric(jobs: Sequence[JobResult], names: Sequence[str]) -> str | None:
    """The metric a sweep summary plots when none is asked for: the jobs' ``optimized_metric`` when they agree
    and report it; ``"optimized_metric"`` (each job's own value, added to its metrics) when every job reports its
    own but they differ (a sweep over ``k``); else the first metric (not a ``time/`` one) that varies across
    jobs; else None."""
    wanted = {j.optimized_metric for j in jobs}
    if None not in wanted and all(j.optimized_metric in j.metrics for j in jobs):
        if len(wanted) == 1:
            return next(iter(wanted))
        for j in jobs:
            j.metrics["optimized_metric"] = j.metrics[j.optimized_metric]
        return "optimized_metric"
    for name in names:
        if name.startswith("time/"):
            continue
        values = {j.metrics.get(name) for j in jobs}
        if len(values) > 1:
            return name
    return None


def summarize_sweep(sweep_dir: str | Path, *, metric: str | None = None,
                    metrics: Sequence[str] | None = None) -> dict[str, Path]:
    """One row per finished job (its overrides and metrics): markdown, CSV and a bar plot of ``metric``
    (default: :func:`plotted_metric`, the metric the sweep optimised), listed first in the table."""
    sweep_dir = Path(sweep_dir)
    jobs = collect_jobs(sweep_dir)
    if not jobs:
        raise FileNotFoundError(f"no finished job (no {RESULT_FILE}) under {sweep_dir}")
    names = list(metrics) if metrics else sorted({k for j in jobs for k in j.metrics
                                                  if isinstance(j.metrics[k], (int, float))})
    metric = metric or plotted_metric(jobs, names)
    if metric is not None:
        if metric == "optimized_metric" and metric not in names:
            names.append(metric)
        if all(metric not in j.metrics for j in jobs):
            raise KeyError(f"metric {metric!r} is not reported by any job of {sweep_dir} (they report {names})")
        names = [metric, *[n for n in names if n != metric]]
    label = lambda j: " ".join(j.overrides) or j.job_dir.name  # noqa: E731
    header = ["job", *names]
    rows = [[label(j), *[j.metrics.get(n) for n in names]] for j in jobs]
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    out = {"markdown": sweep_dir / "sweep_summary.md", "csv": sweep_dir / "sweep_summary.csv"}
    atomic_write_text(out["markdown"], "\n".join(md) + "\n")
    import csv

    with atomic_open(out["csv"], "w") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    if metric is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        values = [math.nan if j.metrics.get(metric) is None else float(j.metrics[metric]) for j in jobs]
        fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(jobs)), 3.5))
        ax.bar(range(len(jobs)), values, color="#4477aa")
        ax.set_xticks(range(len(jobs)))
        ax.set_xticklabels([label(j).replace(" ", "\n") for j in jobs], fontsize=7)
        ax.set_ylabel(metric)
        ax.set_title(f"sweep {sweep_dir.name}: {metric} per job")
        fig.tight_layout()
        out["plot"] = sweep_dir / "sweep_summary.png"
        tmp = out["plot"].with_suffix(".tmp.png")
        fig.savefig(tmp, dpi=120)
        plt.close(fig)
        tmp.replace(out["plot"])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir")
    parser.add_argument("--metric", default=None)
    args = parser.parse_args(argv)
    paths = summarize_sweep(args.sweep_dir, metric=args.metric)
    print(Path(paths["markdown"]).read_text(encoding="utf-8"))
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
