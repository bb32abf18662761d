"""Hermite coefficients: exact vs mpmath, Parseval, Stein, Mehler, checks and bad input."""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale.activations import X
from symscale.gaussian import gaussian_expectation
from symscale.hermite import Z, expansion_coefficients, hermite_he


def _f(value, digits=40):
    """An exact sympy value or an mpmath number as a high-precision sympy Float."""
    if isinstance(value, sp.Basic):
        return sp.N(value, digits)
    return sp.Float(mpmath.nstr(value, digits - 2), digits)


def _closed_form_activations():
    out = []
    for name in ss.list_activations():
        try:
            ss.hermite_coefficients(name, 0)
        except ss.NoClosedFormError:
            continue
        out.append(name)
    return out


CLOSED = _closed_form_activations()


def test_closed_form_list_covers_the_required_activations():
    required = {"relu", "leaky_relu", "abs", "step", "sign", "identity", "polynomial",
                "monomial", "erf", "sin", "cos", "exp", "gelu", "shaped_relu"}
    assert required <= set(CLOSED)
    assert not {"tanh", "sigmoid", "silu", "softplus"} & set(CLOSED)


@pytest.mark.parametrize("name", CLOSED)
@pytest.mark.parametrize("mean, var", [(0, 1), (0.5, 2.0), (-1.25, 0.3)])
def test_exact_equals_mpmath(name, mean, var):
    exact = ss.hermite_coefficients(name, 8, mean=mean, var=var)
    numeric = ss.hermite_coefficients(name, 8, mean=mean, var=var, exact=False, dps=30)
    assert exact.exact and not numeric.exact
    for a, b in zip(exact, numeric):
        assert abs(_f(a) - _f(b)) < 1e-12


@pytest.mark.parametrize("name", ["relu", "erf", "gelu", "sign"])
def test_exact_equals_mpmath_at_order_30(name):
    exact = ss.hermite_coefficients(name, 30)
    numeric = ss.hermite_coefficients(name, 30, exact=False, dps=30)
    worst = max(abs(_f(a) - _f(b)) for a, b in zip(exact, numeric))
    assert worst < 1e-25


@pytest.mark.parametrize("name", CLOSED)
@pytest.mark.parametrize("mean, var", [(0, 1), (-1.25, 0.3)])
def test_mpmath_quadrature_carries_its_digits(name, mean, var):
    """dps=30 means 30 digits (of the natural scale sqrt(k!)), not float64's 16: the adaptive
    pieces (width 2, bisected on demand) must hold them against the closed form."""
    exact = ss.hermite_coefficients(name, 12, mean=mean, var=var)
    numeric = ss.hermite_coefficients(name, 12, mean=mean, var=var, exact=False, dps=30)
    with mpmath.workdps(45):
        worst = max(abs(mpmath.mpf(str(sp.N(a, 45))) - b) * math.factorial(k) ** 0.5
                    for k, (a, b) in enumerate(zip(exact, numeric)))
    assert worst < 1e-28


def test_wider_first_pieces_save_integrand_evaluations(monkeypatch):
    from symscale.expectations import univariate as U

    calls = []

    def counting(g, *args, **kw):
        def h(z):
            calls[-1] += 1
            return g(z)
        return original(h, *args, **kw)

    original = U._integrate_vector
    monkeypatch.setattr(U, "_integrate_vector", counting)
    values = {}
    for piece in (1, 2):
        monkeypatch.setattr(U, "_PIECE", piece)
        calls.append(0)
        values[piece] = U._mp_table(ss.activation("gelu"), 0.5, 2.0, 6, 1, 30)[0]
    assert calls[1] < 0.7 * calls[0]  # 1586 against 2594: some width-2 pieces are bisected
    with mpmath.workdps(30):
        assert max(abs(a - b) for a, b in zip(values[1][1], values[2][1])) < 1e-30


def test_known_relu_coefficients():
    h = ss.hermite_coefficients("relu", 6)
    inv = 1 / sp.sqrt(2 * sp.pi)
    # c_0 = 1/sqrt(2 pi), c_1 = 1/2, and for k >= 2: c_k = He_{k-2}(0) phi(0) / k!
    want = [inv, sp.Rational(1, 2)] + [hermite_he(k - 2, sp.S.Zero) * inv / sp.factorial(k)
                                       for k in range(2, 7)]
    assert all(sp.simplify(a - b) == 0 for a, b in zip(h, want))


def test_odd_and_even_activations_have_vanishing_coefficients():
    assert all(c == 0 for c in ss.hermite_coefficients("erf", 10)[0::2])
    assert all(c == 0 for c in ss.hermite_coefficients("abs", 10)[1::2])


SMOOTH_EXACT = {"erf": 40, "gelu": 25, "sin": 20, "cos": 20, "exp": 20}
SMOOTH_NUMERIC = {"tanh": 50, "sigmoid": 25, "silu": 25, "softplus": 20}


@pytest.mark.parametrize("name, order", sorted({**SMOOTH_EXACT, **SMOOTH_NUMERIC}.items()))
def test_parseval_reconstructs_second_moment(name, order):
    exact = name in SMOOTH_EXACT
    h = ss.hermite_coefficients(name, order, exact=exact, dps=20)
    total = _f(h.parseval_sum())
    second = _f(ss.hermite_coefficients(name, 0, power=2, exact=False, dps=30)[0])
    assert abs(total - second) < 1e-8
    assert total <= second + 1e-25  # partial sums of a Parseval series approach from below


def test_parseval_for_the_user_activation():
    act = ss.register_activation("bump_h", "x + x**2/2*exp(-x**2)", overwrite=True)
    try:
        h = ss.hermite_coefficients(act, 50)
        second = sp.N(gaussian_expectation(act.expr**2), 40)
        assert abs(_f(h.parseval_sum()) - second) < 1e-8
        assert h.check(n_samples=100_000, seed=4).passed
    finally:
        ss.unregister_activation("bump_h")


@pytest.mark.parametrize("name", ["erf", "gelu", "sin", "exp"])
def test_stein_relation_with_derivatives(name):
    """c_k = sigma^k E[phi^(k)(Y)] / k! for smooth phi (Gaussian integration by parts)."""
    act = ss.activation(name)
    mean, var = sp.Rational(1, 3), sp.Rational(3, 2)
    h = ss.hermite_coefficients(act, 5, mean=mean, var=var)
    for k in range(6):
        d = sp.diff(act.expr, X, k)
        want = sp.sqrt(var) ** k * gaussian_expectation(d, mean=mean, var=var) / sp.factorial(k)
        assert abs(sp.N(h[k] - want, 40)) < 1e-30


def test_symbolic_mean_and_variance():
    mu = sp.Symbol("mu", real=True)
    v = sp.Symbol("v", positive=True)
    h = ss.hermite_coefficients("leaky_relu", 3, mean=mu, var=v)
    num = ss.hermite_coefficients("leaky_relu", 3, mean=sp.Rational(2, 7), var=sp.Rational(5, 3))
    for a, b in zip(h, num):
        assert abs(sp.N(a.subs({mu: sp.Rational(2, 7), v: sp.Rational(5, 3)}) - b, 30)) < 1e-25


def test_power_argument():
    h = ss.hermite_coefficients("relu", 2, power=2)
    assert h[0] == sp.Rational(1, 2)                 # E[relu(Z)^2]
    assert sp.simplify(h[1] - sp.sqrt(2 / sp.pi)) == 0  # E[relu(Z)^2 Z] = 2 phi(0)
    assert ss.hermite_coefficients("sign", 3, power=2).coefficients == (1, 0, 0, 0)


def test_zero_variance():
    h = ss.hermite_coefficients("relu", 3, mean=2, var=0)
    assert h.coefficients == (2, 0, 0, 0)
    hn = ss.hermite_coefficients("tanh", 2, mean=0.5, var=0, exact=False)
    assert abs(float(hn[0]) - math.tanh(0.5)) < 1e-15 and hn[1] == 0


def test_expansion_object():
    h = ss.hermite_coefficients("gelu", 6)
    assert len(h) == 7 and h.order == 6 and list(h)[0] == h[0]
    series = h.series()
    assert series.free_symbols == {Z}
    # the truncated series is the L2 projection: it reproduces c_k when re-expanded
    again = expansion_coefficients(series.subs(Z, X), 6)
    assert all(abs(sp.N(a - b, 30)) < 1e-25 for a, b in zip(again, h))
    assert r"\mathrm{He}_{1}" in h.latex() and r"\mathrm{gelu}" in h.latex()
    np.testing.assert_allclose(h.to_numpy()[:2], [float(sp.N(h[0])), 0.5], rtol=1e-15)


def test_monte_carlo_check_of_coefficients():
    report = ss.hermite_coefficients("relu", 5, mean=0.3, var=2.0).check(n_samples=200_000,
                                                                          seed=1)
    assert report.passed and len(report.rows) == 6
    # a wrong coefficient is detected
    h = ss.hermite_coefficients("erf", 3)
    wrong = ss.hermite.HermiteExpansion(h.activation, (0, h[1] * 1.1, 0, h[3]), 0, 1, 1, True)
    assert not wrong.check(n_samples=400_000, seed=2).passed


def test_hermite_polynomials():
    z = sp.Symbol("z")
    for k in range(8):
        assert sp.expand(hermite_he(k, z) - sp.hermite_prob(k, z)) == 0
    zs = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(hermite_he(5, zs), zs**5 - 10 * zs**3 + 15 * zs, rtol=1e-13)


def test_mehler_bound_holds_and_shrinks():
    rho = np.linspace(-1, 1, 41)
    exact = ss.dual_kernel_numeric("erf", 1.0, rho, 1.0)
    bounds = []
    for order in (3, 7, 15):
        m = ss.mehler_series("erf", order)
        err = np.max(np.abs(m(rho) - exact))
        assert err <= m.truncation_bound * (1 + 1e-9)
        bounds.append(m.truncation_bound)
    assert bounds[0] > bounds[1] > bounds[2]
    # at rho = 1 (worst case for a positive series) the bound is attained
    assert abs(float(exact[-1] - ss.mehler_series("erf", 7)(1.0))
               - ss.mehler_series("erf", 7).truncation_bound) < 1e-12


def test_mehler_unequal_variances_and_numeric():
    m = ss.mehler_series("gelu", 12, var=0.5, var2=2.0)
    rho = np.array([-0.7, 0.2, 0.9])
    exact = ss.dual_kernel_numeric("gelu", 0.5, rho * 1.0, 2.0)
    assert np.all(np.abs(m(rho) - exact) <= m.truncation_bound + 1e-14)
    mt = ss.mehler_series("tanh", 15, exact=False, dps=20)
    exact = ss.dual_kernel_numeric("tanh", 1.0, rho, 1.0)
    assert np.all(np.abs(mt(rho) - exact) <= mt.truncation_bound + 1e-10)
    assert mt.formula().latex().startswith(r"V(\rho) =")


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"order": -1}, ValueError, "order must be >= 0"),
    ({"order": 2.0}, TypeError, "order must be an integer"),
    ({"order": 2, "power": 0}, ValueError, "power must be >= 1, got 0"),
    ({"order": 2, "power": 2.5}, TypeError, "power must be an integer, got float 2.5"),
    ({"order": 10**6}, ValueError, "order must be <= 2000"),
    ({"order": True}, TypeError, "order must be an integer, got bool"),
    ({"order": 2, "exact": "no"}, TypeError, "exact must be True or False"),
    ({"order": 2, "var": -1}, ValueError, "var must be >= 0"),
    ({"order": 2, "mean": float("nan")}, ValueError, "mean must be finite"),
    ({"order": 2, "var": float("inf")}, ValueError, "var must be finite"),
    ({"order": 2, "exact": False, "dps": 2}, ValueError, "dps must be >= 5"),
    ({"order": 2, "exact": False, "mean": sp.Symbol("m")}, ValueError, "numeric mean"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ss.hermite_coefficients("relu", **kwargs)


def test_no_closed_form_names_the_fallback():
    with pytest.raises(ss.NoClosedFormError, match="exact=False"):
        ss.hermite_coefficients("tanh", 3)
    with pytest.raises(KeyError, match="available"):
        ss.hermite_coefficients("tanhh", 3)
