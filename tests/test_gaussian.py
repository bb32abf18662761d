"""Exact Gaussian expectations E[Z^j f(mu + sigma Z)] against mpmath quadrature."""

import mpmath
import numpy as np
import pytest
import sympy as sp

from symscale import DomainError, NoClosedFormError
from symscale.activations import X
from symscale.gaussian import gaussian_expectation, gaussian_moments

x = X
CASES = {
    "relu": sp.Max(x, 0),
    "relu_squared": sp.Max(x, 0) ** 2,
    "step": sp.Heaviside(x),
    "sign": sp.sign(x),
    "abs": sp.Abs(x),
    "kink_at_one": sp.Max(x - 1, 0),
    "erf": sp.erf(x),
    "erf_scaled": 3 * sp.erf(x / 2 + sp.Rational(1, 3)),
    "gelu": x * (1 + sp.erf(x / sp.sqrt(2))) / 2,
    "sin": sp.sin(x),
    "cos_shift": sp.cos(2 * x + 1),
    "exp": sp.exp(x),
    "bump": x + x**2 / 2 * sp.exp(-(x**2)),
    "elu": sp.Piecewise((sp.exp(x) - 1, x < 0), (x, True)),
    "poly": 1 - 2 * x + x**4 / 3,
    "erf_times_gauss": x * sp.erf(x) * sp.exp(-(x**2) / 4),
}
POINTS = [(0, 1), (sp.Rational(1, 2), 2), (-sp.Rational(3, 2), sp.Rational(1, 4))]


def _mp_reference(expr, j, mean, var):
    f = sp.lambdify(x, expr, modules=[{"Heaviside": lambda t, h0=0.5: mpmath.mpf(1) if t > 0 else
                                       mpmath.mpf(0) if t < 0 else mpmath.mpf(h0)}, "mpmath"])
    m, s = mpmath.mpf(sp.Rational(mean)), mpmath.sqrt(mpmath.mpf(sp.Rational(var)))
    pts = [-mpmath.inf] + [(mpmath.mpf(b) - m) / s for b in (0, 1)] + [mpmath.inf]
    return mpmath.quad(lambda z: z**j * f(m + s * z) * mpmath.npdf(z), sorted(set(pts)))


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mean, var", POINTS)
def test_moments_match_mpmath(name, mean, var):
    expr = CASES[name]
    exact = gaussian_moments(expr, 3, mean=mean, var=var)
    with mpmath.workdps(30):
        for j, e in enumerate(exact):
            ref = _mp_reference(expr, j, mean, var)
            assert abs(sp.N(e, 30) - sp.Float(mpmath.nstr(ref, 28), 30)) < 1e-20, (j, e)


def test_symbolic_mean_and_variance_reproduce_known_forms():
    mu = sp.Symbol("mu", real=True)
    v = sp.Symbol("v", positive=True)
    s = sp.sqrt(v)
    alpha = mu / s
    pdf = sp.exp(-alpha**2 / 2) / sp.sqrt(2 * sp.pi)
    cdf = (1 + sp.erf(alpha / sp.sqrt(2))) / 2
    # E relu(Y) = sigma phi(a) + mu Phi(a); E relu(Y)^2 = (mu^2 + v) Phi(a) + mu sigma phi(a)
    assert sp.simplify(gaussian_expectation(sp.Max(x, 0), mean=mu, var=v)
                       - (s * pdf + mu * cdf)) == 0
    assert sp.simplify(gaussian_expectation(sp.Max(x, 0) ** 2, mean=mu, var=v)
                       - ((mu**2 + v) * cdf + mu * s * pdf)) == 0
    assert sp.simplify(gaussian_expectation(sp.sin(x), mean=mu, var=v)
                       - sp.sin(mu) * sp.exp(-v / 2)) == 0
    assert sp.simplify(gaussian_expectation(sp.erf(x), mean=mu, var=v)
                       - sp.erf(mu / sp.sqrt(1 + 2 * v))) == 0
    assert sp.expand(gaussian_expectation(x**3, mean=mu, var=v) - (mu**3 + 3 * mu * v)) == 0


def test_stein_identity_holds_exactly():
    """E[Z f(Y)] = sigma E[f'(Y)] for smooth f: two different routes through the engine."""
    for expr in (CASES["gelu"], CASES["erf_scaled"], CASES["bump"], CASES["cos_shift"]):
        lhs = gaussian_moments(expr, 1, mean=sp.Rational(1, 3), var=3)[1]
        rhs = sp.sqrt(3) * gaussian_expectation(sp.diff(expr, x), mean=sp.Rational(1, 3), var=3)
        assert abs(sp.N(lhs - rhs, 40)) < 1e-35


def test_zero_variance_is_deterministic():
    assert gaussian_moments(sp.Max(x, 0), 3, mean=2, var=0) == [2, 0, 2, 0]


@pytest.mark.parametrize("expr", [sp.tanh(x), 1 / (1 + sp.exp(-x)), sp.erf(x) ** 2,
                                  sp.Heaviside(x) * sp.erf(x), sp.exp(x**3), sp.log(1 + x**2)])
def test_outside_the_class_raises_no_closed_form(expr):
    with pytest.raises(NoClosedFormError, match="exact=False"):
        gaussian_expectation(expr)


def test_divergent_expectation_raises_domain_error():
    with pytest.raises(DomainError, match="diverges"):
        gaussian_expectation(sp.exp(x**2), var=1)
    # converges when 2 * alpha * var < 1
    assert sp.simplify(gaussian_expectation(sp.exp(x**2), var=sp.Rational(1, 4))
                       - sp.sqrt(2)) == 0


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"order": -1}, ValueError, "order must be >= 0, got -1"),
    ({"order": 10**6}, ValueError, "order must be <= 2000"),
    ({"order": 1.5}, TypeError, "order must be an integer, got float 1.5"),
    ({"order": True}, TypeError, "order must be an integer, got bool"),
    ({"order": 2, "var": -1}, ValueError, "var must be >= 0"),
    ({"order": 2, "mean": float("nan")}, ValueError, "mean must be finite"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        gaussian_moments(sp.Max(x, 0), **kwargs)


def test_numpy_integer_order_is_accepted():
    assert gaussian_moments(x**2, np.int64(2)) == [1, 0, 3]


def test_plain_symbols_are_treated_as_real_mean_and_positive_variance():
    m, v = sp.symbols("m v")  # no assumptions given by the caller
    out = gaussian_moments(sp.sin(x), 1, mean=m, var=v)
    assert sp.simplify(out[0] - sp.exp(-v / 2) * sp.sin(m)) == 0
    assert sp.simplify(out[1] - sp.sqrt(v) * sp.exp(-v / 2) * sp.cos(m)) == 0
    assert set().union(*(o.free_symbols for o in out)) == {m, v}  # the caller's symbols
    assert not any(o.has(sp.re, sp.im, sp.Abs) for o in out)
