"""The annotation CLI: config composition, and a run killed half way that resumes without rescoring."""

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

CONF = PROJECT_ROOT / "conf"
PAPER_LLMS = {"llama3.2-3b": "meta-llama/Llama-3.2-3B-Instruct", "llama3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
              "llama3.3-70b": "meta-llama/Llama-3.3-70B-Instruct", "gemma3-4b": "google/gemma-3-4b-it",
              "mistral-7b": "mistralai/Mistral-7B-Instruct-v0.3", "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct"}


def _compose(overrides):
    from hydra import compose, initialize_config_dir

    # Outside a Hydra run there is no ${hydra:runtime.cwd}: pin the paths the config derives from it.
    pinned = [f"paths.root_dir={PROJECT_ROOT}", "paths.output_dir=."]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="annotate", overrides=pinned + list(overrides))


def test_llm_configs_compose_with_required_keys():
    keys = {"_target_", "name", "model", "gguf_file", "dtype", "device", "batch_size", "max_new_tokens", "prompt"}
    cfg = _compose([])
    assert cfg.llm.model == "demo" and cfg.llm.name == "qwen2.5-coder-0.5b-instruct"
    assert cfg.llm.dtype == "float32" and cfg.llm.batch_size == 8 and cfg.llm.max_new_tokens == 24
    assert cfg.llm._target_ == "udcg_ltr.annotate.llms.load_llm"
    for name, model_id in PAPER_LLMS.items():
        llm = _compose([f"llm={name}"]).llm
        assert keys <= set(llm), name
        assert llm.model == model_id and llm.dtype == "bfloat16" and llm.device in ("cuda", "auto")
    assert _compose(["llm=smollm2"]).llm.model == "smollm2"


def test_dataset_option_resolves_to_a_reader():
    from udcg_ltr.annotate.__main__ import load_records

    cfg = _compose(["dataset=annotated_squad"])
    node = cfg.dataset.get("reader", cfg.dataset)
    assert node._target_ == "udcg_ltr.data.readers.annotated.read_annotated_squad"
    from udcg_ltr.paths import shared_file
    if not shared_file("annotated", "squad_top10.jsonl.gz").is_file():
        pytest.skip("shared annotated set absent")
    records, source = load_records(cfg)
    assert len(records) == 400 and source == "annotated_squad"


def test_input_jsonl_is_read(tmp_path):
    from udcg_ltr.annotate.__main__ import load_records

    path = tmp_path / "in.jsonl"
    write_records(path, _records(2, 2))
    records, source = load_records(_compose([f"input={path}"]))
    assert [r.qid for r in records] == ["q0", "q1"] and source == str(path)
    # The same through the generic JSONL dataset config (conf/dataset/jsonl.yaml).
    records, source = load_records(_compose(["dataset=jsonl", f"dataset.reader.path={path}"]))
    assert [r.qid for r in records] == ["q0", "q1"] and source == "jsonl"
    with pytest.raises(ValueError, match="nothing to annotate"):
        load_records(_compose([]))


def _records(n_questions: int, n_passages: int) -> list[QueryRecord]:
    topics = ["rivers", "volcanoes", "glaciers", "deserts", "forests", "islands", "canyons", "lakes"]
    return [QueryRecord(f"q{i}", f"Which {topics[i % 8]} are mentioned in report {i}?", [f"answer {i}"],
                        [Passage(f"q{i}-p{j}", f"Report {i}, section {j}: " + "the survey lists several "
                                 f"{topics[(i + j) % 8]} and their sizes. " * (1 + j % 3), title=f"Report {i}")
                         for j in range(n_passages)]) for i in range(n_questions)]


def _complete_lines(cache_dir: Path) -> int:
    n = 0
    for seg in cache_dir.glob("seg-*.jsonl"):
        n += seg.read_bytes().count(b"\n")
    return n


@pytest.mark.slow
def test_killed_run_resumes_without_scoring_twice(tmp_path):
    from udcg_ltr.annotate.demo_llm import DemoLLMError, ensure_smollm2, smollm2_model_dir

    try:
        ensure_smollm2(install=False)
    except DemoLLMError as err:
        pytest.skip(str(err))
    assert smollm2_model_dir().is_dir()

    records = _records(6, 8)  # 48 prompts: enough to kill after two batches and resume the rest
    n = sum(len(r.passages) for r in records)
    data, out, cache_dir = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "cache"
    write_records(data, records)
    cmd = [sys.executable, "-m", "udcg_ltr.annotate", f"input={data}", f"output={out}", "llm=smollm2",
           "llm.batch_size=2", f"paths.annotation_cache_dir={cache_dir}", "fields=[p_no_response]", "num_threads=1",
           "progress=false", f"hydra.run.dir={tmp_path / 'hydra'}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}

    proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    try:
        while _complete_lines(cache_dir) < 4:  # two batches of two are on disk
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no batch cached within 10 minutes"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    done = len(AnnotationCache(cache_dir, read_only=True))
    if done >= n:
        pytest.skip("the run finished before it could be killed")
    assert done >= 4

    result = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["passages"] == n
    assert summary["cached"] == done and summary["computed"] == n - done

    final = AnnotationCache(cache_dir, read_only=True)
    stats = final.stats()
    assert stats["entries"] == n
    # Every LLM scoring is one cache line: as many lines as passages means nothing was scored twice.
    assert stats["lines"] == n and stats["duplicate_lines"] == 0
    annotated = read_records(out)
    assert all("p_no_response" in p.annotations["smollm2-135m-instruct"] for r in annotated for p in r.passages)
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    assert meta["llm"]["prompt_version"] == annotated[0].passages[0].annotations["smollm2-135m-instruct"][
        "prompt_version"]


def test_llm_config_instantiates_through_hydra(tmp_path):
    from hydra.utils import instantiate

    from udcg_ltr.annotate.demo_llm import DemoLLMError, ensure_smollm2
    from udcg_ltr.annotate.scorer import LLMScorer

    try:
        ensure_smollm2(install=False)
    except DemoLLMError as err:
        pytest.skip(str(err))
    cfg = _compose(["llm=smollm2", "llm.batch_size=3", "+llm.prompt.abstention=UNANSWERABLE"])
    scorer = instantiate(cfg.llm)
    assert isinstance(scorer, LLMScorer)
    assert scorer.name == "smollm2-135m-instruct" and scorer.batch_size == 3
    assert scorer.prompt.abstention == "UNANSWERABLE"


def test_run_in_process_with_llm_relevance_judge(tmp_path):
    from udcg_ltr.annotate.__main__ import run
    from udcg_ltr.annotate.demo_llm import DemoLLMError, ensure_smollm2

    try:
        ensure_smollm2(install=False)
    except DemoLLMError as err:
        pytest.skip(str(err))
    data, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_records(data, _records(1, 2))
    cfg = _compose([f"input={data}", f"output={out}", "llm=smollm2", "num_threads=1", "progress=false",
                    f"paths.annotation_cache_dir={tmp_path / 'cache'}", "relevance.method=llm", "relevance.max_new_tokens=12",
                    "relevance.fallback=contains", "fields=[p_no_response,erag]"])
    summary = run(cfg)
    assert summary["passages"] == 2 and summary["relevance"]["method"] == "llm"
    annotated = read_records(out)
    for p in annotated[0].passages:
        verdict = p.extra["relevance_judge"]
        assert verdict["grade"] in ("A", "B", None)
        assert p.relevance in (0, 1)  # judged, or labelled by containment when unparseable
        assert {"p_no_response", "answer_alone", "erag_em", "erag_f1", "erag_contains"} <= set(
            p.annotations["smollm2-135m-instruct"])
    unparseable = sum(p.extra["relevance_judge"]["grade"] is None for p in annotated[0].passages)
    assert summary["relevance"]["unparseable"] == unparseable
    # The judge's replies are cached too: a second run asks the LLM nothing.
    again = run(cfg)
    assert again["computed"] == 0 and again["cache"]["written"] == 0


def test_shards_partition_the_questions(tmp_path):
    """shard.index / shard.count: every question in exactly one shard (sharded annotation jobs)."""
    from udcg_ltr.annotate.__main__ import select_shard

    records = _records(7, 1)
    shards = [select_shard(records, index=i, count=3) for i in range(3)]
    assert sorted(r.qid for s in shards for r in s) == sorted(r.qid for r in records)
    assert all(len(s) in (2, 3) for s in shards)
    with pytest.raises(ValueError, match="shard.index"):
        select_shard(records, index=3, count=3)


def test_sampling_dataset_configs_resolve_their_seed():
    """``dataset=squad`` (and the other readers that sample) read ``${seed}``: the CLI config defines it."""
    from omegaconf import OmegaConf

    for name in ("squad", "nq_open", "demo"):
        cfg = _compose([f"dataset={name}"])
        reader = OmegaConf.to_container(cfg.dataset.reader, resolve=True)
        assert reader["seed"] == 0, name
    assert _compose(["dataset=squad", "seed=3"]).dataset.reader.seed == 3


def test_squad_dataset_runs_from_the_command_line(tmp_path):
    """The reported failure: ``python -m udcg_ltr.annotate dataset=squad`` stopped on a missing ``seed`` key."""
    from udcg_ltr.paths import shared_file

    if not shared_file("squad", "dev-v1.1.json.gz").is_file():
        pytest.skip("shared SQuAD file absent")
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}
    proc = subprocess.run([sys.executable, "-m", "udcg_ltr.annotate", "dataset=squad", "limit=1", "max_passages=1",
                           "llm=smollm2", "llm.num_threads=1", "fields=[p_no_response]", f"output={out}",
                           f"paths.annotation_cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["passages"] == 1
    (record,) = read_records(out)
    assert "p_no_response" in record.passages[0].annotations["smollm2-135m-instruct"]
