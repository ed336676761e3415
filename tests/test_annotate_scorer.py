"""LLMScorer on the SmolLM2-135M fixture: batched + prefix-cached results equal the unbatched reference."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
# Registered as a plugin (not imported): one set of session fixtures for every module.
pytest_plugins = ["llm_fixtures"]

from udcg_ltr.annotate.annotator import annotate_records  # noqa: E402
from udcg_ltr.annotate.cache import AnnotationCache  # noqa: E402
from udcg_ltr.annotate.prompts import PromptItem  # noqa: E402
from udcg_ltr.batching import length_batches  # noqa: E402
from udcg_ltr.data.schema import Passage, QueryRecord  # noqa: E402

ITEMS = [
    PromptItem("What is the capital of France?", [("France", "Paris is the capital and largest city of France.")]),
    PromptItem("Who wrote Hamlet?", [("Hamlet", "Hamlet is a tragedy written by William Shakespeare sometime "
                                                "between 1599 and 1601. It is his longest play.")]),
    PromptItem("When did the Berlin wall fall?", [("Cats", "Cats sleep a lot.")]),
    PromptItem("How tall is Mount Everest?", [("Everest", "Mount Everest is Earth's highest mountain above sea "
                                                          "level, at 8,849 metres, in the Mahalangur Himal "
                                                          "sub-range of the Himalayas.")]),
    PromptItem("Which element has the symbol O?", [("Oxygen", "Oxygen is the chemical element with symbol O."),
                                                   ("Gold", "Gold has the symbol Au.")]),
]


def test_length_batches_sort_and_cover():
    lengths = (5, 9, 2, 9, 7)
    assert list(length_batches(lengths, 2)) == [[1, 3], [4, 0], [2]]
    assert list(length_batches(lengths, 8, max_tokens=20)) == [[1, 3], [4, 0], [2]]  # 2 x 9, then 2 x 7, 1 x 2


def test_a_token_budget_gives_the_same_scores(smollm2):
    plain = smollm2.with_options(batch_size=4).score(ITEMS)
    budget = smollm2.with_options(batch_size=4, max_batch_tokens=150).score(ITEMS)
    for a, b in zip(plain, budget):
        assert abs(a.p_no_response - b.p_no_response) < 1e-4


def test_batched_prefix_scores_match_the_unbatched_reference(smollm2):
    scorer = smollm2.with_options(batch_size=3)
    ref = scorer.score_reference(ITEMS)
    ours = scorer.score(ITEMS)
    assert scorer._prefix_ok, "prefix KV reuse should be exact on a Llama-architecture model"
    assert len(scorer.prefix_ids()) > 10
    for r, o in zip(ref, ours):
        assert o.n_prompt_tokens == r.n_prompt_tokens
        assert abs(o.p_no_response - r.p_no_response) < 1e-4
        assert 0.0 <= o.p_no_response <= 1.0
    # Same result with prefix reuse off and one prompt per batch.
    plain = smollm2.with_options(batch_size=1, prefix_cache=False).score(ITEMS)
    for a, b in zip(plain, ours):
        assert abs(a.p_no_response - b.p_no_response) < 1e-4
    # The probability is the softmax of the full-vocabulary logits at the last prompt position.
    ids = torch.tensor([scorer.encode(ITEMS[1])])
    with torch.inference_mode():
        logits = scorer.model(input_ids=ids).logits[0, -1].float()
    assert ours[1].p_no_response == pytest.approx(logits.softmax(-1)[scorer.no_response_token_id].item(), abs=1e-5)


def test_greedy_answers_match_hf_generate(smollm2):
    scorer = smollm2.with_options(batch_size=4, max_new_tokens=12)
    ref = scorer.score_reference(ITEMS, generate=True)
    ours = scorer.score(ITEMS, generate=True)
    assert [o.answer for o in ours] == [r.answer for r in ref]
    assert all(isinstance(o.answer, str) for o in ours)


def test_on_batch_reports_every_item_once(smollm2):
    seen = []
    smollm2.with_options(batch_size=2).score(ITEMS, on_batch=lambda idx, res: seen.extend(idx))
    assert sorted(seen) == list(range(len(ITEMS)))


def test_answer_logprob_is_teacher_forced_log_likelihood(smollm2):
    scorer = smollm2.with_options(batch_size=3)
    golds = ["Paris", "William Shakespeare", "1989", "8,849 metres", "Oxygen"]
    got = scorer.answer_logprobs(ITEMS, golds)
    for item, gold, value in zip(ITEMS[:2], golds, got):
        prompt = scorer.encode(item)
        target = scorer._answer_ids(gold)
        ids = torch.tensor([prompt + target])
        with torch.inference_mode():
            logp = scorer.model(input_ids=ids).logits[0].float().log_softmax(-1)
        expected = sum(logp[len(prompt) - 1 + t, tok].item() for t, tok in enumerate(target))
        assert value == pytest.approx(expected, abs=1e-3)
        assert value < 0
    best = scorer.answer_logprob(ITEMS[0].question, ITEMS[0].passages[0], ["Paris", "Lyon"])
    assert best == pytest.approx(max(got[0], scorer.answer_logprobs([ITEMS[0]], ["Lyon"])[0]), abs=1e-5)


def test_sampling_is_seeded_and_zero_temperature_is_greedy(smollm2):
    scorer = smollm2.with_options(max_new_tokens=8)
    a = scorer.sample_answers(ITEMS[0], 4, 1.0, seed=7)
    b = scorer.sample_answers(ITEMS[0], 4, 1.0, seed=7)
    assert a == b and len(a) == 4
    greedy = scorer.score([ITEMS[0]], generate=True)[0].answer
    assert scorer.sample_answers(ITEMS[0], 3, 0.0) == [greedy] * 3


def test_generate_chat_for_judges(smollm2):
    replies = smollm2.with_options(batch_size=2).generate_chat(
        [[{"role": "user", "content": "Say hello."}], [{"role": "user", "content": "Count to three."}]],
        max_new_tokens=6)
    assert len(replies) == 2 and all(isinstance(r, str) for r in replies)


def test_annotate_records_with_cache_then_no_llm_work(smollm2, tmp_path):
    def records():
        return [QueryRecord(f"q{i}", it.question, ["Paris"], [Passage(f"p{i}{j}", text, title=title)
                                                            for j, (title, text) in enumerate(it.passages)])
                for i, it in enumerate(ITEMS)]

    scorer = smollm2.with_options(batch_size=2, max_new_tokens=6)
    recs = records()
    stats = annotate_records(recs, scorer, AnnotationCache(tmp_path), fields=["p_no_response", "answer_alone", "erag"])
    n = sum(len(r.passages) for r in recs)
    assert stats.computed == n and stats.cached == 0
    assert all(math.isfinite(p.annotations[scorer.name]["p_no_response"]) for r in recs for p in r.passages)
    before = dict(scorer.counters)
    again = records()
    stats = annotate_records(again, scorer, AnnotationCache(tmp_path), fields=["p_no_response", "answer_alone", "erag"])
    assert stats.computed == 0 and stats.cached == n
    assert scorer.counters == before  # no forward pass at all
    assert [p.annotations for r in again for p in r.passages] == [p.annotations for r in recs for p in r.passages]


def test_bad_arguments(smollm2):
    with pytest.raises(ValueError, match="answers"):
        smollm2.answer_logprobs(ITEMS[:2], ["x"])
    with pytest.raises(ValueError, match="n must be"):
        smollm2.sample_answers(ITEMS[0], 0)
    with pytest.raises(ValueError, match="change the weights"):
        smollm2.with_options(dtype="bfloat16")
    assert smollm2.score([]) == []


def test_dual_precision_linear_switch():
    from udcg_ltr.annotate.weights import DualPrecisionLinear, PrecisionSwitch

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    switch = PrecisionSwitch()
    dual = DualPrecisionLinear(lin, switch)
    x = torch.randn(5, 64)
    assert torch.equal(dual(x), lin(x))  # off: the original layer, bit for bit
    with switch.on():
        fast = dual(x)
    assert not switch.fast and fast.dtype == torch.float32
    assert not torch.equal(fast, lin(x)) and torch.allclose(fast, lin(x), atol=0.05)
    assert dual.weight is lin.weight


def test_bf16_linear_fast_mode(smollm2):
    from udcg_ltr.annotate.demo_llm import smollm2_model_dir
    from udcg_ltr.annotate.llms import load_llm

    fast = load_llm({"model": str(smollm2_model_dir()), "name": smollm2.name}, quantize="bf16-linear",
                    progress=False, batch_size=3)
    assert fast._fast_switch is not None
    ref = smollm2.with_options(batch_size=3).score(ITEMS)
    got = fast.score(ITEMS)
    assert max(abs(a.p_no_response - b.p_no_response) for a, b in zip(ref, got)) < 0.05
    # With the exact tail covering every prompt token the fast mode is the exact computation.
    exact_everywhere = fast.with_options(exact_tail=10_000).score(ITEMS)
    assert max(abs(a.p_no_response - b.p_no_response) for a, b in zip(ref, exact_everywhere)) < 1e-4
    # ... and the reference path never uses the bfloat16 weights.
    assert abs(fast.score_reference(ITEMS[:1])[0].p_no_response - ref[0].p_no_response) < 1e-4


def test_auto_fast_mode_follows_the_hardware(smollm2, monkeypatch):
    """quantize=auto (the *_fast presets) is bf16-linear where bfloat16 is native, float32 elsewhere, and the
    scorer (so the cache key) records the mode that ran."""
    from udcg_ltr.annotate import weights
    from udcg_ltr.annotate.annotator import precision_label
    from udcg_ltr.annotate.demo_llm import smollm2_model_dir
    from udcg_ltr.annotate.llms import load_llm

    cfg = {"model": str(smollm2_model_dir()), "name": smollm2.name, "quantize": "auto"}
    monkeypatch.setattr(weights, "cpu_has_bf16", lambda: False)
    plain = load_llm(cfg, progress=False)
    assert plain.quantize is None and plain._fast_switch is None and precision_label(plain) == "float32"
    monkeypatch.setattr(weights, "cpu_has_bf16", lambda: True)
    fast = load_llm(cfg, progress=False)
    assert fast.quantize == "bf16-linear" and fast._fast_switch is not None
    assert precision_label(fast) == "float32+bf16-linear+tail16"
    monkeypatch.setattr(weights, "cpu_has_bf16", lambda: False)
    assert weights.resolve_quantize("auto", "cuda:0") == "bf16-linear"  # every CUDA GPU we run has bf16 paths
    assert weights.resolve_quantize("int8-dynamic", "cpu") == "int8-dynamic"
    assert weights.resolve_quantize(None, "cpu") is None


def test_padded_batches_without_prefix_reuse(smollm2):
    scorer = smollm2.with_options(batch_size=5, prefix_cache=False)
    ref = scorer.score_reference(ITEMS)
    got = scorer.score(ITEMS)  # one batch, left-padded, pads at the very start of the rows
    assert max(abs(a.p_no_response - b.p_no_response) for a, b in zip(ref, got)) < 1e-4


def test_plain_text_prompt_for_models_without_chat_template(smollm2):
    from udcg_ltr.annotate.prompts import PromptConfig

    scorer = smollm2.with_options(prompt=PromptConfig(chat_template=False), batch_size=3)
    text = scorer.render(ITEMS[0])
    assert text == PromptConfig().plain_text(ITEMS[0].question, ITEMS[0].passages)
    assert "<|im_start|>" not in text
    assert scorer.prompt_version != smollm2.prompt_version
    # The scored token is the first token of " NO-RESPONSE" as it would follow "Answer:".
    assert scorer.tokenizer.decode([scorer.no_response_token_id]).strip() == "NO"
    ref = scorer.score_reference(ITEMS)
    got = scorer.score(ITEMS)
    assert max(abs(a.p_no_response - b.p_no_response) for a, b in zip(ref, got)) < 1e-4
