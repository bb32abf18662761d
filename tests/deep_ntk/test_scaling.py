"""Theorem 3's depth bound, stopping rule, projection norm and stopping grid (deep_ntk.scaling)."""

import dataclasses
import math
import pickle

import mpmath
import numpy as np
import pytest
from scipy.linalg import expm

from symscale import datasets as ds
from symscale.deep_ntk import scaling as sc
from symscale.deep_ntk import spectra as sp


def _kappa1(rho):
    """ReLU arc-cosine map, closed form (independent of the package's angle recursion)."""
    return (np.sqrt(1 - rho * rho) + (np.pi - np.arccos(rho)) * rho) / np.pi


def _pair_with_third(theta):
    """e1 and a point at angle theta from it in the (e1, e2) plane, and e3 (orthogonal)."""
    return np.array([[1.0, 0.0, 0.0], [np.cos(theta), np.sin(theta), 0.0], [0.0, 0.0, 1.0]])


# --- depth bound -------------------------------------------------------------------------------

@pytest.mark.parametrize("theta", [0.05, 0.3, 1.0])
def test_depth_bound_equals_kappa1_twice(theta):
    X = _pair_with_third(theta)
    b = sc.depth_bound(X, constant=2.5)
    rho2 = _kappa1(_kappa1(np.cos(theta)))
    assert b.pair == (0, 1)
    assert b.rho_max == pytest.approx(np.cos(theta), rel=1e-14)
    assert b.rho2 == pytest.approx(rho2, rel=1e-13)
    # 1 - rho2 from the closed form cancels: relative error eps / (1 - rho2) at most
    assert b.gap == pytest.approx(1 - rho2, rel=1e-11)
    assert b.bound == pytest.approx(2.5 / np.sqrt(1 - rho2), rel=1e-11)
    assert b.crossover == pytest.approx(3 * np.pi / np.arccos(rho2), rel=1e-7)
    assert b.bound / b.constant == pytest.approx(sp.depth_scale(X).depth_scale, rel=1e-14)


def test_depth_bound_keeps_the_digits_of_a_tiny_angle():
    theta = 1e-6  # 1 - cos(theta) = 5e-13: the float closed form keeps about 3 digits of it
    X = _pair_with_third(theta)
    with mpmath.workdps(60):
        def k1(r):
            return (mpmath.sqrt(1 - r * r) + (mpmath.pi - mpmath.acos(r)) * r) / mpmath.pi
        # the mpmath pair at the angle the float rows really have (the chord of the rows)
        th = 2 * mpmath.atan2(mpmath.mpf(float(np.linalg.norm(X[0] - X[1]))),
                              mpmath.mpf(float(np.linalg.norm(X[0] + X[1]))))
        gap = 1 - k1(k1(mpmath.cos(th)))
    b = sc.depth_bound(X)
    assert b.gap == pytest.approx(float(gap), rel=1e-9)
    assert b.bound == pytest.approx(float(1 / mpmath.sqrt(gap)), rel=1e-9)


def test_depth_bound_of_duplicated_rows_is_infinite():
    X = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    b = sc.depth_bound(X)
    assert b.gap == 0.0 and b.bound == math.inf and b.crossover == math.inf


# --- stopping rule -----------------------------------------------------------------------------

def test_sample_size_rule_t_lambda_decreases_with_n_under_the_depth_scaling():
    X = ds.sphere_points(160, 4, seed=3).points
    prods, lams = [], []
    for n in (20, 40, 80, 160):
        depth = math.floor(sc.depth_bound(X[:n]).bound)
        s = sc.stopping_time(X[:n], depth, gamma=0.5, constant=2.0, lr=0.5)
        assert not s.beyond_bound and s.depth == depth and s.n == n
        assert s.t_lambda_n == pytest.approx(2.0 * n ** -0.5, rel=1e-12)
        assert s.lr * s.t * s.lambda_n == pytest.approx(s.t_lambda_n, rel=1e-12)
        assert s.lambda_1 == pytest.approx(np.linalg.eigvalsh(sp.ntk_matrix(X[:n], depth))[-1])
        prods.append(s.t_lambda_n)
        lams.append(s.lambda_n)
    assert np.all(np.diff(prods) < 0)
    # the scaled depth keeps the closest pair resolved but not lost: lambda_n <= 1 - K_ij
    assert max(lams) < 0.75


def test_eigenvalue_rule_t_lambda_decreases_with_n_at_fixed_depth():
    # nested training sets at one depth: the Gram matrices are principal submatrices, so
    # lambda_n cannot increase (Cauchy interlacing) and t lambda_n = c lambda_n^gamma neither
    X = ds.sphere_points(160, 4, seed=4).points
    out = [sc.stopping_time(X[:n], 2, gamma=0.5, rule="eigenvalue") for n in (20, 40, 80, 160)]
    prods = np.array([s.t_lambda_n for s in out])
    assert np.all(np.diff(prods) <= 0) and prods[-1] < prods[0]
    for s in out:
        assert s.t == pytest.approx(s.lambda_n ** -0.5, rel=1e-12)


def test_beyond_bound_flag():
    X = _pair_with_third(0.3)
    bound = sc.depth_bound(X).bound
    assert not sc.stopping_time(X, math.floor(bound)).beyond_bound
    assert sc.stopping_time(X, math.ceil(bound)).beyond_bound
    assert not sc.stopping_time(X, math.ceil(bound), depth_constant=2.0).beyond_bound


# --- projection norm ---------------------------------------------------------------------------

def test_projection_norm_equals_the_explicit_operator():
    X, _ = ds.sphere_points(8, 5, max_correlation=0.5, seed=2)
    Xte = ds.sphere_points(5, 5, seed=7).points
    lr, t = 0.9, 0.7
    p = sc.projection_norm(X, 3, t, lr=lr, X_test=Xte)
    K = sp.ntk_matrix(np.vstack([X, Xte]), 3)
    Ktr, Kx = K[:8, :8], K[8:, :8]
    assert np.linalg.cond(Ktr) < 100  # explicit inverse trustworthy here
    P = np.linalg.solve(Ktr, np.eye(8) - expm(-lr * t * Ktr))
    assert p.norm == pytest.approx(np.linalg.norm(P, 2), rel=1e-11)
    assert p.cross_norm == pytest.approx(np.linalg.norm(Kx @ P, 2), rel=1e-11)
    assert p.norm <= p.bound == pytest.approx(min(lr * t, 1 / p.lambda_n))
    inf = sc.projection_norm(X, 3, math.inf, X_test=Xte)
    assert inf.norm == pytest.approx(np.linalg.norm(np.linalg.inv(Ktr), 2), rel=1e-11)
    assert inf.cross_norm == pytest.approx(np.linalg.norm(Kx @ np.linalg.inv(Ktr), 2), rel=1e-10)
    assert sc.projection_norm(X, 3, 0.0).norm == 0.0


def test_projection_norm_of_an_ill_conditioned_gram_is_at_most_eta_t():
    X = _pair_with_third(1e-7)  # lambda_n ~ 1e-7 at depth 1
    lr, t = 2.0, 3.0
    p = sc.projection_norm(X, 1, t, lr=lr)
    lam = np.linalg.eigvalsh(sp.ntk_matrix(X, 1))
    assert p.lambda_n == pytest.approx(lam[0], rel=1e-6)
    z = lr * t * lam[0]
    assert p.norm == pytest.approx(-np.expm1(-z) / lam[0], rel=1e-6)
    assert p.norm <= lr * t and p.norm == pytest.approx(lr * t, rel=1e-5)
    # duplicated rows: the null direction contributes exactly eta t; t = inf is unbounded
    D = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert sc.projection_norm(D, 2, t, lr=lr).norm == lr * t
    with pytest.raises(ValueError, match="X has"):
        sc.projection_norm(D, 2, math.inf)


@pytest.fixture(scope="module")
def scaled_norms():
    return sc.projection_scaling([20, 40, 80, 160], d=4, depth_factor=1.0, repeats=3,
                                 n_test=30, seed=0, n_boot=1000)


def test_rule_exponent_lies_below_the_no_stopping_exponent(scaled_norms):
    # measured (seed 0): rule -0.480 [-0.523, -0.445], no stopping -0.014 [-0.056, 0.021]
    r = scaled_norms
    assert r.fit_rule.ci[1] < r.fit_inf.ci[0]
    assert r.fit_inf.ci[1] < 1.0  # O(n) with the depth scaling even without stopping
    assert np.all(r.norm_rule <= r.norm_inf)
    assert np.all(np.diff(r.depths, axis=1) >= 0)  # nested sets: the bound cannot shrink


def test_fixed_depth_norm_grows_faster_than_the_scaled_one(scaled_norms):
    # measured (seed 0): depth 2, no stopping 0.964 [0.652, 1.229] (1/lambda_n ~ n^(2/(d-1)))
    fixed = sc.projection_scaling([20, 40, 80, 160], d=4, depth=2, repeats=3, n_test=30,
                                  seed=0, n_boot=1000)
    assert np.all(fixed.depths == 2)
    assert fixed.fit_inf.ci[0] > scaled_norms.fit_inf.ci[1]
    assert np.allclose(fixed.norm_inf, 1 / fixed.lambda_min, rtol=1e-12)


# --- test error at the stopping time -----------------------------------------------------------

@pytest.fixture(scope="module")
def grid():
    return sc.stopping_grid([25, 50, 100], depth_factors=[0.25, 1.0, 100.0], n_test=200,
                            noise=0.5, seed=1)


def test_grid_values_equal_the_gradient_flow_predictor(grid):
    Xtr, Ytr, Xte, Yte = ds.sphere_regression(100, 200, 4, noise=0.5, seed=1)
    a, k, n = 1, 1, 50
    K = sp.ntk_matrix(np.vstack([Xtr[:n], Xte]), int(grid.depths[a, k]))
    gf = sp.gradient_flow_predictor(K[:n, :n], K[n:, :n], Ytr[:n], [grid.times[a, k], 1e9])
    assert grid.mse[a, k] == pytest.approx(np.mean((gf.f_test[0] - Yte) ** 2), rel=1e-10)
    assert grid.mse_inf[a, k] == pytest.approx(np.mean((gf.f_test[1] - Yte) ** 2), rel=1e-8)
    assert grid.lambda_min[a, k] == pytest.approx(np.linalg.eigvalsh(K[:n, :n])[0], rel=1e-10)
    lim = sp.gradient_flow_predictor(sp.limit_matrix(n), np.full((200, n), 0.25), Ytr[:n],
                                     [grid.times[a, k], 1e9]).f_test
    assert grid.mse_limit[a, k] == pytest.approx(np.mean((lim[0] - Yte) ** 2), rel=1e-10)
    assert grid.mse_limit_inf[a] == pytest.approx(np.mean((lim[1] - Yte) ** 2), rel=1e-10)
    assert np.allclose(grid.t_lambda_n, grid.n_values[:, None] ** -0.5, rtol=1e-12)


def test_error_at_the_stopping_time_beats_the_data_independent_predictor(grid):
    within = ~grid.beyond_bound
    assert within[:, :2].all() and grid.beyond_bound[:, 2].all()
    assert np.all((grid.mse + 4 * grid.diff_se)[within] < grid.mse_limit[within])
    assert np.all(grid.mse[:, 0] < grid.mse_constant)


def test_error_beyond_the_bound_degrades_toward_the_data_independent_one(grid):
    # gain over the limit-kernel predictor: significantly smaller far beyond the bound
    gain = grid.mse_limit - grid.mse
    se = np.hypot(grid.diff_se[:, 0], grid.diff_se[:, 2])
    assert np.all(gain[:, 2] + 4 * se < gain[:, 0])


def test_plot_stopping_grid_draws(grid):
    import matplotlib.pyplot as plt

    ax = sc.plot_stopping_grid(grid)
    ax.figure.canvas.draw()  # mathtext labels must parse
    assert len(ax.lines) == 2 * grid.depths.shape[1] + 1
    plt.close(ax.figure)


def test_results_are_frozen_pickle_and_display(grid, scaled_norms):
    X = _pair_with_third(0.5)
    results = (sc.stopping_time(X, 3), grid, sc.depth_bound(X), scaled_norms,
               sc.projection_norm(X, 3, 1.0))
    for res in results:
        assert f"<caption><b>{type(res).__name__}</b>" in res._repr_html_()
        with pytest.raises(dataclasses.FrozenInstanceError):
            res.rule = "x"
        back = pickle.loads(pickle.dumps(res))
        assert type(back) is type(res) and repr(back) == repr(res)


def test_projection_norm_with_an_overflowing_eta_t_is_the_no_stopping_norm():
    X = _pair_with_third(0.5)
    huge = sc.projection_norm(X, 2, 10 ** 400, lr=1.0)   # an int beyond float64
    over = sc.projection_norm(X, 2, 1e308, lr=10.0)      # eta t overflows
    inf = sc.projection_norm(X, 2, math.inf)
    assert huge.norm == over.norm == inf.norm == 1 / inf.lambda_n


# --- bad inputs --------------------------------------------------------------------------------

def test_bad_inputs():
    X = _pair_with_third(0.5)
    with pytest.raises(ValueError, match="X must have unit-norm"):
        sc.depth_bound(2 * X)
    with pytest.raises(ValueError, match="X must be finite"):
        sc.depth_bound(np.where(X == 0, np.nan, X))
    with pytest.raises(ValueError, match="X must have at least two"):
        sc.depth_bound(X[:1])
    with pytest.raises(ValueError, match="constant"):
        sc.depth_bound(X, constant=0)
    with pytest.raises(ValueError, match="depth"):
        sc.stopping_time(X, 0)
    with pytest.raises(TypeError, match="depth"):
        sc.stopping_time(X, 2.0)
    with pytest.raises(ValueError, match="X must have at least two"):
        sc.stopping_time(X[:1], 2)
    with pytest.raises(ValueError, match="X has"):
        sc.stopping_time(np.vstack([X, X[:1]]), 2)
    for gamma in (0, 1.5, math.nan):
        with pytest.raises(ValueError, match="gamma"):
            sc.stopping_time(X, 2, gamma=gamma)
    with pytest.raises(ValueError, match="rule"):
        sc.stopping_time(X, 2, rule="fast")
    with pytest.raises(ValueError, match="lr"):
        sc.stopping_time(X, 2, lr=-1)
    with pytest.raises(ValueError, match="depth_constant"):
        sc.stopping_time(X, 2, depth_constant=math.inf)
    for t in (-1.0, math.nan):
        with pytest.raises(ValueError, match="t must"):
            sc.projection_norm(X, 2, t)
    with pytest.raises(TypeError, match="t must"):
        sc.projection_norm(X, 2, "1")
    with pytest.raises(ValueError, match="X_test must have 3 columns"):
        sc.projection_norm(X, 2, 1.0, X_test=np.array([[1.0, 0.0]]))
    with pytest.raises(ValueError, match="X_test must have unit-norm"):
        sc.projection_norm(X, 2, 1.0, X_test=np.array([[2.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="n_values"):
        sc.projection_scaling([10, 20, 20])
    with pytest.raises(ValueError, match="n_values"):
        sc.projection_scaling([1, 2, 3])
    with pytest.raises(TypeError, match="n_values"):
        sc.projection_scaling("abc")
    with pytest.raises(ValueError, match="repeats"):
        sc.projection_scaling([4, 8, 16], repeats=1)
    with pytest.raises(ValueError, match="depth_factor"):
        sc.projection_scaling([4, 8, 16], depth_factor=-1.0)
    with pytest.raises(ValueError, match="depths"):
        sc.stopping_grid([4, 8, 16])
    with pytest.raises(ValueError, match="depths"):
        sc.stopping_grid([4, 8, 16], depths=[2], depth_factors=[1.0])
    with pytest.raises(ValueError, match="depths"):
        sc.stopping_grid([4, 8, 16], depths=[0])
    with pytest.raises(ValueError, match="depth_factors"):
        sc.stopping_grid([4, 8, 16], depth_factors=[0.0])
    with pytest.raises(ValueError, match="task"):
        sc.stopping_grid([4, 8, 16], depths=[2], task="mnist")
    with pytest.raises(ValueError, match="n_test"):
        sc.stopping_grid([4, 8, 16], depths=[2], n_test=1)
    with pytest.raises(ValueError, match="noise"):
        sc.stopping_grid([4, 8, 16], depths=[2], noise=math.inf)
    with pytest.raises(TypeError, match="grid"):
        sc.plot_stopping_grid({"mse": 1})
