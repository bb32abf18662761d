"""LoFi on a real task (scikit-learn's digits, < 5 vs >= 5) against its baselines."""

import math

import numpy as np
import pytest

from symscale.lofi import LoFi
from symscale.lofi.comparison import (Comparison, compare, early_stopped_mlp,
                                      first_layer_filters, nngp_ridge, random_feature_model)

pytest.importorskip("sklearn")
from symscale.datasets import digits_binary  # noqa: E402


def test_lofi_beats_the_same_size_lazy_random_feature_model():
    """n = 200 (<= 500), 10 seeds: LoFi's 50 learned features against 50 random ones."""
    res = compare(digits_binary, [200], range(10), lofi_layers=((1000, 50),), n_test=500,
                  methods=("lofi", "rf_same"))
    lofi, se_l = res.mean("LoFi [(1000, 50)]", 200)
    rf, se_r = res.mean("lazy RF, 50 features", 200)
    assert lofi - rf > 2 * math.sqrt(se_l**2 + se_r**2), (lofi, se_l, rf, se_r)
    assert "±" in res.to_markdown()


def test_baselines_run_and_learn():
    Xtr, ytr, Xte, yte = digits_binary(150, 300, seed=1)
    for dec in (random_feature_model(Xtr, ytr, Xte, 500, seed=1), nngp_ridge(Xtr, ytr, Xte),
                early_stopped_mlp(Xtr, ytr, Xte, width=256, max_steps=150, seed=1)):
        assert dec.shape == (300,)
        assert np.mean(np.sign(dec) == yte) > 0.8


def test_first_layer_filters_are_input_space_images():
    Xtr, ytr, _, _ = digits_binary(200, 10, seed=2)
    m = LoFi([(500, 12)], seed=2).fit(Xtr, ytr)
    F = first_layer_filters(m, 6)
    assert F.shape == (6, 64)
    np.testing.assert_allclose(np.max(np.abs(F), axis=1), 1.0)
    # the filter is W v: it reproduces the feature's response to small inputs along it
    est = m
    v = est.components_[0][:, 0]
    np.testing.assert_allclose(F[0] * np.max(np.abs(est.weights_[0] @ v)),
                               est.weights_[0] @ v, rtol=1e-12)


def test_comparison_table_statistics():
    c = Comparison()
    for v in (0.8, 0.9, 1.0):
        c.add("m", 10, v)
    mean, se = c.mean("m", 10)
    assert mean == pytest.approx(0.9) and se == pytest.approx(0.1 / math.sqrt(3))


def test_compare_trains_the_mlp_at_the_width_it_names():
    res = compare(digits_binary, [120], [3], n_test=200, methods=("mlp",), mlp_steps=30,
                  mlp_width=48)
    Xtr, ytr, Xte, yte = digits_binary(120, 200, seed=3)
    own = np.mean(np.sign(early_stopped_mlp(Xtr, ytr, Xte, width=48, max_steps=30, seed=3)) == yte)
    wide = np.mean(np.sign(early_stopped_mlp(Xtr, ytr, Xte, max_steps=30, seed=3)) == yte)
    assert own != wide  # these draws tell the widths apart (0.73 against 0.825)
    assert res.acc == {"MLP (width 48), GD + early stopping": {120: [own]}}
    assert compare(digits_binary, [120], [3], n_test=200, methods=("mlp",), mlp_steps=30
                   ).acc == {"MLP, GD + early stopping": {120: [wide]}}
