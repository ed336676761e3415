"""The full annotated SQuAD set (``annotated_full/`` of the shared data folder) for the ``full_*`` benches.

``dataset=annotated_squad_full`` (conf/dataset/annotated_squad_full.yaml) reads
``<data_dir>/annotated_full/squad_top10.jsonl.gz`` and ``.../squad_contexts.jsonl.gz``; the 400-question set
(``dataset=annotated_squad``, ``annotated/``) has the same layout, so a bench's ``--dataset annotated`` passes
``folder="annotated"`` to the same helpers. The benches take a ``--data-dir`` (the folder holding
``annotated_full/``) and a ``--max-queries`` subsample: :func:`write_subsample` copies a seeded subsample of whole
questions (each with its pool and its contexts, lines verbatim) into a folder of the same layout, so that the Hydra
job and the readers run on it unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from udcg_ltr.io import atomic_open, open_text
from udcg_ltr.paths import data_dir

ROOT = Path(__file__).resolve().parent.parent  # the repository: train.py / evaluate.py
FOLDER = "annotated_full"
RECORDS = "squad_top10.jsonl.gz"
CONTEXTS = "squad_contexts.jsonl.gz"
SPLITS = ("train", "val", "test")


def full_root(root: str | Path | None = None) -> Path:
    """The folder that holds ``annotated_full/`` (``--data-dir``; default: the shared data folder)."""
    return Path(root) if root is not None else data_dir()


def missing_files(root: Path, folder: str = FOLDER) -> list[Path]:
    """The set's data files absent under ``root / folder`` (empty when the set is there)."""
    return [p for p in (root / folder / RECORDS, root / folder / CONTEXTS) if not p.is_file()]


def per_split_quota(max_queries: int, splits: Sequence[str] = SPLITS) -> dict[str, int]:
    """``max_queries`` shared evenly over the splits, the remainder to the last (test): every split gets some."""
    if max_queries < len(splits):
        raise ValueError(f"--max-queries must be at least {len(splits)} (one question per split), got {max_queries}")
    base = max_queries // len(splits)
    quota = {s: base for s in splits}
    quota[splits[-1]] += max_queries - base * len(splits)
    return quota


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    lines = [line if line.endswith("\n") else line + "\n" for line in lines]
    if path.is_file():
        with open_text(path) as f:
            if list(f) == lines:  # kept as it is: its modification time is part of a job's config hash
                return
    with atomic_open(path, "w") as f:  # gzipped by its .gz suffix
        f.writelines(lines)


def write_subsample(src_root: Path, dst_root: Path, max_queries: int, *, seed: int = 0,
                    folder: str = FOLDER) -> dict[str, int]:
    """Copy a seeded subsample of ``max_queries`` questions (:func:`per_split_quota`) of ``src_root/folder`` to
    ``dst_root/folder``.

    Questions are drawn uniformly within each split (``numpy`` generator seeded with ``seed``) and kept in
    file order with their context lines. Returns the number of questions written per split.
    """
    src, dst = src_root / folder, dst_root / folder
    lines, split_of = [], []
    with open_text(src / RECORDS) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            obj = json.loads(line)
            if not isinstance(obj, dict) or "split" not in obj or "qid" not in obj:
                raise ValueError(f"{src / RECORDS}, line {lineno}: expected an object with 'qid' and 'split'")
            lines.append((str(obj["qid"]), line))
            split_of.append(obj["split"])
    rng = np.random.default_rng(seed)
    keep: set[int] = set()
    counts = {}
    for split, n in per_split_quota(max_queries).items():
        rows = [i for i, s in enumerate(split_of) if s == split]
        take = rng.choice(len(rows), size=min(n, len(rows)), replace=False)
        keep.update(rows[int(i)] for i in take)
        counts[split] = int(min(n, len(rows)))
    kept = [lines[i] for i in sorted(keep)]
    qids = {q for q, _ in kept}
    with open_text(src / CONTEXTS) as f:
        contexts = [line for line in f if line.strip() and str(json.loads(line).get("qid")) in qids]
    dst.mkdir(parents=True, exist_ok=True)
    _write_lines(dst / RECORDS, [line for _, line in kept])
    _write_lines(dst / CONTEXTS, contexts)
    return counts


def add_data_args(ap: argparse.ArgumentParser, out: Path) -> None:
    """The options every ``full_*`` bench shares: ``--data-dir``, ``--out``, ``--max-queries``."""
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="folder holding annotated_full/ (annotated/ with --dataset annotated; default: the shared "
                         "data folder, udcg_ltr.paths.data_dir())")
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--max-queries", type=int, default=None,
                    help="a seeded subsample of this many questions (a third per split, the rest to test) "
                         "instead of all of them (10,570; 400 in annotated/): a quick check, not a result")


def add_reuse_arg(ap: argparse.ArgumentParser) -> None:
    """``--reuse`` of the benches that rerun their one job by default (``force=true``)."""
    ap.add_argument("--reuse", action="store_true",
                    help="keep the job's finished results when its configuration and input files are unchanged (the "
                         "job's own skip rule; it does not see code changes); default: rerun it (force=true)")


def prepare_data(args: argparse.Namespace, folder: str = FOLDER) -> tuple[Path, Path] | None:
    """``(data root holding folder/, output folder)`` for the parsed options: the shared set, or the
    ``--max-queries`` subsample written under the output folder; None (after saying why) when the set is absent."""
    src = full_root(args.data_dir)
    missing = missing_files(src, folder)
    if missing:
        print(f"the annotated SQuAD set is not there: {', '.join(map(str, missing))}", file=sys.stderr)
        return None
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    data_root = src.resolve()
    if args.max_queries:
        data_root = out / "subsample_data"
        counts = write_subsample(src, data_root, args.max_queries, seed=args.seed, folder=folder)
        print(f"subsample (--max-queries {args.max_queries}, seed {args.seed}): {counts} -> {data_root}", flush=True)
    return data_root, out


def parse_and_prepare(ap: argparse.ArgumentParser, argv) -> tuple[argparse.Namespace, Path, Path] | None:
    """A bench's options (plus ``--reuse``) parsed, then :func:`prepare_data`: ``(args, data root, output
    folder)``, or None when the set is absent."""
    add_reuse_arg(ap)
    args = ap.parse_args(argv)
    prepared = prepare_data(args)
    return None if prepared is None else (args, *prepared)


def best_reranker_run(rerankers: Path = ROOT / "outputs" / "bench" / "full_rerankers") -> Path:
    """The seed-0 run of the reranker ``bench/full_rerankers.py`` found best on val (``best_on_val`` in its
    ``summary.json``; chosen on val, never on test), or of direct UDCG when that bench has not named one.
    ``rerankers``: that bench's output folder (``outputs/bench/reranker_squad`` for the 400-question set)."""
    summary = rerankers / "summary.json"
    best = json.loads(summary.read_text(encoding="utf-8")).get("best_on_val") if summary.is_file() else None
    return rerankers / f"{best or 'udcg'}_seed0"


def run_job(cmd: Sequence[str], run_dir: Path) -> float:
    """Run one Hydra job of a ``full_*`` bench, its output appended to ``<run_dir>.log`` (a reused job keeps
    the log of the run that did the work); on failure exit with the log's tail. Returns seconds."""
    print("job: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    log_path = run_dir.with_suffix(".log")
    t0 = time.perf_counter()
    with open(log_path, "ab") as log:
        start = log.tell()
        # Unbuffered: the job's progress bar reaches the log as it goes, not in 8 KB blocks (an hour-long epoch
        # would show nothing for minutes); nothing the job computes changes.
        done = subprocess.run(list(cmd), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seconds = time.perf_counter() - t0
    text = log_path.read_bytes()[start:].decode("utf-8", errors="replace")
    if done.returncode != 0:
        print("\n".join(text.splitlines()[-30:]), file=sys.stderr)
        raise SystemExit(f"the job failed (exit {done.returncode}); its log: {log_path}")
    what = "reused the finished job" if "job already finished" in text else "done"
    print(f"  {what} in {seconds:.0f} s (log {log_path})", flush=True)
    return seconds
