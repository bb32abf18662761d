r"""The integrands of the master theorem's expectations, made as small as their expression allows.

The infinite-width engine (:mod:`symscale.netsor.infinite`) integrates ``E[f(u(x)) g(v(x'))]``
for nonlinearities of several G-variables. Before a joint quadrature these pure functions cut
the integral down:

* :func:`restricted`: only the arguments an expression reads, a node passed twice as one
  argument, and a function of one argument as an :class:`~symscale.activations.Activation`
  (kernels from the univariate engine);
* :func:`terms`: a sum as its terms (E[f g] is bilinear);
* :func:`independent_parts`: a product over groups of independent arguments as a product of
  expectations.

A spec is ``(nonlinearity, [G parents], kernel parameters or None)``.

Examples
--------
>>> import sympy as sp
>>> from symscale.netsor.ops import MultiNonlinearity
>>> x0, x1 = sp.symbols("x0 x1", real=True)
>>> spec = (MultiNonlinearity(sp.tanh(x0) + x1, 2), ["g1", "g2"], None)
>>> [(fn.label, par) for fn, par, _ in terms(spec)]
[('phi(x) = x', ['g2']), ('phi(x) = tanh(x)', ['g1'])]
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import sympy as sp

from .._symbolic import X
from ..activations import Activation
from ..linalg import above_round_off
from .ops import MultiNonlinearity, _multi_symbols

__all__ = ["terms", "restricted", "factors_of", "independent_parts", "add_se", "rank", "ONE",
           "MAX_TERM_PAIRS"]


#: Most pairs of additive terms integrated one by one (beyond, the whole function at once).
MAX_TERM_PAIRS = 64


def terms(spec):
    """The additive terms of a spec's nonlinearity, each restricted to the arguments it reads
    (an Activation is one term)."""
    fn = spec[0]
    if not isinstance(fn, MultiNonlinearity):
        return [spec]
    return [restricted((MultiNonlinearity(t, fn.arity, fn.n_params),) + tuple(spec[1:]))
            for t in sp.Add.make_args(fn.expr)]


def restricted(spec):
    """The spec with only the arguments its expression reads (at least one), renumbered; a
    function of one argument without parameters becomes an Activation (its kernels then come
    from the univariate engine: exact for piecewise polynomials, graded quadrature else)."""
    fn, par, params = spec
    if not isinstance(fn, MultiNonlinearity):
        return spec
    xs = fn.symbols[:fn.arity]
    expr = fn.expr
    # a node passed twice is one argument (x0 - x1 of one G-variable is 0)
    first = {n: i for i, n in reversed(list(enumerate(par[:fn.arity])))}
    twins = {xs[i]: xs[first[n]] for i, n in enumerate(par[:fn.arity]) if first[n] != i}
    if twins:
        expr = expr.xreplace(twins)
    used = [i for i, x in enumerate(xs) if x in expr.free_symbols] or [0]
    if len(used) < fn.arity:
        new = _multi_symbols(len(used), fn.n_params)
        expr = expr.xreplace({xs[i]: new[j] for j, i in enumerate(used)})
    if len(used) == 1 and fn.n_params == 0:
        return _activation_of(expr), [par[used[0]]], None
    if len(used) == fn.arity:
        return spec
    return MultiNonlinearity(expr, len(used), fn.n_params), [par[i] for i in used], params


@functools.lru_cache(maxsize=256)
def _activation_of(expr):
    """The Activation phi(x) = expr(x0)."""
    return Activation(f"phi(x) = {expr.xreplace({_X0: X})}", expr.xreplace({_X0: X}))


_X0 = _multi_symbols(1, 0)[0]
#: The constant 1 (a side of a product that reads nothing of a group).
ONE = Activation("1", sp.Integer(1))


def factors_of(spec):
    """[(factor, [G parents it reads])] of a spec's product (an Activation is one factor)."""
    fn, par, _ = spec
    if not isinstance(fn, MultiNonlinearity):
        return [(None, list(par))]
    xs = fn.symbols[:fn.arity]
    return [(f, list(dict.fromkeys(par[i] for i, x in enumerate(xs) if x in f.free_symbols)))
            for f in sp.Mul.make_args(fn.expr)]


def add_se(a, b):
    """Sum of two standard-error bounds, either possibly None (no Monte Carlo)."""
    return b if a is None else a if b is None else a + b


def rank(C):
    """Largest numerical rank in a stack of covariances (..., D, D)."""
    return int(np.max(np.sum(above_round_off(np.linalg.eigvalsh(C)), axis=-1)))


def independent_parts(spec_a, spec_b, cov):
    """A product term f(x) g(x') as [(f_c, g_c)] over groups c of arguments independent of
    each other: E[f g] = prod_c E[f_c g_c] (tanh(x0) x1 of two independent Gaussians is two
    2-D integrals per pair of inputs, not one 4-D one).

    Parameters
    ----------
    spec_a, spec_b : tuple
        (nonlinearity, G parents, kernel parameters) at x and at x'.
    cov : callable
        ``cov(u, v)``: the P x P covariance of two G-variables (all zeros when independent).

    Returns
    -------
    list of (spec, spec)
        One pair per group; a side that reads nothing of a group gets the constant 1.
    """
    nodes = list(dict.fromkeys(list(spec_a[1]) + list(spec_b[1])))
    group = {n: n for n in nodes}

    def find(n):
        while group[n] != n:
            n = group[n]
        return n

    def join(u, v):
        group[find(u)] = find(v)

    factors = [(side, f) for side, spec in enumerate((spec_a, spec_b))
               for f in factors_of(spec)]
    for _, (_, used) in factors:
        for u in used[1:]:
            join(used[0], u)
    for u, v in itertools.combinations(nodes, 2):
        if find(u) != find(v) and np.any(cov(u, v)):
            join(u, v)
    roots = list(dict.fromkeys(find(n) for n in nodes))
    if len(roots) == 1:
        return [(spec_a, spec_b)]
    out = []
    for k, root in enumerate(roots):
        pair = []
        for side, spec in enumerate((spec_a, spec_b)):
            fn, par, params = spec
            # parameter-only factors ride with the first group
            mine = [f for s, (f, used) in factors if s == side and (
                find(used[0]) == root if used else k == 0)]
            first = next(n for n in nodes if find(n) == root)
            if not mine:  # this side reads nothing of the group: the constant 1
                pair.append((ONE, [first], None))
            elif not isinstance(fn, MultiNonlinearity):
                pair.append(spec)
            else:
                pair.append(restricted((MultiNonlinearity(sp.Mul(*mine), fn.arity,
                                                          fn.n_params), par, params)))
        out.append(tuple(pair))
    return out
