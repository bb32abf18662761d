"""First-order evidence and predictive derived for general P (symscale.nsde.first_order).

References: the coordinate generator (sympy, at exact rational points), the hand-written
evidence_first_order, central differences of the generator, the theory note's zero-temperature
linear formula, and one layer of the exact finite-width chain (Monte Carlo, 5 standard errors).
"""

import math
import pickle
from itertools import combinations_with_replacement

import numpy as np
import pytest
import sympy as sp
from sympy.polys.matrices import DomainMatrix

import symscale as ss
from symscale.errors import DomainError
from symscale.formula import CheckRow
from symscale.nsde import (carre_du_champ, drift, drift_matrix, evidence_first_order,
                           generator_numeric, log_evidence_first_order_formula,
                           predictive_first_order, predictive_first_order_formula, shaped,
                           shaped_relu)
from symscale.nsde.bayes import _log_lik
from symscale.nsde.first_order import _evidence_bundle, _split_drift

R = sp.Rational
PHI2, PHI3 = sp.symbols("phi2 phi3", real=True)
GENERIC = ss.activation("polynomial", coefficients=(0, 1, PHI2 / 2, PHI3 / 6))
# an exact positive definite Gram matrix (inputs with entries in -2..2, d = 7) and labels
_M = sp.Matrix(6, 7, lambda i, j: (3 * i + 5 * j + i * j) % 5 - 2) + 2 * sp.eye(6, 7)
V3 = _M * _M.T / 7
Y3 = sp.Matrix([R(7, 10), R(-2, 5), R(1, 3), R(-1, 2), R(3, 4)])


# ---------------------------------------------------------------------------------------------
# the coordinate generator at an exact point (the definition, coded independently)


class _Jet(tuple):
    """Exact second-order Taylor jet (c0, c1, c2) of a function of t at t = 0."""

    def __add__(self, o):
        o = o if isinstance(o, _Jet) else _Jet((o, 0, 0))
        return _Jet(a + b for a, b in zip(self, o))

    __radd__ = __add__

    def __neg__(self):
        return _Jet(-a for a in self)

    def __sub__(self, o):
        return self + (-o)

    def __mul__(self, o):
        o = o if isinstance(o, _Jet) else _Jet((o, 0, 0))
        return _Jet((self[0] * o[0], self[0] * o[1] + self[1] * o[0],
                     self[0] * o[2] + self[1] * o[1] + self[2] * o[0]))

    __rmul__ = __mul__

    def __truediv__(self, o):
        q0 = self[0] / o[0]
        q1 = (self[1] - q0 * o[1]) / o[0]
        return _Jet((q0, q1, (self[2] - q0 * o[2] - q1 * o[1]) / o[0]))

    def exp_rel(self):
        """exp(x - x0): exp is applied relative to its value at 0 (that factor cancels)."""
        return _Jet((1, self[1], self[2] + self[1] ** 2 / 2))

    def rsqrt_rel(self):
        """(x / x0)^(-1/2)."""
        y = _Jet((0, self[1] / self[0], self[2] / self[0]))
        return -y * R(1, 2) + y * y * R(3, 8) + 1


class _Coordinates:
    """L g(V0) = sum_(a<=b) b_ab d_ab g + 1/2 sum Sigma_(ab),(cd) d_ab d_cd g on the symmetric
    coordinates of an m x m Gram matrix: exact derivatives along directions U (jets of
    g(V0 + tU), the Hessian by polarization). F is taken relative to F(V0)."""

    def __init__(self, V0, activation, Y, beta, P, **params):
        m = V0.shape[0]
        self.V0, self.Y, self.beta, self.P, self.t = V0, Y, beta, P, sp.Symbol("t")
        self.pairs = list(combinations_with_replacement(range(m), 2))
        b = drift(activation, **params)
        q = [v.symbol for v in b.variables[:3]]
        self.B = sp.Matrix(m, m, lambda i, j: b.expr.subs({q[0]: V0[i, i], q[1]: V0[i, j],
                                                            q[2]: V0[j, j]}))

    def _jet(self, expr):
        poly = sp.Poly(sp.expand(expr), self.t)
        return _Jet(poly.coeff_monomial(self.t**k) for k in range(3))

    def gp(self, U):
        """Jets of F / F(V0), mu and sigma^2 along V0 + tU (test input last, if any)."""
        P, V = self.P, self.V0 + self.t * U
        dom = sp.QQ[self.t]  # exact polynomial linear algebra (DomainMatrix over QQ[t])

        def dm(M):
            return DomainMatrix.from_Matrix(M).convert_to(dom)

        def jet(x):
            return self._jet(dom.to_sympy(x))

        C = dm(V[:P, :P] + (0 if self.beta is None else 1 / self.beta) * sp.eye(P))
        det, adj, Y = jet(C.det()), C.adjugate(), dm(self.Y)

        def form(u, v):  # u^T adj(C) v
            return jet((u.transpose() * adj * v).rep.to_ddm()[0][0])

        F = (-(form(Y, Y) / det) * R(1, 2)).exp_rel() * det.rsqrt_rel()
        if V.shape[0] == P:
            return F, None, None
        k = dm(V[:P, P])
        return F, form(k, Y) / det, self._jet(V[P, P]) - form(k, k) / det

    def unit(self, a, b):
        E = sp.zeros(*self.V0.shape)
        E[a, b] = E[b, a] = 1
        return E

    def L(self, g):
        """L g (V0) for g(F, mu, var) -> jet."""
        V0, units = self.V0, [self.unit(a, b) for a, b in self.pairs]
        jets = [g(*self.gp(U)) for U in units]
        # the coordinates of b are its entries b_ab, a <= b
        out = sum(self.B[a, b] * jet[1] for (a, b), jet in zip(self.pairs, jets))
        diag = [2 * jet[2] for jet in jets]
        for i, (a, b) in enumerate(self.pairs):
            for j, (c, d) in enumerate(self.pairs[i:], start=i):
                hess = diag[i] if i == j else (2 * g(*self.gp(units[i] + units[j]))[2]
                                               - diag[i] - diag[j]) / 2
                sigma = V0[a, c] * V0[b, d] + V0[a, d] * V0[b, c]
                out += sigma * hess / (2 if i == j else 1)
        return sp.expand(out)


def _exact_invariants(V0, Y, beta, comps, P):
    """Exact values of every invariant name the Formulas use (defined here independently)."""
    m = V0.shape[0]
    A = (V0[:P, :P] + (0 if beta is None else 1 / beta) * sp.eye(P)).inv()
    letters = ["G"] if len(comps) == 1 else [f"G{i + 1}" for i in range(len(comps))]
    out = {"trA": A.trace(), "trA2": (A * A).trace()}
    for k in (1, 2, 3):
        tag = "A" if k == 1 else f"A{k}"
        out[f"y{tag}y"] = (Y.T * A**k * Y)[0]
    if m > P:
        kv, k00 = V0[:P, P], V0[P, P]
        out["k00"] = k00
        for k in (1, 2, 3):
            tag = "A" if k == 1 else f"A{k}"
            out[f"k{tag}y"] = (kv.T * A**k * Y)[0]
            out[f"k{tag}k"] = (kv.T * A**k * kv)[0]
    for (theta, g), L in zip(comps, letters):
        names = {s.name: s for s in g.free_symbols}
        G = sp.Matrix(m, m, lambda i, j: g.subs({names["q11"]: V0[i, i], names["q12"]: V0[i, j],
                                                 names["q22"]: V0[j, j]}))
        GX = G[:P, :P]
        out[f"trA{L}"] = (A * GX).trace()
        out[f"yA{L}Ay"] = (Y.T * A * GX * A * Y)[0]
        if m > P:
            g0, tag = G[:P, P], ("g0" if L == "G" else f"g{L[1:]}_0")
            out[f"{tag}Ay"] = (g0.T * A * Y)[0]
            out[f"kA{L}Ay"] = (kv.T * A * GX * A * Y)[0]
            out[f"kA{L}Ak"] = (kv.T * A * GX * A * kv)[0]
            out[f"{tag}Ak"] = (g0.T * A * kv)[0]
            out["G00" if L == "G" else f"{L}_00"] = G[P, P]
    return out


def _at(formula, inv):
    return formula.expr.subs({formula.symbol(n): inv[n] for n in formula.names if n in inv})


def _same(a, b):
    """Identical: the difference expands to 0 or, where acos/sqrt stay unevaluated, is below
    1e-40 at 50 digits, at three rational values of the symbolic parameters (a, phi2, ...)."""
    d = sp.expand(a - b)
    if d == 0:
        return True
    free = sorted(d.free_symbols, key=str)
    return all(abs(sp.N(d.subs({s: R(k + 3, k + 2 + i) for i, s in enumerate(free)}), 50))
               < sp.Float(10) ** -40 for k in range(3))


@pytest.mark.parametrize("P, activation, params, beta", [
    (2, "tanh", {}, None),                       # b = G / a^2, a symbolic
    (2, "relu", {"c_plus_value": R(1, 2), "c_minus_value": -1}, R(3)),
    (3, GENERIC, {}, R(2)),                      # two components G1, G2 (phi''^2, phi''')
    (3, "tanh", {"a": R(6, 5)}, None),           # beta = inf
    (5, "tanh", {}, R(2)),
])
def test_evidence_formula_is_the_coordinate_generator(P, activation, params, beta):
    V0, Y = V3[:P, :P], Y3[:P, :]
    co = _Coordinates(V0, activation, Y, beta, P, **params)
    LF_over_F = co.L(lambda F, mu, var: F)      # F is relative to F(V0)
    ev = log_evidence_first_order_formula(P, activation, math.inf if beta is None else beta,
                                          **params)
    inv = _exact_invariants(V0, Y, beta, _split_drift(drift(activation, **params)), P)
    assert _same(P * _at(ev.total, inv), LF_over_F)
    assert _same(ev.total.expr, ev.linear.expr + ev.nonlinear.expr)
    # the classic slip, the generator applied to log F without the carré du champ, is not
    wrong = _evidence_bundle(P, activation, math.inf if beta is None else beta,
                             tuple(sorted(params.items())), None, "L log F").total
    assert not _same(P * _at(wrong, inv), LF_over_F)


@pytest.mark.parametrize("P, activation, params, beta", [
    (2, "tanh", {}, R(2)),                       # symbolic a
    (3, "relu", {"c_plus_value": R(1, 2), "c_minus_value": -1}, R(3)),
    (3, GENERIC, {}, None),
])
def test_predictive_formulas_are_the_coordinate_generator(P, activation, params, beta):
    """Mean and variance slopes and the kernel/data split at a test input."""
    V0 = V3[:P + 1, :P + 1]
    co = _Coordinates(V0, activation, Y3[:P, :], beta, P, **params)
    _, mu, var = co.gp(sp.zeros(P + 1, P + 1))
    mu0, m20 = mu[0], mu[0] ** 2 + var[0]
    lf = co.L(lambda F, mu, var: F)
    slope = co.L(lambda F, mu, var: F * mu) - mu0 * lf             # d/dt E_post f(x0)
    second = co.L(lambda F, mu, var: F * (mu * mu + var)) - m20 * lf
    pr = predictive_first_order_formula(P, activation, math.inf if beta is None else beta,
                                        **params)
    inv = _exact_invariants(V0, Y3[:P, :], beta, _split_drift(drift(activation, **params)), P)
    assert _same(_at(pr.mean, inv), mu0)
    Lmu = co.L(lambda F, mu, var: mu)
    assert _same(_at(pr.kernel_term, inv), Lmu)
    assert _same(P * _at(pr.mean_slope, inv), slope)
    assert _same(_at(pr.data_term, inv), slope - Lmu)          # Gamma(log F, mu)
    assert _same(P * _at(pr.var_slope, inv), second - 2 * mu0 * slope)
    if beta is not None:  # the label-dependent correction is needed (it vanishes at beta = inf)
        assert not _same(_at(pr.kernel_term, inv), slope)


# ---------------------------------------------------------------------------------------------
# known results and structure


@pytest.mark.parametrize("P", [1, 2, 3, 5])
def test_zero_temperature_linear_part_is_the_known_formula(P):
    """Theory note 02 §7: (q^2 - 2(P+2) q + P(P+2)) / 4 per t, q = Y^T V0^-1 Y."""
    lin = log_evidence_first_order_formula(P, "tanh", math.inf).linear
    q = lin.symbol("yAy")
    assert sp.expand(lin.expr - (q * q - 2 * (P + 2) * q + P * (P + 2)) / (4 * P)) == 0


def test_zero_temperature_structure_of_the_predictive():
    """At beta = inf the data term vanishes, and for a linear network (zero drift) the mean
    does not move with depth (HZ23: the posterior mean is depth-independent)."""
    pr = predictive_first_order_formula(4, "tanh", math.inf)
    assert pr.data_term.expr == 0
    lin = predictive_first_order_formula(4, "relu", math.inf, c_plus_value=0.3,
                                         c_minus_value=0.3)
    assert lin.mean_slope.expr == 0
    # the kernel term is linear in the labels, the data term is not (beta finite)
    rng = np.random.default_rng(5)
    X, Y, x0 = rng.standard_normal((3, 8)), rng.standard_normal(3), rng.standard_normal(8)
    pf = predictive_first_order_formula(3, "tanh", 2.0, a=1.0)
    r1, r2 = pf.evaluate(X, Y, x0), pf.evaluate(X, 2 * Y, x0)
    assert math.isclose(r2.kernel_term, 2 * r1.kernel_term, rel_tol=1e-12)
    assert not math.isclose(r2.data_term, 2 * r1.data_term, rel_tol=1e-3)


# ---------------------------------------------------------------------------------------------
# numbers: against evidence_first_order and central differences (float64, well-conditioned
# data: round-off ~1e-14 for the closed forms, ~1e-8 for the differences)


CASES = [("tanh", {"a": 1.3}, {}), ("relu", {"c_plus_value": 0.5, "c_minus_value": -1.0}, {}),
         ("relu", {}, {"c_plus": 0.5, "c_minus": -1.0})]


@pytest.mark.parametrize("P", [2, 3, 5])
@pytest.mark.parametrize("beta", [2.0, math.inf])
def test_derived_evidence_equals_evidence_first_order(P, beta):
    rng = np.random.default_rng(P)
    X, Y = rng.standard_normal((P, P + 3)), rng.standard_normal(P)
    for act, params, values in CASES + [(shaped("tanh", a=1.1, n=64), {}, {})]:
        got = log_evidence_first_order_formula(P, act, beta, **params).evaluate(X, Y, **values)
        ref = evidence_first_order(X, Y, act, beta, **(params or {f"{k}_value": v for k, v in
                                                                 values.items()}))
        for field in ("total", "linear", "nonlinear", "rate_t"):
            a, b = getattr(got, field), getattr(ref, field)
            assert abs(a - b) <= 1e-10 * (1 + abs(b)), (field, a, b)


def _finite_differences(X, Y, x0, activation, beta, **params):
    """The former predictive_first_order: central differences of the generator."""
    Vb = np.vstack([X, x0]) @ np.vstack([X, x0]).T / X.shape[1]
    P, noise = len(Y), (0.0 if math.isinf(beta) else 1.0 / beta)

    def parts(V):
        C, k = V[:P, :P] + noise * np.eye(P), V[:P, P]
        return k @ np.linalg.solve(C, Y), V[P, P] - k @ np.linalg.solve(C, k)

    def mu(V):
        return parts(V)[0]

    def second(V):
        return parts(V)[0] ** 2 + parts(V)[1]

    def logF(V):
        return _log_lik(V[:P, :P], Y, beta)

    b = drift_matrix(Vb, activation, **params)
    Lmu, Gmu = generator_numeric(mu, Vb, b), carre_du_champ(logF, mu, Vb)
    dsec = generator_numeric(second, Vb, b) + carre_du_champ(logF, second, Vb)
    return {"kernel_term": Lmu, "data_term": Gmu, "mean_slope": (Lmu + Gmu) / P,
            "var_slope": (dsec - 2 * mu(Vb) * (Lmu + Gmu)) / P}


@pytest.mark.parametrize("P", [2, 3, 5])
@pytest.mark.parametrize("beta", [2.0, math.inf])
def test_closed_form_predictive_equals_finite_differences(P, beta):
    rng = np.random.default_rng(10 + P)
    X, Y, x0 = rng.standard_normal((P, 60)), rng.standard_normal(P), rng.standard_normal(60)
    for act, params, _ in CASES[:2]:
        got = predictive_first_order(X, Y, x0, act, beta, **params)
        fd = _finite_differences(X, Y, x0, act, beta, **params)
        scale = max(abs(v) for v in fd.values())
        for key, value in fd.items():
            assert abs(getattr(got, key) - value) <= 1e-6 * scale, (key, getattr(got, key), value)
        # the Formulas give the same numbers as the function
        via = predictive_first_order_formula(P, act, beta, **params).evaluate(X, Y, x0)
        for key in ("mean", "var", "mean_slope", "var_slope", "kernel_term", "data_term"):
            assert abs(getattr(via, key) - getattr(got, key)) <= 1e-10 * (1 + scale)


# ---------------------------------------------------------------------------------------------
# Monte Carlo: one layer of the exact chain (5 standard errors), and a wrong variant fails


def _wrong_rows(report, wrong):
    """The same Monte Carlo estimates against a wrong formula."""
    return [CheckRow.make(r.point, float(wrong.evaluate({n: r.point[n] for n in wrong.names})),
                          r.estimate, r.stderr, r.n_samples, 5.0) for r in report.rows]


def test_evidence_against_the_exact_chain():
    ev = log_evidence_first_order_formula(3, "tanh", 2.0, a=1.0, width=1000)
    report = ev.total.check(n_points=3, n_samples=2000, seed=1)
    assert report.passed, str(report)
    # the classic slip: the generator applied to log F, without the carré du champ
    wrong = _evidence_bundle(3, "tanh", 2.0, (("a", 1.0),), 1000, "L log F").total
    assert not all(r.passed for r in _wrong_rows(report, wrong))


def test_evidence_nonlinear_part_against_the_exact_chain():
    """ReLU with c_+ + c_- = 0 (no O(n^-1/2) bias); the drift part sampled on its own."""
    ev = log_evidence_first_order_formula(3, "relu", math.inf, c_plus_value=0.75,
                                          c_minus_value=-0.75, width=1000)
    rng = np.random.default_rng(11)
    pt = ev.point(rng.standard_normal((3, 6)), rng.standard_normal(3))
    report = ev.nonlinear.check(points=[pt], n_samples=2000, seed=3)
    assert report.passed, str(report)
    wrong = ev.nonlinear.replace(expr=-ev.nonlinear.expr)  # the drift with the wrong sign
    assert not all(r.passed for r in _wrong_rows(report, wrong))


def test_predictive_against_the_exact_chain():
    pf = predictive_first_order_formula(3, "tanh", 2.0, a=1.0, width=1000)
    mean = pf.mean_slope.check(n_points=2, n_samples=2000, seed=2)
    var = pf.var_slope.check(n_points=2, n_samples=2000, seed=2)
    assert mean.passed and var.passed, f"{mean}\n{var}"
    # without the label-dependent correction the mean slope is refuted
    wrong = pf.mean_slope.replace(expr=pf.kernel_term.expr / 3)
    assert not all(r.passed for r in _wrong_rows(mean, wrong))


def test_p5_against_the_exact_chain():
    rng = np.random.default_rng(8)
    X, Y, x0 = rng.standard_normal((5, 9)), rng.standard_normal(5), rng.standard_normal(9)
    act = shaped_relu(0.75, -0.75, n=1000)
    ev = log_evidence_first_order_formula(5, act, math.inf)
    rep = ev.total.check(points=[ev.point(X, Y)], n_samples=3000, seed=4)
    assert rep.passed, str(rep)
    wrong = _evidence_bundle(5, act, math.inf, (), None, "L log F").total
    assert not all(r.passed for r in _wrong_rows(rep, wrong))
    pf = predictive_first_order_formula(5, act, math.inf)
    rep = pf.kernel_term.check(points=[pf.point(X, Y, x0)], n_samples=3000, seed=5)
    assert rep.passed, str(rep)


# ---------------------------------------------------------------------------------------------
# API


def test_latex_code_and_pickle():
    ev = log_evidence_first_order_formula(3, "relu")
    tex = ev.total.latex()
    assert r"\langle Y, A Y\rangle" in tex and r"\operatorname{tr}(A G)" in tex and "c_{+}" in tex
    assert "double dlogZ_dtau(double yAy" in ev.total.code("c")
    again = pickle.loads(pickle.dumps(ev.nonlinear))
    assert again.expr == ev.nonlinear.expr and again.sampler is not None
    pr = predictive_first_order_formula(2, "tanh", 2.0, a=1.0)
    assert pickle.loads(pickle.dumps(pr.var_slope)).names == pr.var_slope.names


def test_points_carry_their_data():
    ev = log_evidence_first_order_formula(2, "tanh", None, a=1.0)
    X, Y = np.array([[1.0, 0.2, 0.0], [0.3, 1.0, 0.5]]), np.array([0.7, -0.4])
    pt = ev.point(X, Y, beta=2.0)
    with pytest.raises(ValueError, match="lacks the data entry"):
        ev.total.sampler({k: pt[k] for k in ev.total.names}, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="does not match its data"):
        ev.total.sampler({**pt, "yAy": pt["yAy"] + 1}, 2, np.random.default_rng(0))
    with pytest.raises(TypeError, match="give beta="):
        ev.point(X, Y)
    with pytest.raises(DomainError, match="yAy"):
        ev.total(**{**{k: pt[k] for k in ev.total.names}, "yAy": -1.0})
    # symbolic activation parameters other than a, c_plus, c_minus: no network to sample
    assert log_evidence_first_order_formula(2, GENERIC, 2.0).total.sampler is None


@pytest.mark.parametrize("call, error, match", [
    (lambda: log_evidence_first_order_formula(0, "tanh"), ValueError, "P must be"),
    (lambda: log_evidence_first_order_formula(2.0, "tanh"), TypeError, "P must be"),
    (lambda: log_evidence_first_order_formula(2, "tanh", 0.0), ValueError, "beta must be > 0"),
    (lambda: log_evidence_first_order_formula(2, "tanh", "2"), TypeError, "beta must be"),
    (lambda: log_evidence_first_order_formula(2, "cos"), DomainError, "activation="),
    (lambda: predictive_first_order_formula(2, "abs"), DomainError, "activation="),
    (lambda: log_evidence_first_order_formula(2, drift("tanh")), TypeError, "activation"),
    (lambda: log_evidence_first_order_formula(2, "tanh", width=0), ValueError, "width"),
    (lambda: log_evidence_first_order_formula(2, shaped("tanh", a=1.0, n=8), width=9),
     ValueError, "width"),
    (lambda: log_evidence_first_order_formula(2, "tanh", c_plus_value=1.0), ValueError,
     "c_plus_value"),
])
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()
