"""Diagram enumeration and the repeated-index conversion, against brute-force expansions."""

import itertools
import math

import numpy as np
import pytest
import sympy as sp

from symscale.cumulants.diagrams import (block_cost, diagram_counts, diagrams, integer_partitions,
                                         pattern_in_power_cumulants)


def _set_partitions(items):
    items = list(items)
    if not items:
        yield []
        return
    for part in _set_partitions(items[1:]):
        for i in range(len(part)):
            yield part[:i] + [[items[0]] + part[i]] + part[i + 1:]
        yield [[items[0]]] + part


def _brute_force(m, cap):
    """Joint cumulant of f_1(Z_1)..f_m(Z_m) from exp(sum dk_v d^v / v!), graded by eps^c(v).

    Independent of the enumerator: moments of every slot subset from the truncated exponential,
    then the Moebius sum over set partitions of the slots.
    """
    eps = sp.Symbol("eps")
    t = sp.symbols(f"t0:{m}")
    X = 0
    kap = {}
    for order in range(2, cap + 2):
        for v in itertools.product(range(order + 1), repeat=m):
            if sum(v) != order:
                continue
            support = sum(1 for x in v if x)
            if support == 1 and order < 3:
                continue  # means and variances are in the reference Gaussian
            c = block_cost(v)
            if c > cap - 1:
                continue
            kap[v] = sp.Symbol("kappa_" + "_".join(map(str, v)))
            X += kap[v] * eps**c * sp.prod([t[j] ** v[j] for j in range(m)]) / sp.prod(
                [sp.factorial(x) for x in v])
    series = sum(X**r / sp.factorial(r) for r in range(cap))
    series = sp.expand(series)
    series = sum(term for term in series.as_ordered_terms() if sp.degree(term, eps) <= cap - 1)
    w = {(j, k): sp.Symbol(f"w_{j}_{k}") for j in range(m) for k in range(3 * cap + 2)}

    def moment(S):
        # keep blocks supported in S and map t_j^k -> w_{j,k}
        out = 0
        for term in sp.Add.make_args(series):
            degs = [sp.degree(term, t[j]) for j in range(m)]
            if any(degs[j] for j in range(m) if j not in S):
                continue
            coef = term.subs({tj: 1 for tj in t})  # keeps eps: truncate the cumulant at the end
            out += coef * sp.prod([w[(j, degs[j])] for j in S])
        return sp.expand(out)

    mom = {}
    for r in range(1, m + 1):
        for S in itertools.combinations(range(m), r):
            mom[S] = moment(S)
    cum = 0
    for part in _set_partitions(range(m)):
        k = len(part)
        cum += (-1) ** (k - 1) * math.factorial(k - 1) * sp.prod(
            [mom[tuple(sorted(B))] for B in part])
    cum = sp.expand(cum)
    cum = sum(term for term in sp.Add.make_args(cum) if sp.degree(term, eps) <= cap - 1)
    return sp.expand(cum.subs(eps, 1)), kap, w


def _enumerated(m, cap, kap, w):
    total = 0
    for d in diagrams((1,) * m, cap):
        term = d.coefficient * sp.prod([w[(j, k)] for j, k in enumerate(d.derivatives)])
        for v, mult in d.blocks:
            term *= kap[v] ** mult
        total += term
    return sp.expand(total)


@pytest.mark.parametrize("m,cap", [(1, 3), (1, 4), (2, 2), (2, 3), (2, 4), (3, 3), (3, 4)])
def test_coefficients_match_brute_force_expansion(m, cap):
    brute, kap, w = _brute_force(m, cap)
    assert brute != 0
    assert sp.expand(brute - _enumerated(m, cap, kap, w)) == 0


def test_counts_are_stable():
    # a fingerprint of the enumeration: changes only if the truncation rule changes
    assert diagram_counts(3, 2) == {(1,): 1, (2,): 1, (3,): 1, (4,): 1, (1, 1): 1, (1, 1, 1): 0}
    assert diagram_counts(3, 3) == {(1,): 3, (2,): 3, (3,): 3, (4,): 3, (1, 1): 5,
                                    (1, 1, 1): 4}
    assert diagram_counts(4, 4) == {(1,): 3, (2,): 3, (3,): 3, (4,): 3, (1, 1): 15,
                                    (1, 1, 1): 35, (1, 1, 1, 1): 29}
    assert len(diagrams((1, 1), 5)) == len(diagrams((1, 1), 5))  # cached, deterministic


def test_truncation_respects_cap_and_tracking():
    for cap in (2, 3, 4):
        for d in diagrams((1, 1, 1), cap):
            assert 1 + d.cost <= cap
    # only covariance blocks allowed: the K=3 triple cumulant keeps the three path diagrams
    allowed = frozenset({(2, (1, 1))})
    ds = diagrams((1, 1, 1), 3, allowed)
    assert len(ds) == 3 and all(mult == 1 for d in ds for _, mult in d.blocks)


def test_diagram_latex_and_formula():
    d = diagrams((1, 1), 3)[1]  # k(1,1)^2
    assert d.coefficient == sp.Rational(1, 2)
    assert r"\kappa_{ij}^{2}" in d.latex()
    f = d.formula()
    assert f.latex().startswith(r"\mathrm{term} =")


def _exact_joint_cumulant(values, probs, columns):
    """Joint cumulant of the listed columns of a finite distribution (moments -> cumulants)."""
    d = len(columns)
    total = 0.0
    for part in _set_partitions(range(d)):
        k = len(part)
        prod = 1.0
        for B in part:
            prod *= np.sum(probs * np.prod(values[:, [columns[s] for s in B]], axis=1))
        total += (-1) ** (k - 1) * math.factorial(k - 1) * prod
    return total


@pytest.mark.parametrize("groups", [(2,), (3,), (2, 1), (2, 2), (3, 1), (2, 1, 1), (4,)])
def test_repeated_index_conversion_on_a_finite_distribution(groups):
    rng = np.random.default_rng(sum(groups) * 7 + len(groups))
    m = len(groups)
    values = rng.normal(size=(6, m)) + 0.5
    probs = rng.dirichlet(np.ones(6))
    columns = [j for j, g in enumerate(groups) for _ in range(g)]
    exact = _exact_joint_cumulant(values, probs, columns)

    def pk(slots, powers):
        vals = np.stack([values[:, s] ** p for s, p in zip(slots, powers)], axis=1)
        return _exact_joint_cumulant(vals, probs, list(range(len(slots))))

    via = sum(float(c) * np.prod([pk(f.slots, f.powers) for f in fs])
              for c, fs in pattern_in_power_cumulants(groups))
    assert via == pytest.approx(exact, rel=1e-10, abs=1e-12)


def test_integer_partitions():
    assert integer_partitions(3) == [(1, 1, 1), (2, 1), (3,)]
    assert len(integer_partitions(6)) == 11


@pytest.mark.parametrize("bad", [(), (0,), (1, -1)])
def test_bad_powers(bad):
    with pytest.raises(ValueError, match="powers"):
        diagrams(bad, 3)


def test_bad_cap():
    with pytest.raises(ValueError, match="cap"):
        diagrams((1,), 0)
