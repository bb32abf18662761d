"""Neural LoFi: spectral filters (orthonormal components, eigenvalues of the signed covariance
sorted by magnitude, all eigensolvers and the kernel form agreeing), effective dimensions,
readouts and the model (finite scores, identical scores for duplicate inputs, invariance to
the order of the training data), and typed errors for bad arguments."""

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from symscale.lofi import (LoFi, LoFiKernel, LogisticReadout, RidgeReadout, bbp_prediction,
                           bulk_edge, effective_dimension, kernel_filter, spike_threshold,
                           spectral_filter)

from .strategies import (SEEDS, assert_bad_input, assert_finite, bad_int, bad_matrix,
                         bad_nonnegative, bad_positive, bad_real, inputs, without_none)


@st.composite
def signed_data(draw, n_max=12, P_max=10):
    n, P = draw(st.integers(2, n_max)), draw(st.integers(2, P_max))
    rng = np.random.default_rng(draw(SEEDS))
    Z = rng.standard_normal((n, P)) * draw(st.sampled_from([1.0, 1e-3, 1e3]))
    y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0  # both classes
    return Z, y


@given(data=signed_data(), kfrac=st.floats(0.0, 1.0), first_moment=st.booleans(),
       eig=st.sampled_from(["auto", "dense", "dual", "partial"]))
def test_spectral_filter_keeps_the_top_eigenvectors_of_the_signed_covariance(data, kfrac,
                                                                             first_moment, eig):
    Z, y = data
    n, P = Z.shape
    k = 1 + int(kfrac * (min(n, P) - 1))
    f = spectral_filter(Z, y, k, first_moment=first_moment, eig=eig)
    C = Z.T @ (y[:, None] * Z) / n
    ref = np.linalg.eigvalsh((C + C.T) / 2)
    ref = ref[np.argsort(-np.abs(ref), kind="stable")][:k]
    scale = np.abs(ref).max() + 1e-300
    assert_finite(f.eigenvalues, "eigenvalues")
    np.testing.assert_allclose(np.abs(f.eigenvalues), np.abs(ref), rtol=1e-7, atol=1e-9 * scale)
    V = f.components[:, :k]
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-8)
    # each kept column is an eigenvector: C v = lambda v
    np.testing.assert_allclose(C @ V, V * f.eigenvalues, atol=1e-7 * scale)
    np.testing.assert_allclose(f.features, Z @ f.components, rtol=1e-10,
                               atol=1e-10 * np.abs(Z).max() + 1e-300)


@given(data=signed_data(n_max=8), extra=st.integers(0, 6), kfrac=st.floats(0.0, 1.0))
def test_kernel_filter_equals_the_spectral_filter_for_full_row_rank(data, extra, kfrac):
    Z, y = data
    n = Z.shape[0]
    Z = np.hstack([Z, np.random.default_rng(1).standard_normal((n, n + extra))])  # P > n
    k = 1 + int(kfrac * (n - 1))
    G = Z @ Z.T
    ev = np.linalg.eigvalsh(G)
    if ev[0] < 1e-4 * ev[-1]:
        return  # the documented clip (1e-6 of the top eigenvalue) regularizes such a G
    kf, sf = kernel_filter(G, y, k), spectral_filter(Z, y, k)
    scale = np.abs(sf.eigenvalues).max()
    np.testing.assert_allclose(kf.eigenvalues, sf.eigenvalues, rtol=1e-6, atol=1e-9 * scale)


@given(data=signed_data(), data2=st.data())
def test_spectral_filter_is_invariant_to_the_order_of_the_samples(data, data2):
    Z, y = data
    perm = np.array(data2.draw(st.permutations(range(len(y)))))
    k = min(Z.shape) // 2 + 1 if min(Z.shape) > 1 else 1
    a, b = spectral_filter(Z, y, k, eig="dense"), spectral_filter(Z[perm], y[perm], k,
                                                                   eig="dense")
    scale = np.abs(a.eigenvalues).max() + 1e-300
    np.testing.assert_allclose(b.eigenvalues, a.eigenvalues, rtol=1e-9, atol=1e-12 * scale)


@given(X=inputs(max_points=6, max_dim=5, zero_rows=False), c=st.sampled_from([1e-6, 0.5, 7.0,
                                                                               1e6]),
       kind=st.sampled_from(["participation", "regularized", "rank", "stable"]))
def test_effective_dimension_is_scale_invariant_and_bounded(X, c, kind):
    K = X @ X.T
    if not np.abs(K).max() > 0:
        return
    m = len(K)
    d = effective_dimension(K, kind)
    assert np.isfinite(d) and 0 <= d <= m + 1e-9, (kind, d, m)
    dc = effective_dimension(c * K, kind)  # the default ridge Tr K / m scales with K
    assert dc == pytest.approx(d, rel=1e-9, abs=1e-9), (kind, c, d, dc)
    if kind in ("participation", "stable"):
        assert d >= 1 - 1e-12


@given(n=st.integers(2, 10_000), D=st.floats(0, 1e4), rho=st.floats(-5, 5))
def test_bbp_prediction_is_consistent_with_the_noise_floor(n, D, rho):
    tau = spike_threshold(D, n)
    assert bulk_edge(D, n) == 2 * tau
    b = bbp_prediction(rho, D, n)
    assert b.separates == (abs(rho) > tau)
    assert 0 <= b.overlap2 <= 1
    assert np.isfinite(b.lambda_top)
    if b.separates:
        assert abs(b.lambda_top) >= 2 * tau - 1e-12
    assert bbp_prediction(0.0, D, n) == bbp_prediction(-0.0, D, n)


@st.composite
def regression(draw):
    n, p = draw(st.integers(3, 15)), draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(SEEDS))
    F = rng.standard_normal((n, p))
    if draw(st.booleans()):
        F[1] = F[0]  # a duplicated training point
    return F, rng.standard_normal(n), rng.standard_normal((4, p))


@given(reg=regression(), method=st.sampled_from(["loo", "gcv"]), data=st.data())
def test_ridge_readout_is_invariant_to_the_order_of_the_training_data(reg, method, data):
    F, y, T = reg
    T = np.vstack([T, T[:1]])  # a duplicated test point
    perm = np.array(data.draw(st.permutations(range(len(y)))))
    a = RidgeReadout(method).fit(F, y).predict(T)
    b = RidgeReadout(method).fit(F[perm], y[perm]).predict(T)
    assert_finite(a, "ridge predictions")
    assert a[-1] == a[0]
    np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-9 * (1 + np.abs(a).max()))


@given(seed=SEEDS, layers=st.sampled_from([[(8, 2)], [(12, 3), (6, 1)], [(5, 5)]]),
       readout=st.sampled_from(["ridge", "logistic"]), first_moment=st.booleans(),
       act=st.sampled_from(["relu", "tanh", "abs"]))
def test_lofi_scores_are_finite_and_equal_for_duplicate_inputs(seed, layers, readout,
                                                               first_moment, act):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((20, 3))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(20) > 0, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0
    T = np.vstack([X[:4], X[:1], np.zeros((1, 3))])
    model = LoFi(layers, act, first_moment=first_moment, readout=readout, seed=seed).fit(X, y)
    s = model.decision_function(T)
    assert_finite(s, "LoFi scores")
    assert s[4] == s[0]
    assert set(np.unique(model.predict(T))) <= {-1.0, 1.0}
    s2 = model.decision_function(T[::-1])
    np.testing.assert_allclose(s2, s[::-1], rtol=1e-12, atol=1e-12)


@given(seed=SEEDS, ks=st.sampled_from([[1], [2, 1], [3]]), act=st.sampled_from(["relu", "erf",
                                                                               "abs"]),
       first_moment=st.booleans(), final_lift=st.booleans())
@example(seed=127272746, ks=[2, 1], act="erf", first_moment=False, final_lift=True)
def test_lofi_kernel_scores_are_finite_and_equal_for_duplicate_inputs(seed, ks, act,
                                                                      first_moment, final_lift):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((14, 3))
    y = np.where(X[:, 1] - X[:, 0] > 0, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0
    T = np.vstack([X[:3], X[:1], np.zeros((1, 3))])
    model = LoFiKernel(ks, act, first_moment=first_moment, final_lift=final_lift).fit(X, y)
    s = model.decision_function(T)
    assert_finite(s, "LoFiKernel scores")
    # the readout's forward rounding: inputs equal to ulps (BLAS sums rows in any order) move a
    # score by up to ~eps |z| . |coef|, and a small LOO ridge can make |coef| ~ 1e6
    # (seed 127272746: a 1e-16 change of the lifted kernel moved a score by 1.2e-10)
    r, z = model.readout_, np.abs(model._readout_input(T))
    coef = np.abs(r.dual_coef_ if final_lift else r.coef_)
    tol = 1e-12 + 64 * np.finfo(float).eps * (z @ coef).reshape(len(T), -1).max(axis=1)
    assert abs(s[3] - s[0]) <= tol[0]
    assert np.all(np.abs(model.decision_function(T[::-1]) - s[::-1]) <= tol[::-1])


# ---------------------------------------------------------------------------------------------
# bad input

Z_GOOD = np.random.default_rng(0).standard_normal((6, 4))
Y_GOOD = np.array([1.0, -1.0, 1.0, -1.0, 1.0, 1.0])


@given(name=st.sampled_from(["Z", "y", "k"]), data=st.data())
def test_spectral_filter_rejects_bad_arguments(name, data):
    bad = data.draw({"Z": bad_matrix((6, 4)),
                     "y": st.one_of(bad_matrix((6,)), st.just(np.ones(5))),
                     "k": st.one_of(bad_int(1), st.just(5))}[name])
    kw = {"Z": Z_GOOD, "y": Y_GOOD, "k": 2, name: bad}
    assert_bad_input(name, lambda: spectral_filter(kw["Z"], kw["y"], kw["k"]))


@given(name=st.sampled_from(["G", "y", "k", "clip"]), data=st.data())
def test_kernel_filter_rejects_bad_arguments(name, data):
    bad = data.draw({"G": st.one_of(bad_matrix((6, 6)), st.just(np.ones((6, 5)))),
                     "y": st.one_of(bad_matrix((6,)), st.just(np.ones(5))),
                     "k": st.one_of(bad_int(1), st.just(7)),
                     "clip": bad_nonnegative}[name])
    kw = {"G": Z_GOOD @ Z_GOOD.T, "y": Y_GOOD, "k": 2, "clip": 1e-6, name: bad}
    assert_bad_input(name, lambda: kernel_filter(kw.pop("G"), kw.pop("y"), kw.pop("k"), **kw))


@given(bad=st.sampled_from([[(50.7, 2)], [(8, 2.5)], [(True, 1)], [(4, 0)], [(4, 5)], [],
                            [(-3, 1)], "8,2", None, [(float("nan"), 2)]]))
def test_lofi_rejects_bad_layers(bad):
    # scikit-learn contract: the constructor stores, fit validates
    assert_bad_input("layers", lambda: LoFi(bad).fit(Z_GOOD, Y_GOOD))


@given(bad=st.sampled_from([[0], [2.5], [True], [], "2", None, [float("nan")], [-1]]))
def test_lofi_kernel_rejects_bad_ks(bad):
    assert_bad_input("ks", lambda: LoFiKernel(bad).fit(Z_GOOD, Y_GOOD))


@given(name=st.sampled_from(["ridge", "clip"]), data=st.data())
def test_lofi_kernel_rejects_bad_options(name, data):
    bad = data.draw(st.sampled_from(["ridgecv", None, -1.0, 0.0, float("nan"), True])
                    if name == "ridge" else st.sampled_from([0.0, -1e-6, 1.5, float("nan"),
                                                             "1e-6", None, True]))
    assert_bad_input(name, lambda: LoFiKernel([1], **{name: bad}).fit(Z_GOOD, Y_GOOD))


@given(name=st.sampled_from(["eig", "readout", "seed"]), data=st.data())
def test_lofi_rejects_bad_options(name, data):
    bad = data.draw({"eig": st.sampled_from(["fast", None]),
                     "readout": st.sampled_from(["svm", None, 3]),
                     "seed": st.sampled_from([-1, 2.5, "0", True])}[name])
    X = np.random.default_rng(0).standard_normal((10, 3))

    def call():
        LoFi([(8, 2)], **{name: bad}).fit(X, np.where(X[:, 0] > 0, 1.0, -1.0))
    assert_bad_input(name, call)


@given(bad=bad_matrix((10, 3)))
def test_lofi_fit_rejects_bad_inputs(bad):
    y = np.where(np.arange(10) % 2, 1.0, -1.0)
    assert_bad_input("X", lambda: LoFi([(8, 2)]).fit(bad, y))


@given(name=st.sampled_from(["K", "kind", "lam"]), data=st.data())
def test_effective_dimension_rejects_bad_arguments(name, data):
    bad = data.draw({"K": st.one_of(bad_matrix((3, 3)), st.just(-np.eye(3)),
                                    st.just(np.array([[1.0, 2.0], [0.0, 1.0]]))),
                     "kind": st.sampled_from(["trace", None]),
                     "lam": without_none(bad_nonnegative)}[name])
    kw = {"K": np.eye(3), "kind": "regularized", "lam": 1.0, name: bad}
    assert_bad_input(name, lambda: effective_dimension(kw.pop("K"), **kw))


@given(name=st.sampled_from(["D_eff", "n"]), data=st.data())
def test_noise_floor_rejects_bad_arguments(name, data):
    bad = data.draw(bad_nonnegative if name == "D_eff" else st.sampled_from(
        [1, 0, -5, float("nan"), float("inf"), "10", None, True]))
    kw = {"D_eff": 10.0, "n": 100, name: bad}
    assert_bad_input(name, lambda: spike_threshold(**kw))


@given(name=st.sampled_from(["rho", "D", "n"]), data=st.data())
def test_bbp_prediction_rejects_bad_arguments(name, data):
    bad = data.draw({"rho": bad_real, "D": bad_nonnegative,
                     "n": st.sampled_from([1, 0, float("nan"), "10", None, True])}[name])
    kw = {"rho": 0.5, "D": 10.0, "n": 100, name: bad}
    assert_bad_input(name, lambda: bbp_prediction(**kw))


@given(name=st.sampled_from(["method", "lambdas"]), data=st.data())
def test_ridge_readout_rejects_bad_options(name, data):
    bad = data.draw(st.sampled_from(["cv", None]) if name == "method" else st.sampled_from(
        [[-1.0], [0.0], [float("nan")], [], "1", None]))
    F, y = np.random.default_rng(0).standard_normal((6, 2)), np.arange(6.0)
    assert_bad_input(name, lambda: RidgeReadout(**{name: bad}).fit(F, y))


@given(name=st.sampled_from(["C", "max_iter", "tol"]), data=st.data())
def test_logistic_readout_rejects_bad_options(name, data):
    bad = data.draw({"C": bad_positive, "max_iter": bad_int(1), "tol": bad_nonnegative}[name])
    F = np.random.default_rng(0).standard_normal((6, 2))
    assert_bad_input(name, lambda: LogisticReadout(**{name: bad}).fit(F, Y_GOOD))
