"""Edge values of the dual kernels (issue 12): zero, tiny and huge variances, rho = +-1, signed
zeros, flags and argument validation, each against an independent reference.

References (none of them is the code under test):

* ``_mp_mean``: one-dimensional mpmath quadrature (40 digits) of E[h(s Z)], Z ~ N(0, 1), with
  breakpoints at 0, +-1/s and +-1, the integrand scaled to O(1) first (mpmath's stopping rule is
  absolute). It gives the point mass (a zero variance), rho = +-1 (u = +-v), rho = 0 (a product
  of means) and the Stein/Taylor expansion in a tiny variance.
* ``_textbook``: the textbook closed form ``dual_kernel(act).expr`` (acos/asin, no stable
  rewriting) evaluated by mpmath at 50 digits.
* ``_gl_reference``: the conditional (Cartesian) representation u = s1 z1, v = s2 (rho z1 + r z2)
  integrated by composite Gauss-Legendre on panels graded towards u = 0 and v = 0; it is checked
  against the erf closed form at the same extreme points before it is used.
"""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale.errors import DomainError
from symscale.kernels import (check_covariance, check_dual_kernel, cross_kernel_numeric,
                              gauss_hermite, input_kernel, mlp_kernels, resnet_kernels)

QS = [1e-300, 1e-17, 1e-3, 1.0, 1e6, 1e12]
RHOS = [-1.0, -0.999999, -0.5, -0.0, 0.0, 0.5, 0.999999, 1.0]
QUADRATURE = ["tanh", "sigmoid", "silu", "softplus"]


# -- independent references ------------------------------------------------------------------
def _mp_mean(h, s, dps=30):
    """E[h(s Z)] by mpmath (h takes an mpf); see the module docstring."""
    with mpmath.workdps(dps):
        s = mpmath.mpf(s)
        probe = [mpmath.mpf(z) for z in ("0.01", "0.3", "1", "3")]
        scale = max(abs(h(s * z)) + abs(h(-s * z)) for z in probe) or mpmath.mpf(1)
        pts = {mpmath.mpf(0), mpmath.mpf(1), mpmath.mpf(-1), mpmath.mpf(8), mpmath.mpf(-8)}
        if s > 1:
            pts |= {1 / s, -1 / s, 8 / s, -8 / s}
        val = mpmath.quad(lambda z: h(s * z) / scale * mpmath.exp(-z * z / 2),
                          [-mpmath.inf] + sorted(pts) + [mpmath.inf])
        return val * scale / mpmath.sqrt(2 * mpmath.pi)


def _phi(act, derivative):
    act = ss.activation(act) if isinstance(act, str) else act
    return (act.derivative() if derivative else act).mpmath


def _mp_reference_1d(act, q11, q12, q22, derivative=False):
    """E[phi(u) phi(v)] when it is a one-dimensional integral: a zero variance, rho = +-1, 0."""
    f = _phi(act, derivative)
    with mpmath.workdps(30):
        a, c, b = mpmath.mpf(q11), mpmath.mpf(q12), mpmath.mpf(q22)
        if a == 0 or b == 0:  # point mass at 0
            f0 = f(mpmath.mpf(0))
            return float(f0 * f0 if a == b else f0 * _mp_mean(f, mpmath.sqrt(max(a, b))))
        rho = c / (mpmath.sqrt(a) * mpmath.sqrt(b))
        if rho == 0:
            return float(_mp_mean(f, mpmath.sqrt(a)) * _mp_mean(f, mpmath.sqrt(b)))
        assert abs(abs(rho) - 1) < 1e-12
        big, small = max(a, b), min(a, b)  # integrate in the larger one: its breakpoints
        ratio = mpmath.sign(rho) * mpmath.sqrt(small / big)
        return float(_mp_mean(lambda u: f(u) * f(ratio * u), mpmath.sqrt(big)))


def _textbook(act, derivative=False):
    """The display form in mpmath with 40 digits plus one per decade of the smallest variance
    below 1 (e^(q12 - q) - e^(-q12 - q) needs 300 more digits at q = 1e-300)."""
    V = ss.dual_kernel(act, derivative=derivative)
    heaviside = {"Heaviside": lambda x: mpmath.mpf(1) if x > 0 else (
        mpmath.mpf(0) if x < 0 else mpmath.mpf(1) / 2)}
    fn = sp.lambdify(V.symbols, V.expr, modules=[heaviside, "mpmath"])

    def value(q11, q12, q22):
        small = min(q11, q22)
        with mpmath.workdps(40 + (int(-math.log10(small)) if 0 < small < 1 else 0)):
            a, c, b = mpmath.mpf(q11), mpmath.mpf(q12), mpmath.mpf(q22)
            bound = mpmath.sqrt(a) * mpmath.sqrt(b)
            c = max(min(c, bound), -bound)  # acos/asin of 1 + round-off
            return float(mpmath.re(fn(a, c, b)))

    return value


def _gl_reference(act, q11, q12, q22, derivative=False, n=16):
    f = ss.activation(act).derivative() if derivative else ss.activation(act)
    x, w = np.polynomial.legendre.leggauss(n)
    grid = np.arange(-14.0, 14.0 + 1e-9, 0.5)

    def nodes(center, widths):
        center = np.atleast_1d(center)
        steps = [min(w_, 0.5) * 1e-3 * 2.0 ** np.arange(60) for w_ in widths if 0 < w_ < np.inf]
        graded = [np.zeros(1)] + [k * g[g < 1.0] for g in steps for k in (1, -1)]
        pts = np.concatenate([center[:, None] + np.concatenate(graded)[None, :],
                              np.broadcast_to(grid, (center.size, grid.size))], 1)
        bp = np.sort(np.clip(pts, -14.0, 14.0), axis=1)
        lo, hi = bp[:, :-1, None], bp[:, 1:, None]
        z = ((lo + hi) / 2 + (hi - lo) / 2 * x).reshape(center.size, -1)
        wz = ((hi - lo) / 2 * w).reshape(center.size, -1)
        return z, wz * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    s1, s2 = math.sqrt(q11), math.sqrt(q22)
    rho = q12 / s1 / s2
    r = math.sqrt((1 - rho) * (1 + rho))
    widths = [1 / s1] + ([r / abs(rho), 1 / (s2 * abs(rho))] if rho else [])
    z1, w1 = nodes(0.0, widths)
    z1, w1 = z1[0], w1[0]
    z2, w2 = nodes(-rho * z1 / r, [1 / (s2 * r), 1.0])
    inner = np.sum(f(s2 * (rho * z1[:, None] + r * z2)) * w2, axis=1)
    return float((f(s1 * z1) * inner) @ w1)


def _close(value, ref, rtol, scale=0.0):
    """|value - ref| <= rtol * (|ref| + scale); scale is the Cauchy-Schwarz size of the kernel
    when the true value is (numerically) 0, e.g. E[tanh u] E[tanh v]."""
    return abs(value - ref) <= rtol * (abs(ref) + scale)


# -- 1. zero variance is a point mass (sign(0) = 0, step(0) = 1/2) ---------------------------------
@pytest.mark.parametrize("name", ["sign", "step", "relu", "abs", "tanh", "sigmoid", "gelu",
                                  "cos", "erf"])
@pytest.mark.parametrize("derivative", [False, True])
def test_zero_variance_is_a_point_mass(name, derivative):
    for q in (0.0, 1e-300, 1.0, 1e12):
        for args in ((0.0, 0.0, q), (q, -0.0, 0.0)):
            got = ss.dual_kernel_numeric(name, *args, derivative=derivative)
            if name == "cos":  # cos(1e6 z) is too oscillatory for quadrature: E cos v = e^-q/2
                ref = _textbook(name, derivative)(*args)
            else:
                ref = _mp_reference_1d(name, *args, derivative=derivative)
            assert _close(got, ref, 1e-12, 1e-300), (args, got, ref)
    assert ss.dual_kernel_numeric("sign", 0, 0, 1) == 0.0  # was 1.0
    assert ss.dual_kernel_numeric("step", 0, 0, 1) == 0.25  # step(0) E[step(v)] = 1/2 * 1/2


@pytest.mark.parametrize("name", ["sign", "step"])
def test_gram_matrix_with_a_zero_input_is_psd(name):
    X = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, -1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    for depth in (1, 2, 5):
        K, _ = mlp_kernels(X, depth, name, weight_var=1.0)
        eig = np.linalg.eigvalsh(K)
        assert eig.min() >= -1e-10 * np.trace(K), (depth, eig)  # was -0.63
    # the row of the zero input: phi(0) E[phi(v)] with phi(0) = 0 (sign) or 1/2 (step)
    K1, _ = mlp_kernels(X, 1, name)
    expected = 0.0 if name == "sign" else 0.25
    np.testing.assert_allclose(K1[2], expected, rtol=1e-15, atol=1e-300)


# -- 2. tiny variances ---------------------------------------------------------------------------
def test_tiny_covariances_are_valid():
    for q in (1e-160, 1e-200, 1e-300, 5e-324):
        a, c, b = check_covariance(q, 0.5 * q, q)
        assert c == 0.5 * q
        with pytest.raises(DomainError, match="q12 must satisfy"):
            check_covariance(q, 2 * q, q)
    # rho = 1 stays exact (duplicate inputs) at every scale
    for q in (1e-300, 1e-170, 3.7, 1e300):
        assert ss.dual_kernel_numeric("sign", q, q, q) == 1.0
        assert ss.dual_kernel_numeric("relu", q, q, q) == q / 2


@pytest.mark.parametrize("name", QUADRATURE + ["gelu", "erf", "relu", "sign", "sin"])
def test_tiny_variance_taylor(name):
    """At q ~ 1e-200 Taylor is exact in float64: V = phi(0)^2 + ... + phi'(0)^2 q12 + ..."""
    act = ss.activation(name)
    x = sp.Symbol("x", real=True)
    expr = act.expr.subs(act.expr.free_symbols.pop(), x) if act.expr.free_symbols else act.expr
    q = 1e-200
    for rho in (-1.0, -0.5, 0.5, 1.0):
        got = ss.dual_kernel_numeric(act, q, 2 * rho * q, 4 * q)
        if act.is_smooth:
            d0 = float(expr.subs(x, 0))
            d1 = float(sp.diff(expr, x).subs(x, 0))
            ref = d0 * d0 + d1 * d1 * rho * 2 * q + d0 * float(sp.diff(expr, x, 2).subs(x, 0)) \
                * 5 * q / 2
        else:  # relu, sign: homogeneous, so the unit-scale textbook form gives the value
            ref = _textbook(name)(1.0, 2 * rho, 4.0) * (q if name == "relu" else 1.0)
        assert _close(got, ref, 1e-12, 1e-300 if ref == 0 else 0.0), (rho, got, ref)


def test_deep_gelu_follows_the_variance_down():
    """GELU at w = 1: q shrinks ~4x per layer, to 1e-241 at depth 400 (was rejected)."""
    X = np.array([[1.0, 0.2], [0.3, -1.0], [0.0, 0.0]])
    depth = 400
    nngp, ntk = mlp_kernels(X, depth, "gelu")
    V, Vd = _textbook("gelu"), _textbook("gelu", derivative=True)
    with mpmath.workdps(50):
        S = [[mpmath.mpf(v) for v in row] for row in input_kernel(X)]
        T = [row[:] for row in S]
        for _ in range(depth):
            d = [S[i][i] for i in range(3)]
            v = [[V(d[i], S[i][j], d[j]) if d[i] * d[j] > 0 else 0.0 for j in range(3)]
                 for i in range(3)]
            vd = [[Vd(d[i], S[i][j], d[j]) if d[i] * d[j] > 0 else 0.25 for j in range(3)]
                  for i in range(3)]
            T = [[v[i][j] + vd[i][j] * T[i][j] for j in range(3)] for i in range(3)]
            S = [[mpmath.mpf(v[i][j]) for j in range(3)] for i in range(3)]
    ref_s = np.array([[float(x) for x in row] for row in S])
    ref_t = np.array([[float(x) for x in row] for row in T])
    assert 1e-245 < nngp[0, 0] < 1e-238
    np.testing.assert_allclose(nngp, ref_s, rtol=1e-10, atol=0)
    np.testing.assert_allclose(ntk, ref_t, rtol=1e-10, atol=0)


def test_silu_at_tiny_variance_through_the_recursion():
    """Inputs of norm 1e-150: q = 1e-300, where silu = x/2 + O(x^2) makes every layer q/4 and
    V' = 1/4 (Taylor), so NNGP = Sigma0 / 4^L and NTK = (L + 1) Sigma0 / 4^L."""
    X = np.array([[1.0, 0.5], [-0.2, 1.0]]) * 1e-150
    S0 = input_kernel(X)
    depth = 3
    nngp, ntk = mlp_kernels(X, depth, "silu")
    np.testing.assert_allclose(nngp, S0 / 4**depth, rtol=1e-12)
    np.testing.assert_allclose(ntk, (depth + 1) * S0 / 4**depth, rtol=1e-12)


# -- 3. large variance near rho = +-1 --------------------------------------------------------------
def test_gelu_sign_at_large_variance():
    # E[gelu(u) gelu(-u)] = -E[u^2 Phi(u) Phi(-u)] < 0; the old form gave +2.9e-5
    got = ss.dual_kernel_numeric("gelu", 1e12, -1e12, 1e12)
    ref = _mp_reference_1d("gelu", 1e12, -1e12, 1e12)
    assert got < 0 and _close(got, ref, 1e-12)
    assert _close(got, _textbook("gelu")(1e12, -1e12, 1e12), 1e-12)


NEAR_PM1 = [(1e12, 0.999999e12, 1e12), (1e12, -0.999999e12, 1e12), (1e12, 0.0, 1e12),
            (1e6, 0.5e9, 1e12)]


def test_gl_reference_is_accurate_there():
    """The 2-D reference against a closed form (erf, erf') at the points where it is used."""
    for derivative in (False, True):
        for p in NEAR_PM1:
            ref = _textbook("erf", derivative)(*p)
            assert _close(_gl_reference("erf", *p, derivative=derivative), ref, 1e-10, 1e-9)


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
@pytest.mark.parametrize("derivative", [False, True])
def test_large_variance_near_rho_pm1(name, derivative):
    for p in NEAR_PM1:
        got = ss.dual_kernel_numeric(name, *p, derivative=derivative)
        ref = _gl_reference(name, *p, derivative=derivative)
        # E[tanh u] E[tanh v] = 0: an absolute slack on the O(1) kernel
        assert _close(got, ref, 1e-8, 0.0 if derivative else 1e-6), (p, got, ref)
        # tanh' at rho = 0 was 7e-3 off


# -- 4. sin and cos at tiny variance -------------------------------------------------------------
@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("derivative", [False, True])
def test_sinusoids_at_tiny_variance(name, derivative):
    V = _textbook(name, derivative)
    for q in (1e-300, 1e-17, 1e-3, 1.0, 30.0):
        for rho in (-1.0, -0.5, 0.5, 1.0):
            got = ss.dual_kernel_numeric(name, q, rho * q, q, derivative=derivative)
            assert _close(got, V(q, rho * q, q), 1e-14), (q, rho, got)
    assert ss.dual_kernel_numeric("sin", 1e-17, 1e-17, 1e-17) == pytest.approx(1e-17,
                                                                               rel=1e-15)


# -- 5. q12 = -0.0 is q12 = +0.0 ---------------------------------------------------------------
@pytest.mark.parametrize("name", ss.list_activations())
def test_signed_zero_covariance(name):
    for derivative in (False, True):
        for q11, q22 in ((0.0, 1.0), (0.0, 0.0), (1e-300, 1e-300), (1.3, 0.7), (1e12, 1.0)):
            try:
                plus = ss.dual_kernel_numeric(name, q11, 0.0, q22, derivative=derivative)
            except OverflowError:
                assert name == "exp"
                continue
            minus = ss.dual_kernel_numeric(name, q11, -0.0, q22, derivative=derivative)
            assert plus == minus and math.copysign(1, plus) == math.copysign(1, minus)
            try:
                V = ss.dual_kernel(name, derivative=derivative)
            except ss.NoClosedFormError:
                continue
            if q11 > 0 and q22 > 0:  # the Formula's domain is positive variances
                assert V(q11, 0.0, q22) == V(q11, -0.0, q22)


# -- 6. flags are bools ----------------------------------------------------------------------
def test_flags_must_be_bools():
    X = np.eye(2)
    with pytest.raises(TypeError, match="derivative must be True or False"):
        ss.dual_kernel_numeric("relu", 1.0, 0.5, 1.0, derivative="no")
    with pytest.raises(TypeError, match="derivative must be True or False"):
        ss.dual_kernel("relu", derivative="no")
    with pytest.raises(TypeError, match="derivative must be True or False"):
        check_dual_kernel("relu", derivative=1)
    with pytest.raises(TypeError, match="ntk must be True or False"):
        mlp_kernels(X, 1, ntk="no")
    with pytest.raises(TypeError, match="ntk must be True or False"):
        resnet_kernels(X, 1, ntk=0)
    with pytest.raises(TypeError, match="return_error must be True or False"):
        ss.dual_kernel_numeric("tanh", 1.0, 0.5, 1.0, return_error="yes")
    # numpy booleans are booleans
    assert ss.dual_kernel_numeric("relu", 1.0, 0.5, 1.0, derivative=np.bool_(True)) == \
        pytest.approx(1 / 3)
    assert mlp_kernels(X, 1, ntk=np.bool_(False))[1] is None


# -- 7. argument validation --------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("call, exc, match", [
    (lambda: ss.dual_kernel_numeric("relu", NAN, 0.0, 1.0), DomainError, "q11 must be finite"),
    (lambda: ss.dual_kernel_numeric("relu", 1.0, INF, 1.0), DomainError, "q12 must be finite"),
    (lambda: ss.dual_kernel_numeric("relu", 1.0, 0.0, -1.0), DomainError, "q22 must be >= 0"),
    (lambda: ss.dual_kernel_numeric("tanh", 1.0, 1.5, 1.0), DomainError, "q12 must satisfy"),
    (lambda: ss.dual_kernel_numeric("relu", True, 0.0, 1.0), TypeError, "q11 must be a real"),
    (lambda: ss.dual_kernel_numeric("relu", 1.0, "0", 1.0), TypeError, "q12 must be a real"),
    (lambda: ss.dual_kernel_numeric("relu", 1.0, 0.0, None), TypeError, "q22 must be a real"),
    (lambda: ss.dual_kernel_numeric("relu", 1.0, 1j, 1.0), TypeError, "q12 must be a real"),
    (lambda: ss.dual_kernel_numeric("relu", np.ones(2), np.zeros(3), 1.0), ValueError,
     "must broadcast"),
    (lambda: check_covariance(1.0, 2.0, 1.0, names=("Sigma11", "Sigma12", "Sigma22")),
     DomainError, r"Sigma12 must satisfy Sigma12\*\*2 <= Sigma11\*Sigma22"),
    (lambda: cross_kernel_numeric("relu", "tanh", 1.0, NAN, 1.0), DomainError,
     "q12 must be finite"),
    (lambda: cross_kernel_numeric("relu", "tanh", 1.0, 0.0, 1.0, deg=2.5), TypeError, "deg"),
    (lambda: gauss_hermite(0), ValueError, "deg must be >= 1"),
    (lambda: gauss_hermite(True), TypeError, "deg must be an integer"),
    (lambda: check_dual_kernel("relu", n_points=0), ValueError, "n_points must be >= 1"),
    (lambda: check_dual_kernel("relu", n_samples=10.5), TypeError, "n_samples"),
    (lambda: check_dual_kernel("relu", n_sigma=-1.0), ValueError, "n_sigma must be > 0"),
    (lambda: ss.gaussian_moment("relu", power=2.5), TypeError, "power must be an integer"),
    (lambda: ss.gaussian_moment_numeric("relu", 0.0, NAN), DomainError, "var must be finite"),
    (lambda: input_kernel(np.ones((2, 2)), weight_var=-1.0), ValueError, "weight_var must be > 0"),
    (lambda: input_kernel(np.ones((2, 2)), bias_var=True), TypeError, "bias_var must be a real"),
    (lambda: input_kernel(np.ones(3)), ValueError, "X must be a P x d array"),
    (lambda: input_kernel(np.ones((2, 2, 2))), ValueError, "X must be a P x d array"),
    (lambda: input_kernel(np.array([[1.0, NAN]])), DomainError, r"X must be finite.*\(0, 1\)"),
    (lambda: input_kernel(np.array([["a", "b"]])), TypeError, "X must be a real"),
    (lambda: input_kernel(np.ones((2, 2), dtype=bool)), TypeError, "X must be a real"),
    (lambda: input_kernel(np.full((2, 2), 1e200)), OverflowError, "rescale X"),
    (lambda: mlp_kernels(np.eye(2), 2.5), TypeError, "depth must be an integer"),
    (lambda: mlp_kernels(np.eye(2), True), TypeError, "depth must be an integer"),
    (lambda: mlp_kernels(np.eye(2), -1), ValueError, "depth must be >= 0"),
    (lambda: mlp_kernels(np.eye(2), 1, weight_var=0.0), ValueError, "weight_var must be > 0"),
    (lambda: mlp_kernels(np.eye(2), 1, weight_var=NAN), ValueError, "weight_var must be finite"),
    (lambda: mlp_kernels(np.eye(2), 1, bias_var=-1.0), ValueError, "bias_var must be >= 0"),
    (lambda: mlp_kernels(np.eye(2), 1, weight_var="2"), TypeError, "weight_var must be a real"),
    (lambda: resnet_kernels(np.eye(2), 1, branch_scale=NAN), ValueError,
     "branch_scale must be finite"),
    (lambda: resnet_kernels(np.eye(2), 1, branch_scale=True), TypeError, "branch_scale"),
    (lambda: resnet_kernels(np.eye(2), 1.0), TypeError, "depth must be an integer"),
])
def test_bad_arguments_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_numpy_integers_are_integers():
    nngp, _ = mlp_kernels(np.eye(2), np.int64(2), "relu", weight_var=np.float32(2.0))
    assert np.allclose(nngp, mlp_kernels(np.eye(2), 2, "relu", weight_var=2.0)[0])
    assert ss.dual_kernel_numeric("tanh", 1.0, 0.5, 1.0, deg=np.int32(40)) == pytest.approx(
        ss.dual_kernel_numeric("tanh", 1.0, 0.5, 1.0), rel=1e-9)


def test_overflow_in_the_recursion_is_an_error_not_inf():
    X = np.eye(2)
    with pytest.raises(OverflowError, match="relu overflows float64 within depth 300"):
        mlp_kernels(X, 300, "relu", weight_var=50.0)  # the fused path: (50/2)^300
    with pytest.raises(OverflowError, match="gelu overflows float64 at layer"):
        mlp_kernels(X, 10, "gelu", weight_var=1e100)  # the layer-by-layer path
    with pytest.raises(OverflowError, match="exp overflows float64 at layer 1 of depth 50"):
        mlp_kernels(X * 30, 50, "exp")
    with pytest.raises(OverflowError, match="resnet_kernels"):
        resnet_kernels(X, 500, "relu", branch_scale=3.0)  # grows 5.5x per block


# -- compact sweep ---------------------------------------------------------------------------
def _grid(qs=QS):
    for i, q11 in enumerate(qs):
        for q22 in qs[i:]:
            for rho in RHOS:
                yield q11, rho * math.sqrt(q11) * math.sqrt(q22), q22


CLOSED = [n for n in ss.list_activations() if n not in QUADRATURE + ["shaped"]]


@pytest.mark.parametrize("name", CLOSED)
def test_sweep_closed_forms(name):
    """Every closed form on the whole grid against its textbook form at 50 digits."""
    for derivative in (False, True):
        V = _textbook(name, derivative)
        pts = list(_grid())
        a, c, b = (np.array(x) for x in zip(*pts))
        try:
            got = ss.dual_kernel_numeric(name, a, c, b, derivative=derivative)
        except OverflowError:
            assert name == "exp"
            ok = (a + b + 2 * c) / 2 < 690  # e^690 < 1.8e308
            got = ss.dual_kernel_numeric(name, a[ok], c[ok], b[ok], derivative=derivative)
            a, c, b = a[ok], c[ok], b[ok]
        assert np.all(np.isfinite(got))
        for k in range(len(a)):
            ref = V(a[k], c[k], b[k])
            # slack: what 4 ulps of the inputs change (q12 = rho sqrt(q11) sqrt(q22) was rounded,
            # and near rho = +-1 the sign kernel moves by sqrt(ulp)), plus 1e-4 of the size
            # sqrt(V(q11) V(q22)) when V is 0 (odd phi at rho = 0)
            cond = sum(abs(V(a[k], c[k] * (1 + e), b[k]) - ref) for e in (4e-16, -4e-16))
            size = math.sqrt(abs(V(a[k], a[k], a[k]) * V(b[k], b[k], b[k])))
            assert abs(got[k] - ref) <= 1e-12 * (abs(ref) + 1e-4 * size) + cond + 1e-322, \
                (name, derivative, a[k], c[k], b[k], got[k], ref, cond)


_SIZES = {}


def _size(name, derivative, q):
    """sqrt(E phi(u)^2), u ~ N(0, q) (mpmath, cached): the scale of V(q, ., .)."""
    key = (name, derivative, q)
    if key not in _SIZES:
        f = _phi(name, derivative)
        _SIZES[key] = float(mpmath.sqrt(_mp_mean(lambda u: f(u) ** 2, math.sqrt(q))))
    return _SIZES[key]


@pytest.mark.parametrize("name", QUADRATURE)
def test_sweep_quadrature_one_dimensional_points(name):
    """Quadrature activations where the reference is 1-D: rho = +-1 and rho = 0, variances from
    1e-300 to 1e12 (tanh' at (1e12, 1e12, +-1) was 5e-3 off; the interior points are in
    test_large_variance_near_rho_pm1 and test_tiny_variance_taylor)."""
    qs = (1e-300, 1e-3, 1.0, 1e12)
    for derivative in (False, True):
        pts = sorted({p for p in _grid(qs) if p[1] == 0 or abs(abs(p[1]) - math.sqrt(p[0] * p[2]))
                      <= 1e-12 * math.sqrt(p[0] * p[2])})  # -0.0 == 0.0: deduplicated
        a, c, b = (np.array(x) for x in zip(*pts))
        got = ss.dual_kernel_numeric(name, a, c, b, derivative=derivative)
        assert np.all(np.isfinite(got))
        for k in range(len(a)):
            ref = _mp_reference_1d(name, a[k], c[k], b[k], derivative=derivative)
            # at rho = 0 an odd phi gives exactly 0: slack relative to the kernel's size
            slack = 1e-4 * _size(name, derivative, a[k]) * _size(name, derivative, b[k]) \
                if c[k] == 0 else 0.0
            assert _close(got[k], ref, 1e-9, slack), \
                (name, derivative, a[k], c[k], b[k], got[k], ref)


# -- single-variable maps ------------------------------------------------------------------------
def test_gaussian_moment_quadrature_at_the_edges():
    """The graded 1-D rule: the sigmoid mean is 1/2 exactly by symmetry (the rule starting at
    1e-10 lost 5e-11), and the mean of a bump (tanh') at sd = 1e6 was 1e-7 off."""
    for v in (1e-300, 1e-3, 1.0, 1e12):
        assert ss.gaussian_moment_numeric("sigmoid", 0.0, v) == pytest.approx(0.5, rel=1e-14)
    for name in ("tanh", "sigmoid", "silu"):
        for sd in (1.0, 1e3, 1e6):
            f = _phi(name, True)
            ref = float(_mp_mean(f, sd))
            got = ss.gaussian_moment_numeric(ss.activation(name).derivative(), 0.0, sd * sd)
            assert _close(got, ref, 1e-12), (name, sd, got, ref)
    assert ss.gaussian_moment_numeric("sign", -0.0, 0.0) == ss.gaussian_moment_numeric(
        "sign", 0.0, 0.0) == 0.0
