"""Second order in tau: the derived d^2 log Z/d tau^2 against the generator applied twice, the
closed form of the zero-drift SDE, and one layer of the exact finite-width chain."""

import math
import pickle
import warnings

import numpy as np
import pytest
import sympy as sp

from symscale.errors import DomainError
from symscale.nsde import (drift, evidence_first_order, generator, generator_numeric,
                           gram_symbols, shaped, shaped_relu)
from symscale.nsde.bayes import _evidence_terms, _log_lik, drift_matrix
from symscale.nsde._second_order_chain import _chain_second, _slope_rates
import symscale.nsde.second_order as so_module
from symscale.nsde.second_order import (check_second_order,
                                        evidence_second_order, first_order_horizon,
                                        log_evidence_second_order_formula)

RELU = {"c_plus_value": 0.7, "c_minus_value": -0.7}


def _data(P, seed, d=None):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, d or P + 3)), rng.standard_normal(P)


# ---------------------------------------------------------------------------------------------
# the derivation


def test_p1_equals_generator_applied_twice_exactly():
    """P = 1, symbolic a and noise s: the Formula is L^2 F / F - (L F / F)^2."""
    v = gram_symbols(1)[0, 0]
    y, s = sp.Symbol("y", real=True), sp.Symbol("s", positive=True)
    F = sp.exp(-y**2 / (2 * (v + s))) / sp.sqrt(2 * sp.pi * (v + s))
    LF = generator(F, "tanh", 1)
    ref = generator(LF, "tanh", 1) / F - (LF / F) ** 2
    f = log_evidence_second_order_formula(1, "tanh").total
    assert set(f.names) == {"A11", "V11", "w1", "a"}  # the diagonal drift is written out
    atoms = {"A11": 1 / (v + s), "w1": y / (v + s), "V11": v, "a": sp.Symbol("a", positive=True)}
    got = f.expr.xreplace({f.symbol(k): e for k, e in atoms.items()})
    assert sp.simplify(got - ref) == 0  # d^2/dtau^2 = d^2/dt^2 for P = 1


@pytest.mark.parametrize("act, kw", [("tanh", {"a": 1.2}), ("relu", RELU)])
@pytest.mark.parametrize("beta", [2.0, np.inf])
def test_p2_equals_central_differences(act, kw, beta):
    """P = 2: (L(F R) / F - R^2) / P^2 with L by central differences (generator_numeric) of
    H = F R, R the first-order closed form at any V."""
    X, Y = _data(2, 3)
    V0 = X @ X.T / X.shape[1]

    def R(V):
        return sum(_evidence_terms(V, Y, beta, drift_matrix(V, act, **kw)))

    F0 = math.exp(_log_lik(V0, Y, beta))
    LH = generator_numeric(lambda V: math.exp(_log_lik(V, Y, beta)) * R(V), V0,
                           drift_matrix(V0, act, **kw))
    got = evidence_second_order(X, Y, act, beta, **kw).rate_t2
    # central second differences at h = 1e-4 |V|: about 1e-7 of the terms' scale, which the
    # subtraction of R^2 does not shrink
    assert abs(got - (LH / F0 - R(V0) ** 2)) <= 1e-6 * (abs(LH / F0) + R(V0) ** 2)


def _zero_drift_reference(V0, Y, beta):
    """d^2 log Z/dt^2 of the deep linear network from a different route: with zero drift,
    E F(V_t) = E F(e^X V0) with X = -t + sqrt(2) B_t (a product of chi^2_n / n per layer), so
    with phi(x) = log F(e^x V0) the scalar generator L h = -h' + h'' gives
    R = -phi' + phi'' + phi'^2 and d^2 log Z/dt^2 = -R' + R'' + 2 phi' R' at x = 0."""
    x = sp.Symbol("x", real=True)
    lam, U = np.linalg.eigh(V0)
    y = U.T @ Y
    s = 0 if math.isinf(beta) else 1 / beta
    phi = -sum(sp.Float(yi) ** 2 / (2 * (sp.exp(x) * sp.Float(li) + s))
               + sp.log(sp.exp(x) * sp.Float(li) + s) / 2 for yi, li in zip(y, lam))
    p1, p2, p3, p4 = (float(sp.diff(phi, x, k).subs(x, 0)) for k in range(1, 5))
    R1 = -p2 + p3 + 2 * p1 * p2
    R2 = -p3 + p4 + 2 * p2 * p2 + 2 * p1 * p3
    return -R1 + R2 + 2 * p1 * R1


@pytest.mark.parametrize("P", [2, 3])
@pytest.mark.parametrize("beta", [1.5, np.inf])
def test_linear_part_equals_zero_drift_closed_form(P, beta):
    X, Y = _data(P, 10 + P)
    V0 = X @ X.T / X.shape[1]
    ref = _zero_drift_reference(V0, Y, beta)
    r = evidence_second_order(X, Y, "tanh", beta, a=1.0)
    assert abs(r.linear * P**2 - ref) <= 1e-9 * (1 + abs(ref))
    # c_plus = c_minus: no drift, nothing nonlinear
    z = evidence_second_order(X, Y, "relu", beta, c_plus_value=0.3, c_minus_value=0.3)
    assert z.nonlinear == 0.0 and abs(z.total * P**2 - ref) <= 1e-9 * (1 + abs(ref))


def test_formula_equals_fast_path_and_first_order():
    """The lambdified Formulas (symbolic a, beta a data entry) equal the polynomial evaluated
    directly; the slope is the first-order rate."""
    so = log_evidence_second_order_formula(2, "tanh")
    X, Y = _data(2, 4)
    got = so.evaluate(X, Y, beta=3.0, a=1.3)
    ref = evidence_second_order(X, Y, "tanh", 3.0, a=1.3)
    for k in ("total", "linear", "nonlinear", "slope"):
        assert abs(getattr(got, k) - getattr(ref, k)) <= 1e-12 * (1 + abs(getattr(ref, k)))
    assert ref.slope == pytest.approx(evidence_first_order(X, Y, "tanh", 3.0, a=1.3).total,
                                      rel=1e-14)


@pytest.mark.parametrize("act, grid", [
    ("tanh", [{"a": a} for a in (0.3, 0.7, 1.3, 2.9)]),
    ("relu", [{"c_plus_value": c, "c_minus_value": -c / 3} for c in (0.2, 0.5, 1.1, 2.0)])])
def test_a_parameter_sweep_derives_the_drift_once(act, grid):
    """The drift's parameters are one numeric factor: every value shares one set of lambdified
    derivatives, and the atoms equal those of the drift lambdified with the value in it."""
    X, Y = _data(3, 8)
    V = X @ X.T / X.shape[1]
    evidence_second_order(X, Y, act, 2.0, **grid[0])
    before = so_module._drift_parts.cache_info().misses
    for params in grid:
        evidence_second_order(X, Y, act, 2.0, **params)
        g = drift(act, **params).expr
        got = so_module._drift_atoms(3, V, g)
        off, diag = so_module._drift_parts.__wrapped__(g)  # the old way: one per value
        a, b = 0, 1
        ref = [float(f(V[a, a], V[a, b], V[b, b])) for f in off]
        assert got[("b", (a, b))] == pytest.approx(ref[0], rel=1e-13)
        assert got[("ddb", (a, b), (a, b), (b, b))] == pytest.approx(ref[-2], rel=1e-13)
        h = [float(f(V[2, 2])) for f in diag]
        assert got[("ddb", (2, 2), (2, 2), (2, 2))] == pytest.approx(h[2], rel=1e-13)
    assert so_module._drift_parts.cache_info().misses == before


def test_batched_rate_equals_first_order_closed_form():
    """The stacked L F / F of the samplers against the theory note's formula, matrix by matrix."""
    X, Y = _data(3, 5)
    V = np.stack([X @ X.T / 6, np.eye(3) + 0.1])
    b = np.stack([drift_matrix(v, "tanh", a=1.0) for v in V])
    tot, lin = _slope_rates(V, Y, 0.5, b)
    for k in range(2):
        A = np.linalg.inv(V[k] + 0.5 * np.eye(3))
        w, VA = A @ Y, V[k] @ A
        wVw = w @ V[k] @ w
        ref_lin = (wVw**2 / 4 - w @ V[k] @ A @ V[k] @ w - np.trace(VA) * wVw / 2
                   + np.trace(VA) ** 2 / 4 + np.trace(VA @ VA) / 2)
        ref_non = (w @ b[k] @ w - np.trace(A @ b[k])) / 2
        assert abs(lin[k] - ref_lin) <= 1e-12 * (1 + abs(ref_lin))
        assert abs(tot[k] - ref_lin - ref_non) <= 1e-12 * (1 + abs(ref_lin + ref_non))


# ---------------------------------------------------------------------------------------------
# Monte Carlo: one layer of the exact chain


@pytest.mark.parametrize("P, network, beta", [
    (2, shaped("tanh", 1.0, 1000), 2.0), (3, shaped("tanh", 1.2, 1000), np.inf),
    (2, shaped_relu(0.8, -0.8, 1000), np.inf), (3, shaped_relu(0.6, -0.6, 1000), 2.0)])
def test_chain_check(P, network, beta):
    X, Y = _data(P, 20 + P)
    rep = check_second_order(X, Y, network, beta, n_samples=4000, seed=1)
    assert rep.passed, rep
    # the chain resolves the second order: its negation is far outside 5 standard errors
    total = rep.rows[0]
    assert abs(total.estimate + total.value) / total.stderr > 5


def test_chain_total_alone_is_the_first_column_without_warnings(monkeypatch):
    """Asked for "total" only, the chain fills one column (an unfilled one was garbage that made
    the final division warn) and gives the same draws as the first of the three columns.
    Uninitialised memory is made signalling NaNs so that reading it always warns."""
    X, Y = _data(2, 7)
    V0 = X @ X.T / X.shape[1]
    net = shaped("tanh", 1.0, 200)
    empty = np.empty

    def garbage(shape, dtype=float, **kw):
        out = empty(shape, dtype, **kw)
        if out.dtype == np.float64:
            out.view(np.uint64)[...] = 0x7FF0000000000001
        return out

    monkeypatch.setattr(np, "empty", garbage)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        total = _chain_second("total", V0, Y, 0.5, net, 300, np.random.default_rng(4))
    assert total.shape == (300,) and np.isfinite(total).all()
    three = _chain_second(None, V0, Y, 0.5, net, 300, np.random.default_rng(4))
    monkeypatch.undo()
    np.testing.assert_array_equal(total, three[:, 0])


@pytest.mark.parametrize("P, act, beta", [
    (2, "tanh", None), pytest.param(3, "relu", np.inf, marks=pytest.mark.slow)])
def test_formula_check_and_wrong_sign(P, act, beta):
    """Formula.check on a random data set (random a, or c_- = -c_+; random beta when it is a
    variable); the negated Formula fails on the same draws. P = 3 lambdifies 6504 monomials
    twice (about 15 s)."""
    so = log_evidence_second_order_formula(P, act, beta=beta, width=1000)
    pt = so.total.point_sampler(np.random.default_rng(2))
    rep = so.total.check(points=[pt], n_samples=4000, seed=3)
    assert rep.passed, rep
    wrong = so.total.replace(expr=-so.total.expr).check(points=[pt], n_samples=4000, seed=3)
    assert not wrong.passed and abs(wrong.max_abs_z) > 5


# ---------------------------------------------------------------------------------------------
# invariances, horizon, objects


@pytest.mark.parametrize("act, kw", [("tanh", {"a": 0.9}), ("relu", RELU)])
def test_invariances(act, kw):
    X, Y = _data(3, 7)
    r = evidence_second_order(X, Y, act, 2.5, **kw)
    flip = evidence_second_order(X, -Y, act, 2.5, **kw)
    perm = [2, 0, 1]
    moved = evidence_second_order(X[perm], Y[perm], act, 2.5, **kw)
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 6)))[0]
    rotated = evidence_second_order(X @ Q, Y, act, 2.5, **kw)
    for other in (flip, moved, rotated):
        assert abs(other.total - r.total) <= 1e-10 * (1 + abs(r.total))


def test_horizon():
    X, Y = np.sqrt(3.0) * np.eye(3), np.ones(3)
    r = evidence_second_order(X, Y, "relu", np.inf, c_plus_value=0.5, c_minus_value=-0.5)
    assert r.slope < 0 < r.total  # depth hurts at first order, less so at second
    assert r.horizon == first_order_horizon(X, Y, "relu", c_plus_value=0.5, c_minus_value=-0.5)
    assert abs(r.slope_at(r.horizon)) <= 1e-12
    same = evidence_second_order(X, Y, "tanh", np.inf, a=1.0)  # both negative
    assert same.slope < 0 and same.total < 0 and same.horizon == math.inf


def test_cache_pickle_latex_code():
    so = log_evidence_second_order_formula(2, "tanh", beta=2.0, a=1.0)
    assert log_evidence_second_order_formula(2, "tanh", beta=2.0, a=1.0) is so
    back = pickle.loads(pickle.dumps(so.total))
    assert back.expr == so.total.expr and back.names == so.total.names
    one = log_evidence_second_order_formula(1, "relu", beta=np.inf)
    assert one.nonlinear.expr == 0  # the shaped-ReLU drift vanishes on the diagonal
    assert "G12" in log_evidence_second_order_formula(2, "relu", beta=np.inf).total.names
    tex = log_evidence_second_order_formula(2, "tanh", beta=2.0, a=1.0).total.latex()
    assert r"\partial_{11}^{2} G_{12}" in tex and r"\partial_{12} G_{12}" in tex
    code = so.total.code("c")
    assert code.count("double") >= len(so.total.names) + 1 and "dG12_11" in code


def test_bad_input():
    X, Y = _data(2, 1)
    with pytest.raises(ValueError):
        log_evidence_second_order_formula(0, "tanh")
    with pytest.raises(TypeError):
        log_evidence_second_order_formula(1.5, "tanh")
    with pytest.raises(ValueError):
        log_evidence_second_order_formula(2, "tanh", beta=-1.0)
    with pytest.raises(DomainError):
        log_evidence_second_order_formula(2, "abs")
    with pytest.raises(TypeError):
        log_evidence_second_order_formula(2, drift("tanh", a=1.0))
    with pytest.raises(ValueError, match="symbolic parameters"):
        evidence_second_order(X, Y, "tanh")
    with pytest.raises(ValueError):
        evidence_second_order(X, Y[:1], "tanh", a=1.0)
    with pytest.raises(ValueError):
        evidence_second_order(np.ones((3, 2)), np.ones(3), "tanh", np.inf, a=1.0)  # singular
    with pytest.raises(DomainError, match="collinear"):
        evidence_second_order(np.array([[1.0, 1.0], [2.0, 2.0]]), Y, "relu", 2.0, **RELU)
    so = log_evidence_second_order_formula(2, "tanh", a=1.0)
    with pytest.raises(TypeError, match="beta"):
        so.point(X, Y)
    with pytest.raises(TypeError, match="parameters"):
        so.point(X, Y, beta=1.0, a=2.0)
    pt = so.point(X, Y, beta=1.0)
    with pytest.raises(ValueError, match="does not match"):
        so.total.sampler({**pt, "A11": pt["A11"] + 1.0}, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="Shaped"):
        check_second_order(X, Y, "tanh", 2.0)
    with pytest.raises(DomainError):
        so.total(**{**{n: pt[n] for n in so.total.names}, "V11": -1.0})
