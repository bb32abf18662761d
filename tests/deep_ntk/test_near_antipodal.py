"""Regression: the float64 ReLU-type NTK near rho0 = -1 (nearly opposite inputs).

sin(theta/2) = sqrt((1 - rho)/2) rounds to 1 there and kept no digit of pi - theta:
normalized_ntk(-1 + 2^-53, 1) returned 0.0 with an error bound of 9e-16, while the value is
-2.3716e-9. The references below are independent of symscale: the arc-cosine kernels of
Cho & Saul evaluated on the angle in mpmath, and the evenness of the |x| NTK in rho0."""

import math
import warnings

import mpmath
import numpy as np
import pytest

from symscale.deep_ntk import PrecisionWarning, normalized_ntk, ntk_matrix

EPS = np.finfo(float).eps


def _relu_ntk_mp(theta, depth):
    """Normalized ReLU NTK from the angle: kappa_1 = (sin t + (pi - t) cos t)/pi,
    kappa_0 = (pi - t)/pi, Theta^h = Theta^(h-1) kappa_0 + kappa_1, divided by L + 1."""
    with mpmath.workdps(50):
        t = mpmath.mpf(theta)
        ntk = mpmath.cos(t)
        for _ in range(depth):
            rho = (mpmath.sin(t) + (mpmath.pi - t) * mpmath.cos(t)) / mpmath.pi
            ntk = ntk * (mpmath.pi - t) / mpmath.pi + rho
            t = mpmath.acos(rho)
        return float(ntk / (depth + 1))


def _quiet(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionWarning)
        return normalized_ntk(*args, **kw)


NEAR_MINUS_ONE = [-1.0 + k * 2.0 ** -53 for k in (1, 2, 3, 10, 1000)] + [-1 + 1e-12, -1 + 1e-8,
                                                                        -0.9999, -0.7]


@pytest.mark.parametrize("depth", [1, 2, 10, 150])
def test_relu_ntk_near_minus_one_is_within_its_bound_of_mpmath(depth):
    for r in NEAR_MINUS_ONE:
        with mpmath.workdps(50):
            theta = mpmath.acos(mpmath.mpf(r))  # r is exact: the angle of the float input
        exact = _relu_ntk_mp(theta, depth)
        value, err = _quiet(r, depth, return_error=True)
        assert abs(value - exact) <= err + 4 * EPS, (r, depth, value, exact, err)
        vec = _quiet(np.array([r, 0.5]), depth)[0]  # the same value inside an array
        assert abs(vec - exact) <= err + 4 * EPS


def test_reported_case_and_exact_minus_one():
    value, err = _quiet(-0.9999999999999999, 1, return_error=True)
    # was (0.0, 8.9e-16); 1 + rho0 = 2^-53 gives pi - theta = 2^-26.5
    assert value == pytest.approx(-2.3715934618099826e-09, rel=1e-12)
    assert err < 1e-15
    for depth in (1, 2, 100):
        assert float(normalized_ntk(-1.0, depth)) == pytest.approx(
            _relu_ntk_mp(mpmath.pi, depth), rel=1e-14, abs=4 * EPS)
    assert float(normalized_ntk(-1.0, 1)) == 0.0  # kappa_0(-1) = kappa_1(-1) = 0 exactly


@pytest.mark.parametrize("depth", [1, 3, 40])
def test_abs_ntk_is_even_in_rho0_near_the_boundary(depth):
    """|x| is even: kappa_1(-rho) = kappa_1(rho) and rho kappa_0(rho) is even, so the NTK is
    even in rho0; -1 + delta must match the (cancellation-free) 1 - delta."""
    for k in (2, 4, 64, 2 ** 20):
        delta = k * 2.0 ** -53
        assert _quiet(-1.0 + delta, depth, "abs") == pytest.approx(
            _quiet(1.0 - delta, depth, "abs"), rel=1e-13, abs=8 * depth * EPS)


def test_ntk_matrix_of_nearly_opposite_rows_against_mpmath():
    for e in (1e-3, 1e-6, 1e-9, 3e-12):
        X = np.array([[1.0, 0.0], [-math.cos(e), math.sin(e)]])
        with mpmath.workdps(50):  # the exact angle between the two float rows
            a, b = ([mpmath.mpf(float(x)) for x in row] for row in X)
            theta = mpmath.acos((a[0] * b[0] + a[1] * b[1])
                                / mpmath.sqrt(b[0] ** 2 + b[1] ** 2))
        for depth in (1, 10):
            K = ntk_matrix(X, depth)
            # was 1.6e-10 off at e = 1e-9, depth 1
            assert abs(K[0, 1] - _relu_ntk_mp(theta, depth)) <= 8 * depth * EPS + 4 * EPS, e
