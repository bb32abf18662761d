"""The first-order predictive as a kernel method and its density (symscale.nsde.predictive).

References: predictive_first_order (closed forms in matrix words), central differences of the
generator and the carre du champ (bayes.py), sympy integration of the derived density, and the
exact finite-width chain (Monte Carlo, 5 standard errors; the zeroth-order density must fail).
"""

import math
import pickle

import numpy as np
import pytest
import sympy as sp

from symscale.errors import DomainError
from symscale.nsde import (carre_du_champ, drift_matrix, generator_numeric,
                           predictive_first_order, shaped, shaped_relu)
from symscale.nsde.bayes import _gram
from symscale.nsde.predictive import (_coefficients, _density_expr, _gms, _gss, _m1, _mu, _s2,
                                      _t, _v1, _y, check_predictive_density, feature_map,
                                      predictive_density_first_order)

ACTS = [("tanh", {"a": 1.0}), ("relu", {"c_plus_value": 0.3, "c_minus_value": -0.8}),
        ("relu", {"c_plus_value": 0.0, "c_minus_value": 0.0})]   # the last: a linear net
IDS = ["tanh", "shaped-relu", "linear"]


def _data(seed, P=3, d=5):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, d)), rng.standard_normal(P), rng.standard_normal((4, d))


# ---------------------------------------------------------------------------------------------
# feature map (Corollary 2.2)


@pytest.mark.parametrize("act,kw", ACTS, ids=IDS)
def test_kernel_regression_reproduces_first_order_slopes(act, kw):
    X, Y, Xt = _data(1)
    fm = feature_map(X, Y, act, tau=0.0, **kw)
    pred = fm.predict(Xt)
    for i, x0 in enumerate(Xt):
        ref = predictive_first_order(X, Y, x0, act, **kw)
        scale = abs(ref.mean_slope) + abs(ref.var_slope) + 1
        assert abs(pred.mean_slope[i] - ref.mean_slope) < 1e-10 * scale
        assert abs(pred.var_slope[i] - ref.var_slope) < 1e-10 * scale
        assert abs(pred.mean[i] - ref.mean) < 1e-12 and abs(pred.var[i] - ref.var) < 1e-12
    # the GP regression with K_tau itself: Richardson difference in tau, error O(h^2) ~ 1e-8
    h = 1e-4
    p1, p2 = (feature_map(X, Y, act, tau=s, **kw).predict(Xt) for s in (h, 2 * h))
    for key in ("mean", "var"):
        fd = (4 * (getattr(p1, key) - getattr(pred, key))
              - (getattr(p2, key) - getattr(pred, key))) / (2 * h)
        assert np.allclose(fd, getattr(pred, key + "_slope"), rtol=0, atol=1e-6)


@pytest.mark.parametrize("act,kw", ACTS[:2], ids=IDS[:2])
def test_joint_covariance_of_two_test_inputs_matches_the_generator(act, kw):
    """Cov_post(f(x1), f(x2)) slope = L sigma12 + Gamma(log F, sigma12) + Gamma(mu1, mu2)
    (central differences, ~1e-8) equals the orthogonal features' inner product slope."""
    X, Y, Xt = _data(2, P=2)
    x12 = Xt[:2]
    P = len(Y)
    Vb = _gram(np.vstack([X, x12]))

    def logF(V):
        return -0.5 * (Y @ np.linalg.solve(V[:P, :P], Y) + np.linalg.slogdet(V[:P, :P])[1])

    def mu(i):
        return lambda V: V[P + i, :P] @ np.linalg.solve(V[:P, :P], Y)

    def s12(V):
        return V[P, P + 1] - V[P, :P] @ np.linalg.solve(V[:P, :P], V[:P, P + 1])

    b = drift_matrix(Vb, act, **kw)
    slope = (generator_numeric(s12, Vb, b) + carre_du_champ(logF, s12, Vb)
             + carre_du_champ(mu(0), mu(1), Vb)) / P          # per tau
    h = 1e-4
    cov = []
    for tau in (0.0, h, 2 * h):
        F = feature_map(X, Y, act, tau=tau, **kw)(x12)
        cov.append(F[0, P:] @ F[1, P:])                       # orthogonal coordinates
    fd = (4 * (cov[1] - cov[0]) - (cov[2] - cov[0])) / (2 * h)
    assert abs(fd - slope) < 1e-6 * (1 + abs(slope))
    # the wrong variant, a kernel without the data-dependent part (q - P) R, misses by
    fm = feature_map(X, Y, act, tau=h, **kw)
    R12 = fm.kernel_parts(x12).data[0, 1] / (fm.t * (fm.q - P))
    assert abs((fm.q - P) * R12 / P) > 1e3 * 1e-6 * (1 + abs(slope))


def test_features_reproduce_the_kernel_exactly():
    X, Y, Xt = _data(3, P=3, d=7)           # 3 + 4 inputs in 7 dimensions: K_tau is PD
    fm = feature_map(X, Y, "tanh", tau=0.3, a=1.2)
    F = fm(Xt)
    P = len(Y)
    assert F.shape == (len(Xt), P + len(Xt))
    assert np.allclose(F @ F.T, fm.kernel(Xt), rtol=0, atol=1e-13)
    assert np.allclose(F[:, :P] @ fm.train_features.T, fm.kernel(Xt, X), rtol=0, atol=1e-13)
    assert np.allclose(fm.train_features @ fm.train_features.T, fm.kernel(X), atol=1e-13)
    # GP interpolation from the features = predict
    mean = F[:, :P] @ np.linalg.solve(fm.train_features, fm.Y)
    assert np.allclose(mean, fm.predict(Xt).mean, atol=1e-12)
    assert np.allclose(np.sum(F[:, P:] ** 2, 1), fm.predict(Xt).var, atol=1e-12)


def test_features_with_more_inputs_than_dimensions_are_first_order_exact():
    """3 + 4 inputs in 5 dimensions: K_tau is PSD only to first order, the error is O(t^2)."""
    X, Y, Xt = _data(3)
    errs = []
    for tau in (0.2, 0.1):
        fm = feature_map(X, Y, "tanh", tau=tau, a=1.2)
        F = fm(Xt)
        errs.append(np.abs(F @ F.T - fm.kernel(Xt)).max())
    assert errs[1] > 0 and 3.0 < errs[0] / errs[1] < 5.0     # halving t quarters it


@pytest.mark.parametrize("act,kw", ACTS[:2], ids=IDS[:2])
def test_data_dependent_correction_vanishes_in_the_span_of_the_data(act, kw):
    X, Y, _ = _data(4)
    fm = feature_map(X, Y, act, tau=0.2, **kw)
    x_in = np.array([0.7, -1.3, 0.4]) @ X
    corr = fm.data_correction(x_in)
    assert np.abs(corr).max() < 1e-15 * np.abs(x_in).max() * 10
    assert abs(fm.kernel_parts(x_in).data[0, 0]) < 1e-14 * abs(fm.kernel(x_in)[0, 0])
    # outside the span it does not vanish, and it is (t/2)(q - P) P_perp x / sqrt(d)
    x_out = x_in + np.linalg.svd(X)[2][-1]     # plus a unit vector orthogonal to the data
    corr = fm.data_correction(x_out)[0]
    assert np.allclose(corr, 0.5 * fm.t * (fm.q - 3) * np.linalg.svd(X)[2][-1] / math.sqrt(5),
                       rtol=1e-12, atol=0)


def test_mean_correction_is_linear_in_the_labels_and_the_data_part_is_affine_in_q():
    X, Y, Xt = _data(5)
    kw = {"c_plus_value": 0.5, "c_minus_value": -0.2}
    base = feature_map(X, Y, "relu", tau=0.1, **kw)
    zero = feature_map(X, 0 * Y, "relu", tau=0.1, **kw)
    assert np.all(zero.predict(Xt).mean_slope == 0)              # Y = 0: no mean correction
    assert np.abs(zero.kernel_parts(Xt).data).min() > 0          # but a data part, -t P R
    for c in (2.0, -0.5):
        sc = feature_map(X, c * Y, "relu", tau=0.1, **kw)
        assert np.allclose(sc.predict(Xt).mean_slope, c * base.predict(Xt).mean_slope,
                           rtol=1e-12, atol=1e-15)
        assert math.isclose(sc.q, c * c * base.q, rel_tol=1e-12)
        R = base.kernel_parts(Xt).data / (base.t * (base.q - 3))
        assert np.allclose(sc.kernel_parts(Xt).data, sc.t * (c * c * base.q - 3) * R,
                           rtol=1e-12, atol=1e-15)
    # linear in |P_perp x|: scale the orthogonal component
    e = np.linalg.svd(X)[2][-1]
    x_par = np.array([0.3, 0.1, -0.4]) @ X
    c1, c2 = (base.data_correction(x_par + lam * e)[0] for lam in (1.0, 2.5))
    assert np.allclose(c2, 2.5 * c1, rtol=1e-12, atol=1e-17)


def _isotropic_fit(X, Y, beta, seed):
    """Fit mean slope = k^T z and variance slope = gamma r + k^T N k (linear net, drift 0)."""
    P, d = X.shape
    rng = np.random.default_rng(seed)
    V = _gram(X)
    iu = np.triu_indices(P)
    rm, rv, tm, tv = [], [], [], []
    for _ in range(12):
        x0 = rng.standard_normal(d)
        k = X @ x0 / d
        pr = predictive_first_order(X, Y, x0, "relu", beta, c_plus_value=0.0,
                                    c_minus_value=0.0)
        K = 2 * np.outer(k, k) - np.diag(k * k)
        rm.append(k), tm.append(P * pr.mean_slope)
        rv.append(np.append(K[iu], x0 @ x0 / d - k @ np.linalg.solve(V, k)))
        tv.append(P * pr.var_slope)
    z = np.linalg.lstsq(np.array(rm), tm, rcond=None)[0]
    c = np.linalg.lstsq(np.array(rv), tv, rcond=None)[0]
    fit = max(np.abs(np.array(rm) @ z - tm).max(), np.abs(np.array(rv) @ c - tv).max())
    N = np.zeros((P, P))
    N[iu] = c[:-1]
    return z, N + N.T - np.diag(np.diag(N)), fit


@pytest.mark.parametrize("beta", [2.0, 0.5])
def test_no_kernel_reproduces_both_slopes_at_finite_beta(beta):
    """GP regression with noise 1/beta (+ a first-order noise change delta) and kernel
    Vbar0 + t Delta needs s z = N V Y - delta w (module docstring); the slopes violate it."""
    X, Y, _ = _data(6, P=3, d=6)
    z, N, fit = _isotropic_fit(X, Y, beta, 7)
    assert fit < 1e-12                              # the isotropic form is exact
    s = 1 / beta
    w = np.linalg.solve(_gram(X) + s * np.eye(3), Y)
    gap = N @ _gram(X) @ Y - s * z
    resid = gap - (gap @ w) / (w @ w) * w           # best delta
    assert np.abs(resid).max() > 1e-4 * np.abs(s * z).max()
    # at beta = inf the same fit gives N = 0, gamma = q - P: the kernel exists
    z0, N0, fit0 = _isotropic_fit(X, Y, np.inf, 7)
    assert fit0 < 1e-12 and np.abs(N0).max() < 1e-10 and np.abs(z0).max() < 1e-12
    with pytest.raises(DomainError, match="beta"):
        feature_map(X, Y, "tanh", tau=0.1, beta=beta, a=1.0)


def test_feature_map_bad_input():
    X, Y, Xt = _data(8)
    with pytest.raises(ValueError, match="tau"):
        feature_map(X, Y, "tanh", tau=-0.1, a=1.0)
    with pytest.raises(TypeError):
        feature_map(X, Y, "tanh", tau="0.1", a=1.0)
    with pytest.raises(ValueError, match="linearly independent"):
        feature_map(np.vstack([X, X[:1]]), np.append(Y, 1.0), "tanh", tau=0.1, a=1.0)
    with pytest.raises(ValueError, match="Y"):
        feature_map(X, Y[:2], "tanh", tau=0.1, a=1.0)
    with pytest.raises(DomainError):
        feature_map(X, Y, "abs", tau=0.1, a=1.0)
    fm = feature_map(X, Y, "tanh", tau=0.1, a=1.0)
    with pytest.raises(ValueError, match="Xtest"):
        fm(Xt[:, :3])
    with pytest.raises(ValueError, match="Xtest"):
        fm(np.full((2, 5), np.nan))
    with pytest.raises(DomainError, match="tau"):
        feature_map(X, Y, "tanh", tau=1e6, a=1.0)(Xt)


# ---------------------------------------------------------------------------------------------
# predictive density


def _moment(f):
    """E_p f(y) for p = p0 (1 + t Q(y)): y = mu + sigma z, Gaussian moments of z."""
    p0, p = _density_expr()
    z = sp.Symbol("z")
    ratio = sp.simplify(p / p0)
    poly = sp.Poly(sp.expand((f * ratio).subs(_y, _mu + sp.sqrt(_s2) * z)), z)
    return sp.expand(sum(c * sp.factorial2(k - 1) for (k,), c in poly.terms() if k % 2 == 0))


def test_density_mass_mean_variance_and_cumulants():
    """Mass 1, mean mu + t m1, variance s2 + t v1 (+ O(t^2)); third and fourth cumulants
    3 t Gamma(mu, s2) and 3 t Gamma(s2, s2): the carre du champ terms."""
    assert _moment(sp.S.One) == 1
    assert sp.simplify(_moment(_y) - (_mu + _t * _m1)) == 0
    var = sp.expand(_moment((_y - _mu) ** 2) - (_t * _m1) ** 2)
    assert sp.simplify(var - (_s2 + _t * _v1 - _t ** 2 * _m1 ** 2)) == 0
    assert sp.simplify(_moment((_y - _mu) ** 3) - _t * (3 * _gms + 3 * _s2 * _m1)) == 0
    assert sp.simplify(_moment((_y - _mu) ** 4)
                       - (3 * _s2 ** 2 + _t * (6 * _s2 * _v1 + 3 * _gss))) == 0


@pytest.mark.parametrize("s", [0.0, 0.5])
def test_density_coefficients_against_central_differences(s):
    rng = np.random.default_rng(9)
    P = 3
    X, Y, x0 = rng.standard_normal((P, 5)), rng.standard_normal(P), rng.standard_normal(5)
    Vb = _gram(np.vstack([X, x0]))

    def mu(V):
        return V[P, :P] @ np.linalg.solve(V[:P, :P] + s * np.eye(P), Y)

    def s2(V):
        return V[P, P] - V[P, :P] @ np.linalg.solve(V[:P, :P] + s * np.eye(P), V[:P, P])

    shp = shaped("tanh", 1.0, 100)
    m, v, m1, v1, gms, gss = _coefficients(Vb, Y, s, shp, P)
    ref = predictive_first_order(X, Y, x0, shp, math.inf if s == 0 else 1 / s)
    assert math.isclose(m1, P * ref.mean_slope, rel_tol=1e-12, abs_tol=1e-14)
    assert math.isclose(v1, P * ref.var_slope, rel_tol=1e-12, abs_tol=1e-14)
    assert abs(gms - carre_du_champ(mu, s2, Vb)) < 1e-7 * (1 + abs(gms))
    assert abs(gss - carre_du_champ(s2, s2, Vb)) < 1e-7 * (1 + abs(gss))
    if s == 0:
        assert gms == pytest.approx(0, abs=1e-14)


# (network, X, Y, x0, t): t = 0.02 (two layers at n = 100) puts the first-order correction at
# ~8-10 SE with 40 000 chains and the O(t^2) remainder at ~2 SE (measured: SE ~ 0.006 sqrt(t)
# sqrt(2e4 / N), so z(t p1) ~ sqrt(t N) and z(t^2) / z(t p1) ~ t (q - P)-ish); the P = 3 data
# set has a 3x larger correction (zeroth-order z ~ 30 at t = 0.01), so t = 0.01 there.
SETTINGS = [(shaped("tanh", 1.0, 100), np.eye(2, 3), np.array([1.0, -0.5]),
             np.array([0.6, 0.2, 1.0]), 0.02),
            (shaped_relu(0.6, -0.6, 100), np.eye(2, 3), np.array([1.0, -0.5]),
             np.array([0.6, 0.2, 1.0]), 0.02),
            (shaped("tanh", 1.0, 100), np.array([[1.0, 0.3, 0, 0], [0.2, 1.0, 0.5, 0],
                                                 [0.0, -0.4, 1.0, 0.3]]),
             np.array([0.9, -0.6, 0.4]), np.array([0.5, 0.2, 0.1, 1.0]), 0.01)]


@pytest.mark.parametrize("shp,X,Y,x0,t", SETTINGS, ids=["tanh-P2", "relu-P2", "tanh-P3"])
def test_density_against_the_finite_network(shp, X, Y, x0, t):
    """p0 + t p1 within 5 SE of the width-100 network posterior at five y; p0 fails there."""
    P = len(Y)
    tau = t * P
    pd = predictive_density_first_order(P, shp)
    c = pd.coefficients(X, Y, x0, tau)
    ys = c.mu + math.sqrt(c.sigma2) * np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    first = check_predictive_density(X, Y, x0, shp, tau, ys, n_samples=40_000, seed=3)
    zeroth = check_predictive_density(X, Y, x0, shp, tau, ys, n_samples=40_000, seed=3,
                                      order=0)
    assert first.passed, first.table()
    assert zeroth.max_abs_z > 5, zeroth.table()         # p0 is detected as wrong


def test_density_formula_check_and_pickle():
    shp = shaped("tanh", 1.0, 100)
    pd = predictive_density_first_order(2, shp)
    X, Y, x0 = np.eye(2, 3), np.array([1.0, -0.5]), np.array([0.6, 0.2, 1.0])
    pt = pd.point(X, Y, x0, y=0.5, tau=0.04)
    rep = pd.density.check(points=[pt], n_samples=20_000, seed=1)
    assert rep.passed, rep.table()
    assert math.isclose(float(pd.density.evaluate({k: pt[k] for k in pd.density.names})),
                        pd.evaluate(X, Y, x0, [0.5], 0.04)[0], rel_tol=1e-14)
    again = pickle.loads(pickle.dumps(pd.density))
    assert again.expr == pd.density.expr
    bad = dict(pt, t=0.015)          # not L/n at n = 100
    with pytest.raises(ValueError, match="L/n"):
        pd.density.sampler(bad, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="mu"):
        pd.density.sampler(dict(pt, mu=pt["mu"] + 1), 10, np.random.default_rng(0))


def test_density_bad_input():
    X, Y, x0 = np.eye(2, 3), np.array([1.0, -0.5]), np.array([0.6, 0.2, 1.0])
    with pytest.raises(TypeError, match="Shaped"):
        check_predictive_density(X, Y, x0, "tanh", 0.1, [0.0])
    with pytest.raises(TypeError):
        predictive_density_first_order(2, "tanh")              # no parameters, no network
    with pytest.raises(ValueError, match="width"):
        predictive_density_first_order(2, shaped("tanh", 1.0, 50), width=60)
    pd = predictive_density_first_order(2, "tanh", a=1.0, width=50)
    with pytest.raises(ValueError, match="order"):
        pd.evaluate(X, Y, x0, [0.0], 0.1, order=2)
    with pytest.raises(ValueError, match="P = 2"):
        pd.coefficients(np.eye(3), np.ones(3), np.ones(3), 0.1)
    with pytest.raises(ValueError, match="tau"):
        pd.coefficients(X, Y, x0, -1.0)
    with pytest.raises(DomainError, match="sigma2"):
        pd.density.evaluate({"y": 0.0, "mu": 0.0, "sigma2": -1.0, "m1": 0.0, "v1": 0.0,
                             "Gamma_ms": 0.0, "Gamma_ss": 0.0, "t": 0.1})
    with pytest.raises(ValueError, match="ys"):
        check_predictive_density(X, Y, x0, shaped("tanh", 1.0, 50), 0.1, [[0.0]])
