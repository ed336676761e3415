"""Utility annotation with real LLMs: P(NO-RESPONSE) (UDCG paper, Eq. 2, Figure 4), answers, relevance
(Figure 5), grading (Figure 6) and the baselines' labels; ``python -m udcg_ltr.annotate`` is the Hydra CLI.

The package imports nothing itself: ``import udcg_ltr.annotate.cache`` does not load torch.
"""
