"""Depth limits of the normalized NTK: high precision, float64, derivation, rate, other phases."""

import warnings

import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale.deep_ntk import (PrecisionWarning, angle_asymptotics, correction_fit, depth_limit,
                               normalized_ntk, phase_limit)
from symscale.kernels import mlp_kernels


@pytest.mark.parametrize("L,ref", [(10, 0.3734865024), (100, 0.2776677219)])
def test_high_precision_reference_values(L, ref):
    assert abs(float(normalized_ntk(0.5, L, dps=40)) - ref) < 1e-9


def test_reference_table_of_the_theory_note():
    # 40-digit values from the note (rho0 = 0 column) and the deep rho0 = 0.5 entries
    assert abs(float(normalized_ntk(0.0, 10, dps=40)) - 0.3163070) < 1e-7
    assert abs(float(normalized_ntk(0.0, 1, dps=40)) - 1 / (2 * np.pi)) < 1e-12
    assert abs(float(normalized_ntk(0.5, 1000, dps=40)) - 0.2538025) < 1e-7


def test_float64_agrees_with_mpmath_up_to_depth_1000():
    rho = np.array([-1.0, -0.9, -0.3, 0.0, 0.5, 0.9, 0.999, 1 - 1e-8, 1.0])
    for L in (1, 7, 100, 1000):
        f = normalized_ntk(rho, L)
        m = np.array([float(normalized_ntk(r, L, dps=30)) for r in rho])
        assert np.max(np.abs(f - m)) < 1e-8, L


def test_float64_deep_recursion_stays_finite_and_accurate():
    vals = normalized_ntk(np.array([0.0, 0.5]), 100_000)
    assert np.all(np.isfinite(vals))
    # the note's 40-digit L (Theta-bar - 1/4) at L = 1e5: 5.040 (rho0 = 0) and 5.551 (0.5)
    np.testing.assert_allclose(1e5 * (vals - 0.25), [5.040, 5.551], atol=2e-3)


def test_naive_correlation_iteration_would_fail_where_the_angle_does_not():
    # iterate rho -> kappa_1(rho) directly: wrong by orders of magnitude at L = 1e5
    rho, ntk = 0.5, 0.5
    for _ in range(100_000):
        th = np.arccos(min(rho, 1.0))
        k1 = (np.sin(th) + (np.pi - th) * np.cos(th)) / np.pi
        ntk = ntk * (np.pi - th) / np.pi + k1
        rho = k1
    naive = 1e5 * (ntk / 100_001 - 0.25)
    good = 1e5 * (float(normalized_ntk(0.5, 100_000)) - 0.25)
    # the naive path is off by ~3e-3 in L (Theta-bar - 1/4); the angle path by < 1e-3
    assert abs(naive - good) > 2e-3 and abs(good - 5.551) < 1e-3


@pytest.mark.parametrize("kw", [{}, {"dps": 20}, {"activation": "tanh"},
                                {"activation": "leaky_relu"}, {"bias_var": 0.1}])
def test_a_sequence_of_depths_equals_separate_calls(kw):
    """depth=[...] gives every depth in the order asked (repeats allowed), bit for bit what
    separate calls give, with the depths on a leading axis; one pass of the recursion."""
    depths = [100, 3, 100, 40] if "dps" not in kw else [7, 3]
    rho = np.array([[0.0, 0.5], [-0.7, 0.999]]) if "dps" not in kw else np.array([0.5, -0.2])
    got = normalized_ntk(rho, depths, **kw)
    assert got.shape == (len(depths),) + rho.shape
    for row, L in zip(got, depths):
        want = normalized_ntk(rho, L, **kw)
        assert all(a == b for a, b in zip(np.ravel(row), np.ravel(want))), L
    if not kw:  # scalar rho: a vector over depths; return_error keeps the same layout
        vals, err = normalized_ntk(0.5, depths, return_error=True)
        assert vals.shape == err.shape == (4,)
        assert np.array_equal(err, [normalized_ntk(0.5, L, return_error=True)[1]
                                    for L in depths])


def test_a_sequence_of_depths_runs_the_recursion_once(monkeypatch):
    import symscale.deep_ntk.depth as depth_module

    calls = []
    path = depth_module._float_ntk_path
    monkeypatch.setattr(depth_module, "_float_ntk_path",
                        lambda *a: calls.append(a[1]) or path(*a))
    normalized_ntk(0.3, [50, 10, 50, 1000])
    assert calls == [(10, 50, 1000)]
    general = depth_module._general_ntk  # the (q, rho) recursion too
    monkeypatch.setattr(depth_module, "_general_ntk",
                        lambda *a: calls.append(tuple(a[2])) or general(*a))
    normalized_ntk(0.3, [30, 5, 30], activation="tanh")
    assert calls[1:] == [(5, 30)]


def test_precision_warning_when_the_input_carries_too_few_digits():
    with pytest.warns(PrecisionWarning, match="1e-12") as rec:
        normalized_ntk(1 - 1e-14, 10)
    assert rec[0].filename == __file__  # points at the caller, not inside symscale
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, err = normalized_ntk(0.3, 1000, return_error=True)
        assert err < 1e-10


def test_depth_limit_is_derived_exactly():
    lim = depth_limit("relu")
    assert lim.value == sp.Rational(1, 4)
    assert lim.log_coefficient == sp.Rational(3, 8)
    assert lim.beta == 1 / (3 * sp.pi) and lim.gamma == 1 / sp.pi
    assert lim.epsilon == 1 / (6 * sp.pi**2)
    assert lim.formula.latex().startswith(r"\lim")
    # the angle asymptotics of the note: theta_h ~ 3 pi / (h + 3/2 ln h)
    h = sp.Symbol("h", positive=True)
    assert sp.simplify(angle_asymptotics("relu") - 3 * sp.pi / (h + sp.Rational(3, 2) * sp.log(h))) == 0
    # derived once per activation (seconds of sympy series), whatever names it
    assert depth_limit("relu") is lim and depth_limit(ss.activation("relu")) is lim
    assert depth_limit("leaky_relu") is not lim


def test_angle_asymptotics_matches_the_recursion():
    th = float(np.arccos(0.5))
    expr = sp.lambdify(sp.Symbol("h", positive=True), angle_asymptotics("relu"))
    theta = th
    for h in range(1, 20001):
        s, c = np.sin(theta), np.cos(theta)
        one_minus = 2 * np.sin(theta / 2) ** 2 - (s - theta * c) / np.pi if theta > 0.1 else \
            2 * np.sin(theta / 2) ** 2 - theta**3 / (3 * np.pi) * (1 - theta**2 / 10)
        theta = 2 * np.arcsin(np.sqrt(one_minus / 2))
    # O(1) in the denominator remains: relative error ~ 1/h
    assert abs(theta / expr(20000) - 1) < 5e-4


def test_log_correction_not_pure_one_over_L():
    fit = correction_fit(0.5, [1000, 3000, 10000, 30000, 100000])
    assert abs(fit.A - 0.375) < 0.01
    assert fit.residual < 0.01
    # L (Theta-bar - 1/4) is unbounded: it grows by ~ 3/8 ln 10 per decade
    assert np.all(np.diff(fit.scaled) > 0.3)
    # ... while L (Theta-bar - 1/4) - 3/8 ln L converges (note: 1.212, 1.232, 1.234)
    c = fit.scaled - 0.375 * np.log(fit.depths)
    assert abs(c[-1] - 1.234) < 2e-3 and abs(c[-1] - c[-2]) < abs(c[1] - c[0])


def test_mlp_kernels_ntk_is_L_plus_one_times_normalized_ntk():
    rng = np.random.default_rng(0)
    d = 6
    X = rng.standard_normal((5, d))
    X *= np.sqrt(d / 2) / np.linalg.norm(X, axis=1, keepdims=True)  # unit-diagonal Sigma^0
    rho0 = (X @ X.T) / (d / 2)
    np.fill_diagonal(rho0, 1.0)  # exact: the rounded product would trigger the precision warning
    for L in (1, 3, 10):
        _, ntk = mlp_kernels(X, depth=L, activation="relu", weight_var=2, bias_var=0)
        np.testing.assert_allclose(ntk, (L + 1) * normalized_ntk(np.clip(rho0, -1, 1), L),
                                   atol=1e-12 * (L + 1))


def test_other_activations():
    leaky = depth_limit("leaky_relu")
    assert leaky.value == sp.Rational(1, 4)
    assert abs(float(normalized_ntk(0.5, 3000, activation="leaky_relu")) - 0.25) < 0.01
    # smooth activations: phases from the fixed points, checked against the deep recursion
    for act in ("erf", "tanh", "gelu"):
        p = phase_limit(act)
        assert p.phase == "chaotic" and p.limit == 0.0
        v60, v100 = (float(normalized_ntk(0.5, L, activation=act)) for L in (60, 100))
        assert 0 < v100 < v60 < 0.05
        # geometric decay at the predicted rate (up to the polynomial prefactor, ~1/L)
        assert abs(np.log(v100 / v60) / 40 - np.log(p.rate)) < 0.08 * abs(np.log(p.rate))
    s = phase_limit("sigmoid")
    assert s.phase == "ordered" and abs(s.limit - 1) < 1e-9
    assert abs(float(normalized_ntk(0.5, 100, activation="sigmoid")) - 1) < 1e-6
    with pytest.raises(ValueError, match="ReLU-type"):
        depth_limit("tanh")


@pytest.mark.parametrize("kwargs,error,match", [
    ({"rho0": 1.5, "depth": 3}, ValueError, "rho0"),
    ({"rho0": np.nan, "depth": 3}, ValueError, "rho0"),
    ({"rho0": 0.5, "depth": 0}, ValueError, "depth"),
    ({"rho0": 0.5, "depth": 2.5}, TypeError, "depth"),  # a float is never an integer
    ({"rho0": 0.5, "depth": 3, "dps": 2}, ValueError, "dps"),
    ({"rho0": 0.5, "depth": 3, "dps": 20, "activation": "tanh"}, ValueError, "dps"),
    ({"rho0": 0.5, "depth": []}, ValueError, "non-empty flat sequence"),
    ({"rho0": 0.5, "depth": [[1, 2]]}, ValueError, "non-empty flat sequence"),
    ({"rho0": 0.5, "depth": [3, 0]}, ValueError, "depth must be >= 1, got 0"),
    ({"rho0": 0.5, "depth": [3, 2.5]}, TypeError, "depth"),
    ({"rho0": 0.5, "depth": "10"}, TypeError, "depth"),
])
def test_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        normalized_ntk(**kwargs)
