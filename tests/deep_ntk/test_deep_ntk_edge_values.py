"""Edge values of symscale.deep_ntk (issue 12): duplicates, extreme depths and scales, bad input.

References are independent of the package: an mpmath iteration of the ReLU angle recursion with
the closed-form arc-cosine kernels, the erf dual kernels in closed form in mpmath, and closed
forms (identical inputs have normalized NTK 1 at every depth; the t -> inf gradient-flow limit).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from symscale.deep_ntk import (NTKMLP, correction_fit, model_ntk, normalized_ntk,
                               phase_limit, train_gd)
from symscale import datasets
from symscale.deep_ntk import spectra

EPS = np.finfo(float).eps


# ---------------------------------------------------------------------------------------------
# references


def _mp_relu_ntk(x, y, depths, dps=40):
    """Normalized ReLU NTK of two float vectors, by mpmath iteration at ``dps`` digits.

    The angle is taken from the exact float entries (2 atan2(|x - y|, |x + y|) after normalizing
    in mpmath), then kappa_1(cos t) = (sin t + (pi - t) cos t)/pi, kappa_0 = (pi - t)/pi and
    Theta <- Theta kappa_0 + kappa_1: the closed-form arc-cosine kernels, not the package's.
    """
    out = {}
    with mpmath.workdps(dps):
        x = [mpmath.mpf(float(v)) for v in x]
        y = [mpmath.mpf(float(v)) for v in y]
        nx = mpmath.sqrt(mpmath.fsum(v * v for v in x))
        ny = mpmath.sqrt(mpmath.fsum(v * v for v in y))
        x, y = [v / nx for v in x], [v / ny for v in y]
        d = mpmath.sqrt(mpmath.fsum((a - b) ** 2 for a, b in zip(x, y)))
        s = mpmath.sqrt(mpmath.fsum((a + b) ** 2 for a, b in zip(x, y)))
        t = 2 * mpmath.atan2(d, s)
        ntk = mpmath.cos(t)
        for h in range(1, max(depths) + 1):
            rho = (mpmath.sin(t) + (mpmath.pi - t) * mpmath.cos(t)) / mpmath.pi
            ntk = ntk * (mpmath.pi - t) / mpmath.pi + rho
            t = 2 * mpmath.asin(mpmath.sqrt((1 - rho) / 2))  # no cancellation near rho = 1
            if h in depths:
                out[h] = ntk / (h + 1)
    return out


def _mp_erf_ntk(rho0, depth, dps=30):
    """Normalized erf NTK on the sphere, (q, rho) recursion with the closed-form erf kernels.

    V = (2/pi) asin(2 q12 / sqrt((1 + 2 q11)(1 + 2 q22))),
    V' = (4/pi) / sqrt((1 + 2 q11)(1 + 2 q22) - 4 q12^2); weight variance 1/V(1, 1, 1).
    """
    with mpmath.workdps(dps):
        def V(q11, q12, q22):
            return 2 / mpmath.pi * mpmath.asin(2 * q12 / mpmath.sqrt((1 + 2 * q11) * (1 + 2 * q22)))

        def Vd(q11, q12, q22):
            return 4 / mpmath.pi / mpmath.sqrt((1 + 2 * q11) * (1 + 2 * q22) - 4 * q12 ** 2)

        w = 1 / V(1, 1, 1)
        q, s = mpmath.mpf(1), mpmath.mpf(rho0)
        t11, t12 = mpmath.mpf(1), mpmath.mpf(rho0)
        for _ in range(depth):
            q_new, s_new = w * V(q, q, q), w * V(q, s, q)
            t11 = t11 * w * Vd(q, q, q) + q_new
            t12 = t12 * w * Vd(q, s, q) + s_new
            q, s = q_new, s_new
        return t12 / t11


def _unit_rows(n, d, seed):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------------
# item 1: identical inputs give identical rows and columns; rho = 1 exactly


@pytest.mark.parametrize("depth", [1, 100, 10_000, 100_000])
def test_duplicate_rows_are_bit_identical_relu(depth):
    X = _unit_rows(5, 4, seed=3)
    X[1] *= 1.0 - 5e-9  # within the 1e-8 unit-norm tolerance: X @ X.T puts 1 - 1e-8 on the pair
    X[2, 0] = 0.0
    X[2] /= np.linalg.norm(X[2])
    Xd = np.vstack([X, X[1], X[2], X[0]])  # copies of rows 1, 2, 0
    Xd[6, 0] = -0.0  # -0.0 and 0.0 are the same input
    for normalized in (True, False):
        K = spectra.ntk_matrix(Xd, depth, normalized=normalized)
        one = 1.0 if normalized else float(depth + 1)
        for i, j in ((1, 5), (2, 6), (0, 7)):
            assert np.array_equal(K[i], K[j]) and np.array_equal(K[:, i], K[:, j])
            assert K[i, j] == one and K[i, i] == one  # theta = 0: exact at every depth
        assert np.array_equal(K, K.T)
        assert np.all(np.isfinite(K))


@pytest.mark.parametrize("depth", [1, 100])
def test_duplicate_rows_are_bit_identical_leaky_relu(depth):
    X = _unit_rows(4, 3, seed=4)
    Xd = np.vstack([X, X[2]])
    K = spectra.ntk_matrix(Xd, depth, "leaky_relu")
    assert np.array_equal(K[2], K[4]) and np.array_equal(K[:, 2], K[:, 4])
    assert K[2, 4] == 1.0


def test_identical_and_close_pairs_against_mpmath():
    """Close pairs: the angle from |x - x'| (not 1 - x.x') matches a 40-digit reference.

    The old cosine path was off by 1.6e-8 (angle 1e-9, depth 100) and 7e-8 (1e-6, depth 1e4).
    """
    depths = [1, 100, 3000]
    for angle in (1e-9, 1e-6, 1e-3, 0.5, 3.1):
        X = np.array([[1.0, 0.0, 0.0], [math.cos(angle), math.sin(angle), 0.0], [0.0, 0.0, 1.0]])
        ref = _mp_relu_ntk(X[0], X[1], depths)
        for L in depths:
            got = spectra.ntk_matrix(X, L)[0, 1]
            exact = float(ref[L])
            tol = 8 * L * EPS * abs(exact) + 4 * EPS  # the documented rounding bound
            assert abs(got - exact) <= tol, (angle, L, got, exact)


def test_depth_1e5_against_mpmath_and_duplicate_fixed_point():
    """Depth 1e5: a pair at angle 1e-4 against mpmath; the same input twice stays at 1."""
    X = np.array([[1.0, 0.0], [math.cos(1e-4), math.sin(1e-4)], [1.0, 0.0]])
    ref = float(_mp_relu_ntk(X[0], X[1], [100_000], dps=30)[100_000])
    K = spectra.ntk_matrix(X, 100_000)
    assert abs(K[0, 1] - ref) <= 8 * 100_000 * EPS * ref + 4 * EPS
    assert K[0, 2] == 1.0 and np.array_equal(K[0], K[2])


def test_normalized_ntk_rho_boundaries():
    r = normalized_ntk(np.array([0.0, -0.0, 1.0, -1.0]), 100_000)
    assert r[0] == r[1]  # +0.0 and -0.0 give the same result
    assert r[2] == 1.0  # rho = 1 is the fixed point: exactly 1
    assert np.all(np.isfinite(r))
    for rho0 in (-1.0, 1.0, -0.0):
        for L in (1, 100):
            assert float(normalized_ntk(rho0, L)) == pytest.approx(
                float(normalized_ntk(rho0, L, dps=30)), rel=1e-13, abs=1e-15)


def test_tiny_and_huge_rows_with_normalize():
    X = _unit_rows(4, 3, seed=5)
    ref = spectra.ntk_matrix(X, 50)
    for scale in (1e-300, 1e-160, 1e160, 1e300):
        got = spectra.ntk_matrix(X * scale, 50, normalize=True)
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# item 3: no NaN/inf from the (q, rho) recursion, gradient flow or the finite network


def test_general_recursion_against_mpmath_and_past_overflow():
    """erf (chaotic): Theta_11 ~ 1.2257^L overflows near depth 3500 (old code: inf/inf = NaN)."""
    for L in (10, 50):
        got = float(normalized_ntk(0.5, L, activation="erf"))
        assert got == pytest.approx(float(_mp_erf_ntk(0.5, L)), rel=1e-10)
    # identical inputs: exactly 1 (and -1 for antipodal inputs of an odd activation)
    assert float(normalized_ntk(1.0, 5000, activation="erf")) == 1.0
    assert float(normalized_ntk(-1.0, 5000, activation="erf")) == -1.0
    deep = float(normalized_ntk(0.5, 5000, activation="erf"))  # reference ~ 0.745^5000: underflows
    assert math.isfinite(deep) and 0.0 <= deep < 1e-300


def test_relu_with_bias_uses_the_q_rho_recursion():
    """bias_var > 0 used to be ignored for ReLU (the bias-free angle recursion ran)."""
    with mpmath.workdps(30):
        b, w = mpmath.mpf("0.1"), mpmath.mpf(2)

        def k1(q, s):  # E[relu(u) relu(v)], closed form
            t = mpmath.acos(s / q)
            return q * (mpmath.sin(t) + (mpmath.pi - t) * mpmath.cos(t)) / (2 * mpmath.pi)

        def k0(q, s):
            return (mpmath.pi - mpmath.acos(s / q)) / (2 * mpmath.pi)

        q, s, t11, t12 = mpmath.mpf(1), mpmath.mpf("0.5"), mpmath.mpf(1), mpmath.mpf("0.5")
        for _ in range(20):
            q_new, s_new = w * k1(q, q) + b, w * k1(q, s) + b
            t11, t12 = t11 * w * k0(q, q) + q_new, t12 * w * k0(q, s) + s_new
            q, s = q_new, s_new
        ref = float(t12 / t11)
    got = float(normalized_ntk(0.5, 20, weight_var=2.0, bias_var=0.1))
    # 1e-8: the registry's closed-form kernel at q11 = q12 = q22 = q can see a correlation
    # 1 - eps (sqrt(q q) != q), i.e. a 1.5e-8 angle, so V'(q, q, q) is 0.5 - 2e-9 for some q
    assert got == pytest.approx(ref, rel=1e-8)
    assert abs(got - float(normalized_ntk(0.5, 20))) > 1e-2


@pytest.mark.parametrize("kwargs, error, name", [
    ({"weight_var": 1e300}, OverflowError, "weight_var"),
    ({"weight_var": 1e-300}, FloatingPointError, "weight_var"),
])
def test_general_recursion_out_of_range_raises(kwargs, error, name):
    with pytest.raises(error, match=name):
        normalized_ntk(0.5, 10, activation="tanh", **kwargs)


def test_gradient_flow_with_overflowing_lr_times_t():
    """eta t = 1e600 is the t -> inf limit; the old code returned NaN (inf * 0)."""
    K = np.ones((3, 3))  # eigenvalue 3 along 1/sqrt(3), a 2-d null space
    Y = np.array([1.0, 2.0, 3.0])
    gf = spectra.gradient_flow_predictor(K, [[1.0, 1.0, 1.0]], Y, [0.0, 1e300], lr=1e300)
    # t -> inf: only the mean is learnt; f(x) = Kx u (1/3) u.Y = 2 for Kx = 1^T
    np.testing.assert_allclose(gf.residual[1], [-1.0, 0.0, 1.0], atol=1e-14)
    np.testing.assert_allclose(gf.f_train[1], [2.0, 2.0, 2.0], atol=1e-14)
    np.testing.assert_allclose(gf.f_test[:, 0], [0.0, 2.0], atol=1e-14)
    K2 = spectra.ntk_matrix(np.eye(3), 5)
    gf = spectra.gradient_flow_predictor(K2, K2[:1], Y, 1e300, lr=1e300)
    np.testing.assert_allclose(gf.f_train, Y, rtol=1e-14)
    np.testing.assert_allclose(gf.f_test, [1.0], rtol=1e-14)


def test_gradient_flow_overflowing_scale_raises():
    K = np.eye(2) * 1e-10  # f_test = Kx Y / lambda at t -> inf: 1e300 * 1e300 / 1e-10
    with pytest.raises(OverflowError, match="rescale"):
        spectra.gradient_flow_predictor(K, [[1e300, 0.0]], [1e300, 1.0], 1e20)


def test_network_overflow_and_nan_weights_are_typed_errors():
    model = NTKMLP.init(2, d_in=3, width=8, seed=0)
    with pytest.raises(OverflowError, match="X"):
        model_ntk(model, 1e200 * np.eye(3))
    with pytest.raises(ValueError, match="weights"):
        NTKMLP([np.full((2, 3), np.nan)], np.ones(2))
    with pytest.raises(ValueError, match="readout"):
        NTKMLP([np.ones((2, 3))], np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match="weights"):
        NTKMLP([np.zeros((0, 3))], np.ones(0))
    with pytest.raises(FloatingPointError, match="lr"):
        train_gd(model, np.eye(3), np.ones(3), lr=1e308, steps=3)


# ---------------------------------------------------------------------------------------------
# item 2: bad input is a typed error naming the argument


@pytest.mark.parametrize("call, error, name", [
    (lambda: normalized_ntk(0.5, True), TypeError, "depth"),
    (lambda: normalized_ntk(0.5, 2.0), TypeError, "depth"),
    (lambda: normalized_ntk(0.5, "3"), TypeError, "depth"),
    (lambda: normalized_ntk("a", 3), TypeError, "rho0"),
    (lambda: normalized_ntk(True, 3), TypeError, "rho0"),
    (lambda: normalized_ntk(0.5, 3, dps=True), TypeError, "dps"),
    (lambda: normalized_ntk(0.5, 3, dps=10.0), TypeError, "dps"),
    (lambda: normalized_ntk(0.5, 3, activation="tanh", weight_var=-1.0), ValueError, "weight_var"),
    (lambda: normalized_ntk(0.5, 3, activation="tanh", weight_var=True), TypeError, "weight_var"),
    (lambda: normalized_ntk(0.5, 3, bias_var=-0.1), ValueError, "bias_var"),
    (lambda: normalized_ntk(0.5, 3, bias_var=np.nan), ValueError, "bias_var"),
    (lambda: normalized_ntk(0.5, 3, activation="tanh", return_error=True), ValueError, "return_error"),
    (lambda: normalized_ntk(0.5, 3, return_error=1), TypeError, "return_error"),
    (lambda: correction_fit(0.5, [100]), ValueError, "depths"),
    (lambda: correction_fit(0.5, [100, 200.5]), TypeError, "depths"),
    (lambda: correction_fit(0.5, 100), TypeError, "depths"),
    (lambda: phase_limit("relu", weight_var=3.0), ValueError, "weight_var"),
    (lambda: phase_limit("relu", weight_var=1.0), ValueError, "weight_var"),
    (lambda: phase_limit("tanh", tol=0.0), ValueError, "tol"),
    (lambda: phase_limit("tanh", rho0=2.0), ValueError, "rho0"),
    (lambda: spectra.ntk_matrix(np.eye(2), np.int64(0)), ValueError, "depth"),
    (lambda: spectra.ntk_matrix(np.eye(2), 3, normalized="yes"), TypeError, "normalized"),
    (lambda: spectra.ntk_matrix(np.eye(2), 3, normalize=1), TypeError, "normalize"),
    (lambda: spectra.ntk_matrix([["a", "b"]], 3), TypeError, "X"),
    (lambda: spectra.ntk_matrix(np.zeros((2, 2)), 3, normalize=True), ValueError, "X"),
    (lambda: spectra.limit_matrix(2.5), TypeError, "n"),
    (lambda: spectra.spectrum_vs_depth(np.eye(2), [1.5]), ValueError, "depths"),
    (lambda: spectra.gradient_flow_predictor(np.eye(2), None, [1, 2], 1.0, lr=True),
     TypeError, "lr"),
    (lambda: spectra.gradient_flow_predictor(np.eye(2), None, [1, 2], 1.0, lr=np.inf),
     ValueError, "lr"),
    (lambda: spectra.gradient_flow_predictor(np.eye(2), None, [1, 2], "1"), TypeError, "t"),
    (lambda: spectra.gradient_flow_predictor(np.eye(2), None, [1, 2], -1.0), ValueError, "t"),
    (lambda: NTKMLP.init(2, d_in=3, width=8.0), TypeError, "width"),
    (lambda: NTKMLP.init(2, d_in=3, width=50.7), TypeError, "width"),
    (lambda: NTKMLP.init(2, d_in=True, width=8), TypeError, "d_in"),
    (lambda: NTKMLP.init(2, d_in=3, width=8, seed=-1), ValueError, "seed"),
    (lambda: NTKMLP.init(2, d_in=3, width=8, seed=1.5), TypeError, "seed"),
    (lambda: NTKMLP.init(2, d_in=3, width=8, weight_std=True), TypeError, "weight_std"),
    (lambda: NTKMLP.init(2, d_in=3, width=8, weight_std="a"), TypeError, "weight_std"),
    (lambda: NTKMLP.init(2, d_in=3, width=8, weight_std=0.0), ValueError, "weight_std"),
    (lambda: train_gd("model", np.eye(3), np.ones(3), lr=0.1, steps=1), TypeError, "model"),
    (lambda: train_gd(NTKMLP.init(1, d_in=3, width=8), np.eye(3), np.ones(3), lr=True, steps=1),
     TypeError, "lr"),
    (lambda: train_gd(NTKMLP.init(1, d_in=3, width=8), np.eye(3), np.ones(3), lr=0.1, steps=True),
     TypeError, "steps"),
    (lambda: model_ntk(NTKMLP.init(1, d_in=3, width=8), [["a"] * 3]), TypeError, "X"),
    (lambda: datasets.sphere_points(5, 3, min_angle="a"), TypeError, "min_angle"),
    (lambda: datasets.sphere_points(5, 3, min_angle=True), TypeError, "min_angle"),
    (lambda: datasets.sphere_points(5, 3, max_correlation=np.nan), ValueError,
     "max_correlation"),
    (lambda: datasets.sphere_points(5.0, 3), TypeError, "n"),
    (lambda: datasets.sphere_points(5, 3, seed=-1), ValueError, "seed"),
    (lambda: datasets.sphere_points(5, 3, max_iter=0), ValueError, "max_iter"),
    (lambda: datasets.sphere_regression(5, 3, 3, noise=True), TypeError, "noise"),
    (lambda: datasets.sphere_regression(5, 3, 3, target=None), TypeError, "target"),
    (lambda: datasets.onehot_sequences(5, 3, vocab=2.5), TypeError, "vocab"),
    (lambda: datasets.onehot_sequences(5, 3, seed="a"), TypeError, "seed"),
])
def test_bad_input_is_a_typed_error_naming_the_argument(call, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        call()


def test_numpy_integers_are_accepted():
    X = np.eye(3)
    np.testing.assert_array_equal(spectra.ntk_matrix(X, np.int64(3)), spectra.ntk_matrix(X, 3))
    assert float(normalized_ntk(0.5, np.int32(7), dps=np.int64(20))) == pytest.approx(
        float(normalized_ntk(0.5, 7)), rel=1e-14)
    m1, m2 = NTKMLP.init(np.int64(2), d_in=np.int64(3), width=np.int64(8), seed=np.int64(4)), \
        NTKMLP.init(2, d_in=3, width=8, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(m1.params, m2.params))
