"""Utility annotation with real LLMs: P(NO-RESPONSE), answers, relevance, grading, baseline labels.

* :mod:`~udcg_ltr.annotate.prompts` -- :class:`PromptConfig` (UDCG paper, Figure 4), its version hash, the
  prompt data types :class:`PromptItem` and :class:`ScoreResult`;
* :mod:`~udcg_ltr.annotate.scorer` -- :class:`LLMScorer` (torch); :mod:`~udcg_ltr.annotate.weights` -- loading
  its weights, the ``bf16-linear`` fast CPU mode;
* :mod:`~udcg_ltr.annotate.llms` -- :func:`load_llm` (``"demo"``, ``"smollm2"``, a Hub id or a path);
* :mod:`~udcg_ltr.annotate.cache` -- :class:`AnnotationCache` (append-only JSONL segments);
* :mod:`~udcg_ltr.annotate.annotator` -- :class:`CachedScorer`, :func:`with_cache`, :func:`annotate_records`,
  :func:`ensure_annotations`;
* :mod:`~udcg_ltr.annotate.end_to_end` -- the LLM answering whole contexts, graded (:func:`run_contexts`);
* :mod:`~udcg_ltr.annotate.baselines` -- eRAG labels, ANSWER_PROB, Monte Carlo P(NO-RESPONSE);
* :mod:`~udcg_ltr.annotate.relevance` -- relevance from labels, containment or an LLM judge;
* :mod:`~udcg_ltr.annotate.judge` -- LLM judges (relevance, answer grading) with tolerant parsing;
* :mod:`~udcg_ltr.annotate.grading` -- rule-based CORRECT / ABSTAINED / WRONG;
* :mod:`~udcg_ltr.annotate.demo_llm` -- the demo LLM and the SmolLM2 fixture, set up offline;
* ``python -m udcg_ltr.annotate`` -- the Hydra CLI (``conf/annotate.yaml``).

The package imports nothing itself: ``import udcg_ltr.annotate.cache`` does not load torch.
"""
