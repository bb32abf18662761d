"""Deep-NTK spectra, depth scale, gradient-flow predictor and the sphere data sets."""

import sys

import mpmath
import numpy as np
import pytest

# modules, not names: `test_error_grid` / `TestErrorGrid` imported here would be collected
from symscale import datasets as ds
from symscale.deep_ntk import spectra as sp


def _kappa1(rho):
    return (np.sqrt(1 - rho * rho) + (np.pi - np.arccos(rho)) * rho) / np.pi


def _pair(gap):
    """Two unit vectors with correlation 1 - gap."""
    th = np.arccos(1 - gap)
    return np.array([[1.0, 0.0], [np.cos(th), np.sin(th)]])


def _profile(u):
    """Continuum profile of the normalized NTK of a close pair, u = L theta_0 / (3 pi)."""
    return ((1 + u) ** 4 - 1) / (4 * u * (1 + u) ** 3)


@pytest.fixture(scope="module")
def flow_problem():
    """A small well-conditioned kernel problem with non-zero initial outputs."""
    Xtr, Ytr, Xte, _ = ds.sphere_regression(10, 4, d=5, seed=2)
    K = sp.ntk_matrix(np.vstack([Xtr, Xte]), 3)
    rng = np.random.default_rng(0)
    return K[:10, :10], K[10:, :10], Ytr, 0.3 * rng.standard_normal(10), \
        0.3 * rng.standard_normal(4)


# --- gradient-flow predictor -----------------------------------------------------------------

def _euler(K, Kx, r0, f0_test, lr, times, dt):
    """Explicit Euler on the linearized model: d r/dt = -lr K r, d f(x)/dt = lr K(x, X) r."""
    steps = np.round(np.asarray(times) / dt).astype(int)
    r, f, out_f, out_r = r0.copy(), f0_test.copy(), [], []
    for k in range(steps[-1] + 1):
        if k in steps:
            out_f.append(f.copy())
            out_r.append(r.copy())
        f = f + lr * dt * (Kx @ r)  # uses r_k: the same explicit step as the residual
        r = r - lr * dt * (K @ r)
    return np.array(out_f), np.array(out_r)


def test_predictor_equals_euler_gradient_descent(flow_problem):
    K, Kx, Y, f0tr, f0te = flow_problem
    lr, times = 0.7, np.array([0.5, 1.0, 2.0])
    gf = sp.gradient_flow_predictor(K, Kx, Y, times, lr, f0tr, f0te)
    coarse = _euler(K, Kx, Y - f0tr, f0te, lr, times, 5e-4)
    fine = _euler(K, Kx, Y - f0tr, f0te, lr, times, 2.5e-4)
    err_coarse = np.abs(coarse[0] - gf.f_test).max()
    err_fine = np.abs(fine[0] - gf.f_test).max()
    assert 1.8 < err_coarse / err_fine < 2.2  # first order in dt: same ODE, not a lucky match
    # Richardson extrapolation removes the O(dt) term
    assert np.abs(2 * fine[0] - coarse[0] - gf.f_test).max() < 1e-6
    assert np.abs(2 * fine[1] - coarse[1] - gf.residual).max() < 1e-6
    np.testing.assert_allclose(gf.f_train, Y - gf.residual, atol=1e-15)


def test_long_time_limit_is_kernel_regression():
    X, _ = ds.sphere_points(15, 6, max_correlation=0.5, seed=0)
    K = sp.ntk_matrix(X, 2)
    Kt, Kx, y = K[:12, :12], K[12:, :12], np.sin(3 * X[:12, 0])
    assert np.linalg.cond(Kt) < 100
    gf = sp.gradient_flow_predictor(Kt, Kx, y, [1.0, 1e4])
    regression = Kx @ np.linalg.solve(Kt, y)
    assert np.abs(gf.f_test[0] - regression).max() > 1e-3  # t = 1 is not yet converged
    np.testing.assert_allclose(gf.f_test[1], regression, atol=1e-10)
    np.testing.assert_allclose(gf.f_train[1], y, atol=1e-10)


def test_time_zero_gives_initial_outputs(flow_problem):
    K, Kx, Y, f0tr, f0te = flow_problem
    gf = sp.gradient_flow_predictor(K, Kx, Y, 0.0, 2.0, f0tr, f0te)
    np.testing.assert_array_equal(gf.f_test, f0te)
    np.testing.assert_allclose(gf.f_train, f0tr, atol=1e-15)
    np.testing.assert_allclose(gf.residual, Y - f0tr, atol=1e-15)


def test_singular_kernel_from_duplicated_inputs():
    X, _ = ds.sphere_points(8, 5, max_correlation=0.6, seed=4)
    Xd = np.vstack([X[:6], X[:1]])  # training point 0 twice, with conflicting labels
    y = np.array([1.0, -0.5, 0.3, 0.8, -1.0, 0.2, -1.0])
    K = sp.ntk_matrix(np.vstack([Xd, X[6:]]), 4)
    Kt, Kx = K[:7, :7], K[7:, :7]
    assert np.linalg.eigvalsh(Kt)[0] < 1e-12  # exactly singular up to round-off
    gf = sp.gradient_flow_predictor(Kt, Kx, y, [0.0, 1.0, 1e3, 1e12])
    assert all(np.all(np.isfinite(a)) for a in gf)
    # the null direction (e_0 - e_6)/sqrt 2 is never fitted: both copies end at the mean label
    np.testing.assert_allclose(gf.f_train[-1, [0, 6]], [0.0, 0.0], atol=1e-9)
    # and the limit is kernel regression on the merged set with the averaged label
    merged = sp.ntk_matrix(X, 4)
    ym = y[:6].copy()
    ym[0] = 0.0
    regression = merged[6:, :6] @ np.linalg.solve(merged[:6, :6], ym)
    np.testing.assert_allclose(gf.f_test[-1], regression, atol=1e-9)


def test_roundoff_negative_eigenvalues_are_clipped_and_real_ones_rejected(flow_problem):
    K, Kx, Y, _, _ = flow_problem
    u = np.ones(10) / np.sqrt(10)
    lam0, U = np.linalg.eigh(K)
    v = U[:, 0]
    almost = K - (lam0[0] + 1e-13) * np.outer(v, v)  # smallest eigenvalue -1e-13
    gf = sp.gradient_flow_predictor(almost, Kx, Y, [1.0, 1e15])
    assert np.all(np.isfinite(gf.f_test))
    with pytest.raises(ValueError, match="K_train must be positive semi-definite"):
        sp.gradient_flow_predictor(K - 2 * np.outer(u, u) * lam0[-1], Kx, Y, 1.0)


def test_shapes_scalar_time_and_several_outputs(flow_problem):
    K, Kx, Y, _, _ = flow_problem
    Y2 = np.column_stack([Y, -2 * Y])
    gf = sp.gradient_flow_predictor(K, Kx, Y2, [0.5, 3.0])
    assert gf.f_test.shape == (2, 4, 2) and gf.residual.shape == (2, 10, 2)
    one = sp.gradient_flow_predictor(K, Kx, Y, 3.0)
    assert one.f_test.shape == (4,) and one.f_train.shape == (10,)
    np.testing.assert_allclose(gf.f_test[1, :, 1], -2 * one.f_test, rtol=1e-12)
    assert sp.gradient_flow_predictor(K, None, Y, [1.0]).f_test is None


def test_gradient_flow_rejects_bad_arguments(flow_problem):
    K, Kx, Y, _, _ = flow_problem
    with pytest.raises(ValueError, match="^t must"):
        sp.gradient_flow_predictor(K, Kx, Y, [1.0, -0.1])
    with pytest.raises(ValueError, match="^lr must"):
        sp.gradient_flow_predictor(K, Kx, Y, 1.0, lr=0.0)
    bad = K.copy()
    bad[0, 1] += 1e-3
    with pytest.raises(ValueError, match="K_train must be symmetric"):
        sp.gradient_flow_predictor(bad, Kx, Y, 1.0)
    with pytest.raises(ValueError, match="^K_train must be a square"):
        sp.gradient_flow_predictor(K[:, :9], Kx, Y, 1.0)
    with pytest.raises(ValueError, match="^K_test_train must have shape"):
        sp.gradient_flow_predictor(K, Kx[:, :9], Y, 1.0)
    with pytest.raises(ValueError, match="^Y must have shape"):
        sp.gradient_flow_predictor(K, Kx, Y[:9], 1.0)
    with pytest.raises(ValueError, match="^f0_test must have shape"):
        sp.gradient_flow_predictor(K, Kx, Y, 1.0, f0_test=np.zeros(3))


# --- NTK matrix and its spectrum against depth -----------------------------------------------

def test_ntk_matrix_conventions_and_theory_table():
    X = np.vstack([_pair(0.5), [[0.0, -1.0]]])  # correlations 0.5 and 0 (and -0.866)
    raw = sp.ntk_matrix(X, 10, normalized=False)
    np.testing.assert_allclose(np.diag(raw), 11.0, rtol=1e-14)
    np.testing.assert_allclose(sp.ntk_matrix(X, 10), raw / 11, rtol=1e-13)
    # values from the 40-digit table of theory note 04, §2
    for L, at_half, at_zero in [(1, 0.4711656, 0.1591549), (10, 0.3734865, 0.3163070),
                                (1000, 0.2538025, 0.2532905)]:
        K = sp.ntk_matrix(np.array([[1.0, 0.0], [0.5, np.sqrt(0.75)], [0.0, 1.0]]), L)
        assert abs(K[0, 1] - at_half) < 1e-7 and abs(K[0, 2] - at_zero) < 1e-7
    np.testing.assert_allclose(sp.ntk_matrix(3 * X, 2, normalize=True), sp.ntk_matrix(X, 2))


def test_limit_matrix_spectrum():
    lam = np.linalg.eigvalsh(sp.limit_matrix(6))
    np.testing.assert_allclose(lam, [0.75] * 5 + [0.75 + 6 / 4])


def test_spectrum_tends_to_limit_matrix():
    X, _ = ds.sphere_points(12, 6, max_correlation=0.9, seed=0)
    depths = [10, 30, 100, 300, 1000]
    s = sp.spectrum_vs_depth(X, depths)
    assert np.all(np.diff(s.eigenvalues, axis=1) <= 0)  # descending
    assert np.all(np.diff(s.distance) < 0)
    assert s.distance[0] > 0.5 and s.distance[-1] < 0.05
    # lambda_n of the normalized kernel rises towards the limit's 3/4 (the raw NTK's is
    # (L+1) times larger): depth removes the small eigenvalues of close pairs
    assert np.all(np.diff(s.lambda_min) > 0) and 0.72 < s.lambda_min[-1] < 0.75
    np.testing.assert_allclose(s.eigenvalues[-1, 0], 0.75 + 12 / 4, atol=0.1)
    fro = sp.spectrum_vs_depth(X, depths, norm="fro").distance
    assert np.all(fro >= s.distance - 1e-12) and np.all(fro <= np.sqrt(12) * s.distance)


def test_better_separated_points_keep_a_larger_lambda_min():
    depths = [1, 10, 100, 1000]
    lam = []
    for rho in [0.2, 0.5, 0.9, 0.99, 0.999]:
        X, rho_max = ds.sphere_points(12, 6, max_correlation=rho, seed=0)
        assert abs(rho_max - rho) < 1e-12
        lam.append(sp.spectrum_vs_depth(X, depths).lambda_min)
    lam = np.array(lam)  # rows: increasing rho_max
    assert np.all(np.diff(lam, axis=0) < 0)
    assert lam[-1, 0] < 0.01 and lam[-1, -1] > 0.65  # even the closest pair is resolved late


# --- depth scale -----------------------------------------------------------------------------

def test_depth_scale_formula():
    X = np.vstack([_pair(0.1), [[-1.0, 0.0]]])
    r = sp.depth_scale(X)
    rho2 = _kappa1(_kappa1(0.9))
    assert r.pair == (0, 1) and abs(r.rho0_max - 0.9) < 1e-15
    assert abs(r.rho_max - rho2) < 1e-14
    assert abs(r.depth_scale - 1 / np.sqrt(1 - rho2)) < 1e-10
    # near rho = 1 the naive formula cancels; compare with 40-digit arithmetic
    gap = 1e-12
    th = 2 * np.arcsin(np.sqrt(gap / 2))
    Xc = np.array([[1.0, 0.0], [np.cos(th), np.sin(th)]])
    with mpmath.workdps(40):
        rho = mpmath.cos(mpmath.mpf(th))
        for _ in range(2):
            rho = (mpmath.sqrt(1 - rho ** 2) + (mpmath.pi - mpmath.acos(rho)) * rho) / mpmath.pi
        exact = float(1 / mpmath.sqrt(1 - rho))
    assert abs(sp.depth_scale(Xc).depth_scale / exact - 1) < 1e-6
    assert sp.depth_scale(np.vstack([X, X[:1]])).depth_scale == np.inf


def test_depth_scale_separates_resolved_from_collapsed_depths():
    """At L = c * depth_scale the pair's normalized NTK depends on c only (for small gaps)."""
    values = {}
    for gap in [1e-2, 1e-4, 1e-5]:
        X = _pair(gap)
        scale = sp.depth_scale(X).depth_scale
        theta0 = np.arccos(1 - gap)
        for c in [0.1, 1.0, 10.0, 100.0]:
            L = max(1, round(c * scale))
            value = sp.ntk_matrix(X, L)[0, 1]
            values[gap, c] = value
            assert abs(value - _profile(L * theta0 / (3 * np.pi))) < 0.015
    for gap in [1e-2, 1e-4, 1e-5]:
        assert values[gap, 0.1] - 0.25 > 0.7  # c << 1: the pair is still resolved
        assert abs(values[gap, 100.0] - 0.25) < 0.02  # c >> 1: collapsed to the limit 1/4
    for c in [1.0, 10.0, 100.0]:  # collapse onto one curve of c
        assert abs(values[1e-2, c] - values[1e-5, c]) < 0.015


# --- test error grid -------------------------------------------------------------------------

def test_error_grid_depth_and_time():
    data = ds.sphere_regression(60, 60, d=4, seed=0)
    g = sp.test_error_grid(*data, depths=[1, 10, 1000], times=[0.1, 10.0, 1e4])
    assert g.mse.shape == (3, 3) and g.mse_limit.shape == (3,)
    assert g.mse[0, 1] < 0.1 * g.baseline_mean  # shallow kernel, moderate time: learns
    assert np.all(np.diff(g.mse[:, -1]) > 0)  # deeper is worse at convergence here
    assert g.mse[-1, -1] > 0.8 * g.baseline_mean  # depth 1000 is nearly trivial
    # the limit kernel predicts one constant for all test points: no better than a constant
    assert abs(g.mse_limit[-1] - g.baseline_mean) < 0.05 * g.baseline_mean
    assert np.all(np.diff(g.lambda_min) > 0)


@pytest.mark.parametrize("activation, repeat", [
    ("relu", "train"), ("erf", "train"), ("relu", "none"), ("relu", "test"),
    ("relu", "across")])
def test_depth_sweeps_run_the_recursion_once_with_the_values_of_separate_runs(activation, repeat,
                                                                              monkeypatch):
    # unsorted depths with a repeat and a repeated input row (within the train set, within the
    # test set, or one in both): bit for bit ntk_matrix's
    Xtr, Ytr, Xte, Yte = ds.sphere_regression(12, 6, d=3, seed=2)
    if repeat == "train":
        Xtr[5] = Xtr[2]
    elif repeat == "test":
        Xte[4] = Xte[1]
    elif repeat == "across":
        Xte[3] = Xtr[7]
    depths, times = [30, 1, 300, 30, 7], [0.5, 50.0]
    X = np.vstack([Xtr, Xte])
    separate = {L: sp.ntk_matrix(X, L, activation) for L in set(depths)}
    passes = []
    pairs = []
    real = sp._float_ntk_path
    monkeypatch.setattr(sp, "_float_ntk_path", lambda *a, **k: passes.append(a[1])
                        or pairs.append(np.size(a[0])) or real(*a, **k))
    g = sp.test_error_grid(Xtr, Ytr, Xte, Yte, depths, times, activation=activation)
    s = sp.spectrum_vs_depth(X, depths, activation=activation)
    n = len(Xtr)
    if activation == "relu":
        assert passes == [(1, 7, 30, 300)] * 2  # one pass to the deepest, per call
        # the grid skips the test-by-test pairs, the spectrum needs them all
        p = len(np.unique(X + 0.0, axis=0))
        p_test = len(np.unique(Xte, axis=0)) - (repeat == "across")
        assert pairs == [p * (p - 1) // 2 - p_test * (p_test - 1) // 2, p * (p - 1) // 2]
    for row, L in enumerate(depths):
        K = separate[L]
        flow = sp.gradient_flow_predictor(K[:n, :n], K[n:, :n], Ytr[:, None], times).f_test
        assert np.array_equal(g.mse[row], sp._mse(flow, Yte[:, None]))
        assert g.lambda_min[row] == np.linalg.eigvalsh(K[:n, :n])[0]
        assert np.array_equal(s.eigenvalues[row], np.linalg.eigvalsh(K)[::-1])


def test_error_grid_rejects_bad_inputs():
    Xtr, Ytr, Xte, Yte = ds.sphere_regression(10, 5, d=3, seed=0)
    with pytest.raises(ValueError, match="^X_train must have unit-norm rows"):
        sp.test_error_grid(2 * Xtr, Ytr, Xte, Yte, [1], [1.0])
    with pytest.raises(ValueError, match="^depths must"):
        sp.test_error_grid(Xtr, Ytr, Xte, Yte, [0, 1], [1.0])
    with pytest.raises(ValueError, match="^t must"):
        sp.test_error_grid(Xtr, Ytr, Xte, Yte, [1], [-1.0])


def test_sphere_inputs_and_depth_are_validated():
    X = np.array([[1.0, 0.0], [0.6, 0.8 + 1e-6]])
    with pytest.raises(ValueError, match="^X must have unit-norm rows"):
        sp.ntk_matrix(X, 2)
    with pytest.raises(ValueError, match="^X must have unit-norm rows"):
        sp.depth_scale(X)
    with pytest.raises(ValueError, match="^X must have unit-norm rows"):
        sp.spectrum_vs_depth(X, [1])
    with pytest.raises(ValueError, match="^depth must be >= 1, got 0"):
        sp.ntk_matrix(_pair(0.5), 0)
    with pytest.raises(ValueError, match="^X has a zero row"):
        sp.ntk_matrix(np.zeros((2, 2)), 1, normalize=True)
    with pytest.raises(ValueError, match="^X must have at least two rows"):
        sp.depth_scale(np.array([[1.0, 0.0]]))


# --- data sets -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [{"max_correlation": 0.3}, {"max_correlation": 0.999},
                                    {"min_angle": 0.05}, {"max_correlation": 1.0}])
def test_sphere_points_achieve_the_separation(kwargs):
    X, rho_max = ds.sphere_points(40, 8, seed=1, **kwargs)
    target = kwargs.get("max_correlation", np.cos(kwargs.get("min_angle", 0.0)))
    assert X.shape == (40, 8) and X.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-15)
    G = X @ X.T
    np.fill_diagonal(G, -np.inf)
    assert rho_max == G.max() and abs(rho_max - target) < 1e-12


def test_sphere_points_seed_and_errors():
    a, b = ds.sphere_points(20, 5, max_correlation=0.6, seed=3), ds.sphere_points(
        20, 5, max_correlation=0.6, seed=3)
    np.testing.assert_array_equal(a.points, b.points)
    assert not np.allclose(a.points, ds.sphere_points(20, 5, max_correlation=0.6, seed=4)[0])
    free = ds.sphere_points(20, 5, seed=3)
    assert 0.3 < free.rho_max < 1.0
    with pytest.raises(ValueError, match="at most one of min_angle and max_correlation"):
        ds.sphere_points(5, 3, min_angle=0.1, max_correlation=0.5)
    with pytest.raises(ValueError, match="^max_correlation gives rho_max"):
        ds.sphere_points(5, 3, max_correlation=-0.5)  # below the simplex bound -1/4
    with pytest.raises(ValueError, match="^max_correlation: could not separate"):
        ds.sphere_points(12, 6, max_correlation=0.0, max_iter=200)  # only the cross-polytope
    with pytest.raises(ValueError, match="^d must be >= 2, got 1"):
        ds.sphere_points(5, 1)


@pytest.mark.parametrize("target", ["relu_ridge", "harmonic"])
def test_sphere_regression(target):
    Xtr, Ytr, Xte, Yte = ds.sphere_regression(100000, 7, d=6, target=target, seed=5)
    assert Xtr.shape == (100000, 6) and Ytr.shape == (100000,) and Xte.shape == (7, 6)
    np.testing.assert_allclose(np.linalg.norm(Xte, axis=1), 1.0, atol=1e-15)
    assert abs(Ytr.mean()) < 0.02 and abs(Ytr.var() - 1) < 0.02  # exact moments, not sample
    noisy = ds.sphere_regression(100000, 7, d=6, target=target, noise=0.5, seed=5)
    np.testing.assert_array_equal(noisy[0], Xtr)
    np.testing.assert_array_equal(noisy[3], Yte)  # test labels stay noiseless
    assert abs(np.std(noisy[1] - Ytr) - 0.5) < 0.01
    with pytest.raises(ValueError, match="^target must be"):
        ds.sphere_regression(5, 5, 3, target="cubic")
    with pytest.raises(ValueError, match="^noise must be"):
        ds.sphere_regression(5, 5, 3, noise=-1.0)


def test_digits_binary():
    pytest.importorskip("sklearn")
    Xtr, Ytr, Xte, Yte = ds.digits_binary(300, 100, seed=0)
    assert Xtr.shape == (300, 64) and Xte.shape == (100, 64) and Yte.shape == (100,)
    np.testing.assert_allclose(np.linalg.norm(np.vstack([Xtr, Xte]), axis=1), 1.0, atol=1e-14)
    assert set(Ytr.tolist()) == {-1.0, 1.0} and abs(Ytr.mean()) < 0.2
    np.testing.assert_array_equal(ds.digits_binary(300, 100, seed=0)[2], Xte)
    assert not np.array_equal(ds.digits_binary(300, 100, seed=1)[0], Xtr)
    with pytest.raises(ValueError, match="^n_train \\+ n_test must be <= 1797"):
        ds.digits_binary(1500, 400)


def test_digits_binary_without_sklearn(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # import fails
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        ds.digits_binary(10, 10)


def test_onehot_sequences():
    Xtr, Ytr, Xte, Yte = ds.onehot_sequences(200, 50, vocab=6, length=5, seed=2)
    assert Xtr.shape == (200, 30) and Yte.shape == (50,) and Xtr.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(Xtr, axis=1), 1.0, atol=1e-15)
    blocks = Xtr.reshape(200, 5, 6) * np.sqrt(5)
    assert np.all(blocks.sum(axis=2) == 1) and np.all(blocks.max(axis=2) == 1)  # one-hot
    corr = Xtr @ Xtr.T  # fraction of agreeing positions
    np.testing.assert_allclose(corr * 5, np.round(corr * 5), atol=1e-12)
    assert set(Ytr.tolist()) == {-1.0, 1.0}
    again = ds.onehot_sequences(200, 50, vocab=6, length=5, seed=2)
    assert all(np.array_equal(a, b) for a, b in zip(again, (Xtr, Ytr, Xte, Yte)))
    with pytest.raises(ValueError, match="^vocab must be >= 2, got 1"):
        ds.onehot_sequences(10, 10, vocab=1)
    with pytest.raises(ValueError, match="^n_train must be >= 1, got 0"):
        ds.onehot_sequences(0, 10)


def test_a_user_registered_relu_takes_the_relu_path():
    """The ReLU angle recursion is chosen by the activation's family, not its name: a
    user-registered max(x, 0) gives bit-identical kernels (the general path differs by
    round-off)."""
    import symscale as ss

    ss.register_activation("user_relu_spectra", "Piecewise((x, x > 0), (0, True))",
                           overwrite=True)
    try:
        X = np.random.default_rng(0).standard_normal((12, 3))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        for normalized in (True, False):
            ref = sp.ntk_matrix(X, 6, "relu", normalized=normalized)
            got = sp.ntk_matrix(X, 6, "user_relu_spectra", normalized=normalized)
            assert np.array_equal(got, ref)
    finally:
        ss.unregister_activation("user_relu_spectra")
