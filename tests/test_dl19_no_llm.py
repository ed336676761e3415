"""A TREC reranking recipe calls no LLM unless asked (issue 31: `experiment=dl19_rerank` used to start annotating
DL19's 4,300 passages with the demo LLM on the CPU, hours, without a word)."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from udcg_ltr.paths import PROJECT_ROOT


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return compose("evaluate", overrides=[f"paths.root_dir={PROJECT_ROOT}", *overrides])


def test_dl19_rerank_has_no_llm_by_default():
    assert _compose("experiment=dl19_rerank").get("llm") is None
    # the README's older spelling with '~llm' still composes
    assert _compose("experiment=dl19_rerank", "~llm").get("llm") is None


def test_dl19_rerank_takes_an_llm_when_asked():
    assert _compose("experiment=dl19_rerank", "llm=demo").llm.name == "qwen2.5-coder-0.5b-instruct"
