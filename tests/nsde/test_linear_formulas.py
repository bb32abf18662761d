"""Deep linear networks as Formulas: evidence, posterior scale, predictive density (HZ23).

Reference values come from independent routes: the theory note's regression case (nested
quadrature), a 1-D mpmath integral over the chi-square of a one-hidden-layer network, and the
log-space functions of symscale.nsde.linear. The sampling checks draw network weights.
"""

import math
import pickle

import mpmath
import numpy as np
import pytest
import sympy as sp

from symscale import DomainError
from symscale.nsde import (deep_linear_evidence, deep_linear_evidence_asymptotic,
                           deep_linear_evidence_formula, deep_linear_statistics,
                           posterior_scale, posterior_scale_asymptotic, posterior_scale_formula,
                           predictive_density, predictive_density_asymptotic,
                           predictive_density_formula)
from symscale.nsde.linear_formulas import LogMeijerG, dy, r_perp

X_REF = np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0]])  # rows are the inputs
Y_REF = np.array([0.7, -0.4])
X_NEW = np.array([0.3, -0.2, 1.1])

EXACT = (deep_linear_evidence_formula, posterior_scale_formula, predictive_density_formula)
ASYMPTOTIC = (deep_linear_evidence_asymptotic, posterior_scale_asymptotic,
              predictive_density_asymptotic)


def _pick(formula, stats):
    return {n: stats[n] for n in formula.names}


def test_reference_case_and_agreement_with_the_log_space_functions():
    """The theory note's regression numbers, and the same values as deep_linear_evidence,
    posterior_scale and predictive_density on a random instance (P = 3, three layers)."""
    s0 = deep_linear_statistics(X_REF, Y_REF, [4, 7], x=X_NEW, y=0.36)
    s1 = deep_linear_statistics(X_REF, Y_REF, [4, 7], x=X_NEW, y=1.36)
    Z, S, p = (f(2, [4, 7]) for f in EXACT)
    assert abs(float(Z.evaluate(_pick(Z, s0))) - 0.0613993132436) < 1e-12
    assert abs(float(S.evaluate(_pick(S, s0))) - 0.466189455162) < 1e-11
    assert abs(float(p.evaluate(_pick(p, s0))) - 0.602558541107) < 1e-11
    assert abs(float(p.evaluate(_pick(p, s1))) - 0.182491569214) < 1e-11

    rng = np.random.default_rng(7)
    X, Y = rng.standard_normal((3, 6)), rng.standard_normal(3)
    x, y = rng.standard_normal(6), 0.4
    ws, var = [6, 8, 5], (1.5, 0.8, 1.2, 0.6)
    st = deep_linear_statistics(X, Y, ws, var, x=x, y=y)
    Z, S, p = (f(3, ws) for f in EXACT)
    log_z = deep_linear_evidence(X, Y, ws, var, method="meijer").log_value
    assert math.isclose(math.log(float(Z.evaluate(_pick(Z, st)))), log_z, rel_tol=1e-13)
    assert math.isclose(float(S.evaluate(_pick(S, st))),
                        posterior_scale(X, Y, ws, var, method="meijer")[0], rel_tol=1e-12)
    assert math.isclose(float(p.evaluate(_pick(p, st))), predictive_density(y, x, X, Y, ws, var)[0],
                        rel_tol=1e-12)


def _one_layer_reference(P, N, M, det_g, c_, q_extra=0.0, r=None):
    """E over s^2 = c chi2_N of the Gaussian likelihood (and predictive numerator), by
    mpmath.quad at 30 digits: no Meijer G involved."""
    with mpmath.workdps(30):
        def chi2(t):
            return mpmath.exp((N / 2 - 1) * mpmath.log(t) - t / 2 - N / 2 * mpmath.log(2)
                              - mpmath.loggamma(N / 2))

        def like(t, p, q):
            s2 = c_ * t
            return (2 * mpmath.pi * s2) ** (-mpmath.mpf(p) / 2) * mpmath.exp(-q / (2 * s2))

        def mean(p, q):
            return mpmath.quad(lambda t: chi2(t) * like(t, p, q), [0, N / 4, N, 4 * N, mpmath.inf])

        Z = mean(P, M) / mpmath.sqrt(det_g)
        if r is None:
            return Z, mean(P - 2, M) / (2 * mpmath.pi * mean(P, M))
        return Z, mean(P + 1, M + q_extra) / (mean(P, M) * r)


def test_one_hidden_layer_against_direct_integration():
    P, N, M, det_g, c_ = 2, 5, 1.7, 1.4, 0.09
    Z_ref, S_ref = _one_layer_reference(P, N, M, det_g, c_)
    assert math.isclose(float(deep_linear_evidence_formula(P, [N])(M, det_g, c_)), Z_ref,
                        rel_tol=1e-13)
    assert math.isclose(float(posterior_scale_formula(P, [N])(M, c_)), S_ref, rel_tol=1e-13)
    dyv, r = 0.8, 1.3
    _, p_ref = _one_layer_reference(P, N, M, det_g, c_, (dyv / r) ** 2, r)
    assert math.isclose(float(predictive_density_formula(P, [N])(dyv, M, c_, r)), p_ref,
                        rel_tol=1e-13)


def test_derivation_is_the_mellin_transform_of_the_mixture():
    """sympy's Mellin transform of the derived G^{2,0}_{0,2} is Gamma(z) E[U^(z - P/2)],
    U ~ Gamma(N/2): the identity the builder inverts."""
    P, N = 2, 5
    Z = deep_linear_evidence_formula(P, [N])
    (g,) = Z.expr.atoms(sp.meijerg)
    assert list(g.bm) == [0, sp.Rational(N - P, 2)]
    a, z = sp.symbols("a z", positive=True)
    mellin = sp.mellin_transform(g.func(*g.args[:2], a), a, z, simplify=True)[0]
    want = sp.gamma(z) * sp.gamma(z + sp.Rational(N, 2) - sp.Rational(P, 2))
    assert sp.simplify(mellin / want) == 1


POINTS = {
    # labels matched to the prior scale (c prod N = 1), mismatched x2.5 and x0.3, and Y = 0
    "evidence": [{"M_star": 2.0, "det_G": 1.3, "c": 1 / 35},
                 {"M_star": 5.0, "det_G": 0.7, "c": 1 / 35},
                 {"M_star": 0.0, "det_G": 1.0, "c": 1 / 35}],
    "scale": [{"M_star": 2.0, "c": 1 / 35}, {"M_star": 0.6, "c": 1 / 35}],
    "predictive": [{"dy": 0.0, "M_star": 2.0, "c": 1 / 35, "r_perp": 0.8},
                   {"dy": 2.0, "M_star": 2.0, "c": 1 / 35, "r_perp": 0.8}],
}
N_SAMPLES = 40_000


@pytest.mark.parametrize("builder, kind", list(zip(EXACT, POINTS)))
def test_checks_over_sampled_network_weights_pass(builder, kind):
    f = builder(2, [5, 7])
    report = f.check(points=POINTS[kind], n_samples=N_SAMPLES, seed=0)
    assert report.passed, str(report)
    # and at random points of the Formula's own point sampler
    assert f.check(n_points=3, n_samples=20_000, seed=1).passed


@pytest.mark.parametrize("kind, right, wrong", [
    ("evidence", deep_linear_evidence_formula(2, [5, 7]), deep_linear_evidence_formula(2, [5, 8])),
    ("evidence", deep_linear_evidence_formula(2, [5, 7]), deep_linear_evidence_formula(3, [5, 7])),
    ("scale", posterior_scale_formula(2, [5, 7]), posterior_scale_formula(2, [5, 8])),
    ("scale", posterior_scale_formula(2, [5, 7]), posterior_scale_formula(1, [5, 7])),
    ("predictive", predictive_density_formula(2, [5, 7]), predictive_density_formula(3, [5, 7])),
], ids=["evidence-width", "evidence-P", "scale-width", "scale-P", "predictive-P"])
def test_wrong_variants_fail_the_same_check(kind, right, wrong):
    """One width off, or P off by one (the power of s in the likelihood), against the sampler
    of the right network: the same check, same seed, fails."""
    points = POINTS[kind][:2]
    assert right.check(points=points, n_samples=N_SAMPLES, seed=0).passed
    bad = wrong.replace(sampler=right.sampler).check(points=points, n_samples=N_SAMPLES, seed=0)
    assert not bad.passed and bad.max_abs_z > 5


def test_a_gaussian_at_the_posterior_scale_fails_the_predictive_check():
    """Ignoring the scale mixture (a Gaussian of variance E_post[s^2] r^2) is detected."""
    right = predictive_density_formula(2, [5, 7])
    s2 = posterior_scale_formula(2, [5, 7]).stable_expr
    gauss = sp.exp(-dy**2 / (2 * s2 * r_perp**2)) / sp.sqrt(2 * sp.pi * s2 * r_perp**2)
    wrong = right.replace(expr=gauss, stable_expr=gauss)
    points = POINTS["predictive"][:1]
    assert right.check(points=points, n_samples=N_SAMPLES, seed=0).passed
    assert not wrong.check(points=points, n_samples=N_SAMPLES, seed=0).passed


@pytest.mark.parametrize("k", range(3))
def test_asymptotic_ratio_tends_to_one_at_rate_a_to_minus_one_over_m(k):
    """log(exact / asymptotic) ~ C a^(-1/m), m = L + 1: log-log slope -1/m (stated margin
    0.01, the next order a^(-2/m) moving it by < 0.002 over a = 1e4..1e12), monotone."""
    for P, ws in ((2, (4, 7)), (1, (6,))):
        m = len(ws) + 1
        c_ = 1 / math.prod(ws)
        exact = EXACT[k](P, ws).numeric("mpmath")
        approx = ASYMPTOTIC[k](P, ws).numeric("mpmath")
        a = 10.0 ** np.arange(4, 14, 2)
        with mpmath.workdps(30):
            log_ratio = []
            for ai in a:
                M = mpmath.mpf(ai) * 2 ** m * c_
                args = {"M_star": M, "det_G": mpmath.mpf(1), "c": mpmath.mpf(c_),
                        "dy": mpmath.mpf(1), "r_perp": mpmath.mpf(1)}
                vals = [args[n] for n in EXACT[k](P, ws).names]
                log_ratio.append(float(mpmath.log(exact(*vals) / approx(*vals))))
        log_ratio = np.abs(log_ratio)
        assert np.all(np.diff(log_ratio) < 0)
        slope = np.polyfit(np.log(a), np.log(log_ratio), 1)[0]
        assert abs(slope + 1 / m) < 0.01, (P, ws, slope)


def test_log_space_keeps_ratios_finite_where_g_underflows():
    """a = 1e12: G ~ exp(-3e4) is 0 in float64, the numpy evaluators still agree with the
    mpmath ones and with the log-space functions of linear.py."""
    Y = Y_REF * 1e6
    st = deep_linear_statistics(X_REF, Y, [4, 7], x=X_NEW, y=0.36e6 + 3e3)
    S, p = posterior_scale_formula(2, [4, 7]), predictive_density_formula(2, [4, 7])
    s_np = float(S.evaluate(_pick(S, st)))
    p_np = float(p.evaluate(_pick(p, st)))
    with mpmath.workdps(30):
        s_mp = S.numeric("mpmath")(*[mpmath.mpf(st[n]) for n in S.names])
        p_mp = p.numeric("mpmath")(*[mpmath.mpf(st[n]) for n in p.names])
    assert math.isclose(s_np, float(s_mp), rel_tol=1e-10)
    assert math.isclose(p_np, float(p_mp), rel_tol=1e-10)
    assert math.isclose(s_np, posterior_scale(X_REF, Y, [4, 7], method="meijer")[0],
                        rel_tol=1e-10)
    assert math.isclose(p_np, predictive_density(0.36e6 + 3e3, X_NEW, X_REF, Y, [4, 7])[0],
                        rel_tol=1e-10)
    assert float(deep_linear_evidence_formula(2, [4, 7]).evaluate(_pick(
        deep_linear_evidence_formula(2, [4, 7]), st))) == 0.0  # e^-30000: the value underflows


def test_zero_labels_closed_form():
    """M_* = 0: G(0 | 0, b) = prod Gamma(b_l), so Z has the closed form of test_linear."""
    Z = deep_linear_evidence_formula(2, [4, 7])
    want = math.exp(deep_linear_evidence(X_REF, np.zeros(2), [4, 7]).log_value)
    assert math.isclose(float(Z(0.0, 1.0, 1 / 84)), want, rel_tol=1e-13)
    assert math.isclose(float(posterior_scale_formula(2, [4, 7])(0.0, 1 / 84)), 10 / 84,
                        rel_tol=1e-13)


def test_pickle_latex_and_backends():
    for builder in EXACT + ASYMPTOTIC:
        f = builder(2, [4, 7])
        g = pickle.loads(pickle.dumps(f))
        point = {"dy": 0.3, "M_star": 1.0525, "det_G": 1.0, "c": 1 / 84, "r_perp": 1.1}
        vals = [point[n] for n in f.names]
        assert float(g(*vals)) == float(f(*vals))
        with mpmath.workdps(20):
            assert math.isclose(float(f.numeric("mpmath")(*vals)), float(f(*vals)), rel_tol=1e-14)
        tex = f.latex()
        assert "M_{*}" in tex and ("G_{0, 3}^{3, 0}" in tex) != (builder in ASYMPTOTIC)
    assert f.sampler is None  # the asymptotic forms have no sampler
    assert deep_linear_evidence_formula(2, [4, 7]).stable_expr.has(LogMeijerG)


@pytest.mark.parametrize("call, error, match", [
    (lambda: deep_linear_evidence_formula(0, [4]), ValueError, "P must be >= 1"),
    (lambda: posterior_scale_formula(2.0, [4]), TypeError, "P must be an integer"),
    (lambda: predictive_density_formula(2, [4, 0]), ValueError, r"widths\[1\]"),
    (lambda: deep_linear_evidence_asymptotic(2, [4, 2.5]), TypeError, r"widths\[1\]"),
    (lambda: deep_linear_evidence_formula(2, "47"), TypeError, "widths"),
    (lambda: deep_linear_evidence_formula(2, []), ValueError, "widths"),
    (lambda: deep_linear_evidence_formula(2, [4])(-1.0, 1.0, 0.1), DomainError, "M_star"),
    (lambda: deep_linear_evidence_formula(2, [4])(np.nan, 1.0, 0.1), DomainError, "M_star"),
    (lambda: deep_linear_evidence_formula(2, [4])(1.0, 0.0, 0.1), DomainError, "det_G"),
    (lambda: posterior_scale_formula(2, [4])(1.0, -0.1), DomainError, "c must be"),
    (lambda: predictive_density_formula(2, [4])(0.0, 1.0, 0.1, 0.0), DomainError, "r_perp"),
    (lambda: predictive_density_formula(2, [4])(np.inf, 1.0, 0.1, 1.0), DomainError, "dy"),
    (lambda: deep_linear_evidence_formula(2, [2, 5])(0.0, 1.0, 0.1), DomainError, "infinite"),
    (lambda: predictive_density_formula(2, [3])(0.0, 0.0, 0.1, 1.0), DomainError, "infinite"),
    (lambda: posterior_scale_asymptotic(2, [4])(0.0, 0.1), DomainError, "M_star"),
    (lambda: deep_linear_statistics(X_REF, Y_REF, [4, 7], [1.0, -1.0, 1.0]), ValueError,
     r"variances\[1\]"),
    (lambda: deep_linear_statistics(X_REF, [np.nan, 1.0], [4, 7]), ValueError, "Y must be finite"),
    (lambda: deep_linear_statistics(X_REF, Y_REF, [4, 7], x=[np.inf, 0, 1], y=0.0), ValueError,
     "x must be finite"),
    (lambda: deep_linear_statistics(X_REF, Y_REF, [4, 7], x=X_NEW, y=np.nan), ValueError, "y must be finite"),
    (lambda: deep_linear_statistics(X_REF, Y_REF, [4, 7], x=X_NEW), ValueError, "together"),
    (lambda: deep_linear_statistics(X_REF, Y_REF, [4, 7], x=[1.0, 0.5, 0.0], y=0.0),
     ValueError, "span"),
    (lambda: deep_linear_statistics(X_REF, Y_REF, [4, 7], [1e-300, 1e-300, 1.0]), ValueError,
     "c = exp"),
    (lambda: deep_linear_evidence_formula(2, [3, 7]).check(
        points=[{"M_star": 1.0, "det_G": 1.0, "c": 0.05}], n_samples=10), ValueError,
     "infinite variance"),
])
def test_bad_inputs_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
