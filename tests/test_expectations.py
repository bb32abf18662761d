"""The one univariate Gaussian-expectation engine and its two clients."""

import math
import re
import warnings

import mpmath
import numpy as np
import pytest

import symscale as ss
from symscale.cumulants import wick_table
from symscale.errors import QuadratureWarning
from symscale.expectations import GaussianTable, joint_expectation, univariate_table

USER = "expectations_user_bump"


@pytest.fixture(scope="module", autouse=True)
def user_activation():
    ss.register_activation(USER, "x + x**2/2*exp(-x**2)", overwrite=True)
    yield
    ss.unregister_activation(USER)


@pytest.mark.parametrize("act", ["relu", "leaky_relu", "tanh", "gelu", "erf", USER])
@pytest.mark.parametrize("mean, var", [(0.7, 1.8), (-1.3, 0.4)])
def test_wick_table_and_hermite_coefficients_satisfy_the_identity(act, mean, var):
    """w_k = k! sigma^-k c_k: the float64 Wick table (cumulants) against the mpmath Hermite
    coefficients (30 digits), both from univariate_table, at a non-zero mean."""
    k_max, p_max = 5, 2
    w = wick_table(act, [mean], [var], k_max, p_max)
    sd = math.sqrt(var)
    for p in range(1, p_max + 1):
        c = ss.hermite_coefficients(act, k_max, mean=mean, var=var, exact=False, dps=30, power=p)
        scale = math.sqrt(float(ss.hermite_coefficients(act, 0, mean=mean, var=var, exact=False,
                                                        dps=20, power=2 * p)[0]))
        for k in range(k_max + 1):
            want = math.factorial(k) * float(c[k]) / sd**k
            # float64 accuracy of the table: 1e-13 of the natural scale sigma^-k sqrt(E phi^2p k!)
            tol = 1e-13 * scale * math.sqrt(math.factorial(k)) / sd**k
            assert abs(w[p, k, 0] - want) <= tol, (act, p, k, w[p, k, 0], want)


def test_one_table_holds_both_normalizations():
    t = univariate_table("tanh", [0.2, -1.0], [0.5, 3.0], 4, 2)
    assert isinstance(t, GaussianTable) and t.method == "quadrature"
    k = np.arange(5)
    fact = np.array([math.factorial(j) for j in k], dtype=float)
    want = t.wick * np.sqrt(t.var)[None, None, :] ** k[None, :, None] / fact[None, :, None]
    np.testing.assert_array_equal(t.hermite, want)
    mp = univariate_table("tanh", 0.2, 0.5, 4, 2, dps=25)
    assert mp.wick.dtype == object and isinstance(mp.hermite[1, 3, 0], mpmath.mpf)
    np.testing.assert_allclose(mp.wick.astype(float)[..., 0], t.wick[..., 0], rtol=1e-12,
                               atol=1e-14)


def test_exact_and_quadrature_paths_agree():
    exact = univariate_table("leaky_relu", [0.4, 2.0], [1.5, 0.2], 3, 3, method="exact")
    quad = univariate_table("leaky_relu", [0.4, 2.0], [1.5, 0.2], 3, 3, method="quadrature")
    assert exact.method == "exact" and quad.method == "quadrature"
    # integration by parts: the quadrature of sigma^-k E[phi^p He_k] carries the Dirac terms
    # of the kinks that the exact path adds explicitly
    np.testing.assert_allclose(exact.wick, quad.wick, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(method="fast"), ValueError, "method"),
    (dict(dps=3), ValueError, "dps"),
    (dict(dps=20, method="exact"), ValueError, "exact"),
])
def test_bad_arguments_are_named(kwargs, err, match):
    with pytest.raises(err, match=match):
        univariate_table("relu", 0.0, 1.0, 2, 1, **kwargs)
    with pytest.raises(ValueError, match="var must be > 0"):
        univariate_table("relu", 0.0, 0.0, 2, 1)
    with pytest.raises(TypeError, match="k_max"):
        univariate_table("relu", 0.0, 1.0, 2.0, 1)


# ---------------------------------------------------------------------------------------------
# bivariate moments with means, joint expectations


def _ref_bivariate(f, g, m1, m2, s1, s2, rho):
    """E[f(Z1) g(Z2)] by nested adaptive quadrature (scipy), split at the kinks at 0 of each
    argument: an independent reference."""
    from scipy import integrate

    r = math.sqrt(1 - rho**2)
    dens = lambda t: math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)  # noqa: E731

    def inner(u):
        kink = (-m2 / s2 - rho * u) / r
        val, _ = integrate.quad(lambda v: g(m2 + s2 * (rho * u + r * v)) * dens(v), -12, 12,
                                points=[kink] if -12 < kink < 12 else None, epsabs=1e-14,
                                epsrel=1e-13, limit=200)
        return val

    kink = -m1 / s1
    val, _ = integrate.quad(lambda u: f(m1 + s1 * u) * inner(u) * dens(u), -12, 12,
                            points=[kink] if -12 < kink < 12 else None, epsabs=1e-14,
                            epsrel=1e-13, limit=200)
    return val


def test_bivariate_moment_paths_against_nested_quadrature():
    from symscale.expectations import bivariate_moment

    relu = lambda x: max(x, 0.0)  # noqa: E731
    for args in [(0.3, -0.2, 1.0, 2.0, 0.5), (-1.0, 0.7, 0.5, 1.5, -0.8)]:
        value, how = bivariate_moment("relu", *args)
        assert how == "relu closed form"
        assert abs(value - _ref_bivariate(relu, relu, *args)) < 1e-10
    # the Gauss-Hermite path converges with its degree (tanh: analytic in a strip), to round-off
    # at moderate variance; at sd = 3 with correlation 0.9 it needs many nodes (documented)
    for args in [(0.3, -0.2, 1.0, 2.0, 0.5), (0.0, 0.0, 3.0, 3.0, 0.9)]:
        ref = _ref_bivariate(math.tanh, math.tanh, *args)
        errs = [abs(bivariate_moment("tanh", *args, deg=d)[0] - ref) for d in (16, 32, 64, 128)]
        assert bivariate_moment("tanh", *args)[1] == "gauss-hermite"
        assert all(b < a for a, b in zip(errs, errs[1:])), errs
    assert errs[0] > 1e-3  # the hard case is hard: the test would see a wrong reference
    ref = _ref_bivariate(math.tanh, math.tanh, 0.3, -0.2, 1.0, 2.0, 0.5)
    assert abs(bivariate_moment("tanh", 0.3, -0.2, 1.0, 2.0, 0.5, deg=128)[0] - ref) < 1e-13
    # a user registration of max(x, 0) takes the closed form through its family
    ss.register_activation("expectations_user_relu", "Max(x, 0)", overwrite=True)
    try:
        assert bivariate_moment("expectations_user_relu", 0.1, 0.2, 1.0, 1.0, 0.3)[1] == \
            "relu closed form"
    finally:
        ss.unregister_activation("expectations_user_relu")


def test_joint_expectation_quadrature_and_monte_carlo():
    from symscale.expectations import MAX_QUADRATURE_DIM, joint_expectation

    rng = np.random.default_rng(4)
    A = rng.standard_normal((3, 3))
    C = (A @ A.T)[None]
    value, se = joint_expectation(lambda z, idx: z[..., 0] * z[..., 1] * z[..., 2] ** 2, C)
    c = C[0]
    want = c[0, 1] * c[2, 2] + 2 * c[0, 2] * c[1, 2]  # Isserlis
    assert se is None and abs(value[0] - want) < 1e-10 * abs(want)
    D = MAX_QUADRATURE_DIM + 1
    B = rng.standard_normal((D, D))
    C5 = (B @ B.T)[None]
    value, se = joint_expectation(lambda z, idx: z[..., 0] * z[..., D - 1], C5, seed=1)
    assert se is not None and abs(value[0] - C5[0, 0, D - 1]) <= 5 * se[0]
    again, _ = joint_expectation(lambda z, idx: z[..., 0] * z[..., D - 1], C5, seed=1)
    assert again[0] == value[0]


def test_polynomial_moments_are_derived_and_agree_with_quadrature():
    """E[u^i v^j] from the moment generating function (symbolic, in q11, q12, q22) against the
    engine's Gauss-Hermite bivariate moment of monomials (exact for these degrees)."""
    import sympy as sp

    import symscale as ss
    from symscale.expectations import bivariate_moment, polynomial_expectation, polynomial_moment
    from symscale.kernels import q11, q12, q22

    assert polynomial_moment(4, 0) == 3 * q11**2
    assert polynomial_moment(2, 2) == q11 * q22 + 2 * q12**2
    assert polynomial_moment(3, 0) == 0 and polynomial_moment(0, 0) == 1
    point = {q11: 1.3, q12: -0.4, q22: 0.7}
    sd1, sd2 = np.sqrt(1.3), np.sqrt(0.7)
    for i, j in [(1, 1), (2, 2), (3, 1), (4, 2), (1, 5)]:
        exact = float(polynomial_moment(i, j).subs(point))
        mono = [ss.activation("monomial", k=k) for k in (i, j)]
        quad, how = bivariate_moment(mono[0], 0.0, 0.0, sd1, sd2, -0.4 / (sd1 * sd2),
                                     activation2=mono[1])
        assert how == "gauss-hermite" and abs(quad - exact) <= 1e-12 * max(1.0, abs(exact))
    u, v = sp.symbols("u v")
    assert polynomial_expectation((u + v) ** 2, u, v) == q11 + 2 * q12 + q22
    with pytest.raises(TypeError, match="poly must be a sympy expression"):
        polynomial_expectation("u*v", u, v)
    with pytest.raises(ValueError, match="i must be >= 0"):
        polynomial_moment(-1, 0)


def test_limits_apply_entry_by_entry_in_mixed_arrays():
    """The rho = +-1 and infinite-argument limits are evaluated only where they apply: in an
    array mixing them with ordinary entries every entry equals its own scalar evaluation."""
    from symscale.expectations.bivariate import (bivariate_normal_cdf,
                                                 relu_bivariate_moment_numeric)

    a = np.array([0.3, np.inf, -np.inf, 0.5, -0.2, 0.0])
    b = np.array([-0.1, 0.4, 0.2, np.inf, 0.7, 0.0])
    rho = np.array([0.2, 0.5, -0.3, 1.0, -1.0, 1.0])
    got = bivariate_normal_cdf(a, b, rho)
    for i in range(a.size):
        assert got[i] == bivariate_normal_cdf(a[i], b[i], rho[i])
    m1, m2 = np.array([0.1, -0.3, 0.2, 0.0]), np.array([0.4, 0.2, -0.5, 0.0])
    s1, s2 = np.array([1.0, 0.7, 1.3, 2.0]), np.array([0.5, 1.1, 0.9, 1.0])
    r = np.array([0.3, 1.0, -1.0, -0.6])
    got = relu_bivariate_moment_numeric(m1, m2, s1, s2, r)
    for i in range(m1.size):
        assert got[i] == relu_bivariate_moment_numeric(m1[i], m2[i], s1[i], s2[i], r[i])
    # the rho = 1 limit: E[relu(m1 + s1 Z) relu(m2 + s2 Z)] by a fine trapezoid rule (the
    # integrand has kinks: error O(h^2) ~ 1e-9 here)
    z = np.linspace(-12.0, 12.0, 400_001)
    f = (np.maximum(m1[1] + s1[1] * z, 0) * np.maximum(m2[1] + s2[1] * z, 0)
         * np.exp(-z * z / 2) / np.sqrt(2 * np.pi))
    assert abs(got[1] - (z[1] - z[0]) * (f.sum() - (f[0] + f[-1]) / 2)) < 1e-8


@pytest.mark.parametrize("name, params", [("relu", {}), ("leaky_relu", {"alpha": 0.2}),
                                          ("abs", {}), ("step", {}), ("sign", {}),
                                          ("shaped_relu", {"s_plus": 1.1, "s_minus": 0.7})])
def test_two_piece_tables_are_one_product_with_the_values_of_the_loop(monkeypatch, name, params):
    """phi of two polynomials meeting at one kink: the table is C @ (partial and Dirac moments)
    with C built once per (phi, k_max, p_max); it equals the per-entry loop to round-off of
    the row's scale, at every order, for neurons from the far left to the far right tail."""
    from symscale.expectations import univariate as U

    act = ss.activation(name, **params)
    rng = np.random.default_rng(0)
    mean = np.concatenate([[0.0, 1e-9, -40.0, 40.0, 8.0, -1.01, 1.01], 3 * rng.standard_normal(60)])
    var = np.concatenate([np.ones(7), rng.uniform(0.01, 4.0, 60)])
    assert U._two_piece_plan(U._polynomial_pieces(act), 2, 2) is not None
    for k_max, p_max in [(0, 1), (2, 2), (4, 3), (6, 4)]:
        fast = univariate_table(act, mean, var, k_max, p_max, method="exact").wick
        with monkeypatch.context() as m:
            m.setattr(U, "_two_piece_plan", lambda *a: None)
            loop = univariate_table(act, mean, var, k_max, p_max, method="exact").wick
        scale = np.abs(loop).max(axis=-1, keepdims=True)
        gap = np.abs(fast - loop) / np.maximum(scale, 1e-300)  # all-zero rows: 0
        assert gap.max() <= 1e-14, (k_max, p_max, gap.max())


def test_three_pieces_take_the_loop():
    """A finite middle piece (hard tanh) has no two-piece plan; its table still agrees with
    quadrature."""
    from symscale.expectations import univariate as U

    act = ss.register_activation("hardtanh_t", "Max(-1, Min(x, 1))", overwrite=True)
    try:
        assert U._two_piece_plan(U._polynomial_pieces(act), 2, 2) is None
        mean, var = np.array([0.3, -2.0]), np.array([0.5, 2.0])
        ex = univariate_table(act, mean, var, 2, 2, method="exact").wick
        qu = univariate_table(act, mean, var, 2, 2, method="quadrature").wick
        np.testing.assert_allclose(ex, qu, rtol=1e-10, atol=1e-12)
    finally:
        ss.unregister_activation("hardtanh_t")


@pytest.mark.parametrize("J", [1, 2, 4, 8, 16])
def test_partial_moments_on_both_sides_of_the_switch(J):
    """Where the forward recursion hands over to the backward one (t = 1.7/sqrt(J)), and at
    the smallest t of the backward one, every moment up to J is within 4e-15 of 40-digit
    mpmath (t exact here, so no conditioning term): the forward recursion's cancellation grows
    with t sqrt(J) (1.6e-13 at J = 16, t = 1 when the switch was at 1 for every J)."""
    from symscale.expectations.univariate import _forward_limit, _partial_moments

    T = _forward_limit(J)
    t = np.array([0.5 * T, np.nextafter(T, 0), T, np.nextafter(T, 3), 1.02 * T, 1.0, 1.25])
    S = _partial_moments(t, np.ones_like(t), J)
    with mpmath.workdps(40):
        for i, ti in enumerate(t):
            tm = mpmath.mpf(float(ti))
            for m in range(J + 1):
                exact = mpmath.quad(lambda u: u**m * mpmath.npdf(u + tm), [0, 1, 4, 12, 40])
                rel = abs(float((mpmath.mpf(float(S[m, i])) - exact) / exact))
                assert rel <= 4e-15, (ti, m, rel)


def test_partial_moments_against_parabolic_cylinder_functions():
    """E[(U - d)_+^m] = sd^m m! exp(-t^2/4) D_(-m-1)(t) / sqrt(2 pi), t = d / sd, on both
    sides of the switch from the forward recursion (t <= 1.7/sqrt(J)) to the backward one, up
    to m = 12. The tolerance is the conditioning of exp(-t^2/2) in t (t^2 eps) plus 1e-14."""
    from symscale.expectations.univariate import _partial_moments

    t = np.concatenate([np.linspace(-3.0, 1.0, 9), [1.0001, 1.01, 1.5, 2.0, 3.0],
                        np.linspace(4.0, 30.0, 8)])
    sd = np.full_like(t, 1.3)
    S = _partial_moments(t * sd, sd, 12)
    with mpmath.workdps(40):
        for i, ti in enumerate(t):
            tm = mpmath.mpf(float(ti))
            for m in range(13):
                exact = (mpmath.factorial(m) * mpmath.exp(-tm**2 / 4) * mpmath.pcfd(-m - 1, tm)
                         / mpmath.sqrt(2 * mpmath.pi) * mpmath.mpf(1.3) ** m)
                rel = abs(float((mpmath.mpf(float(S[m, i])) - exact) / exact))
                assert rel <= 1e-14 + 4 * ti**2 * np.finfo(float).eps, (ti, m, rel)


def test_joint_expectation_refines_until_its_tolerance():
    """tanh(a) tanh(b) at variances 25: 48 x 48 Gauss-Hermite nodes were 0.015 off; the
    refined rule meets the dual kernel to 1e-9 without a warning."""
    C = np.array([[[25.0, 22.5], [22.5, 25.0]], [[25.0, -5.0], [-5.0, 4.0]]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuadratureWarning)
        v, se = joint_expectation(lambda z, idx: np.tanh(z[..., 0]) * np.tanh(z[..., 1]), C)
    want = [ss.dual_kernel_numeric("tanh", c[0, 0], c[0, 1], c[1, 1]) for c in C]
    assert se is None
    np.testing.assert_allclose(v, want, rtol=1e-9)


def test_joint_expectation_warns_with_an_honest_estimate_at_a_kink():
    """|z0 - z1| for independent z: the kink lies across both axes, so no tensor rule meets
    1e-10 within the budget; the warning's estimate bounds the error (the last change alone,
    8.2e-6, did not: the error is 2.6e-5)."""
    with pytest.warns(QuadratureWarning, match=r"entry \(0,\) \(rank 2\)") as rec:
        v, _ = joint_expectation(lambda z, idx: np.abs(z[..., 0] - z[..., 1]), np.eye(2)[None])
    estimate = float(re.search(r"error estimate (\S+)", str(rec[0].message)).group(1))
    error = abs(v[0] - 2 / math.sqrt(math.pi))
    assert error <= estimate < 1e-2
    # an absolute tolerance above the estimate silences it (a round-off floor)
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuadratureWarning)
        joint_expectation(lambda z, idx: np.abs(z[..., 0] - z[..., 1]), np.eye(2)[None],
                          atol=2 * estimate)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"rtol": 0.0}, ValueError, "rtol must be > 0"),
    ({"rtol": 1.0}, ValueError, "rtol must be < 1"),
    ({"rtol": "1e-8"}, TypeError, "rtol"),
    ({"atol": -1e-3}, ValueError, "atol must be >= 0"),
    ({"atol": float("nan")}, ValueError, "atol must be finite"),
])
def test_joint_expectation_bad_tolerances(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        joint_expectation(lambda z, idx: z[..., 0], np.eye(2)[None], **kwargs)
