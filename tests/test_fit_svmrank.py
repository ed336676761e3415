"""The SVM-rank LightningModule must reach the SVM optimum: same weights as scikit-learn's LinearSVC."""

from __future__ import annotations

import numpy as np
import pytest

from udcg_ltr.fit.pairs import build_context_table, build_pairs, table_features
from udcg_ltr.fit.reference import cosine, fit_reference_sklearn, primal_objective, symmetrise
from udcg_ltr.fit.svmrank import PairwiseSVMRank, fit_pairwise_svm, pairwise_accuracy
from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data, true_weights
from udcg_ltr.fit.theta import fit_udcg_theta


@pytest.fixture(scope="module")
def pairs():
    records, runs = synthetic_study_data(150, seed=3)
    table = build_context_table(records, runs, SYNTHETIC_LLM, k=5)
    return build_pairs(table_features(table), table.qids, table.outcome).diffs


@pytest.mark.parametrize("C", [0.05, 1.0])
def test_newton_hinge_matches_linear_svc(pairs, C):
    ours = fit_pairwise_svm(pairs, C=C)
    ref = fit_reference_sklearn(pairs, C=C)
    assert cosine(ours, ref) >= 0.99
    # Same objective: ours must be (essentially) as low as liblinear's.
    f_ours, f_ref = primal_objective(ours, pairs, C=C), primal_objective(ref, pairs, C=C)
    assert f_ours <= f_ref * (1 + 1e-4)


def test_lbfgs_and_squared_hinge(pairs):
    ref = fit_reference_sklearn(pairs, C=0.5)
    assert cosine(fit_pairwise_svm(pairs, C=0.5, optimizer="lbfgs"), ref) >= 0.99
    ours_sq = fit_pairwise_svm(pairs, C=0.5, loss="squared_hinge")
    ref_sq = fit_reference_sklearn(pairs, C=0.5, loss="squared_hinge")
    assert cosine(ours_sq, ref_sq) >= 0.999


def test_adam_large_batch_is_close(pairs):
    ref = fit_reference_sklearn(pairs, C=0.5)
    w = fit_pairwise_svm(pairs, C=0.5, optimizer="adam", batch_size=2048)
    assert cosine(w, ref) >= 0.99


def test_optimum_is_a_minimum(pairs):
    w = fit_pairwise_svm(pairs, C=1.0)
    f = primal_objective(w, pairs, C=1.0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        d = rng.normal(size=w.shape) * 0.01
        assert primal_objective(w + d, pairs, C=1.0) >= f - 1e-6


def test_no_pairs_gives_zero_weights():
    assert np.all(fit_pairwise_svm(np.zeros((0, 4))) == 0)


def test_module_objective_and_validation(pairs):
    import torch

    m = PairwiseSVMRank(pairs.shape[1], C=1.0, n_pairs=len(pairs))
    d = torch.from_numpy(pairs)
    # At w = 0 every margin is 0: the hinge objective is C * P, scaled by 1 / (C P) -> 1, smoothing adds <= s log 2.
    assert m.exact_objective(d) == pytest.approx(len(pairs))
    f, g, H = m.objective_derivatives(d, 1e-3)
    assert float(f) == pytest.approx(1.0, abs=1e-3 * np.log(2) + 1e-9)
    assert H.shape == (pairs.shape[1], pairs.shape[1])
    with pytest.raises(ValueError):
        PairwiseSVMRank(3, n_pairs=1, loss="log")
    with pytest.raises(ValueError):
        PairwiseSVMRank(3, n_pairs=1, C=0)


def test_symmetrise():
    X, y = symmetrise(np.array([[1.0, 2.0]]))
    np.testing.assert_array_equal(X, [[1, 2], [-1, -2]])
    np.testing.assert_array_equal(y, [1, -1])


def test_recovers_hidden_positional_weights():
    # Outcomes generated from known U-shaped alpha / decreasing beta: the fit must find that shape.
    records, runs = synthetic_study_data(600, seed=11, temperature=0.2, query_sd=0.1)
    table = build_context_table(records, runs, SYNTHETIC_LLM, k=5)
    w = fit_udcg_theta(table, C=1.0)
    a0, b0 = true_weights(5)
    assert cosine(w.alpha, a0) > 0.97
    assert np.corrcoef(w.alpha, a0)[0, 1] > 0.6  # the U shape itself, not just positivity
    assert w.meta["train_pairwise_accuracy"] > 0.8
    assert pairwise_accuracy(w.vector, build_pairs(table_features(table), table.qids, table.outcome).diffs) > 0.8


def test_select_C_by_grouped_cv():
    from udcg_ltr.fit.theta import select_C

    records, runs = synthetic_study_data(60, seed=2)
    table = build_context_table(records, runs, SYNTHETIC_LLM, k=5)
    best, rows = select_C(table, grid=[0.001, 1.0], n_folds=3)
    assert [r["C"] for r in rows] == [0.001, 1.0]
    assert best == rows[int(np.argmax([r["cv_mean_spearman"] for r in rows]))]["C"]
    assert all(0 < r["n_heldout_queries"] <= 60 for r in rows)


def test_one_weight_set_per_k():
    from udcg_ltr.data.contexts import ContextRun
    from udcg_ltr.fit.theta import fit_udcg_theta_per_k

    records, runs5 = synthetic_study_data(40, seed=4, k=5)
    _, runs3 = synthetic_study_data(40, seed=4, k=3)
    runs3 = [ContextRun(r.qid, r.context_id + 100, r.pids, r.answer, r.llm, outcome=r.outcome) for r in runs3]
    out = fit_udcg_theta_per_k(records, runs5 + runs3, SYNTHETIC_LLM, variants=("full", "relevance_only"))
    assert sorted(out) == [3, 5]
    for k, by_variant in out.items():
        assert by_variant["full"].k == k and by_variant["full"].alpha.shape == (k,)
        assert np.all(by_variant["relevance_only"].beta == 0)
        assert by_variant["full"].meta["n_contexts"] == 400


def test_fit_leaves_global_torch_state_alone():
    import torch

    threads = torch.get_num_threads()
    det = torch.are_deterministic_algorithms_enabled()
    a = fit_pairwise_svm(np.random.default_rng(0).normal(size=(80, 4)))
    assert torch.get_num_threads() == threads and torch.are_deterministic_algorithms_enabled() == det
    b = fit_pairwise_svm(np.random.default_rng(0).normal(size=(80, 4)))
    np.testing.assert_array_equal(a, b)  # deterministic without the global flag
