"""Deep linear networks: Meijer-G priors, evidence, posterior scale and predictive density."""

import math

import mpmath
import numpy as np
import pytest

from symscale import DomainError
from symscale.nsde import (deep_linear_evidence, deep_linear_prior, log_meijer_g0m, meijer_g0m,
                           posterior_scale, predictive_density, relu_deep_prior)


def _chi2_mixture_density(h, widths):
    """p(h) = E[N(h; 0, prod chi2_{n_l} / n_l)] by nested adaptive quadrature (scipy)."""
    from scipy import integrate

    n1, n2 = widths

    def chi2(x, k):
        if x <= 0:
            return 0.0
        return math.exp((k / 2 - 1) * math.log(x) - x / 2 - k / 2 * math.log(2)
                        - math.lgamma(k / 2))

    def integrand(x2, x1):
        var = x1 * x2 / (n1 * n2)
        if var <= 0:
            return 0.0
        return chi2(x1, n1) * chi2(x2, n2) * math.exp(-h * h / (2 * var)) / math.sqrt(
            2 * math.pi * var)

    val, _ = integrate.dblquad(integrand, 0, np.inf, 0, np.inf, epsabs=1e-13, epsrel=1e-12)
    return val


def test_prior_matches_the_chi2_mixture_and_the_reference():
    p = deep_linear_prior([3, 5])
    assert abs(float(p(0.25)) - 0.513311975085) < 1e-11
    for h in (0.25, 1.3):
        assert abs(float(p(h)) - _chi2_mixture_density(h, (3, 5))) < 1e-9
    with mpmath.workdps(15):
        total = 2 * mpmath.quad(lambda x: p.numeric("mpmath")(x), [0, 1, 4, mpmath.inf])
    assert abs(total - 1) < 1e-9
    assert "G^{3, 0}_{0, 3}" in p.latex() or "G" in p.latex()


def test_relu_prior_against_sampled_networks():
    ns = (3, 4)
    f, atom = relu_deep_prior(ns)
    rng = np.random.default_rng(0)
    N = 200_000
    h1 = np.maximum(rng.standard_normal((N, 3)), 0)
    h2 = np.maximum(np.einsum("nij,nj->ni", rng.standard_normal((N, 4, 3)), h1), 0)
    out = np.einsum("ni,ni->n", rng.standard_normal((N, 4)), h2) * math.sqrt(2**2 / 12)
    for lo, hi in ((-0.3, 0.3), (0.5, 2.0)):
        inside = (out > lo) & (out < hi)
        frac, se = inside.mean(), inside.std(ddof=1) / math.sqrt(N)
        with mpmath.workdps(15):  # the density is singular at 0: split there
            mass = float(mpmath.quad(lambda x: f.numeric("mpmath")(x),
                                     sorted({lo, hi} | ({0.0} if lo < 0 < hi else set()))))
        if lo < 0 < hi:
            mass += atom
        assert abs(frac - mass) <= 5 * se
    assert abs(np.mean(out == 0) - atom) <= 5 * math.sqrt(atom * (1 - atom) / N)


X_REF = np.array([[1.0, 0.5], [0.0, 1.0], [0.0, 0.0]]).T  # rows are the inputs
Y_REF = np.array([0.7, -0.4])
X_NEW = np.array([0.3, -0.2, 1.1])


def test_reference_regression_case():
    ev = deep_linear_evidence(X_REF, Y_REF, [4, 7])
    assert ev.path == "series"
    assert math.isclose(ev.model.c, 1 / 84) and math.isclose(ev.model.M_star, 1.0525)
    assert abs(ev.value - 0.0613993132436) < 1e-12
    s2, _ = posterior_scale(X_REF, Y_REF, [4, 7])
    assert abs(s2 - 0.466189455162) < 1e-11
    d0, _ = predictive_density(0.36, X_NEW, X_REF, Y_REF, [4, 7])
    d1, _ = predictive_density(1.36, X_NEW, X_REF, Y_REF, [4, 7])
    assert abs(d0 - 0.602558541107) < 1e-11 and abs(d1 - 0.182491569214) < 1e-11
    # total mass 1 (the tails beyond +-12 carry less than 1e-12)
    ys = np.linspace(-12, 12, 1201) + 0.36
    dens = np.array([predictive_density(y, X_NEW, X_REF, Y_REF, [4, 7], dps=16)[0]
                     for y in ys])
    mass = np.sum((dens[1:] + dens[:-1]) / 2 * np.diff(ys))
    assert abs(mass - 1) < 1e-4  # trapezoid error at step 0.02


def test_evidence_and_posterior_scale_against_monte_carlo():
    """Random instance N0 = 6, P = 3, widths (4, 7): s^2 = c chi2_4 chi2_7, Y ~ N(0, s^2 X X^T)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3, 6))
    Y = rng.standard_normal(3)
    variances = (1.5, 0.8, 1.2)
    ev = deep_linear_evidence(X, Y, [4, 7], variances)
    s2_exact, _ = posterior_scale(X, Y, [4, 7], variances)
    c = ev.model.c
    N = 400_000
    s2 = c * rng.chisquare(4, N) * rng.chisquare(7, N)
    G = X @ X.T
    q = Y @ np.linalg.solve(G, Y)
    logdet = np.linalg.slogdet(G)[1]
    like = np.exp(-q / (2 * s2) - 1.5 * np.log(2 * np.pi * s2) - logdet / 2)
    z, se = like.mean(), like.std(ddof=1) / math.sqrt(N)
    assert abs(z - ev.value) <= 5 * se
    # ratio estimator with the delta-method standard error
    num = s2 * like
    ratio = num.mean() / z
    var = np.var(num - ratio * like, ddof=1) / N / z**2
    assert abs(ratio - s2_exact) <= 5 * math.sqrt(var)


def _asym(z, b):
    m = len(b)
    theta = (sum(b) - (m - 1) / 2) / m
    return (m - 1) / 2 * math.log(2 * math.pi) - math.log(m) / 2 + theta * math.log(z) \
        - m * z ** (1 / m)


def test_mellin_barnes_path_at_large_argument():
    b = [0, 1, 2.5]
    exact, path = log_meijer_g0m(1e5, b)
    assert path == "series"
    # exact / asymptotic = 1.032 at z = 1e5 (theory note 02, section 9)
    assert abs(math.exp(float(exact) - _asym(1e5, b)) - 1.032) < 0.002
    # the Mellin-Barnes integral agrees with the series where both run (30 digits)
    from symscale.nsde.linear import _log_g_mellin_barnes

    with mpmath.workdps(30):
        for z, bb in ((1e5, b), (11.05, b), (3.0, [0, -0.5, 3]), (1e3, [0, 49, 49])):
            series = mpmath.log(mpmath.meijerg([[], []], [bb, []], z, maxterms=20_000))
            mb = _log_g_mellin_barnes(mpmath.log(z), [mpmath.mpf(x) for x in bb], 30)
            assert abs(mb - series) < 1e-25 * max(1, abs(series)), (z, bb)
    logv, path = log_meijer_g0m(1e12, b)  # G ~ exp(-30000): beyond the series
    # the asymptotic is within its O(z^(-1/3)) = 1e-4 relative error of the exact value
    assert path == "mellin-barnes" and 0 < float(logv) - _asym(1e12, b) < 1e-3
    val, path = meijer_g0m(2.0, [0, 1, 2.5])
    assert path == "series" and abs(float(val) - 0.393887518809538) < 1e-13


@pytest.mark.parametrize("call, match", [
    (lambda: deep_linear_evidence(np.ones((4, 3)), np.ones(4), [3]), "P = 4 inputs in N0 = 3"),
    (lambda: deep_linear_evidence(np.array([[1.0, 0], [2.0, 0]]), np.ones(2), [3]), "singular"),
    (lambda: deep_linear_evidence(np.full((2, 3), np.nan), np.ones(2), [3]), "finite"),
    (lambda: deep_linear_evidence(np.eye(2, 3), np.ones(2), [0]), "widths"),
    (lambda: deep_linear_evidence(np.eye(2, 3), np.ones(2), [3], [1.0]), "variances"),
    (lambda: predictive_density(0.0, np.array([1.0, 0.5, 0.0]), X_REF, Y_REF, [4, 7]),
     "span"),
    (lambda: log_meijer_g0m(-1.0, [0, 1]), "> 0"),
])
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("widths", [[20] * 100, [5, 40, 9] * 20, [4] * 12, [1000] * 20])
def test_quadrature_step_is_converged(widths, monkeypatch):
    """An 8x finer grid changes log Z and E_post s^2 only at round-off."""
    import symscale.nsde.linear as linear

    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((3, 6)), 30 * rng.standard_normal(3)
    coarse = deep_linear_evidence(X, Y, widths, method="quadrature")
    s_coarse = posterior_scale(X, Y, widths, method="quadrature")[0]
    step = linear._step
    monkeypatch.setattr(linear, "_step", lambda *args: step(*args) / 8)
    monkeypatch.setattr(linear, "_MAX_LOG2_GRID", 24)
    fine = deep_linear_evidence(X, Y, widths, method="quadrature")
    s_fine = posterior_scale(X, Y, widths, method="quadrature")[0]
    assert abs(coarse.log_value - fine.log_value) <= 1e-13 * max(1.0, abs(fine.log_value))
    assert abs(s_coarse - s_fine) <= 1e-12 * s_fine


def test_quadrature_band_is_where_the_characteristic_function_vanishes():
    """|phi(w)| of log chi2_k tilted: below e^-45 at the band, above it at half the band."""
    from scipy.special import gammaln, loggamma

    from symscale.nsde.linear import _band

    for counts, args in (({20: 100}, {20: 10.3}), ({4: 1}, {4: 0.02}), ({5: 3, 40: 2},
                                                                         {5: 2.5, 40: 20.0})):
        w = _band(counts, args)

        def log_modulus(x):
            return sum(c * (loggamma(args[k] + 1j * x).real - gammaln(args[k]))
                       for k, c in counts.items())

        assert log_modulus(w) < -45 and (w == 1.0 or log_modulus(w / 2) > -45)


def test_quadrature_path_agrees_with_meijer_and_monte_carlo():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3, 6))
    Y = rng.standard_normal(3)
    for widths in ([4, 7], [20] * 6):
        a = deep_linear_evidence(X, Y, widths, method="meijer")
        b = deep_linear_evidence(X, Y, widths, method="quadrature")
        assert b.path == "quadrature" and abs(a.value - b.value) <= 1e-12 * a.value
        sa = posterior_scale(X, Y, widths, method="meijer")[0]
        sb = posterior_scale(X, Y, widths, method="quadrature")[0]
        assert abs(sa - sb) <= 1e-12 * sa
    # a deep network (L = 60): quadrature against Monte Carlo over log s^2
    widths = [20] * 60
    ev = deep_linear_evidence(X, Y, widths)
    assert ev.path == "quadrature"
    N = 200_000
    log_s2 = ev.model.log_c + np.log(rng.chisquare(20, (N, 60))).sum(axis=1)
    s2 = np.exp(log_s2)
    G = X @ X.T
    like = np.exp(-ev.model.M_star / (2 * s2) - 1.5 * np.log(2 * np.pi * s2)
                  - np.linalg.slogdet(G)[1] / 2)
    assert abs(like.mean() - ev.value) <= 5 * like.std(ddof=1) / math.sqrt(N)


def test_large_depth_heuristic_tracks_the_exact_evidence():
    from symscale.nsde import large_depth_log_evidence

    rng = np.random.default_rng(3)
    X = rng.standard_normal((3, 6))
    Y = rng.standard_normal(3)
    for L in (50, 200):
        exact = deep_linear_evidence(X, Y, [20] * L).log_value
        assert abs(large_depth_log_evidence(X, Y, [20] * L) - exact) < 0.1
    with pytest.raises(ValueError, match="equal widths"):
        large_depth_log_evidence(X, Y, [20, 30])
    with pytest.raises(ValueError, match="method must be"):
        deep_linear_evidence(X, Y, [4], method="fast")


def _ref_log_moment(X, Y, widths, p):
    """log E[(s^2)^(-p/2) exp(-M_* / 2 s^2)], s^2 = c chi2_{k1} chi2_{k2}, at 30 digits.

    Independent of both library routes (no Meijer-G, no characteristic function): the
    chi2_{k2} integral in closed form, int x^(nu-1) e^(-x/2 - g/x) dx = 2 (2g)^(nu/2)
    K_nu(sqrt(2g)), and the chi2_{k1} one by mp.quad over u = log x1, around its mode.
    """
    with mpmath.workdps(30):
        X = np.asarray(X, float)
        P, N0 = X.shape
        G = mpmath.matrix([[mpmath.fsum(mpmath.mpf(X[i, k]) * X[j, k] for k in range(N0))
                            for j in range(P)] for i in range(P)])
        Yv = mpmath.matrix([mpmath.mpf(float(y)) for y in Y])
        M = (Yv.T * mpmath.inverse(G) * Yv)[0]
        k1, k2 = (mpmath.mpf(w) for w in widths)
        c = 1 / (N0 * k1 * k2)
        nu = (k2 - p) / 2
        const = (-p / mpmath.mpf(2) * mpmath.log(c) - (k1 + k2) / 2 * mpmath.log(2)
                 - mpmath.loggamma(k1 / 2) - mpmath.loggamma(k2 / 2))

        def log_f(u):
            gam = M / (2 * c * mpmath.exp(u))
            inner = (mpmath.log(2) + nu / 2 * mpmath.log(2 * gam)
                     + mpmath.log(mpmath.besselk(nu, mpmath.sqrt(2 * gam))))
            return (k1 - p) / 2 * u - mpmath.exp(u) / 2 + inner

        mode = mpmath.findroot(lambda u: mpmath.diff(log_f, u), mpmath.log(k1))
        s = 1 / mpmath.sqrt(-mpmath.diff(log_f, mode, 2))
        f0 = log_f(mode)
        pts = [mode + j * s for j in (-40, -10, -3, 0, 3, 10, 40)]
        assert log_f(pts[0]) - f0 < -70 and log_f(pts[-1]) - f0 < -70  # tails negligible
        return const + f0 + mpmath.log(mpmath.quad(lambda u: mpmath.exp(log_f(u) - f0), pts)), M


@pytest.mark.parametrize("scale", [1.0, 100.0, 1e4])
def test_evidence_routes_agree_with_an_independent_integral(scale):
    """Audit: labels x100, widths (4, 7): the quadrature gave log Z = -46.5 for -132.96 (its FFT
    density of the prior scale is round-off where the posterior sits), and at x1e4 the Meijer
    route used the large-argument asymptotic. Both now agree with 30-digit mpmath."""
    Y = Y_REF * scale
    ref, M = _ref_log_moment(X_REF, Y, (4, 7), 2)
    G = X_REF @ X_REF.T
    ref_log_z = float(ref - mpmath.log(2 * mpmath.pi) - mpmath.log(mpmath.det(
        mpmath.matrix(G.tolist()))) / 2)
    ref_s2 = float(mpmath.exp(_ref_log_moment(X_REF, Y, (4, 7), 0)[0] - ref))
    for method in ("meijer", "quadrature", "auto"):
        ev = deep_linear_evidence(X_REF, Y, [4, 7], method=method)
        assert abs(ev.log_value - ref_log_z) <= 1e-13 * max(1.0, abs(ref_log_z)), method
        s2, _ = posterior_scale(X_REF, Y, [4, 7], method=method)
        assert abs(s2 - ref_s2) <= 1e-11 * ref_s2, method
    if scale == 100.0:
        assert abs(ref_log_z + 132.963323495859) < 1e-11
    if scale == 1e4:  # the asymptotic was 1.4e-3 off here; e^-3083 underflows as a value
        assert deep_linear_evidence(X_REF, Y, [4, 7]).path == "mellin-barnes"
        assert deep_linear_evidence(X_REF, Y, [4, 7]).value == 0.0


def test_deep_network_routes_agree_at_large_labels():
    """auto beyond 8 hidden layers takes the quadrature: compare with Meijer-G (Mellin-Barnes,
    m = 13) and the old asymptotic, which is off by tens of nats when the b_l are large."""
    rng = np.random.default_rng(11)
    X = rng.standard_normal((3, 6))
    Y = 1000 * rng.standard_normal(3)
    widths = [100] * 12
    q = deep_linear_evidence(X, Y, widths)
    mg = deep_linear_evidence(X, Y, widths, method="meijer")
    assert q.path == "quadrature" and mg.path == "mellin-barnes"
    assert abs(q.log_value - mg.log_value) <= 1e-12 * abs(mg.log_value)
    b = [0] + [(n - 3) / 2 for n in widths]
    assert abs(_asym(mg.model.a, b) - float(log_meijer_g0m(mg.model.a, b)[0])) > 10  # 10.65


def test_zero_labels_and_extreme_scales():
    # Y = 0: Z = (2 pi)^(-P/2) det^(-1/2) c^(-P/2) prod 2^(-P/2) Gamma((N-P)/2) / Gamma(N/2)
    G = X_REF @ X_REF.T
    c = 1 / 84
    want = (-math.log(2 * math.pi) - np.linalg.slogdet(G)[1] / 2 - math.log(c)
            - 2 * math.log(2) + math.lgamma(1) - math.lgamma(2) + math.lgamma(2.5)
            - math.lgamma(3.5))
    for method in ("meijer", "quadrature"):
        ev = deep_linear_evidence(X_REF, np.zeros(2), [4, 7], method=method)
        assert abs(ev.log_value - want) < 1e-13
        # E_post s^2 = c prod 2 (N - P)/2 = c (N1 - P)(N2 - P)
        s2, _ = posterior_scale(X_REF, np.zeros(2), [4, 7], method=method)
        assert math.isclose(s2, c * 2 * 5, rel_tol=1e-12)
        with pytest.raises(DomainError, match="infinite"):
            deep_linear_evidence(X_REF, np.zeros(2), [2, 7], method=method)
    # rescaling X by 1e-200 and Y by 1e-200 leaves M_* and shifts log Z by -P log(1e-200)
    base = deep_linear_evidence(X_REF, Y_REF, [4, 7])
    tiny = deep_linear_evidence(X_REF * 1e-200, Y_REF * 1e-200, [4, 7])
    assert math.isclose(tiny.log_value, base.log_value + 2 * 200 * math.log(10), rel_tol=1e-13)
    with pytest.raises(OverflowError, match="evidence"):
        tiny.value  # noqa: B018  e^921 is beyond float64
