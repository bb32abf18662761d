"""Wick coefficients E[(phi^p)^(k)(G)] and the K = 2 ReLU closed forms (theory note 03, §3)."""

import math

import mpmath
import numpy as np
import pytest
import scipy.special as sps
import sympy as sp

import symscale as ss
from symscale.activations import X
from symscale.cumulants.wick import (
    BivariateNormalCDF,
    bivariate_normal_cdf,
    relu_bivariate_moment,
    relu_bivariate_moment_numeric,
    relu_derivative_mean,
    relu_gaussian_mean,
    relu_gaussian_second_moment,
    wick_table,
)
from symscale.hermite import hermite_he
from symscale.testing import mc_zscore

# the §3 reference point
POINT = dict(mu1=0.3, mu2=-0.5, s1=1.2, s2=0.7, rho=0.6)
BIVARIATE_REF = 0.15207404319341
COV_REF = 0.0892457


def _relu_forms():
    forms = {(1, 0): relu_gaussian_mean(), (2, 0): relu_gaussian_second_moment()}
    forms.update({(1, k): relu_derivative_mean(k) for k in range(1, 7)})
    return forms


def _scale(act, mean, var, k_max, p_max):
    """Natural size of w[p, k]: sigma^-k sqrt(E[phi^2p] k!) (Cauchy-Schwarz bound)."""
    even = wick_table(act, mean, var, 0, 2 * p_max)[::2, 0]  # E phi^(2p), p = 0..p_max
    k = np.arange(k_max + 1)
    fact = np.sqrt([math.factorial(j) for j in k])
    return np.sqrt(even)[:, None, :] * fact[None, :, None] / np.sqrt(var)[None, None, :] ** k[
        None, :, None]


# ---------------------------------------------------------------------------------------------
# exact path


@pytest.mark.parametrize("sigma", [0.05, 1.0, 20.0])
def test_exact_relu_table_equals_closed_forms(sigma):
    alpha = np.linspace(-8, 8, 33)
    mean, var = alpha * sigma, np.full(alpha.size, sigma**2)
    w, how = wick_table("relu", mean, var, 6, 2, return_method=True)
    assert how == "exact"
    for (p, k), f in _relu_forms().items():
        # float evaluation of the closed form: equal to 1e-12 of the natural scale sigma^(p-k)
        np.testing.assert_allclose(w[p, k], f(mean, sigma), rtol=0, atol=1e-12 * sigma ** (p - k))
        # mpmath evaluation at 50 digits: the table is relatively accurate (measured 8e-15),
        # also in the tails where the float closed form is not (1 + erf cancels)
        fm = f.numeric("mpmath")
        with mpmath.workdps(50):
            ref = np.array([float(fm(mpmath.mpf(m), mpmath.mpf(sigma))) for m in mean])
        np.testing.assert_allclose(w[p, k], ref, rtol=1e-13, atol=0)


def test_exact_relu_is_relatively_accurate_deep_in_the_tails():
    alpha = np.array([-30.0, -20.0, -12.0, 12.0, 30.0])
    w = wick_table("relu", alpha * 0.7, np.full(5, 0.49), 4, 2)
    for (p, k), f in _relu_forms().items():
        if k > 4:
            continue
        fm = f.numeric("mpmath")
        with mpmath.workdps(800):  # 1 + erf(-30/sqrt 2) needs ~400 digits
            ref = np.array([float(fm(mpmath.mpf(a * 0.7), mpmath.mpf(0.7))) for a in alpha])
        assert np.all(ref != 0)
        # conditioning of exp(-alpha^2/2) in alpha alone is alpha^2 * 1e-16 ~ 1e-13 at alpha=30
        np.testing.assert_allclose(w[p, k], ref, rtol=5e-13, atol=0)


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "abs", "step", "sign", "identity"])
def test_exact_equals_quadrature(name):
    rng = np.random.default_rng(3)
    mean = rng.uniform(-2.0, 2.0, 40)
    var = np.exp(rng.uniform(np.log(0.25), np.log(4.0), 40))
    we, m1 = wick_table(name, mean, var, 6, 4, method="exact", return_method=True)
    wq, m2 = wick_table(name, mean, var, 6, 4, method="quadrature", return_method=True)
    assert (m1, m2) == ("exact", "quadrature")
    # measured: 2e-15 of the natural scale
    assert np.all(np.abs(we - wq) <= 1e-12 * _scale(name, mean, var, 6, 4))


def test_user_piecewise_activation_is_exact():
    # pieces read off the sympy expression: a finite middle piece and a non-zero kink
    expr = "Piecewise((0, x < -1), ((x + 1)**2, x < 1/2), (9/4 + 3*(x - 1/2), True))"
    ss.register_activation("wick_test_pw", expr, overwrite=True)
    try:
        rng = np.random.default_rng(4)
        mean = rng.uniform(-3.0, 3.0, 30)
        var = np.exp(rng.uniform(np.log(0.01), np.log(25.0), 30))
        we, how = wick_table("wick_test_pw", mean, var, 5, 3, return_method=True)
        wq = wick_table("wick_test_pw", mean, var, 5, 3, method="quadrature")
        assert how == "exact"
        assert np.all(np.abs(we - wq) <= 1e-11 * _scale("wick_test_pw", mean, var, 5, 3))
    finally:
        ss.unregister_activation("wick_test_pw")


def test_piece_much_narrower_than_sd():
    # hard tanh at sd up to 50: the two tails of the middle piece would cancel to 2e-9
    ss.register_activation("wick_test_clip", "Min(Max(x, -1), 1)", overwrite=True)
    try:
        mean, var = np.array([0.3, -0.2, 1.0]), np.array([400.0, 100.0, 2500.0])
        we = wick_table("wick_test_clip", mean, var, 4, 4)
        wq = wick_table("wick_test_clip", mean, var, 4, 4, method="quadrature")
        err = np.abs(we - wq) / _scale("wick_test_clip", mean, var, 4, 4)
        assert np.all(err[:, :2] < 1e-13)  # measured 2e-15
        # k >= 2: Dirac terms of two kinks 2/sd apart nearly cancel (measured 4e-11)
        assert np.all(err < 1e-9)
    finally:
        ss.unregister_activation("wick_test_clip")


def test_step_sign_abs_identity_exact_values():
    mean = np.array([-3.0, -0.4, 0.0, 0.9, 6.0])
    var = np.array([0.3, 1.0, 2.0, 0.5, 4.0])
    sd = np.sqrt(var)
    a = mean / sd
    dens = np.exp(-a * a / 2) / math.sqrt(2 * math.pi)
    w = wick_table("step", mean, var, 3, 1)
    np.testing.assert_allclose(w[1, 0], sps.ndtr(a), rtol=1e-14)
    np.testing.assert_allclose(w[1, 1], dens / sd, rtol=1e-14)          # density of G at 0
    np.testing.assert_allclose(w[1, 2], -a * dens / var, rtol=1e-14)    # -(density)'(0)
    w = wick_table("sign", mean, var, 1, 1)
    np.testing.assert_allclose(w[1], [2 * sps.ndtr(a) - 1, 2 * dens / sd], rtol=1e-14)
    w_abs, w_id = wick_table("abs", mean, var, 3, 2), wick_table("identity", mean, var, 3, 2)
    np.testing.assert_allclose(w_abs[2], w_id[2], rtol=1e-14, atol=1e-14)  # |x|^2 = x^2
    np.testing.assert_allclose(w_id[2, :3], [mean**2 + var, 2 * mean, np.full(5, 2.0)],
                               rtol=1e-14)
    np.testing.assert_allclose(w_abs[1, 2], 2 * dens / sd, rtol=1e-14)
    np.testing.assert_array_equal(w_id[:, 3], 0.0)


def test_p_zero_row_and_shapes():
    w = wick_table("tanh", 0.3, 2.0, 3, 2)  # scalars: n = 1
    assert w.shape == (3, 4, 1) and w.dtype == np.float64
    np.testing.assert_array_equal(w[0, :, 0], [1.0, 0.0, 0.0, 0.0])
    assert wick_table("relu", [0.1, 0.2], [1.0, 1.0], 0, 0).shape == (1, 1, 2)


# ---------------------------------------------------------------------------------------------
# quadrature path


@pytest.mark.parametrize("mean,var", [(0.7, 2.0), (-1.3, 0.5)])
def test_tanh_integration_by_parts_equals_derivative_expectation(mean, var):
    # independent route: E[tanh^(k)(G)] by mpmath quadrature of the sympy k-th derivative
    w = wick_table("tanh", [mean], [var], 6, 1)
    deriv = sp.tanh(X)
    with mpmath.workdps(20):
        s = mpmath.sqrt(var)
        for k in range(7):
            f = sp.lambdify(X, deriv, "mpmath")
            ref = mpmath.quad(lambda z: f(mean + s * z) * mpmath.npdf(z),
                              [-mpmath.inf, -mean / s, mpmath.inf])
            assert abs(w[1, k, 0] - float(ref)) <= 1e-12 * max(1.0, abs(float(ref)))
            deriv = sp.diff(deriv, X)


@pytest.mark.parametrize("name", ["sigmoid", "gelu"])
def test_quadrature_matches_mpmath_hermite_form(name):
    act = ss.activation(name)
    f = act.mpmath
    mean, var = np.array([0.4, -2.0, 0.1]), np.array([1.5, 0.2, 100.0])
    w, how = wick_table(name, mean, var, 4, 3, return_method=True)
    assert how == "quadrature"
    scale = _scale(name, mean, var, 4, 3)
    with mpmath.workdps(20):
        for i, (m, v) in enumerate(zip(mean, var)):
            s = mpmath.sqrt(v)
            cuts = [-mpmath.inf, -m / s, mpmath.inf]
            for p in (1, 3):
                for k in (0, 2, 4):
                    ref = mpmath.quad(lambda z: f(m + s * z) ** p * hermite_he(k, z)
                                      * mpmath.npdf(z), cuts) / s**k
                    assert abs(w[p, k, i] - float(ref)) <= 1e-13 * scale[p, k, i]


def test_agrees_with_gaussian_moment_closed_forms():
    # the closed forms of symscale.gaussian (its quadrature fallback is less accurate)
    mean, var = np.array([-1.0, 0.0, 0.5, 2.0]), np.array([0.5, 1.0, 2.0, 0.3])
    for name, powers in [("relu", (1, 2)), ("abs", (1, 2)), ("sin", (1, 2)), ("gelu", (1,)),
                         ("erf", (1,))]:
        w = wick_table(name, mean, var, 0, 2)
        for p in powers:
            ref = ss.gaussian_moment(name, p)(mean, var)
            np.testing.assert_allclose(w[p, 0], ref, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["relu", "tanh", "abs"])
def test_monte_carlo_moments(name):
    rng = np.random.default_rng(11)
    mean, var = np.array([-0.8, 0.3, 1.5]), np.array([0.6, 1.0, 2.5])
    w = wick_table(name, mean, var, 0, 3)
    act = ss.activation(name)
    for i in range(3):
        phi = act(mean[i] + math.sqrt(var[i]) * rng.standard_normal(200_000))
        for p in (1, 2, 3):
            assert abs(mc_zscore(phi**p, w[p, 0, i])) < 5


# ---------------------------------------------------------------------------------------------
# closed forms


def test_formula_checks_pass():
    forms = [relu_gaussian_mean(), relu_gaussian_second_moment()]
    forms += [relu_derivative_mean(k) for k in range(1, 4)]
    for f in forms:
        assert f.names == ("mu", "sigma")
        report = f.check(n_points=3, n_samples=100_000, seed=2)
        assert report.passed, str(report)
    report = relu_bivariate_moment().check(n_points=3, n_samples=100_000, seed=2)
    assert report.passed, str(report)


def test_formula_check_detects_a_wrong_closed_form():
    # the sampler of E relu''(Z) is the integration-by-parts estimator, not the formula itself
    good = relu_derivative_mean(2)
    bad = ss.Formula(-good.expr, good.variables, name="wrong", sampler=good.sampler)
    assert not bad.check(points=[{"mu": 0.2, "sigma": 1.0}], n_samples=100_000, seed=0).passed


def test_relu_derivative_mean_forms():
    mu, sigma = sp.Symbol("mu", real=True), sp.Symbol("sigma", positive=True)
    assert relu_derivative_mean(0).expr == relu_gaussian_mean().expr
    a = mu / sigma
    assert sp.simplify(relu_derivative_mean(2).expr
                       - sp.exp(-a**2 / 2) / sp.sqrt(2 * sp.pi) / sigma) == 0
    # d/dmu of E relu^(k) is E relu^(k+1): the closed forms are consistent with each other
    for k in range(5):
        lhs = sp.diff(relu_derivative_mean(k).expr, mu)
        assert sp.simplify(lhs - relu_derivative_mean(k + 1).expr) == 0


def test_bivariate_reference_values():
    f = relu_bivariate_moment()
    val = f(POINT["mu1"], POINT["mu2"], POINT["s1"], POINT["s2"], POINT["rho"])
    assert abs(val - BIVARIATE_REF) < 1e-12
    num = relu_bivariate_moment_numeric(*POINT.values())
    assert abs(num - BIVARIATE_REF) < 1e-12
    m1 = relu_gaussian_mean()
    cov = num - m1(POINT["mu1"], POINT["s1"]) * m1(POINT["mu2"], POINT["s2"])
    assert abs(cov - COV_REF) < 1e-6
    assert r"\Phi_2" in f.latex()


def test_bivariate_against_conditional_quadrature():
    # independent: E[relu Z1 E(relu Z2 | Z1)] with the univariate closed form inside
    def mean_relu(m, s):
        return s * mpmath.npdf(m / s) + m * mpmath.ncdf(m / s)

    rng = np.random.default_rng(5)
    for _ in range(4):
        m1, m2 = rng.uniform(-1.5, 1.5, 2)
        s1, s2 = np.exp(rng.uniform(-0.7, 0.7, 2))
        rho = rng.uniform(-0.95, 0.95)
        r = math.sqrt(1 - rho**2)
        with mpmath.workdps(25):
            ref = mpmath.quad(lambda x: (m1 + s1 * x) * mean_relu(m2 + s2 * rho * x, s2 * r)
                              * mpmath.npdf(x), [-m1 / s1, mpmath.inf])
        assert abs(relu_bivariate_moment_numeric(m1, m2, s1, s2, rho) - float(ref)) < 1e-14


def test_zero_mean_is_the_arccosine_kernel():
    rho = np.linspace(-1, 1, 41)
    th = np.arccos(rho)
    ref = 1.2 * 0.7 / (2 * np.pi) * (np.sin(th) + (np.pi - th) * np.cos(th))
    got = relu_bivariate_moment_numeric(0.0, 0.0, 1.2, 0.7, rho)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-15)


def test_bivariate_rho_limits_are_continuous():
    for m1, m2 in [(0.3, -0.5), (0.3, 0.3), (-1.0, 2.0), (-0.2, -0.4)]:
        for r in (1.0, -1.0):
            at = relu_bivariate_moment_numeric(m1, m2, 1.2, 0.7, r)
            near = relu_bivariate_moment_numeric(m1, m2, 1.2, 0.7, r * (1 - 1e-10))
            assert np.isfinite(at) and abs(at - near) < 1e-6
    # rho = 1 with equal marginals: E relu(Z)^2
    second = relu_gaussian_second_moment()(0.4, 1.1)
    assert abs(relu_bivariate_moment_numeric(0.4, 0.4, 1.1, 1.1, 1.0) - second) < 1e-15


def test_mehler_series_of_the_table_gives_the_covariance():
    # Cov = sum_k S12^k/k! E relu^(k)(Z1) E relu^(k)(Z2) (note 03, §3, with its partial sums)
    mu = np.array([POINT["mu1"], POINT["mu2"]])
    sd = np.array([POINT["s1"], POINT["s2"]])
    w = wick_table("relu", mu, sd**2, 60, 1)[1]
    s12 = POINT["rho"] * sd[0] * sd[1]
    terms = np.array([s12**k / math.factorial(k) * w[k, 0] * w[k, 1] for k in range(61)])
    partial = np.cumsum(terms[1:])
    for kept, value, digits in [(1, 0.07167, 5), (2, 0.08974, 5), (3, 0.08910, 5),
                                (5, 0.08926, 5), (10, 0.089247, 6)]:
        assert round(partial[kept - 1], digits) == value
    cov = relu_bivariate_moment_numeric(*POINT.values()) - w[0, 0] * w[0, 1]
    assert abs(partial[-1] - cov) < 1e-9


@pytest.mark.parametrize("a,b,rho", [(0.0, 0.0, 0.5), (0.0, -1.3, 0.7), (2.0, 0.0, -0.4),
                                     (-2.5, 1.9, -0.95), (5.0, -2.5, 0.9999), (-6.0, -6.0, 0.4),
                                     (0.3, 0.3, -0.999), (-0.7, 0.2, 0.0)])
def test_bivariate_normal_cdf_owen_t_against_mpmath(a, b, rho):
    ref = float(sp.N(BivariateNormalCDF(sp.Float(a), sp.Float(b), sp.Float(rho)), 30))
    assert abs(bivariate_normal_cdf(a, b, rho) - ref) < 1e-14
    assert abs(bivariate_normal_cdf(b, a, rho) - ref) < 1e-14  # symmetric


@pytest.mark.parametrize("a,b,rho", [(-5.8553328440, -1.5501922168, -0.9999999026184273),
                                     (-2.0503268821, -0.3668159098, -0.9999999177866266),
                                     (-0.8722695044, -6.2438198387, -0.7788560133)])
def test_bivariate_normal_cdf_is_a_probability_in_far_tails(a, b, rho):
    """Owen's formula cancels in far tails (true values 1e-52 to 1e-30 here, where it gave
    -3e-17 to -6e-17): the result is clipped to [0, 1], still within 1e-16 of the truth."""
    for x, y in ((a, b), (b, a)):
        got = float(bivariate_normal_cdf(x, y, rho))
        assert 0.0 <= got < 1e-16
    grid = np.random.default_rng(0).uniform(-8, 8, (2, 4000))
    r = np.random.default_rng(1).uniform(-1, 1, 4000)
    vals = bivariate_normal_cdf(grid[0], grid[1], r)
    assert np.all((vals >= 0) & (vals <= 1))


def test_bivariate_normal_cdf_symbolic():
    a, b, r = sp.symbols("a b rho", real=True)
    F = BivariateNormalCDF(a, b, r)
    # the derivative in a is phi(a) Phi((b - rho a)/r): check it by finite differences
    d = sp.lambdify((a, b, r), sp.diff(F, a), "numpy")
    h = 1e-5
    fd = (bivariate_normal_cdf(0.3 + h, -0.2, 0.5) - bivariate_normal_cdf(0.3 - h, -0.2, 0.5))
    assert abs(fd / (2 * h) - d(0.3, -0.2, 0.5)) < 1e-9
    fr = sp.lambdify((a, b, r), F, "numpy")
    assert abs(fr(0.3, -0.2, 0.5) - bivariate_normal_cdf(0.3, -0.2, 0.5)) == 0
    assert BivariateNormalCDF(a, sp.oo, r) == (1 + sp.erf(a / sp.sqrt(2))) / 2
    assert BivariateNormalCDF(-sp.oo, b, r) == 0
    np.testing.assert_allclose(bivariate_normal_cdf([np.inf, -np.inf], 0.3, 0.2),
                               [sps.ndtr(0.3), 0.0])


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("kwargs,name", [
    (dict(mean=[0.0, np.nan], var=[1.0, 1.0]), "mean"),
    (dict(mean=[0.0, 1.0], var=[1.0, np.inf]), "var"),
    (dict(mean=[0.0, 1.0], var=[1.0, 0.0]), "var"),
    (dict(mean=[0.0, 1.0], var=[1.0, -2.0]), "var"),
    (dict(mean=[0.0, 1.0], var=[1.0]), "mean and var"),
    (dict(mean=np.zeros((2, 2)), var=np.ones((2, 2))), "mean"),
    (dict(k_max=-1), "k_max"),
    (dict(p_max=-1), "p_max"),
    (dict(method="gauss"), "method"),
])
def test_bad_input_raises_value_error_naming_the_argument(kwargs, name):
    args = dict(mean=[0.0, 1.0], var=[1.0, 2.0], k_max=2, p_max=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        wick_table("relu", **args)


@pytest.mark.parametrize("kwargs,match", [
    # bool and floats (even 2.0) are not integers: a TypeError (symscale.validation)
    (dict(k_max=1.5), "k_max must be an integer, got float 1.5"),
    (dict(k_max=True), "k_max must be an integer, got bool True"),
    (dict(p_max=2.0), "p_max must be an integer, got float 2.0"),
])
def test_non_integer_orders_raise_type_error_naming_the_argument(kwargs, match):
    args = dict(mean=[0.0, 1.0], var=[1.0, 2.0], k_max=2, p_max=2)
    args.update(kwargs)
    with pytest.raises(TypeError, match=match):
        wick_table("relu", **args)


@pytest.mark.parametrize("name", ["mean", "var"])
@pytest.mark.parametrize("bad", ["1", True, None, 1j, [1.0, "2"]])
def test_non_numeric_moments_raise_type_error_naming_the_argument(name, bad):
    # np.asarray(..., dtype=float) used to read "1" and True as 1.0 and None as nan
    args = dict(mean=[0.0], var=[1.0], k_max=2, p_max=2)
    args[name] = bad
    # a scalar is named as a number, a sequence as an array
    with pytest.raises(TypeError, match=f"^{name} must be a real (number|numeric array), got"):
        wick_table("relu", **args)


def test_exact_method_for_a_smooth_activation_names_method():
    with pytest.raises(ValueError, match="method"):
        wick_table("tanh", [0.0], [1.0], 2, 2, method="exact")
    assert wick_table("tanh", [0.0], [1.0], 2, 2, method="auto", return_method=True)[1] == \
        "quadrature"


def test_non_finite_results_raise_floating_point_error():
    with pytest.raises(FloatingPointError, match=r"exp.*neuron 1"):
        wick_table("exp", [0.0, 1.0], [1.0, 1e6], 1, 2)
    with pytest.raises(FloatingPointError, match=r"relu.*neuron 0"):
        wick_table("relu", [0.0], [1e-300], 6, 1)  # the delta'''' at sd = 1e-150
    with pytest.raises(ValueError, match="rho"):
        relu_bivariate_moment_numeric(0.0, 0.0, 1.0, 1.0, 1.5)
    with pytest.raises(FloatingPointError, match="mu1=1e"):
        relu_bivariate_moment_numeric(1e200, 1e200, 1.0, 1.0, 0.5)  # the product overflows
