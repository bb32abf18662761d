"""Edge values of symscale.lofi (issue 12): bad input, extreme scales, degenerate data.

References: the same model on rescaled data (LoFi normalizes every layer by its RMS norm, so
X and 1e200 X must give the same features), closed forms (participation ratio of a multiple of
the identity, the BBP laws), and explicit refits.
"""

from __future__ import annotations

import numpy as np
import pytest

from symscale.lofi import (KernelRidgeReadout, LoFi, LoFiKernel, LogisticReadout, RidgeReadout,
                           kernel_filter, spectral_filter, variational_check)
from symscale.lofi import comparison as cmp
from symscale.lofi import emergence as em
from symscale.lofi import teacher as tt


def _task(n=40, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)


X, Y = _task()


# ---------------------------------------------------------------------------------------------
# item 2: constructors and functions reject bad input with a typed error naming the argument


@pytest.mark.parametrize("build, error, name", [
    (lambda: LoFi(layers=[(50.7, 5)]).fit(X, Y), TypeError, "layers"),
    (lambda: LoFi(layers=[(50, 5.0)]).fit(X, Y), TypeError, "layers"),
    (lambda: LoFi(layers=[(True, 1)]).fit(X, Y), TypeError, "layers"),
    (lambda: LoFi(layers=[("50", 5)]).fit(X, Y), TypeError, "layers"),
    (lambda: LoFi(layers=[(50, 0)]).fit(X, Y), ValueError, "layers"),
    (lambda: LoFi(layers=[(5, 50)]).fit(X, Y), ValueError, "layers"),
    (lambda: LoFi(layers=[(50, 5, 1)]).fit(X, Y), ValueError, "layers"),
    (lambda: LoFi(layers=[]).fit(X, Y), ValueError, "layers"),
    (lambda: LoFi(layers=5).fit(X, Y), TypeError, "layers"),
    (lambda: LoFi([(50, 5)], seed=-1).fit(X, Y), ValueError, "seed"),
    (lambda: LoFi([(50, 5)], seed=1.5).fit(X, Y), TypeError, "seed"),
    (lambda: LoFi([(50, 5)], seed=True).fit(X, Y), TypeError, "seed"),
    (lambda: LoFi([(50, 5)], first_moment="no").fit(X, Y), TypeError, "first_moment"),
    (lambda: LoFi([(50, 5)], eig=None).fit(X, Y), ValueError, "eig"),
    (lambda: LoFiKernel([3], clip=-1).fit(X, Y), ValueError, "clip"),
    (lambda: LoFiKernel([3], clip=0.0).fit(X, Y), ValueError, "clip"),
    (lambda: LoFiKernel([3], clip=2.0).fit(X, Y), ValueError, "clip"),
    (lambda: LoFiKernel([3], clip=np.nan).fit(X, Y), ValueError, "clip"),
    (lambda: LoFiKernel([3], clip="1e-6").fit(X, Y), TypeError, "clip"),
    (lambda: LoFiKernel([3], ridge=np.inf).fit(X, Y), ValueError, "ridge"),
    (lambda: LoFiKernel([3], ridge=True).fit(X, Y), TypeError, "ridge"),
    (lambda: LoFiKernel([3], ridge="cv").fit(X, Y), ValueError, "ridge"),
    (lambda: LoFiKernel([2.0]).fit(X, Y), TypeError, "ks"),
    (lambda: LoFiKernel([True]).fit(X, Y), TypeError, "ks"),
    (lambda: LoFiKernel([]).fit(X, Y), ValueError, "ks"),
    (lambda: LoFiKernel([2], lambdas=[-1.0]).fit(X, Y), ValueError, "lambdas"),
    (lambda: LoFiKernel([2], lambdas=["a"]).fit(X, Y), TypeError, "lambdas"),
    (lambda: LoFiKernel([2], final_lift=1).fit(X, Y), TypeError, "final_lift"),
    (lambda: RidgeReadout(per_output="yes"), TypeError, "per_output"),
    (lambda: RidgeReadout(method=None), ValueError, "method"),
    (lambda: LogisticReadout(C=True), TypeError, r"C"),
    (lambda: LogisticReadout(C=0.0), ValueError, r"C"),
    (lambda: LogisticReadout(max_iter=2.5), TypeError, "max_iter"),
    (lambda: LogisticReadout(tol=-1.0), ValueError, "tol"),
    (lambda: tt.HierarchicalTeacher(30.5, n_mc=100), TypeError, "d"),
    (lambda: tt.HierarchicalTeacher(30, n_mc=1), ValueError, "n_mc"),
    (lambda: tt.HierarchicalTeacher(30, n_mc=2.5), TypeError, "n_mc"),
    (lambda: tt.HierarchicalTeacher(30, noise="a", n_mc=100), TypeError, "noise"),
    (lambda: tt.HierarchicalTeacher(30, seed=-2, n_mc=100), ValueError, "seed"),
    (lambda: tt.HierarchicalTeacher(30, features=["linear", ("square", True)], n_mc=100),
     ValueError, "features"),
    (lambda: tt.HierarchicalTeacher(30, label=lambda S: S[:, 0] * np.nan, n_mc=100),
     ValueError, "label"),
])
def test_bad_parameters(build, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        build()


TEACHER = tt.HierarchicalTeacher(30, seed=0, n_mc=2 ** 12)
Z = np.random.default_rng(1).standard_normal((30, 40))
YZ = np.where(np.arange(30) % 2 == 0, 1.0, -1.0)


@pytest.mark.parametrize("call, error, name", [
    (lambda: spectral_filter(Z, YZ[:-1], 3), ValueError, "y"),
    (lambda: spectral_filter(Z, YZ, 3.0), TypeError, "k"),
    (lambda: spectral_filter(Z, YZ, True), TypeError, "k"),
    (lambda: spectral_filter(Z, YZ, 41), ValueError, "k"),
    (lambda: spectral_filter(np.full((3, 4), np.nan), [1, -1, 1], 1), ValueError, "Z"),
    (lambda: spectral_filter(Z, YZ, 3, seed=-1), ValueError, "seed"),
    (lambda: spectral_filter(Z, YZ, 3, first_moment=None), TypeError, "first_moment"),
    (lambda: kernel_filter(Z @ Z.T, YZ, 3, clip=-1), ValueError, "clip"),
    (lambda: kernel_filter(1e-10 * Z @ Z.T, YZ, 3, clip=1e-320), ValueError, "clip"),
    (lambda: kernel_filter(Z @ Z.T, YZ, 31), ValueError, "k"),
    (lambda: kernel_filter(Z, YZ, 3), ValueError, "G"),
    (lambda: variational_check(Z, YZ, Z[:3].T, n_random=0), ValueError, "n_random"),
    (lambda: variational_check(Z, YZ, Z[:3].T, n_iter=1.5), TypeError, "n_iter"),
    (lambda: variational_check(Z, YZ, Z[:3].T, rtol=-1.0), ValueError, "rtol"),
    (lambda: variational_check(Z, YZ, np.zeros((40, 2))), ValueError, "V"),
    (lambda: variational_check(Z, YZ, Z[:3].T, kind="dense"), ValueError, "kind"),
    (lambda: RidgeReadout().fit([["a"]], [1.0]), TypeError, "F"),
    (lambda: RidgeReadout().fit(np.ones((3, 2)) * 1e200, [1.0, 2.0, 3.0]), OverflowError, "F"),
    (lambda: RidgeReadout().fit(np.eye(3), [1e300, 2.0, 3.0]), OverflowError, "y"),
    (lambda: KernelRidgeReadout().fit(np.eye(3), [1e300, 2.0, 3.0]), OverflowError, "y"),
    (lambda: em.spike_threshold("a", 10), TypeError, "D_eff"),
    (lambda: em.spike_threshold(True, 10), TypeError, "D_eff"),
    (lambda: em.spike_threshold(1, "a"), TypeError, "n"),
    (lambda: em.additive_spike_model(5.5, 100, 0.3), TypeError, "D"),
    (lambda: em.additive_spike_model(5, 100.5, 0.3), TypeError, "n"),
    (lambda: em.spectral_outliers(np.zeros((10, 3)), YZ[:10]), ValueError, "Z"),
    (lambda: em.spectral_outliers(Z, YZ, D_eff=0.0), ValueError, "D_eff"),
    (lambda: em.spectral_outliers(Z * 1e200, YZ), OverflowError, "Z"),
    (lambda: em.signed_covariance(Z * 1e200, YZ), OverflowError, "Z"),
    (lambda: TEACHER.sample(5.5), TypeError, "n"),
    (lambda: TEACHER.sample(5, seed=-1), ValueError, "seed"),
    (lambda: TEACHER.strength(True), TypeError, "feature"),
    (lambda: TEACHER.features_of(np.full((2, 30), np.nan)), ValueError, "X"),
    (lambda: tt.predicted_emergence("teacher", 1), TypeError, "teacher"),
    (lambda: tt.predicted_emergence(TEACHER, 1, d_eff="a"), TypeError, "d_eff"),
    (lambda: tt.predicted_emergence(TEACHER, 1, margin=np.nan), ValueError, "margin"),
    (lambda: tt.emergence_sweep(TEACHER, [50.5, 100.7], [0]), ValueError, "ns"),
    (lambda: tt.emergence_sweep(TEACHER, [50, 100], [-1]), ValueError, "seeds"),
    (lambda: cmp.random_feature_model(X, Y, X, 10.5), TypeError, "width"),
    (lambda: cmp.random_feature_model(np.zeros((40, 5)), Y, X, 10), ValueError, "X_train"),
    (lambda: cmp.random_feature_model(X, Y, X[:, :3], 10), ValueError, "X_test"),
    (lambda: cmp.nngp_ridge(np.zeros((40, 5)), Y, X), ValueError, "X_train"),
    (lambda: cmp.nngp_ridge(X, Y, X, depth=1.5), TypeError, "depth"),
    (lambda: cmp.early_stopped_mlp(X, Y, X, width=8, max_steps=1, val_fraction=1.0),
     ValueError, "val_fraction"),
    (lambda: cmp.early_stopped_mlp(X[:2], Y[:2], X, width=8, max_steps=1, val_fraction=0.9),
     ValueError, "val_fraction"),
    (lambda: cmp.compare(lambda n, m, seed: (X[:n], Y[:n], X[:m], Y[:m]), [20], [0],
                         methods=("lofii",)), ValueError, "methods"),
    (lambda: cmp.compare(lambda n, m, seed: (X[:n], Y[:n], X[:m], Y[:m]), [20.5], [0],
                         methods=("rf_same",)), TypeError, "sizes"),
    (lambda: cmp.compare(lambda n, m, seed: (X[:n], Y[:n], X[:m], Y[:m]), [20], [0],
                         methods=("mlp",), mlp_width=0), ValueError, "mlp_width"),
    (lambda: cmp.compare(lambda n, m, seed: (X[:n], Y[:n], X[:m], Y[:m]), [20], [0],
                         methods=("mlp",), mlp_width=8.5), TypeError, "mlp_width"),
    (lambda: cmp.first_layer_filters(LoFi([(20, 2)]), 3), Exception, "fit"),
    (lambda: cmp.first_layer_filters(LoFiKernel([2]), 3), TypeError, "model"),
])
def test_bad_input(call, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        call()


def test_numpy_integers_are_accepted():
    a = LoFi(layers=[(np.int64(60), np.int32(3))], seed=np.int64(2)).fit(X, Y)
    b = LoFi(layers=[(60, 3)], seed=2).fit(X, Y)
    assert a.layers_ == [(60, 3)]
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert LoFiKernel(ks=[np.int64(3)]).fit(X, Y).ks_ == [3]


# ---------------------------------------------------------------------------------------------
# item 3: no silent NaN/inf at extreme scales or on degenerate data


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_lofi_is_scale_free(scale):
    """Every layer is normalized by the RMS norm: X and scale * X give the same model.

    The old code formed mean |x|^2 (overflow at 1e200: inf, all-zero lifts; underflow at
    1e-200: ValueError "all-zero representation").
    """
    for make in (lambda: LoFi([(100, 5), (50, 3)], first_moment=True, seed=3),
                 lambda: LoFiKernel([4, 2], first_moment=True),
                 lambda: LoFiKernel([3], final_lift=True)):
        ref = make().fit(X, Y).decision_function(X)
        got = make().fit(X * scale, Y).decision_function(X * scale)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())


def test_degenerate_data_gives_finite_values():
    """Constant column, zero-norm rows and duplicated rows: finite scores, equal for copies."""
    Xc = X.copy()
    Xc[:, 2] = 3.0
    Xc[3] = 0.0
    Xc[7] = Xc[4]
    for model in (LoFi([(100, 5)], first_moment=True), LoFiKernel([3, 2], first_moment=True),
                  LoFiKernel([3], final_lift=True)):
        s = model.fit(Xc, Y).decision_function(Xc)
        assert np.all(np.isfinite(s))
        assert s[7] == pytest.approx(s[4], rel=1e-10, abs=1e-12)
        features = model.transform(Xc)
        assert all(np.all(np.isfinite(h)) for h in features)


def test_test_inputs_far_beyond_the_training_scale():
    """ReLU is positively homogeneous: 1e300 X scores 1e300 times X (finite, correct); at the
    edge of float64 the lift overflows and the error names X."""
    model = LoFi([(50, 3)]).fit(X, Y)
    s, big = model.decision_function(X), model.decision_function(X * 1e300)
    b = model.readout_.intercept_
    np.testing.assert_allclose((big - b) / 1e300, s - b, rtol=1e-10, atol=1e-12)
    with pytest.raises(OverflowError, match="X"):
        model.decision_function(X / np.abs(X).max() * 1e308)


def test_degenerate_filters():
    """All-zero features: the variational check passes with objective 0 (no 0/0 in the power
    iteration); the first-moment column is the zero vector."""
    zero = np.zeros((30, 40))
    V = np.eye(40)[:, :2]
    res = variational_check(zero, YZ, V, n_random=10, n_optimized=3, n_iter=5)
    assert res.passed and np.all(res.kept == 0) and np.all(res.best_optimized == 0)
    sf = spectral_filter(zero, YZ, 2, first_moment=True)
    assert np.all(sf.features == 0) and np.all(sf.components[:, -1] == 0)


def test_effective_dimension_at_extreme_scales():
    """Closed form: the participation ratio and the rank of c I_m are m for every c > 0."""
    for c in (1e-200, 1.0, 1e200, 1e307):
        for kind in ("participation", "regularized", "rank", "stable"):
            expected = 2.5 if kind == "regularized" else 5.0  # lam = Tr K / m = c: s/(s+c) = 1/2
            assert em.effective_dimension(c * np.eye(5), kind) == pytest.approx(expected,
                                                                                rel=1e-12)


def test_bbp_at_extreme_strengths():
    """lambda_top = rho + tau^2/rho, overlap^2 = 1 - tau^2/rho^2 (old: rho^2 over/underflow)."""
    r = em.bbp_prediction(1e-200, 0, 10)  # tau = 0: any rho != 0 separates
    assert r.separates and r.lambda_top == 1e-200 and r.overlap2 == 1.0
    r = em.bbp_prediction(1e200, 4, 100)
    assert r.separates and r.lambda_top == pytest.approx(1e200, rel=1e-15)
    assert r.overlap2 == 1.0
    r = em.bbp_prediction(-1e-170, 1e-300, 4)  # tau = 5e-151 > |rho|: in the bulk
    assert not r.separates and r.lambda_top == pytest.approx(-1e-150, rel=1e-14)
    assert r.overlap2 == 0.0


def test_first_layer_filters_finite():
    model = LoFi([(60, 3)], first_moment=True, seed=1).fit(X, Y)
    F = cmp.first_layer_filters(model, 4)
    assert F.shape == (4, X.shape[1]) and np.all(np.isfinite(F))
    np.testing.assert_allclose(np.abs(F).max(axis=1), 1.0)


def test_transform_far_beyond_the_training_scale_raises():
    model = LoFi([(50, 3)]).fit(X, Y)
    with pytest.raises(OverflowError, match="X"):
        model.transform(X / np.abs(X).max() * 1e308)
