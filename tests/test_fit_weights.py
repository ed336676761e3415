"""UDCG_theta weights: scoring (Eq. 3) consistent with the fitted features, JSON round trip, plots."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from udcg_ltr.fit.pairs import context_features
from udcg_ltr.fit.weights import UDCGThetaWeights, load_weight, load_weights, plot_weights, save_weights
from udcg_ltr.metrics.udcg import sigmoid, udcg

utilities = arrays(np.float64, (4, 3), elements=st.floats(-1, 1, allow_nan=False))


@settings(max_examples=50, deadline=None)
@given(u=utilities, w=arrays(np.float64, 6, elements=st.floats(-3, 3, allow_nan=False)),
       mask=arrays(bool, (4, 3)))
def test_score_is_sigmoid_of_features_dot_weights(u, w, mask):
    # Left-aligned masks only (contexts are stored left-aligned).
    mask = np.sort(mask, axis=1)[:, ::-1]
    rel = u > 0
    for variant in ("full", "binary"):
        theta = UDCGThetaWeights.from_vector(w, 3, variant=variant)
        X = context_features(u, mask, relevant=rel, variant=variant)
        np.testing.assert_allclose(theta.score(u, mask, relevant=rel), sigmoid(X @ w), atol=1e-12)
        np.testing.assert_allclose(theta.logit(u, mask, relevant=rel), X @ w, atol=1e-12)
    theta = UDCGThetaWeights.from_vector(w[:3], 3, variant="relevance_only")
    X = context_features(u, mask, variant="relevance_only")
    np.testing.assert_allclose(theta.score(u, mask), sigmoid(X @ w[:3]), atol=1e-12)


def test_udcg_equivalent_weights_reproduce_udcg():
    rng = np.random.default_rng(0)
    u = rng.uniform(-1, 1, (10, 5))
    w = UDCGThetaWeights.udcg_equivalent(5, gamma=0.25)
    np.testing.assert_allclose(w.score(u), udcg(u, gamma=0.25), atol=1e-12)


def test_json_round_trip_is_atomic(tmp_path):
    a = UDCGThetaWeights(3, [0.5, 0.2, 0.4], [0.1, 0.0, 0.3], meta={"variant": "full", "C": 1.0,
                                                                   "n": np.int64(4)})
    b = UDCGThetaWeights.from_vector(np.arange(3.0), 3, variant="relevance_only", meta={"C": 2.0})
    path = save_weights(tmp_path / "w.json", [a, b])
    assert [p.name for p in tmp_path.iterdir()] == ["w.json"]  # no temp file left behind
    obj = json.loads(path.read_text())
    assert obj["format"] == "udcg_ltr.udcg_theta/1"
    back = load_weights(path)
    np.testing.assert_array_equal(back[0].alpha, a.alpha)
    np.testing.assert_array_equal(back[1].beta, np.zeros(3))
    assert back[0].meta["n"] == 4 and back[1].variant == "relevance_only"
    assert load_weight(path, variant="full").k == 3
    with pytest.raises(KeyError):
        load_weight(path)  # two sets match
    single = tmp_path / "one.json"
    save_weights(single, a)
    assert load_weight(single).meta["C"] == 1.0


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError):
        UDCGThetaWeights(3, [1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        UDCGThetaWeights.from_vector(np.ones(5), 3)
    with pytest.raises(ValueError):
        UDCGThetaWeights(1, [1], [1], meta={"variant": "other"})
    p = tmp_path / "x.json"
    p.write_text('{"format": "something-else"}')
    with pytest.raises(ValueError):
        load_weights(p)


def test_plot_weights_png(tmp_path):
    w = UDCGThetaWeights(4, [0.4, 0.2, 0.2, 0.3], [0.2, 0.1, 0.1, 0.05])
    path = plot_weights([w], tmp_path / "w.png", reference=UDCGThetaWeights.udcg_equivalent(4), normalize=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
