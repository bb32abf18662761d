"""Bayesian evidence and predictions to first order in tau = LP/N."""

import math

import numpy as np
import pytest
import sympy as sp

from symscale.nsde import (carre_du_champ, check_first_order, depth_benefit, drift_matrix,
                           evidence_first_order, generator, generator_numeric, gram_symbols,
                           log_gaussian_likelihood, partition_function, predictive_first_order,
                           shaped, shaped_relu)

RNG = np.random.default_rng(0)
X3 = RNG.standard_normal((3, 5))
Y3 = RNG.standard_normal(3)
X0 = RNG.standard_normal(5)


def _sym_likelihood(Y, beta):
    P = len(Y)
    V = gram_symbols(P)
    C = V + (0 if np.isinf(beta) else sp.Rational(1, 1) / sp.nsimplify(beta)) * sp.eye(P)
    Yv = sp.Matrix([sp.nsimplify(y) for y in Y])
    quad = (Yv.T * C.adjugate() * Yv)[0] / C.det()
    return V, sp.exp(-quad / 2) / sp.sqrt(C.det() * (2 * sp.pi) ** P)


@pytest.mark.parametrize("act, params", [("tanh", {"a": 1.3}),
                                         ("relu", {"c_plus_value": 0.5, "c_minus_value": -1.0})])
@pytest.mark.parametrize("beta", [2.0, np.inf])
def test_closed_form_equals_the_symbolic_generator(act, params, beta):
    X, Y = X3[:2, :3], np.array([0.7, -0.4])
    ev = evidence_first_order(X, Y, act, beta, **params)
    V, F = _sym_likelihood(Y, beta)
    LF = generator(F, act, 2, **params)
    V0 = X @ X.T / 3
    sub = {V[i, j]: sp.nsimplify(V0[i, j]) for i in range(2) for j in range(2)}
    exact = float(sp.N((LF / F).subs(sub), 30))
    assert abs(ev.rate_t - exact) <= 1e-10 * max(1.0, abs(exact))
    assert math.isclose(ev.total, ev.linear + ev.nonlinear, rel_tol=1e-14)


def test_closed_form_equals_central_differences():
    s = shaped("tanh", a=1.2, n=100)
    ev = evidence_first_order(X3, Y3, s, beta=3.0)
    V0 = X3 @ X3.T / 5
    F = lambda V: math.exp(log_gaussian_likelihood(V, Y3, 3.0))  # noqa: E731
    fd = generator_numeric(F, V0, drift_matrix(V0, s)) / F(V0)
    assert abs(fd - ev.rate_t) <= 1e-6 * max(1.0, abs(ev.rate_t))


def test_zero_temperature_linear_limit():
    for P in (1, 3, 5):
        X = RNG.standard_normal((P, 7))
        Y = RNG.standard_normal(P)
        ev = evidence_first_order(X, Y, "relu", np.inf, c_plus_value=0.3, c_minus_value=0.3)
        q = Y @ np.linalg.solve(X @ X.T / 7, Y)
        assert abs(ev.rate_t - (q * q - 2 * (P + 2) * q + P * (P + 2)) / 4) <= 1e-10 * (1 + q * q)
        assert ev.nonlinear == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("act", [shaped("tanh", a=1.0, n=1000), shaped_relu(1.0, -1.0, n=8000)])
def test_first_order_formulas_against_the_exact_chain(act):
    report = check_first_order(X3, Y3, act, beta=2.0, x0=X0, n_samples=4000, seed=1)
    assert report.passed, str(report)
    # the drift matters: the linear part alone is refuted by the same samples
    ev = evidence_first_order(X3, Y3, act, 2.0)
    row = report.rows[0]
    assert abs(row.estimate - ev.linear * 3) > 5 * row.stderr


def test_predictive_decomposition():
    s = shaped("tanh", a=1.0, n=100)
    pr = predictive_first_order(X3, Y3, X0, s, beta=2.0)
    assert math.isclose(3 * pr.mean_slope, pr.kernel_term + pr.data_term, rel_tol=1e-12)
    # the GP posterior at tau = 0
    V = np.vstack([X3, X0]) @ np.vstack([X3, X0]).T / 5
    C = V[:3, :3] + np.eye(3) / 2
    assert math.isclose(pr.mean, V[3, :3] @ np.linalg.solve(C, Y3), rel_tol=1e-12)
    assert math.isclose(pr.var, V[3, 3] - V[3, :3] @ np.linalg.solve(C, V[:3, 3]),
                        rel_tol=1e-12)
    # the data term involves the labels quadratically: scaling Y by k scales it by k^3 / k^2...
    pr2 = predictive_first_order(X3, 2 * Y3, X0, s, beta=2.0)
    assert math.isclose(pr2.kernel_term, 2 * pr.kernel_term, rel_tol=1e-6)
    assert not math.isclose(pr2.data_term, 2 * pr.data_term, rel_tol=1e-3)


def test_carre_du_champ_of_linear_functions():
    V = X3 @ X3.T / 5
    f = lambda M: M[0, 1]  # noqa: E731
    g = lambda M: M[1, 1]  # noqa: E731
    # Gamma(V_01, V_11) = Sigma_{01,11} = V_01 V_11 + V_01 V_11
    assert math.isclose(carre_du_champ(f, g, V), 2 * V[0, 1] * V[1, 1], rel_tol=1e-6)


def test_depth_benefit_formulas_match_the_evidence():
    relu = depth_benefit("relu")
    smooth = depth_benefit()
    P = 4
    X = np.sqrt(P * 0.8) * np.eye(P)  # V0 = 0.8 I
    Y = np.array([1.0, 0.5, -0.2, 0.8])
    point = dict(P=P, v=0.8, y2=float(np.mean(Y**2)), ybar=float(np.mean(Y)), s2=0.25)
    ev = evidence_first_order(X, Y, "relu", 4.0, c_plus_value=0.5, c_minus_value=-1.0)
    assert math.isclose(float(relu.rate(**point, c_plus=0.5, c_minus=-1.0)), ev.total,
                        rel_tol=1e-12)
    assert relu.holds(**point, c_plus=0.5, c_minus=-1.0) == (ev.total > 0)
    s = shaped("tanh", a=1.3, n=50)
    ev = evidence_first_order(X, Y, s, 4.0)
    assert math.isclose(float(smooth.rate(**point, a=1.3, phi2=0, phi3=-2)), ev.total,
                        rel_tol=1e-12)
    # the ReLU threshold: at (c+ - c-)^2 equal to it the rate vanishes
    thr = float(relu.threshold(**point))
    gap = math.sqrt(abs(thr))
    if thr > 0:
        assert abs(float(relu.rate(**point, c_plus=gap, c_minus=0.0))) < 1e-12


def test_partition_function_chain_and_sde_agree():
    relu = shaped_relu(0.5, -1.0, n=128)
    zc = partition_function(X3, Y3, relu, 2.0, tau=0.6, n_samples=3000, seed=2)
    zs = partition_function(X3, Y3, relu, 2.0, tau=0.6, n_samples=3000, seed=3, method="sde",
                            dt=2e-3)
    assert abs(zc[0] - zs[0]) <= 5 * math.hypot(zc[1], zs[1])
    z0 = partition_function(X3, Y3, relu, 2.0, tau=0.0, n_samples=10, seed=4)
    assert math.isclose(z0[0], math.exp(log_gaussian_likelihood(X3 @ X3.T / 5, Y3, 2.0)))


@pytest.mark.parametrize("call, match", [
    (lambda: partition_function(X3, Y3, shaped_relu(0, 0, 8), 1.0, tau=-0.5), "tau must be"),
    (lambda: evidence_first_order(X3, Y3, "tanh", 0.0, a=1.0), "beta must be > 0"),
    (lambda: evidence_first_order(np.full((2, 2), np.nan), [1.0, 2.0], "tanh", a=1.0),
     "X must be finite"),
    (lambda: evidence_first_order(X3, [1.0, np.nan, 0.0], "tanh", a=1.0), "Y must be"),
    (lambda: evidence_first_order(RNG.standard_normal((4, 2)), np.ones(4), "tanh", a=1.0),
     "singular"),
    (lambda: evidence_first_order(X3, Y3, "tanh"), "symbolic parameters"),
    (lambda: partition_function(X3, Y3, "tanh", 1.0, tau=0.1), "Shaped"),
])
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()
