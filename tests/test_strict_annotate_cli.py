"""The annotate CLI checks its settings before any record is read or any LLM loads (issue 31): ``limit=abc``,
``limit=-1``, ``limit=0``, ``shard.count=0`` and ``output=<an existing directory>`` end with exit status 1 and
one line naming the setting, no Hydra traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from bad_inputs_catalogue import jsonl_bytes, record_obj

from udcg_ltr.data.schema import DataError
from udcg_ltr.paths import PROJECT_ROOT


def _annotate(tmp_path, *overrides):
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(jsonl_bytes([record_obj(0), record_obj(1)]))
    argv = [sys.executable, "-m", "udcg_ltr.annotate", f"input={inp}", "llm=smollm2",
            f"paths.annotation_cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'hydra'}", *overrides]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}
    return subprocess.run(argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(("override", "field"), [
    ("limit=abc", "limit"), ("limit=-1", "limit"), ("limit=0", "limit"), ("shard.count=0", "shard.count"),
    ("shard.index=2", "shard.index"), ("max_passages=1.5", "max_passages"), ("output=DIR", "output"),
])
def test_bad_setting_is_one_line_and_exit_status_1(tmp_path, override, field):
    if override == "output=DIR":
        (tmp_path / "existing").mkdir()
        override = f"output={tmp_path / 'existing'}"
    extra = [] if override.startswith("output=") else [f"output={tmp_path / 'out.jsonl'}"]
    proc = _annotate(tmp_path, *extra, override)
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr
    assert lines[-1].startswith("error: ") and f"field '{field}'" in lines[-1], proc.stderr[-2000:]
    assert not (tmp_path / "out.jsonl").exists()


def test_settings_are_checked_before_records_or_the_llm(tmp_path, monkeypatch):
    """``run`` refuses an existing output directory without reading the input or loading the LLM."""
    from omegaconf import OmegaConf

    import udcg_ltr.annotate.__main__ as cli
    import udcg_ltr.annotate.llms as llms

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the settings were checked")

    monkeypatch.setattr(llms, "load_llm", forbidden)
    monkeypatch.setattr(cli, "load_records", forbidden)
    cfg = OmegaConf.create({"input": "x.jsonl", "output": str(tmp_path), "limit": None, "max_passages": None,
                            "num_threads": None, "shard": {"index": 0, "count": 1}})
    with pytest.raises(DataError, match="existing directory") as err:
        cli.run(cfg)
    assert err.value.field == "output"
    cfg.output = str(tmp_path / "fine.jsonl")
    cfg.limit = 2
    with pytest.raises(AssertionError, match="before the settings"):  # valid settings: the work starts
        cli.run(cfg)
