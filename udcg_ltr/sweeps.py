"""Sweep bookkeeping: read the finished jobs of a Hydra multirun and write one summary table and plot.

A multirun folder (``multirun/<task>/<sweep_name>/``) holds one sub-folder per job, named by its overrides; a finished
job wrote ``job_result.json`` (status, config hash, metrics, the config itself) last and atomically. The summary reads
only those files, never W&B's private run log, so ``logger=csv`` / ``none`` sweeps summarise the same way.

``python -m udcg_ltr.sweeps <sweep folder> [--metric test/udcg@5]`` writes ``sweep_summary.md``, ``.csv`` and ``.png``
into the sweep folder; the plot shows the metric the sweep optimised unless ``--metric`` names another.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.report import Column, fmt_float, new_figure, save_figure, set_title, write_table

RESULT_FILE = "job_result.json"


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

    return [str(o) for o in (yaml.safe_load(path.read_text(encoding="utf-8")) or [])]


def collect_jobs(sweep_dir: str | Path) -> list[JobResult]:
    """Finished jobs of a sweep folder (sub-folders holding ``job_result.json``), sorted by folder."""
    jobs = []
    for path in sorted(Path(sweep_dir).rglob(RESULT_FILE)):
        result = json.loads(path.read_text(encoding="utf-8"))
        if result.get("status") == "finished":
            jobs.append(JobResult(job_dir=path.parent, overrides=_overrides(path.parent),
                                  metrics=dict(result.get("metrics", {})), config=dict(result.get("config") or {}),
                                  config_hash=result.get("config_hash")))
    return jobs


def plotted_metric(jobs: Sequence[JobResult], names: Sequence[str]) -> str | None:
    """The metric a sweep summary plots when none is asked for: the jobs' ``optimized_metric`` when they agree
    and report it; ``"optimized_metric"`` (each job's own value, added to its metrics) when they differ (a
    sweep over ``k``); else the first metric (not a ``time/`` one) that varies across jobs, if any."""
    wanted = {j.optimized_metric for j in jobs}
    if None not in wanted and all(j.optimized_metric in j.metrics for j in jobs):
        if len(wanted) == 1:
            return next(iter(wanted))
        for j in jobs:
            j.metrics["optimized_metric"] = j.metrics[j.optimized_metric]
        return "optimized_metric"
    varying = (n for n in names if not n.startswith("time/") and len({j.metrics.get(n) for j in jobs}) > 1)
    return next(varying, None)


def job_label(job: JobResult) -> str:
    """A job's name in the summary: its overrides (else its folder name)."""
    return " ".join(job.overrides) or job.job_dir.name


def sweep_figure(jobs: Sequence[JobResult], metric: str, *, sweep_name: str = ""):
    """Bars of ``metric`` per job, each labelled with its value; the title names the sweep, the metric (and
    whether the jobs optimised it) and the data sets the jobs ran on."""
    values = np.array([math.nan if j.metrics.get(metric) is None else float(j.metrics[metric]) for j in jobs])
    optimised = {j.optimized_metric for j in jobs}
    what = (f"each job's optimised metric ({', '.join(sorted(m for m in optimised if m))})"
            if metric == "optimized_metric" else metric + (" (the optimised metric)" if optimised == {metric} else ""))
    datasets = sorted({str((j.config.get("dataset") or {}).get("name")) for j in jobs
                       if isinstance(j.config.get("dataset"), dict) and j.config["dataset"].get("name")})
    width = max(5.0, 1.3 * len(jobs))
    fig, ax = new_figure(figsize=(width, 4.0))
    x = np.arange(len(jobs))
    ax.bar(x, np.nan_to_num(values), color=["#4477aa" if np.isfinite(v) else "none" for v in values])
    finite = values[np.isfinite(values)]
    span = float(np.ptp(np.append(finite, 0.0))) or 1.0
    for xi, v in zip(x, values):
        ax.text(xi, (v if np.isfinite(v) and v > 0 else 0.0) + 0.01 * span, fmt_float(v, 4), ha="center",
                va="bottom", fontsize=7)
    if len(finite):
        ax.set_ylim(min(0.0, float(finite.min())) * 1.1, max(0.0, float(finite.max())) + 0.12 * span)
    ax.set_xticks(x, [job_label(j).replace(" ", "\n") for j in jobs], fontsize=7)
    ax.set_ylabel(metric)
    where = f"data set{'s' if len(datasets) > 1 else ''} {', '.join(datasets)}" if datasets else "data set not recorded"
    set_title(ax, f"sweep {sweep_name}: {what}\n{where}; {len(jobs)} finished jobs", width=int(13 * width), fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return fig


def summarize_sweep(sweep_dir: str | Path, *, metric: str | None = None) -> dict[str, Path]:
    """One row per finished job (its overrides and metrics): markdown (``md``), CSV and a bar plot of ``metric``
    (default: :func:`plotted_metric`, the metric the sweep optimised), listed first in the table."""
    sweep_dir = Path(sweep_dir)
    jobs = collect_jobs(sweep_dir)
    if not jobs:
        raise FileNotFoundError(f"no finished job (no {RESULT_FILE}) under {sweep_dir}")
    names = sorted({k for j in jobs for k in j.metrics if isinstance(j.metrics[k], (int, float))})
    metric = metric or plotted_metric(jobs, names)
    if metric is not None:
        if all(metric not in j.metrics for j in jobs):
            raise KeyError(f"metric {metric!r} is not reported by any job of {sweep_dir} (they report {names})")
        names = [metric, *[n for n in names if n != metric]]
    rows = [{"job": job_label(j), **{n: j.metrics.get(n) for n in names}} for j in jobs]
    four_digits = lambda v: fmt_float(v, 4) if v is None or isinstance(v, float) else str(v)  # noqa: E731
    out = write_table(sweep_dir / "sweep_summary", rows, ["job", *[Column(n, fmt=four_digits) for n in names]])
    if metric is not None:
        out["plot"] = save_figure(sweep_figure(jobs, metric, sweep_name=sweep_dir.name), sweep_dir / "sweep_summary.png")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir")
    parser.add_argument("--metric", default=None)
    args = parser.parse_args(argv)
    paths = summarize_sweep(args.sweep_dir, metric=args.metric)
    print(paths["md"].read_text(encoding="utf-8"))
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
