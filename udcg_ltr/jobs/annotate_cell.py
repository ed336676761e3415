"""Annotate one grid cell (a data set read by one LLM) and keep it compactly: ``python -m udcg_ltr.jobs.annotate_cell``.

For each chosen question: the LLM's single-passage P(NO-RESPONSE) and answer for every pool passage (Eq. 2), and
its graded-later answer to ``n_contexts`` end-to-end contexts of ``k`` passages. Contexts follow the UDCG paper's
protocol (:mod:`udcg_ltr.fit.sampling`: half hold a relevant passage, half none), or, where the data set already
has contexts (``dataset.contexts_path``, SQuAD's ``annotated_full``), are *those* contexts (same pids, same
order), so that two LLMs answer identical inputs. Work goes in chunks of questions through the annotation
cache, and the cell (:mod:`udcg_ltr.data.cells`) is rewritten after each chunk: a killed run loses at most a
batch, and rerunning the command resumes. ``max_seconds`` stops starting chunks after a deadline (a lease); the
first chunk always runs.
"""

from __future__ import annotations

import os
import platform
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from udcg_ltr.annotate.annotator import annotate_records  # noqa: E402
from udcg_ltr.annotate.cache import AnnotationCache, default_cache_root  # noqa: E402
from udcg_ltr.annotate.end_to_end import Context, run_contexts  # noqa: E402
from udcg_ltr.data.cells import write_cell  # noqa: E402
from udcg_ltr.data.contexts import ContextRun  # noqa: E402
from udcg_ltr.data.readers.annotated import read_annotated_contexts  # noqa: E402
from udcg_ltr.data.schema import QueryRecord  # noqa: E402
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts  # noqa: E402
from udcg_ltr.io import read_json_dict, sha256_file  # noqa: E402
from udcg_ltr.paths import PROJECT_ROOT  # noqa: E402

ALL_SPLITS = "all"


def question_order(qid: str, seed: int) -> int:
    """A seeded, order-independent shuffle key (the same question keeps its place when others are added)."""
    return zlib.crc32(f"{seed}:{qid}".encode())


def select_questions(records: Sequence[QueryRecord], per_split: Mapping[str, int] | None, seed: int
                     ) -> list[QueryRecord]:
    """The first ``per_split[split]`` questions of each split in seeded order, splits in the mapping's order
    (``all``: regardless of split; ``None``: every question); asking a split for more than it has is an error."""
    if per_split is None:
        return sorted(records, key=lambda r: question_order(r.qid, seed))
    chosen = []
    for split, count in per_split.items():
        pool = [r for r in records if split == ALL_SPLITS or r.split == split]
        if count > len(pool):
            raise ValueError(f"questions.{split}={count}, but the data set has {len(pool)} {split} questions")
        chosen += sorted(pool, key=lambda r: question_order(r.qid, seed))[:count]
    return chosen


@dataclass(frozen=True)
class CellPlan:
    """The job's settings (the ``plan`` node of ``conf/annotate_cell.yaml``), checked before any LLM loads."""

    output: str
    questions: dict[str, int] | None = None  # per split, in order; None: every question; {all: n}: any split
    n_contexts: int = 6
    k: int = 5
    top_n: int = 10
    seed: int = 0
    chunk_questions: int = 50
    max_seconds: float | None = None
    tf32: bool = True
    progress: bool = True

    def __post_init__(self):
        for name in ("n_contexts", "k", "top_n", "chunk_questions"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"plan.{name}={getattr(self, name)!r}: expected an integer >= 1")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"plan.seed={self.seed!r}: expected an integer >= 0")
        if self.max_seconds is not None and not 0 <= self.max_seconds < float("inf"):
            raise ValueError(f"plan.max_seconds={self.max_seconds!r}: expected a finite number >= 0 or null")
        for split, count in (self.questions or {}).items():
            if not isinstance(count, int) or count < 0:
                raise ValueError(f"plan.questions.{split}={count!r}: expected an integer >= 0")
        if Path(self.output).is_file():
            raise ValueError(f"plan.output={self.output!r} is a file: expected a folder for the cell")

    def sampling(self, relevance_threshold: int) -> ContextSamplingConfig:
        return ContextSamplingConfig(n_contexts=self.n_contexts, k=self.k, top_n=self.top_n, seed=self.seed,
                                     relevance_threshold=relevance_threshold)


def plan_contexts(records: Sequence[QueryRecord], dataset: Mapping[str, Any], sampling: ContextSamplingConfig
                  ) -> list[Context]:
    """The data set's own contexts (ids below ``n_contexts``) when it has them, else balanced samples."""
    if path := dataset.get("contexts_path"):
        wanted = {r.qid for r in records}
        existing = [c for c in read_annotated_contexts(path) if c.qid in wanted and c.context_id < sampling.n_contexts]
        return [Context(c.qid, c.context_id, tuple(c.pids)) for c in existing]
    return [Context(c.qid, c.context_id, c.pids, c.kind) for c in sample_contexts(records, sampling)]


def model_sha256(scorer) -> str | None:
    """The GGUF's sha256: hashed when loaded from the GGUF, else recorded by the preset's conversion (``None``
    for a hub model)."""
    if scorer.gguf_file:
        return sha256_file(Path(str(scorer.model_name_or_path)) / scorer.gguf_file)
    marker = read_json_dict(Path(str(scorer.model_name_or_path)) / "udcg_ltr_model.json") or {}
    return marker.get("sha256")


def machine() -> dict[str, Any]:
    import torch

    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info.update(gpu=torch.cuda.get_device_name(0), tf32=torch.backends.cuda.matmul.allow_tf32)
    return info


@dataclass
class CellProgress:
    """What a cell holds so far, and the time spent on it (this run)."""

    records: list[QueryRecord] = field(default_factory=list)
    runs: list[ContextRun] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=lambda: {"single": 0.0, "contexts": 0.0})
    computed: dict[str, int] = field(default_factory=lambda: {"single": 0, "contexts": 0})


def annotate_chunk(chunk: Sequence[QueryRecord], contexts: Sequence[Context], scorer, cache,
                   progress: CellProgress, show: bool) -> None:
    """Single-passage values, then the chunk's contexts; adds both to ``progress``."""
    t0 = time.perf_counter()
    stats = annotate_records(chunk, scorer, cache, fields=["p_no_response", "answer_alone"], progress=show)
    t1 = time.perf_counter()
    runs = run_contexts(chunk, contexts, scorer, cache, progress=show)
    t2 = time.perf_counter()
    progress.records += chunk
    progress.runs += runs
    progress.seconds["single"] += t1 - t0
    progress.seconds["contexts"] += t2 - t1
    progress.computed["single"] += stats.computed
    progress.computed["contexts"] += len(runs)


def provenance(plan: CellPlan, dataset: Mapping[str, Any], scorer, progress: CellProgress, planned: int
               ) -> dict[str, Any]:
    described = scorer.describe()
    return {"llm": scorer.name, "sha256": model_sha256(scorer), "model": described["model"],
            "prompt_version": described["prompt_version"], "prompt": described["prompt"],
            "decoding": f"greedy, max {described['max_new_tokens']} new tokens",
            "precision": {k: described[k] for k in ("dtype", "device", "quantize", "exact_tail")},
            "machine": machine(), "dataset": dataset["name"], "questions": plan.questions or "all",
            "seed": plan.seed, "contexts": {"n_contexts": plan.n_contexts, "k": plan.k,
                                            "source": "dataset" if dataset.get("contexts_path") else
                                            "udcg_ltr.fit.sampling (balanced, seeded)"},
            "sizes": {"questions": len(progress.records), "passages": sum(len(r.passages) for r in progress.records),
                      "contexts": len(progress.runs), "planned_questions": planned},
            "seconds_this_run": {k: round(v, 1) for k, v in progress.seconds.items()},
            "prompts_this_run": dict(progress.computed), "complete": len(progress.records) == planned}


def open_cell_cache(cfg: DictConfig, name: str) -> AnnotationCache | None:
    if not cfg.cache.enabled:
        return None
    folder = cfg.paths.annotation_cache_dir
    return AnnotationCache(Path(folder) if folder else default_cache_root(name))


def announce(records: Sequence[QueryRecord], contexts: Sequence[Context], scorer) -> None:
    singles = sum(len(r.passages) for r in records)
    print(f"annotate_cell: {len(records)} questions -> {singles} single-passage prompts and {len(contexts)} "
          f"contexts of up to 5 passages with {scorer.name} on {scorer.device}; the rate is reported per chunk",
          flush=True)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Annotate the cell ``cfg`` describes (the plan is checked before the data is read or the LLM loads)."""
    import torch
    from hydra.utils import instantiate

    plan: CellPlan = instantiate(cfg.plan, _convert_="all")
    dataset = OmegaConf.to_container(cfg.dataset, resolve=True)
    torch.backends.cuda.matmul.allow_tf32 = plan.tf32
    records = select_questions(list(instantiate(cfg.dataset.reader, _convert_="all")), plan.questions, plan.seed)
    contexts = plan_contexts(records, dataset, plan.sampling(dataset["relevance_threshold"]))
    scorer = instantiate(cfg.llm, progress=plan.progress)
    announce(records, contexts, scorer)
    cache = open_cell_cache(cfg, scorer.name)
    try:
        progress = annotate_in_chunks(plan, records, contexts, scorer, cache, dataset)
    finally:
        if cache is not None:
            cache.close()
    return provenance(plan, dataset, scorer, progress, len(records))


def annotate_in_chunks(plan: CellPlan, records, contexts, scorer, cache, dataset) -> CellProgress:
    """Chunk after chunk, the cell rewritten after each; the first chunk always runs (every run makes progress),
    later ones only within ``plan.max_seconds``."""
    progress, start = CellProgress(), time.perf_counter()
    for first in range(0, len(records), plan.chunk_questions):
        if first and plan.max_seconds is not None and time.perf_counter() - start > plan.max_seconds:
            print(f"annotate_cell: max_seconds={plan.max_seconds} reached; rerun to resume", flush=True)
            break
        chunk = records[first:first + plan.chunk_questions]
        qids = {r.qid for r in chunk}
        annotate_chunk(chunk, [c for c in contexts if c.qid in qids], scorer, cache, progress, plan.progress)
        write_cell(plan.output, scorer.name, progress.records, progress.runs,
                   provenance(plan, dataset, scorer, progress, len(records)))
        print(f"annotate_cell: {len(progress.records)}/{len(records)} questions, {len(progress.runs)} contexts, "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    return progress


@hydra.main(config_path=str(PROJECT_ROOT / "conf"), config_name="annotate_cell", version_base="1.3")
def main(cfg: DictConfig) -> None:
    summary = run(cfg)
    print(f"annotate_cell: wrote {cfg.plan.output}: {summary['sizes']}", flush=True)


if __name__ == "__main__":
    main()
