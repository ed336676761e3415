"""Every study end to end on a tiny demo world with a real LLM (the SmolLM2-135M fixture), from one call each.

SmolLM2's P(NO-RESPONSE) is near 0 everywhere, so the numbers mean nothing; what is checked is the
path the lead's ``evaluate.py mode=<study>`` takes: records without annotations, a real scorer, the
cache (a rerun costs no LLM call), the files and a RunLogger.
"""

from __future__ import annotations

import copy

import pytest
from llm_fixtures import smollm2  # noqa: F401  (pytest fixture)

from udcg_ltr.annotate.annotator import CachedScorer
from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.data.demo_world import generate_demo_world
from udcg_ltr.io import json_safe
from udcg_ltr.studies import get_study
from udcg_ltr.tracking import RunLogger

pytestmark = pytest.mark.slow

#: Two studies of different paths (contexts drawn per arm; contexts resampled per k): the cache rule is the
#: scorer's, shared by all. Every study's run with a real LLM from its command: test_readme_demo_studies.py.
PARAMS = {
    "distractors": {"k": 3},
    "context_size": {"k_values": (1, 2), "n_contexts": 3, "report_split": None,
                     "fit_splits": ("train", "val", "test"), "metrics": ("udcg", "ndcg", "precision", "erag")},
}


@pytest.fixture(scope="module")
def tiny_world():
    return generate_demo_world(seed=3, n_entities=16, n_questions=5, pool_size=7)


@pytest.mark.parametrize("study", list(PARAMS))
def test_study_runs_end_to_end(study, smollm2, tiny_world, tmp_path):  # noqa: F811
    run, config_cls = get_study(study)
    cache = AnnotationCache(tmp_path / "cache")
    logger = RunLogger(tmp_path / "run")
    records = copy.deepcopy(tiny_world)  # fresh copies: annotations are added in place
    rep = run(records, smollm2, llm=smollm2.name, out_dir=tmp_path / "out", logger=logger, cache=cache,
              n_bootstrap=50, progress=False, **PARAMS[study])
    assert rep.n_queries > 0
    assert rep.meta["annotations"]["missing"] > 0  # the demo world ships without LLM annotations
    for key in ("table_md", "table_csv", "png", "report_md", "summary_json"):
        assert rep.paths[key].is_file() and rep.paths[key].stat().st_size > 0, key
    if study != "context_size":
        for r in rep.rows:
            if "abstained" in r and r.get("arm") != "weak - hard":
                assert r["correct"] + r["abstained"] + r["wrong"] == pytest.approx(1.0)
    assert (tmp_path / "run" / "metrics.json").is_file()
    # a rerun is served by the cache: the LLM is not called again
    counting = CachedScorer(smollm2, cache)
    again = run(copy.deepcopy(tiny_world), counting, llm=smollm2.name,
                out_dir=tmp_path / "again", cache=cache, n_bootstrap=50, progress=False, **PARAMS[study])
    assert all(c["computed"] == 0 for c in counting.stats.by_task.values())
    assert json_safe(again.rows) == json_safe(rep.rows)  # NaN-aware
    assert config_cls.__name__.endswith("Config")
