"""`evaluate.py mode=<study>`: the study recipes compose, and the studies' own rules (k fitted to the pools).

The entry point itself runs for every study in ``test_readme_demo_studies.py`` (the README's commands on a tiny
demo world with the SmolLM2 fixture), which checks the wiring there: config -> study parameters, the run's
annotation cache, the study's files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_studies_common import LLM, FakeScorer, annotate, make_record

ROOT = Path(__file__).resolve().parent.parent


def test_study_recipes_compose():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["experiment=squad_studies", "mode=distractors"])
        assert cfg.mode == "distractors" and cfg.dataset.name == "annotated_squad"
        assert cfg.studies.distractors.max_queries == 150 and list(cfg.studies.oracle.ks) == [5, 3]
        assert cfg.llm.get("quantize") is None  # float32: the shared annotations' precision
        cfg = compose(config_name="evaluate", overrides=["experiment=demo_studies", "mode=position"])
        assert cfg.dataset.name == "demo" and cfg.studies.context_size.mode == "resample"
        cfg = compose(config_name="train", overrides=["experiment=squad_bce"])
        assert cfg.loss.name == "bce" and cfg.model.name == "cross_encoder" and list(cfg.splits) == ["val", "test"]


# ---- issue 16: the demo world's pools of 8 and the distractor study's 2(k-1) distractors -------------------
def _pools(sizes, *, relevant=1):
    recs = [make_record(i, ["R"] * relevant + [round(0.1 + 0.8 * j / n, 3) for j in range(n - relevant)])
            for i, n in enumerate(sizes)]
    annotate(recs)
    return recs


def test_fit_k_to_pools_lowers_k_to_what_most_pools_hold():
    from udcg_ltr.studies.distractors import DistractorConfig, fit_k_to_pools

    eight = _pools([8] * 6)  # 7 irrelevant passages: k - 1 = 3 per arm at most
    k, note = fit_k_to_pools(eight, DistractorConfig(k=5))
    assert k == 4 and "k lowered from 5 to 4" in note and "0 of 6" in note
    assert fit_k_to_pools(eight, DistractorConfig(k=4)) == (4, None)
    assert fit_k_to_pools(_pools([10] * 4), DistractorConfig(k=5)) == (5, None)
    # the majority decides: 2 of 5 pools hold 8 distractors -> k = 4; 3 of 5 -> k = 5
    assert fit_k_to_pools(_pools([9, 9, 8, 8, 8]), DistractorConfig(k=5))[0] == 4
    assert fit_k_to_pools(_pools([9, 9, 9, 8, 8]), DistractorConfig(k=5))[0] == 5
    assert fit_k_to_pools(_pools([3] * 3), DistractorConfig(k=5))[0] == 2  # never below 2


def test_distractor_study_adapts_k_with_a_note_and_a_fixed_k_names_the_fix(tmp_path):
    from udcg_ltr.studies import run_distractor_sensitivity

    recs = _pools([8] * 8)
    rep = run_distractor_sensitivity(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "a", k=5, adapt_k=True,
                                     n_bootstrap=50, cache=None, progress=False)
    assert rep.meta["config"]["k"] == 4 and rep.scalars["k"] == 4 and rep.n_queries == 8
    assert "k lowered from 5 to 4" in rep.markdown and rep.meta["k_note"]
    with pytest.raises(ValueError, match=r"no eligible query .* k = 5.*the pools support k = 4"):
        run_distractor_sensitivity(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "b", k=5, n_bootstrap=50,
                                   cache=None, progress=False)


def test_evaluate_config_defaults_fit_the_demo_world():
    """``evaluate.py mode=distractors`` on the demo world: the study adapts k; ``mode=correlation`` does not
    sweep k unless asked (``k_sweep: null``)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["mode=distractors"])
        correlation = compose(config_name="evaluate", overrides=["mode=correlation"])
    assert cfg.studies.distractors.adapt_k is True and cfg.studies.distractors.k == cfg.k == 5
    assert correlation.correlation.k_sweep is None


def test_correlation_study_sweeps_k_only_when_asked(tmp_path):
    from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data
    from udcg_ltr.studies.correlation import StudySpec, SweepSpec, run_correlation_study

    records, runs = synthetic_study_data(40, n_contexts=4, k=3, pool_size=6, seed=5)
    kw = dict(llm=SYNTHETIC_LLM, k=3, spec=StudySpec(n_bootstrap=20, seed=0), progress=False)
    for i, sweep in enumerate((None, SweepSpec([]))):
        res = run_correlation_study(records, runs, out_dir=tmp_path / f"none{i}", sweep=sweep, **kw)
        assert res.k_sweep == [] and "k_sweep_csv" not in res.paths
    res = run_correlation_study(records, runs, out_dir=tmp_path / "swept", sweep=SweepSpec([1, 3]), **kw)
    assert sorted({r["k"] for r in res.k_sweep}) == [1, 3]
