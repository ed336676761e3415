"""Session-wide LLM fixtures for the annotation tests (the lead owns ``tests/conftest.py``).

Usage in a test module::

    import sys, pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    pytest_plugins = ["llm_fixtures"]

    def test_something(smollm2): ...

Why this shape: ``pytest_plugins`` in a test module registers this module once, by name, as a plugin
for the whole run, so its session fixtures really are built once per session, however many modules
ask for them (importing the fixture functions instead would register them per module and load the
model again). The explicit ``sys.path`` insert makes ``llm_fixtures`` importable under any import
mode (``prepend``, ``importlib``) without a ``conftest.py``. On top of that the loaders are memoised
per process (``functools.cache``), and a model that cannot be set up is skipped with the reason,
never failed.
"""

from __future__ import annotations

import functools
import os

import pytest

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)


@functools.cache
def _load(preset: str):
    """``(scorer, None)`` or ``(None, reason)``; never raises."""
    try:
        from udcg_ltr.annotate.llms import PRESETS, load_llm

        ensure, name = PRESETS[preset]
        path = ensure(install=False)  # tests never pip-install; a missing package means skip
        # One thread by default: the tests run next to other jobs on 2 cores, where 2 OpenMP threads
        # spin badly (UDCG_LTR_TEST_THREADS=2 on a quiet machine).
        threads = int(os.environ.get("UDCG_LTR_TEST_THREADS", "1"))
        return load_llm({"model": str(path), "name": name}, progress=False, num_threads=threads), None
    except Exception as err:  # missing packages, failed conversion, no disk ...
        return None, f"{preset} LLM unavailable: {type(err).__name__}: {err}"


def get_scorer(preset: str):
    scorer, reason = _load(preset)
    if scorer is None:
        pytest.skip(reason)
    return scorer


@pytest.fixture(scope="session")
def smollm2():
    """The SmolLM2-135M fixture as an :class:`LLMScorer` (float32, CPU)."""
    return get_scorer("smollm2")


@pytest.fixture(scope="session")
def demo_llm():
    """The demo LLM (Qwen2.5-Coder-0.5B-Instruct, float32) as an :class:`LLMScorer`."""
    return get_scorer("demo")
