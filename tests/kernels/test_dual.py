"""Closed-form dual kernels: known values, 2-D quadrature, Monte Carlo, Price, families."""

import math

import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale.kernels import q11, q12, q22
from symscale.kernels.numeric import _polar

CLOSED = ["identity", "relu", "leaky_relu", "abs", "step", "sign", "erf", "gelu", "sin", "cos",
          "exp", "monomial", "polynomial", "shaped_relu"]
PARAMETERIZED = [("leaky_relu", {"alpha": 0.3}), ("monomial", {"k": 3}),
                 ("polynomial", {"coefficients": (0.5, -1, 0, 0.25)}),
                 ("shaped_relu", {"s_plus": 1.5, "s_minus": -0.5}),
                 ("shaped", {"base": "erf", "s": 2.0}), ("shaped", {"base": "gelu", "s": 0.7}),
                 ("shaped", {"base": "relu", "s": 3.0})]
SPECS = [(n, {}) for n in CLOSED] + PARAMETERIZED


def _id(p):
    return p[0] + "".join(f"-{k}={v}" for k, v in p[1].items())


def _points(seed, n=6):
    rng = np.random.default_rng(seed)
    v1, v2 = np.exp(rng.uniform(np.log(0.25), np.log(4.0), size=(2, n)))
    rho = rng.uniform(-1, 1, size=n)
    rho[:2] = [1.0, -1.0]  # the boundary of the PSD cone
    return v1, rho * np.sqrt(v1 * v2), v2


@pytest.mark.parametrize("derivative", [False, True])
@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_closed_form_equals_2d_quadrature(spec, derivative):
    """Closed form vs the polar quadrature at high degree (an independent code path)."""
    act = ss.activation(spec[0], **spec[1])
    V = ss.dual_kernel(act, derivative=derivative)
    a, c, b = _points(7)
    closed = ss.dual_kernel_numeric(act, a, c, b, derivative=derivative)
    target = act.derivative() if derivative else act
    quad = _polar(target, a, c, b, 160)
    scale = np.maximum(1.0, np.abs(quad))
    assert np.all(np.abs(closed - quad) <= 1e-10 * scale), (closed, quad)
    # the two rho = +-1 points are collinear only up to round-off; there dual_kernel_numeric
    # snaps the sign-type kernels (which move by sqrt(1 - rho^2)) to rho = +-1 and the Formula
    # does not
    formula = np.broadcast_to(np.asarray(V(a, c, b), dtype=float), closed.shape)
    assert np.all(np.abs(formula - closed)[2:] <= 1e-15 * scale[2:])
    assert np.all(np.abs(formula - closed)[:2] <= 1e-7 * scale[:2])


@pytest.mark.parametrize("derivative", [False, True])
@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_closed_form_agrees_with_monte_carlo(spec, derivative):
    V = ss.dual_kernel(ss.activation(spec[0], **spec[1]), derivative=derivative)
    report = V.check(n_points=3, n_samples=200_000, seed=11, n_sigma=5)
    assert report.passed, str(report)


def test_known_relu_and_erf_formulas():
    a, c, b = _points(3, n=20)
    s = np.sqrt(a * b)
    theta = np.arccos(np.clip(c / s, -1, 1))
    relu = s / (2 * np.pi) * (np.sin(theta) + (np.pi - theta) * np.cos(theta))
    np.testing.assert_allclose(ss.dual_kernel_numeric("relu", a, c, b), relu, rtol=1e-12,
                               atol=1e-15)
    erf = 2 / np.pi * np.arcsin(2 * c / np.sqrt((1 + 2 * a) * (1 + 2 * b)))
    np.testing.assert_allclose(ss.dual_kernel_numeric("erf", a, c, b), erf, rtol=1e-12)
    np.testing.assert_allclose(ss.dual_kernel_numeric("relu", a, a, a), a / 2, rtol=1e-15)
    np.testing.assert_allclose(ss.dual_kernel_numeric("sign", 1.0, c / s, 1.0),
                               2 / np.pi * np.arcsin(c / s), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ss.dual_kernel_numeric("relu", a, c, b, derivative=True),
                               (np.pi - theta) / (2 * np.pi), rtol=1e-12)


def test_textbook_relu_form_is_symbolically_equal():
    theta = sp.acos(q12 / sp.sqrt(q11 * q22))
    s = sp.sqrt(q11 * q22)
    textbook = s / (2 * sp.pi) * (sp.sin(theta) + (sp.pi - theta) * sp.cos(theta))
    assert sp.simplify(ss.dual_kernel("relu").expr - textbook) == 0


def test_polynomial_kernels_are_derived_exactly():
    assert sp.expand(ss.dual_kernel("monomial").expr - (q11 * q22 + 2 * q12**2)) == 0
    cube = ss.dual_kernel(ss.activation("monomial", k=3)).expr
    assert sp.expand(cube - (9 * q11 * q22 * q12 + 6 * q12**3)) == 0
    # V_{x^m}' = m^2 V_{x^(m-1)}
    for m in (2, 3, 4):
        d = ss.dual_kernel(ss.activation("monomial", k=m), derivative=True).expr
        lower = ss.dual_kernel(ss.activation("monomial", k=m - 1)).expr
        assert sp.expand(d - m**2 * lower) == 0
    assert ss.dual_kernel("identity").expr == q12


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "abs", "erf", "gelu", "sin", "cos",
                                  "exp", "monomial"])
def test_price_theorem(name):
    """d V_phi / d q12 = V_phi' for continuous phi (symbolic derivative vs derivative kernel)."""
    V = ss.dual_kernel(name)
    dV = sp.lambdify((q11, q12, q22), sp.diff(V.expr, q12), "numpy")
    a, c, b = _points(5, n=10)
    a, c, b = a[2:], 0.9 * c[2:], b[2:]  # interior: the textbook derivative divides by sin(theta)
    np.testing.assert_allclose(dV(a, c, b), ss.dual_kernel_numeric(name, a, c, b,
                                                                   derivative=True),
                               rtol=1e-11, atol=1e-13)


def test_jumps_have_zero_ntk_factor():
    assert ss.dual_kernel("step", derivative=True).expr == 0
    assert ss.dual_kernel("sign", derivative=True).expr == 0


def test_scaling_rules():
    # shaped(relu, s) = relu exactly, so its kernel is relu's
    a, c, b = _points(9)
    np.testing.assert_allclose(
        ss.dual_kernel_numeric(ss.activation("shaped", base="relu", s=3.0), a, c, b),
        ss.dual_kernel_numeric("relu", a, c, b), rtol=1e-13, atol=1e-15)
    # s erf(x/s): V = s^2 V_erf(Sigma / s^2)
    s = 2.0
    np.testing.assert_allclose(
        ss.dual_kernel_numeric(ss.activation("shaped", base="erf", s=s), a, c, b),
        s**2 * ss.dual_kernel_numeric("erf", a / s**2, c / s**2, b / s**2), rtol=1e-13)


def test_user_activations_get_closed_forms_by_detection():
    try:
        ramp = ss.register_activation("ramp_k", "3*Max(x, 0)", overwrite=True)
        a, c, b = _points(4)
        np.testing.assert_allclose(ss.dual_kernel_numeric(ramp, a, c, b),
                                   9 * ss.dual_kernel_numeric("relu", a, c, b), rtol=1e-13,
                                   atol=1e-15)
        quad = ss.register_activation("quad_k", "1 + x**2", overwrite=True)
        assert sp.expand(ss.dual_kernel(quad).expr
                         - (1 + q11 + q22 + q11 * q22 + 2 * q12**2)) == 0
        assert ss.dual_kernel(quad).check(n_samples=200_000, seed=3).passed
    finally:
        for name in ("ramp_k", "quad_k"):
            ss.unregister_activation(name)


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "silu", "softplus"])
def test_no_closed_form_names_the_fallback(name):
    with pytest.raises(ss.NoClosedFormError, match="dual_kernel_numeric"):
        ss.dual_kernel(name)


def test_formula_metadata():
    V = ss.dual_kernel("gelu", derivative=True)
    assert V.names == ("q11", "q12", "q22")
    assert [v.meaning for v in V.variables][1] == "covariance of u and v"
    assert V.lhs.startswith(r"\dot V_{\mathrm{gelu}}")
    assert ss.dual_kernel("gelu") is ss.dual_kernel(ss.activation("gelu"))  # cached


def test_mpmath_backend_at_high_precision():
    import mpmath

    V = ss.dual_kernel("relu")
    reference = sp.N(V.expr.subs({q11: 1, q22: 1, q12: 1 - sp.Rational(1, 10**30)}), 110)
    with mpmath.workdps(50):
        stable = V.numeric("mpmath")(1, 1 - mpmath.mpf("1e-30"), 1)
        assert abs(stable - mpmath.mpf(str(reference))) < 1e-48
        assert 0 < 0.5 - stable < 1e-30  # 1/2 - V = eps/2 + O(eps^(3/2))
    assert math.isfinite(float(V(1.0, 1.0 - 1e-15, 1.0)))
