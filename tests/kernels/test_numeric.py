"""dual_kernel_numeric: validation, robustness at the edges, quadrature accuracy, properties."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symscale as ss
from symscale.kernels.numeric import CORRELATION_SLACK
from symscale.testing import reference_dual_kernel

NAMES = ss.list_activations()
VARIANTS = [("leaky_relu", {"alpha": -0.4}), ("monomial", {"k": 3}),
            ("polynomial", {"coefficients": (1, 0, -0.5)}), ("shaped", {"base": "relu", "s": 2}),
            ("shaped", {"base": "silu", "s": 0.5}), ("shaped_relu", {"s_plus": 2, "s_minus": -1})]
ACTIVATIONS = [ss.activation(n) for n in NAMES] + [ss.activation(n, **p) for n, p in VARIANTS]
GROWING = {"exp"}  # kernels that legitimately exceed float64 at large variance


# -- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, match", [
    ((float("nan"), 0.0, 1.0), "q11 must be finite"),
    ((1.0, float("nan"), 1.0), "q12 must be finite"),
    ((1.0, 0.0, float("inf")), "q22 must be finite"),
    ((-1.0, 0.0, 1.0), r"q11 must be >= 0 \(a variance\), got -1.0"),
    ((1.0, 0.0, -0.5), "q22 must be >= 0"),
    ((1.0, 1.5, 1.0), "q12 must satisfy q12\\*\\*2 <= q11\\*q22.*got q12=1.5"),
    ((0.0, 1e-3, 1.0), "q12 must satisfy"),
])
def test_invalid_covariances(args, match):
    for name in ("relu", "tanh"):
        with pytest.raises(ValueError, match=match):
            ss.dual_kernel_numeric(name, *args)


def test_array_errors_name_the_index():
    q = np.ones(4)
    c = np.array([0.1, 0.2, 1.2, 0.3])
    with pytest.raises(ValueError, match="at index 2"):
        ss.dual_kernel_numeric("relu", q, c, q)


def test_round_off_beyond_the_cone_is_accepted_and_clipped():
    q = 2.0
    c = q * (1 + CORRELATION_SLACK / 10)
    assert ss.dual_kernel_numeric("relu", q, c, q) == pytest.approx(1.0, rel=1e-14)
    assert ss.dual_kernel_numeric("tanh", q, -c, q) == pytest.approx(
        -ss.dual_kernel_numeric("tanh", q, q, q), rel=1e-12)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"deg": 3}, ValueError, "deg must be >= 8"),
    ({"deg": 20.0}, TypeError, "deg must be an integer"),
    ({"deg": True}, TypeError, "deg must be an integer"),
    ({"method": "simpson"}, ValueError, "method must be 'polar' or 'hermite'"),
    ({"derivative": "no"}, TypeError, "derivative must be True or False"),
    ({"return_error": 1}, TypeError, "return_error must be True or False"),
])
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ss.dual_kernel_numeric("tanh", 1.0, 0.5, 1.0, **kwargs)


def test_unknown_activation():
    with pytest.raises(KeyError, match="available"):
        ss.dual_kernel_numeric("swish2", 1.0, 0.0, 1.0)


def test_overflow_is_reported_not_returned():
    with pytest.raises(OverflowError, match="mpmath"):
        ss.dual_kernel_numeric("exp", 1e6, 0.0, 1e6)
    import mpmath

    assert mpmath.isfinite(ss.dual_kernel("exp").numeric("mpmath")(1e6, 0.0, 1e6))


def test_shapes_and_scalars():
    out = ss.dual_kernel_numeric("tanh", np.ones((2, 3)), 0.5, 1.0)
    assert out.shape == (2, 3) and np.all(out == out[0, 0])
    assert isinstance(ss.dual_kernel_numeric("relu", 1.0, 0.5, 1.0), float)
    v, e = ss.dual_kernel_numeric("relu", np.ones(3), 0.5, 1.0, return_error=True)
    assert v.shape == e.shape == (3,) and np.all(e < 1e-14)


# -- edges -------------------------------------------------------------------------------------
EDGE_Q = [0.0, 1e-300, 1e-12, 1.0, 1e6, 1e12]


@pytest.mark.parametrize("act", ACTIVATIONS, ids=lambda a: a.label)
@pytest.mark.parametrize("derivative", [False, True])
def test_finite_at_the_edges(act, derivative):
    a, b = np.meshgrid(EDGE_Q, EDGE_Q)
    a, b = a.ravel(), b.ravel()
    s = np.sqrt(a * b)
    for c in (s, -s, 0 * s, 0.3 * s):
        try:
            v = ss.dual_kernel_numeric(act, a, c, b, derivative=derivative)
        except OverflowError:
            assert act.name in GROWING
            continue
        assert np.all(np.isfinite(v))


def test_limits_at_the_edges():
    # zero variance: relu gives 0, erf gives 0; rho = 1: relu gives sqrt(q11 q22)/2
    assert ss.dual_kernel_numeric("relu", 0.0, 0.0, 1.0) == 0.0
    assert ss.dual_kernel_numeric("erf", 0.0, 0.0, 5.0) == 0.0
    assert ss.dual_kernel_numeric("relu", 4.0, 6.0, 9.0) == pytest.approx(3.0, rel=1e-15)
    # saturating activations at huge variance tend to the sign kernel (2/pi) asin(rho)
    rho = np.array([-0.9, -0.2, 0.4, 0.95])
    for name in ("tanh", "erf", "sigmoid"):
        v = ss.dual_kernel_numeric(name, 1e12, rho * 1e12, 1e12)
        sign = 2 / np.pi * np.arcsin(rho)
        if name == "sigmoid":  # sigmoid = (1 + sign)/2 at scale infinity
            sign = (1 + 2 * (1 - np.arccos(rho) / np.pi) - 1 + 1) / 4 + 0 * rho
            sign = 0.25 + 0.25 * (2 / np.pi * np.arcsin(rho))
        np.testing.assert_allclose(v, sign, atol=1e-5)


# -- quadrature accuracy -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("q, rho", [(0.1, 0.5), (4.0, -0.7), (100.0, 0.99)])
def test_polar_quadrature_accuracy_and_error_estimate(q, rho):
    q1, q2 = q, 1.3 * q
    c = rho * math.sqrt(q1 * q2)
    ref = reference_dual_kernel("tanh", q1, c, q2)
    value, err = ss.dual_kernel_numeric("tanh", q1, c, q2, return_error=True)
    assert abs(value - ref) < 1e-10
    assert err >= abs(value - ref)  # the estimate is conservative


def test_hermite_method_agrees_at_small_variance_and_fails_at_large():
    a, c, b = 0.3, 0.1, 0.5
    polar = ss.dual_kernel_numeric("tanh", a, c, b)
    gh = ss.dual_kernel_numeric("tanh", a, c, b, method="hermite", deg=64)
    assert abs(polar - gh) < 1e-11
    # at variance 100, Gauss-Hermite is far off while the polar rule keeps its accuracy
    big_polar = ss.dual_kernel_numeric("tanh", 100.0, 99.0, 100.0)
    big_gh = ss.dual_kernel_numeric("tanh", 100.0, 99.0, 100.0, method="hermite")
    fine = ss.dual_kernel_numeric("tanh", 100.0, 99.0, 100.0, deg=120)
    assert abs(big_polar - fine) < 1e-10 < 1e-4 < abs(big_gh - fine)


def test_quadrature_is_exact_for_kinks_at_zero():
    """A user relu (no family detected because of the Piecewise form) integrates exactly."""
    try:
        act = ss.register_activation("pw_relu", "Piecewise((0, x < 0), (x**2/x, True))",
                                     overwrite=True)
        a, c, b = np.array([1.0, 2.0]), np.array([0.3, -1.0]), np.array([1.0, 0.7])
        got = ss.dual_kernel_numeric(act, a, c, b)
        np.testing.assert_allclose(got, ss.dual_kernel_numeric("relu", a, c, b), rtol=1e-12)
    finally:
        ss.unregister_activation("pw_relu")


# -- properties (hypothesis) ---------------------------------------------------------------------
scales = st.one_of(st.just(0.0), st.floats(-12, 12).map(lambda e: 10.0**e))
correlations = st.one_of(st.sampled_from([-1.0, 1.0, 0.0]), st.floats(-1.0, 1.0))
activations = st.sampled_from(ACTIVATIONS)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(act=activations, q1=scales, q2=scales, rho=correlations, derivative=st.booleans())
def test_property_finite_and_symmetric(act, q1, q2, rho, derivative):
    c = rho * math.sqrt(q1 * q2)
    try:
        v = ss.dual_kernel_numeric(act, q1, c, q2, derivative=derivative)
        w = ss.dual_kernel_numeric(act, q2, c, q1, derivative=derivative)
    except OverflowError:
        assert act.name in GROWING
        return
    assert math.isfinite(v) and math.isfinite(w)
    assert abs(v - w) <= 1e-12 * max(1.0, abs(v))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(act=activations, seed=st.integers(0, 2**32 - 1), log_scale=st.floats(-6, 6),
       n=st.integers(2, 6), derivative=st.booleans(), duplicate=st.booleans())
def test_property_kernel_matrix_is_psd(act, seed, log_scale, n, derivative, duplicate):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3)) * 10.0 ** (log_scale / 2)
    if duplicate:  # repeated and opposite inputs put pairs exactly at rho = +-1
        X[-1] = X[0] if seed % 2 else -X[0]
    Q = X @ X.T / 3
    d = np.diag(Q).copy()
    try:
        K = ss.dual_kernel_numeric(act, d[:, None], Q, d[None, :], derivative=derivative)
    except OverflowError:
        assert act.name in GROWING
        return
    np.testing.assert_allclose(K, K.T, rtol=1e-12, atol=1e-300)
    eig = np.linalg.eigvalsh((K + K.T) / 2)
    has_closed_form = (act.derivative() if derivative else act).family is not None
    tol = (1e-12 if has_closed_form else 1e-9) * n
    assert eig.min() >= -tol * max(abs(eig).max(), 1e-300)
