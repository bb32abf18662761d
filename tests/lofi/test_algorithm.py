"""Neural LoFi: SVD identity, finite -> kernel convergence, variational check, readouts, errors."""

import numpy as np
import pytest

from symscale.lofi.algorithm import (
    LoFi,
    LoFiKernel,
    kernel_filter,
    spectral_filter,
    variational_check,
)
from symscale.lofi.readout import (
    KernelRidgeReadout,
    LogisticReadout,
    NotFittedError,
    RidgeReadout,
)
from symscale.testing import fit_loglog_slope, seeded_rng


def relu_lift(X, P, rng):
    """z = relu(W^T x / c)/sqrt(P) with c^2 = mean |x|^2, as in LoFi's first layer."""
    c = np.sqrt(np.mean(np.sum(X * X, axis=1)))
    return np.maximum(X @ rng.standard_normal((X.shape[1], P)) / c, 0) / np.sqrt(P)


def sqrtm_psd(G):
    d, U = np.linalg.eigh(G)
    return (U * np.sqrt(np.maximum(d, 0))) @ U.T


def by_magnitude(vals, vecs=None):
    order = np.argsort(-np.abs(vals))
    return vals[order] if vecs is None else (vals[order], vecs[:, order])


def toy(n, d, seed):
    rng = seeded_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1.0, -1.0)


# -- SVD identity (note §3) -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def lifted():
    rng = seeded_rng(11)
    X = rng.standard_normal((90, 6))
    Z = relu_lift(X, 200, rng)  # same W for train (first 60) and test (last 30)
    y = np.where(rng.random(60) < 0.5, 1.0, -1.0)
    return Z[:60], Z[60:], y


def test_svd_identity_spectra_and_eigenvectors(lifted):
    Z, _, y = lifted
    n = len(y)
    C = Z.T @ (y[:, None] * Z) / n
    G = Z @ Z.T
    R = sqrtm_psd(G)
    M = R @ (y[:, None] * R) / n
    lam_C, V = by_magnitude(*np.linalg.eigh(C))
    lam_M, B = by_magnitude(*np.linalg.eigh(M))
    scale = np.abs(lam_M).max()
    assert np.max(np.abs(lam_C[:n] - lam_M)) < 1e-10 * scale
    assert np.max(np.abs(lam_C[n:])) < 1e-10 * scale  # the rest of C's spectrum is zero
    for j in range(10):  # Z v = G^{1/2} b up to sign
        a, b = Z @ V[:, j], R @ B[:, j]
        assert min(np.linalg.norm(a - b), np.linalg.norm(a + b)) < 1e-10


@pytest.mark.parametrize("first_moment", [False, True])
def test_finite_features_equal_kernel_features_with_finite_gram(lifted, first_moment):
    Z, Zt, y = lifted
    sf = spectral_filter(Z, y, 5, first_moment=first_moment, eig="dense")
    kf = kernel_filter(Z @ Z.T, y, 5, first_moment=first_moment)
    np.testing.assert_allclose(sf.eigenvalues, kf.eigenvalues, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sf.features, kf.features, rtol=0, atol=1e-10)
    np.testing.assert_allclose(Zt @ sf.components, (Zt @ Z.T) @ kf.coefs, rtol=0, atol=1e-10)
    assert sf.components.shape[1] == 5 + first_moment


# -- finite width converges to the kernel form at rate P^-1/2 -------------------------------------
def test_finite_width_converges_to_kernel_form():
    # two filtered layers, fixed ridge penalty; LoFi's widths are nested for a fixed seed,
    # which makes the error-vs-width curve of each seed smooth
    X, y = toy(40, 8, seed=5)
    widths = np.array([800, 1600, 3200, 6400, 12800, 25600])
    kernel = LoFiKernel(ks=[4, 3], ridge=1e-2).fit(X, y)
    for spec, k in zip(kernel.spectra_, kernel.ks):  # precondition: a gap at each cut
        mag = np.abs(spec)
        assert (mag[k - 1] - mag[k]) / mag[0] > 0.05
    pred_k, spec_k = kernel.decision_function(X), np.sort(kernel.spectra_[0])
    pred_err, spec_err = [], []
    for P in widths:
        pe, se = [], []
        for seed in range(4):
            m = LoFi(layers=[(P, 4), (P, 3)], readout=RidgeReadout(lambdas=1e-2), seed=seed)
            m.fit(X, y)
            pe.append(np.mean((m.decision_function(X) - pred_k) ** 2))
            se.append(np.sum((np.sort(m.spectra_[0]) - spec_k) ** 2))  # all n, by value
        pred_err.append(np.sqrt(np.mean(pe)))
        spec_err.append(np.sqrt(np.mean(se)))
    pred_slope = fit_loglog_slope(widths, pred_err).slope
    spec_slope = fit_loglog_slope(widths, spec_err).slope
    assert abs(pred_slope + 0.5) < 0.15, (pred_slope, pred_err)
    assert abs(spec_slope + 0.5) < 0.15, (spec_slope, spec_err)
    assert pred_err[-1] < 0.05 * np.sqrt(np.mean(pred_k**2))


def test_quadrature_activation_matches_finite_width():
    # tanh has no closed dual kernel: the quadrature path must carry the same normalization
    X, y = toy(30, 5, seed=4)
    lam_k = LoFiKernel(ks=[3], activation="tanh").fit(X, y).eigenvalues_[0]
    errs = [np.max(np.abs(LoFi([(20000, 3)], activation="tanh", seed=s).fit(X, y)
                          .eigenvalues_[0] - lam_k)) for s in range(2)]
    assert np.mean(errs) < 0.05 * np.abs(lam_k).max(), (errs, lam_k)


def test_final_lift_uses_the_arccos_kernel_of_the_note():
    X, y = toy(40, 6, seed=5)
    m = LoFiKernel(ks=[3], final_lift=True, ridge=1e-2).fit(X, y)
    F = m.features_[0]
    q = F @ F.T / np.mean(np.sum(F * F, axis=1))
    d = np.sqrt(np.diag(q))
    theta = np.arccos(np.clip(q / np.outer(d, d), -1, 1))
    K = np.outer(d, d) / (2 * np.pi) * (np.sin(theta) + (np.pi - theta) * np.cos(theta))
    np.testing.assert_allclose(m.decision_function(X), m.readout_.predict(K), atol=1e-8)


# -- variational characterization (note §4) -------------------------------------------------------
def perturbed(V, rng, eps=1e-3):
    return np.linalg.qr(V + eps * rng.standard_normal(V.shape))[0]


def test_variational_check_finite():
    rng = seeded_rng(6)
    X, y = toy(50, 6, seed=6)
    Z = relu_lift(X, 120, rng)
    V = spectral_filter(Z, y, 4).components
    res = variational_check(Z, y, V, kind="finite", n_random=500, n_optimized=10)
    assert res.passed, str(res)
    assert np.all(res.best_optimized > res.kept * (1 - 1e-6))  # the optimizer reaches the max
    assert np.all(res.best_random < res.kept)
    bad = variational_check(Z, y, perturbed(V, rng), kind="finite", n_random=500,
                            n_optimized=10)
    assert not bad.passed and not bad.passed_each[0], str(bad)


def test_variational_check_kernel():
    rng = seeded_rng(7)
    X, y = toy(50, 6, seed=7)
    m = LoFiKernel(ks=[4]).fit(X, y)
    G = m._train_kernel(X @ X.T / m.input_norm_**2)
    A = m.coefs_[0]
    np.testing.assert_allclose(A.T @ G @ A, np.eye(4), atol=1e-8)  # unit, orthogonal in RKHS
    res = variational_check(G, y, A, kind="kernel", n_random=500, n_optimized=10)
    assert res.passed, str(res)
    np.testing.assert_allclose(res.kept, np.abs(m.eigenvalues_[0]), rtol=1e-8)
    assert np.all(res.best_optimized > res.kept * (1 - 1e-6))
    bad = variational_check(G, y, A + 1e-3 * rng.standard_normal(A.shape), kind="kernel",
                            n_random=500, n_optimized=10)
    assert not bad.passed, str(bad)


# -- readouts -------------------------------------------------------------------------------------
def brute_loo(F, Y, lam):
    n, err = len(Y), np.zeros(Y.shape[1])
    for i in range(n):
        m = np.arange(n) != i
        mu, ym = F[m].mean(0), Y[m].mean(0)
        Fc = F[m] - mu
        beta = np.linalg.solve(Fc.T @ Fc + lam * np.eye(F.shape[1]), Fc.T @ (Y[m] - ym))
        err += (Y[i] - ym - (F[i] - mu) @ beta) ** 2
    return err / n


@pytest.mark.parametrize("p", [4, 25])
def test_ridge_loo_equals_brute_force(p):
    rng = seeded_rng(8)
    F = rng.standard_normal((15, p))
    Y = np.column_stack([F[:, 0] - F[:, 1] ** 2, np.sign(F[:, 2])])
    Y += 0.1 * rng.standard_normal(Y.shape)
    lambdas = np.logspace(-3, 3, 7)
    r = RidgeReadout(lambdas=lambdas, per_output=True).fit(F, Y)
    brute = np.array([brute_loo(F, Y, lam) for lam in lambdas])
    np.testing.assert_allclose(r.cv_curve_, brute, rtol=1e-8)
    np.testing.assert_array_equal(r.lambda_, lambdas[np.argmin(brute, axis=0)])
    # kernel form on F F^T is the same estimator
    k = KernelRidgeReadout(lambdas=lambdas, per_output=True).fit(F @ F.T, Y)
    np.testing.assert_allclose(k.cv_curve_, brute, rtol=1e-8)
    Ft = rng.standard_normal((5, p))
    np.testing.assert_allclose(k.predict(Ft @ F.T), r.predict(Ft), atol=1e-8)


def test_kernel_ridge_loo_equals_bordered_system_refits():
    X, y = toy(14, 3, seed=9)
    K = np.exp(-np.sum((X[:, None] - X[None]) ** 2, -1) / 4)
    lam = 0.05
    k = KernelRidgeReadout(lambdas=lam).fit(K, y)
    err = 0.0
    for i in range(len(y)):  # [[K + lam I, 1], [1^T, 0]] [alpha; b] = [y; 0] (intercept)
        m = np.arange(len(y)) != i
        Km = K[np.ix_(m, m)]
        S = np.block([[Km + lam * np.eye(len(Km)), np.ones((len(Km), 1))],
                      [np.ones((1, len(Km))), np.zeros((1, 1))]])
        sol = np.linalg.solve(S, np.append(y[m], 0.0))
        err += (y[i] - K[i, m] @ sol[:-1] - sol[-1]) ** 2
    assert abs(k.loo_error_ - err / len(y)) < 1e-8 * err


def test_gcv_formula_equals_direct_hat_matrix():
    rng = seeded_rng(10)
    F, y = rng.standard_normal((20, 6)), rng.standard_normal(20)
    lambdas = np.logspace(-2, 2, 5)
    r = RidgeReadout(method="gcv", lambdas=lambdas).fit(F, y)
    Fc, n = F - F.mean(0), len(y)
    for lam, got in zip(lambdas, r.cv_curve_[:, 0]):
        H = 1 / n + Fc @ np.linalg.solve(Fc.T @ Fc + lam * np.eye(6), Fc.T)
        direct = np.mean((y - H @ y) ** 2) / (1 - np.trace(H) / n) ** 2
        assert abs(got - direct) < 1e-10 * direct


def test_logistic_readout_is_stationary():
    rng = seeded_rng(12)
    F = rng.standard_normal((60, 3))
    y = np.where(F @ [1.0, -1.0, 0.5] + 0.5 * rng.standard_normal(60) > 0, 1.0, -1.0)
    clf = LogisticReadout(C=2.0).fit(F, y)
    m = y * clf.decision_function(F)
    p = 1 / (1 + np.exp(m))
    np.testing.assert_allclose(-F.T @ (y * p) + clf.coef_ / 2.0, 0, atol=1e-8)
    assert abs(np.sum(y * p)) < 1e-8  # unpenalized intercept


def test_lofi_with_logistic_readout():
    X, y = toy(60, 4, seed=1)
    m = LoFi([(300, 4)], readout="logistic").fit(X, y)
    logits = m.readout_.decision_function(m.transform(X)[-1])
    np.testing.assert_allclose(m.decision_function(X), logits)
    np.testing.assert_array_equal(m.predict(X), np.where(logits >= 0, 1.0, -1.0))
    assert np.mean(m.predict(X) == y) > 0.7


# -- model plumbing -------------------------------------------------------------------------------
def test_multiclass_one_vs_rest():
    rng = seeded_rng(13)
    centres = 3 * rng.standard_normal((3, 4))
    labels = np.repeat(np.array(["a", "b", "c"]), 15)
    X = centres[np.repeat(np.arange(3), 15)] + 0.5 * rng.standard_normal((45, 4))
    for model in (LoFi([(200, 3)]), LoFiKernel(ks=[3])):
        model.fit(X, labels)
        assert model.decision_function(X).shape == (45, 3)
        assert np.mean(model.predict(X) == labels) > 0.9
        assert len(model.transform(X[:2])) == 3 and len(model.estimators_) == 3


def test_first_moment_adds_one_orthonormal_feature_per_layer():
    X, y = toy(40, 5, seed=14)
    m = LoFi([(150, 3), (120, 2)], first_moment=True).fit(X, y)
    assert [h.shape for h in m.transform(X[:7])] == [(7, 4), (7, 3)]
    for V in m.components_:
        np.testing.assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-10)
    mk = LoFiKernel(ks=[3, 2], first_moment=True).fit(X, y)
    assert [h.shape for h in mk.transform(X[:7])] == [(7, 4), (7, 3)]


def test_eigensolvers_keep_the_same_subspace():
    rng = seeded_rng(15)
    Z, y = rng.standard_normal((80, 150)), np.where(rng.random(80) < 0.5, 1.0, -1.0)
    ref = spectral_filter(Z, y, 5, eig="dense")
    for eig in ("dual", "partial"):
        other = spectral_filter(Z, y, 5, eig=eig)
        np.testing.assert_allclose(other.eigenvalues, ref.eigenvalues, atol=1e-10)
        np.testing.assert_allclose(other.components @ other.components.T,
                                   ref.components @ ref.components.T, atol=1e-8)
    X, yy = toy(30, 4, seed=15)
    preds = [LoFi([(60, 3)], eig=e).fit(X, yy).decision_function(X) for e in ("dense", "partial")]
    np.testing.assert_allclose(preds[0], preds[1], atol=1e-8)


# -- errors ---------------------------------------------------------------------------------------
X_OK, Y_OK = toy(10, 3, seed=0)
X_NAN, Y_INF = X_OK.copy(), Y_OK.copy()
X_NAN[3, 1], Y_INF[4] = np.nan, np.inf


@pytest.mark.parametrize("make, args, pattern", [
    (lambda: LoFi([(50, 2)]), (X_OK, np.ones(len(Y_OK))), r"\by\b.*at least 2 distinct"),
    (lambda: LoFi([(50, 2)]), (X_OK[:1], Y_OK[:1]), r"\bX\b.*at least 2"),
    (lambda: LoFi([(50, 2)]), (X_NAN, Y_OK), r"\bX\b must be finite"),
    (lambda: LoFi([(50, 2)]), (X_OK, Y_INF), r"\by\b must be finite"),
    (lambda: LoFi([(50, 2)]), (X_OK, Y_OK[:-1]), r"X and y .*same length"),
    (lambda: LoFiKernel(ks=[20]), (X_OK, Y_OK), r"\bks\b"),
])
def test_bad_fit_inputs_name_the_argument(make, args, pattern):
    with pytest.raises(ValueError, match=pattern):
        make().fit(*args)


@pytest.mark.parametrize("build, pattern", [
    (lambda: LoFi([(10, 11)]), r"\blayers\b"),
    (lambda: LoFi([(10, 2)], eig="lanczos"), r"\beig\b"),
    (lambda: LoFi([(10, 2)], readout="svm"), r"\breadout\b"),
    (lambda: LoFiKernel(ks=[0]), r"\bks\b"),
    (lambda: LoFiKernel(ks=[2], ridge=-1.0), r"\bridge\b"),
])
def test_bad_parameters_name_the_argument(build, pattern):
    """scikit-learn contract: the constructor stores, fit validates."""
    model = build()
    with pytest.raises(ValueError, match=pattern):
        model.fit(X_OK, Y_OK)


def test_use_before_fit_and_wrong_width():
    for model in (LoFi([(20, 2)]), LoFiKernel(ks=[2])):
        with pytest.raises(NotFittedError, match="fit"):
            model.predict(X_OK)
        model.fit(X_OK, Y_OK)
        with pytest.raises(ValueError, match=r"\bX\b"):
            model.transform(X_OK[:, :2])
