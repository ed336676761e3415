"""Kill test: an annotation run killed with SIGKILL mid-way, then rerun, gives the same output as a run that was
never interrupted (byte for byte), and its cache compacts to one line per passage.

The runs are subprocesses of ``python -m udcg_ltr.annotate`` with the tiny SmolLM2 fixture LLM, one prompt per
batch (``llm.batch_size=1``) and one thread, so every P(NO-RESPONSE) is computed the same way whichever run
computes it: the only thing the kill may change is *which* run computed an entry, and that must not show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.data.jsonl import read_records, write_records
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.paths import PROJECT_ROOT

LLM_NAME = "smollm2-135m-instruct"
TOPICS = ["rivers", "volcanoes", "glaciers", "deserts", "forests", "islands", "canyons", "lakes"]


def _records(n_questions: int = 4, n_passages: int = 4) -> list[QueryRecord]:
    return [QueryRecord(f"q{i}", f"Which {TOPICS[i % 8]} are mentioned in report {i}?", [f"answer {i}"],
                        [Passage(f"q{i}-p{j}", f"Report {i}, section {j}: the survey lists several "
                                 f"{TOPICS[(i + j) % 8]} and their sizes.", title=f"Report {i}")
                         for j in range(n_passages)]) for i in range(n_questions)]


def _complete_lines(cache_dir: Path) -> int:
    return sum(seg.read_bytes().count(b"\n") for seg in cache_dir.glob("seg-*.jsonl"))


def _command(data: Path, out: Path, cache_dir: Path, hydra_dir: Path) -> list[str]:
    return [sys.executable, "-m", "udcg_ltr.annotate", f"input={data}", f"output={out}", "llm=smollm2",
            "llm.batch_size=1", f"paths.annotation_cache_dir={cache_dir}", "fields=[p_no_response]", "num_threads=1",
            "progress=false", f"hydra.run.dir={hydra_dir}"]


@pytest.fixture(scope="module")
def smollm2_ready():
    from udcg_ltr.annotate.demo_llm import DemoLLMError, ensure_smollm2

    try:
        ensure_smollm2(install=False)
    except DemoLLMError as err:
        pytest.skip(str(err))


def test_killed_annotation_rerun_equals_uninterrupted_run(tmp_path, smollm2_ready):
    records = _records()
    n = sum(len(r.passages) for r in records)
    data = write_records(tmp_path / "in.jsonl", records)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline",
           "OMP_NUM_THREADS": "1"}

    # the reference: one uninterrupted run
    ref_out, ref_cache = tmp_path / "ref.jsonl", tmp_path / "ref_cache"
    ref = subprocess.run(_command(data, ref_out, ref_cache, tmp_path / "hy_ref"), cwd=PROJECT_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr[-3000:]

    # the same run killed once a few prompts are cached
    out, cache_dir = tmp_path / "out.jsonl", tmp_path / "cache"
    cmd = _command(data, out, cache_dir, tmp_path / "hy_killed")
    proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    try:
        while not cache_dir.is_dir() or _complete_lines(cache_dir) < 3:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "nothing cached within 10 minutes"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()  # the output is written atomically, at the end only
    done = len(AnnotationCache(cache_dir, read_only=True))
    assert 3 <= done < n, f"killed after {done} of {n} prompts"

    # rerun the same command: only the missing prompts are computed, the output equals the reference
    again = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["passages"] == n and summary["cached"] == done and summary["computed"] == n - done
    assert out.read_bytes() == ref_out.read_bytes()
    annotated = read_records(out)
    assert all(0.0 <= p.annotations[LLM_NAME]["p_no_response"] <= 1.0 for r in annotated for p in r.passages)
    ref_meta = json.loads(Path(f"{ref_out}.meta.json").read_text())
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert meta["llm"] == ref_meta["llm"] and meta["fields"] == ref_meta["fields"]

    # the killed run's torn line, if any, and its repeated computations do not survive compaction
    cache = AnnotationCache(cache_dir)
    cache.compact()
    stats = AnnotationCache(cache_dir, read_only=True).stats()
    assert stats["entries"] == stats["lines"] == n and stats["duplicate_lines"] == 0 and stats["torn_bytes"] == 0
    assert len(cache.segments()) == 1
