"""The demo LLM (one model per session): reproducing the shared annotations, exactness of batching.

Slow (the model scores ~1 prompt/s on 2 CPU cores); skipped when the model or the shared data is absent.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
# Registered as a plugin (not imported): one set of session fixtures for every module.
pytest_plugins = ["llm_fixtures"]

from udcg_ltr.paths import shared_file  # noqa: E402

SHARED = shared_file("annotated", "squad_top10.jsonl.gz")
needs_shared = pytest.mark.skipif(not SHARED.is_file(), reason="shared annotated set absent")


@pytest.mark.slow
@pytest.mark.shared_data
@needs_shared
def test_reannotating_20_shared_passages_reproduces_them(demo_llm):
    from udcg_ltr.annotate.agreement import reannotate_shared, spread_sample
    from udcg_ltr.annotate.prompts import PromptConfig
    from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, read_annotated_squad, read_annotation_meta

    meta = read_annotation_meta()
    # As meta.json says: its prompt, float32, greedy with <= 24 new tokens, batches of 8 sorted by length.
    scorer = demo_llm.with_options(prompt=PromptConfig.from_meta(meta), batch_size=8, max_new_tokens=24)
    assert scorer.name == ANNOTATED_LLM
    assert scorer.tokenizer.convert_ids_to_tokens(scorer.no_response_token_id) == meta["no_response_token"]
    pairs = spread_sample(read_annotated_squad(), 20)
    assert len({p.pid for _, p in pairs}) == 20
    report = reannotate_shared(scorer, pairs, ANNOTATED_LLM, tolerance=0.01)
    assert report.n == 20
    assert report.within >= 18, report.summary_line()
    assert report.same_answer >= 18, report.summary_line()


@pytest.mark.slow
def test_demo_batched_prefix_scores_are_exact(demo_llm):
    from udcg_ltr.annotate.prompts import PromptItem

    items = [
        PromptItem("Who designed the Eiffel Tower?", [("Eiffel Tower", "The tower was designed by the engineering "
                                                                      "company of Gustave Eiffel and built in 1889.")]),
        PromptItem("What is the boiling point of water?", [("Rivers", "The Nile is a long river in Africa.")]),
        PromptItem("When was the printing press invented?", [("Printing", "Johannes Gutenberg introduced "
                                                                          "movable-type printing to Europe around "
                                                                          "1440, starting the Printing Revolution.")]),
    ]
    scorer = demo_llm.with_options(batch_size=3)
    ref = scorer.score_reference(items)
    ours = scorer.score(items)
    assert scorer._prefix_ok
    assert max(abs(a.p_no_response - b.p_no_response) for a, b in zip(ref, ours)) < 1e-4
    # The demo LLM abstains far more on the unrelated passage than on the answering one.
    assert ours[1].p_no_response > ours[0].p_no_response
