"""Shared test set-up: offline everywhere, a shared-data fixture that skips when the folder is absent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Offline before anything imports transformers or wandb: tests must never reach a hub or ask for a key.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # lets test modules import shared helpers (llm_fixtures, ...)
    sys.path.insert(0, str(TESTS_DIR))


@pytest.fixture(autouse=True)
def _restore_environment():
    """Each test leaves ``os.environ`` as it found it. A job run in-process exports its folders
    (:func:`udcg_ltr.jobs.common.prepare_environment`: ``UDCG_LTR_CACHE`` = the test's tmp cache) for the processes
    it starts; without this, every later test of that worker looked for the LLMs in a deleted tmp folder."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    from udcg_ltr.paths import data_dir

    path = data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data folder {path} is absent")
    return path


@pytest.fixture(scope="session")
def annotated_squad(shared_data_dir):
    from udcg_ltr.data.readers.annotated import read_annotated_squad

    path = shared_data_dir / "annotated" / "squad_top10.jsonl.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return read_annotated_squad(path)
