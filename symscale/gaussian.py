r"""Exact Gaussian expectations of elementary functions.

For :math:`Z\sim\mathcal N(0,1)` and :math:`Y=\mu+\sigma Z` this module computes, exactly and with
:math:`\mu`, :math:`\sigma^2` possibly symbolic,

.. math:: M_j = \mathbb E\,[Z^j f(Y)], \qquad j = 0, \dots, J,

for every :math:`f` that is, on each interval of a finite partition of the real line, a sum of
terms :math:`c\,x^m e^{\alpha x^2+\beta x}\,[\operatorname{erf}(a x+b)]` (the bracket optional,
and allowed only on a piece that is the whole line). That class contains polynomials, ReLU-type
and step-type functions, ``exp``, ``sin``/``cos`` (through complex exponentials), ``erf``, GELU and
products such as :math:`x + \tfrac12 x^2 e^{-x^2}`. Anything else raises
:class:`~symscale.errors.NoClosedFormError`.

How: complete the square to turn :math:`e^{\alpha y^2+\beta y}\varphi` into another Gaussian, then
run Stein's recursion :math:`\mathbb E[W h(W)] = m\,\mathbb E h(W) + s^2\,\mathbb E h'(W)` for
:math:`W\sim\mathcal N(m,s^2)`: on a truncated interval :math:`h'` picks up boundary terms
(densities at the ends); with :math:`h=\operatorname{erf}(aW+b)` it picks up an exp-quadratic term,
which is again a Gaussian moment. The arithmetic runs in symengine (fast expansion) and the result
is converted back to sympy.

Examples
--------
>>> import sympy as sp
>>> from symscale.gaussian import gaussian_moments, gaussian_expectation
>>> x = sp.Symbol("x", real=True)
>>> gaussian_expectation(sp.Max(x, 0))      # E[relu(Z)] = 1/sqrt(2 pi)
sqrt(2)/(2*sqrt(pi))
>>> gaussian_moments(sp.sin(x), 2)           # E[sin Z], E[Z sin Z], E[Z^2 sin Z]
[0, exp(-1/2), 0]
>>> mu = sp.Symbol("mu", real=True)
>>> sp.simplify(gaussian_expectation(x**2, mean=mu, var=2))
mu**2 + 2
"""

from __future__ import annotations

from math import comb

import symengine as se
import sympy as sp

from ._symbolic import X, pieces, to_sympy
from .expressions import as_expression
from .validation import check_int

#: Largest moment order (the exact moments grow like (order-1)!!; beyond this a request is a
#: typo that would exhaust memory).
MAX_ORDER = 2000
from .errors import DomainError, NoClosedFormError

__all__ = ["gaussian_moments", "gaussian_expectation"]

_SQRT_PI = se.sqrt(se.pi)
_SQRT_2 = se.sqrt(2)


def gaussian_expectation(expr, *, mean=0, var=1, x: sp.Symbol = X) -> sp.Expr:
    """Exact :math:`\\mathbb E f(Y)` for :math:`Y\\sim\\mathcal N(\\text{mean}, \\text{var})`.

    See :func:`gaussian_moments` for parameters and errors.
    """
    return gaussian_moments(expr, 0, mean=mean, var=var, x=x)[0]


def gaussian_moments(expr, order: int, *, mean=0, var=1, x: sp.Symbol = X) -> list[sp.Expr]:
    """Exact :math:`M_j=\\mathbb E[Z^j f(\\text{mean}+\\sqrt{\\text{var}}\\,Z)]`, j = 0..order.

    Parameters
    ----------
    expr : sympy.Expr
        f as an expression in ``x``.
    order : int
        Highest power j of Z.
    mean, var : number or sympy.Expr
        Mean and variance of Y; symbols are allowed (``var`` is then assumed positive).
    x : sympy.Symbol
        The variable of ``expr``.

    Returns
    -------
    list of sympy.Expr
        ``order + 1`` exact expressions.

    Raises
    ------
    NoClosedFormError
        f is outside the supported class (tanh, sigmoid, erf squared, erf on a half-line...).
    DomainError
        The expectation diverges (a factor exp(alpha x^2) with 2*alpha*var >= 1).
    TypeError
        ``order`` is not an integer.
    ValueError
        ``order`` outside 0..MAX_ORDER, or a negative variance.
    """
    order = check_int(order, "order", low=0, high=MAX_ORDER)
    mean = to_sympy(mean, "mean")
    var = to_sympy(var, "var")
    if var.is_number and (var.is_extended_real is False or var < 0):
        raise ValueError(f"var must be >= 0, got {var}")
    expr = as_expression(expr, "expr")
    # work with a positive variance and real means/parameters whatever the caller's symbols say
    # (same names, so the symengine round trip below maps them back by name)
    assume = {s: sp.Symbol(s.name, positive=True) for s in var.free_symbols if not s.is_positive}
    assume.update({s: sp.Symbol(s.name, real=True)
                   for s in (mean.free_symbols | expr.free_symbols) - {x}
                   if not s.is_extended_real and s not in assume})
    if assume:
        undo = {v: k for k, v in assume.items()}
        out = gaussian_moments(expr.xreplace(assume), order, mean=mean.xreplace(assume),
                               var=var.xreplace(assume), x=x)
        return [o.xreplace(undo) for o in out]
    if var == 0:
        # Deterministic Y: E[Z^j] f(mean), with the standard normal moments (j-1)!!.
        fm = expr.subs(x, mean)
        return [fm * _std_moment(j) for j in range(order + 1)]
    mu, sigma = se.sympify(mean), se.sqrt(se.sympify(var))
    total = [se.Integer(0)] * (order + 1)
    for lo, hi, piece in pieces(expr, x):
        tl = None if lo == -sp.oo else (se.sympify(lo) - mu) / sigma
        th = None if hi == sp.oo else (se.sympify(hi) - mu) / sigma
        for term in _terms(piece, x):
            contrib = _term_moments(term, order, mu, sigma, tl, th)
            total = [a + b for a, b in zip(total, contrib)]
    # symengine drops assumptions: map its symbols back to the caller's (real, positive...).
    back = {sp.Symbol(s.name): s for s in expr.free_symbols | mean.free_symbols | var.free_symbols}
    out = [sp.sympify(se.expand(t)).xreplace(back) for t in total]
    return [_realify(o) for o in out]


def _std_moment(j: int) -> sp.Integer:
    if j % 2:
        return sp.S.Zero
    return sp.factorial2(j - 1) if j else sp.S.One


def _realify(e: sp.Expr) -> sp.Expr:
    """Remove the imaginary unit introduced by sin/cos -> exp (the results are real)."""
    if not e.has(sp.I):
        return e
    e = sp.expand_complex(e)  # every symbol is real here (see gaussian_moments)
    return sp.simplify(e) if e.has(sp.I) else e


# ---------------------------------------------------------------------------------------------
# parsing f into terms  c * x**m * exp(alpha x^2 + beta x) * erf(a x + b)


def _trig_to_exp(g):
    i = sp.I
    return g.replace(sp.sin, lambda u: (sp.exp(i * u) - sp.exp(-i * u)) / (2 * i)).replace(
        sp.cos, lambda u: (sp.exp(i * u) + sp.exp(-i * u)) / 2).replace(
        sp.sinh, lambda u: (sp.exp(u) - sp.exp(-u)) / 2).replace(
        sp.cosh, lambda u: (sp.exp(u) + sp.exp(-u)) / 2)


def _terms(piece, x):
    """Decompose a smooth piece into (coef, m, alpha, beta, erf_ab) tuples (sympy values)."""
    g = sp.expand(_trig_to_exp(piece))
    out = []
    for t in sp.Add.make_args(g):
        if t == 0:
            continue
        t = sp.powsimp(t, combine="exp")
        coef, rest = t.as_independent(x, as_Add=False)
        m, expo, erf_arg = 0, sp.S.Zero, None
        for f in sp.Mul.make_args(rest):
            if f == 1:
                continue
            base, e = f.as_base_exp()
            if base == x and e.is_Integer and e > 0:
                m += int(e)
            elif isinstance(f, sp.exp):
                expo += f.args[0]
            elif isinstance(f, sp.erf) and erf_arg is None:
                erf_arg = f.args[0]
            else:
                raise NoClosedFormError(
                    f"no closed-form Gaussian integral for the factor {f} of {piece}; "
                    "use the numeric path (exact=False)"
                )
        alpha, beta, gamma = _poly_coeffs(expo, x, 2, piece)
        coef = coef * sp.exp(gamma)
        erf_ab = None
        if erf_arg is not None:
            _, a, b = _poly_coeffs(erf_arg, x, 1, piece)
            if a == 0:
                coef = coef * sp.erf(b)
            else:
                erf_ab = (a, b)
        out.append((coef, m, alpha, beta, erf_ab))
    return out


def _poly_coeffs(e, x, degree, piece):
    """(coefficient of x^2, of x, constant) of a polynomial of at most ``degree`` in x."""
    e = sp.expand(e)
    if not e.is_polynomial(x) or sp.degree(e, x) > degree:
        raise NoClosedFormError(
            f"the argument {e} in {piece} is not a polynomial of degree <= {degree} in {x}; "
            "use the numeric path (exact=False)"
        )
    p = sp.Poly(e, x)
    return p.coeff_monomial(x**2), p.coeff_monomial(x), p.coeff_monomial(1)


# ---------------------------------------------------------------------------------------------
# moments


def _term_moments(term, order, mu, sigma, tl, th):
    coef, m, alpha, beta, erf_ab = term
    alpha, beta = se.sympify(alpha), se.sympify(beta)
    # f(mu + sigma z): exp(alpha' z^2 + beta' z + gamma') with
    a2 = alpha * sigma**2
    b1 = sigma * (2 * alpha * mu + beta)
    g0 = alpha * mu**2 + beta * mu
    lam = se.expand(1 - 2 * a2)
    if lam.is_number and not (float(lam) > 0):
        raise DomainError(
            f"the Gaussian expectation of exp({sp.sympify(alpha)}*x**2 + ...) diverges: "
            "it needs 2*alpha*var < 1"
        )
    s2 = 1 / lam
    mm = b1 / lam
    # phi(z) exp(a2 z^2 + b1 z) = K * density of N(mm, s2); K = lam^{-1/2} exp(b1^2 / (2 lam)).
    K = se.exp(g0 + b1**2 / (2 * lam)) / se.sqrt(lam)
    nmax = order + m
    if erf_ab is None:
        G = _truncated_moments(mm, s2, tl, th, nmax)
    else:
        if tl is not None or th is not None:
            raise NoClosedFormError(
                "erf on a half-line has no elementary Gaussian integral (it needs Owen's T "
                "function); use the numeric path (exact=False)"
            )
        a, b = (se.sympify(v) for v in erf_ab)
        G = _erf_moments(mm, s2, a * sigma, a * mu + b, nmax)
    scale = se.sympify(coef) * K
    binom = [comb(m, i) * mu ** (m - i) * sigma**i for i in range(m + 1)]
    return [
        se.expand(scale * sum(binom[i] * G[i + j] for i in range(m + 1)))
        for j in range(order + 1)
    ]


def _density(t, m, s2):
    return se.exp(-((t - m) ** 2) / (2 * s2)) / se.sqrt(2 * se.pi * s2)


def _Phi(t):
    return (1 + se.erf(t / _SQRT_2)) / 2


def _truncated_moments(m, s2, tl, th, nmax):
    """E[W^n 1{tl < W < th}], n = 0..nmax, W ~ N(m, s2); None means an infinite end."""
    s = se.sqrt(s2)
    upper = se.Integer(1) if th is None else _Phi((th - m) / s)
    lower = se.Integer(0) if tl is None else _Phi((tl - m) / s)
    dl = None if tl is None else _density(tl, m, s2)
    dh = None if th is None else _density(th, m, s2)
    G = [se.expand(upper - lower)]
    for n in range(1, nmax + 1):
        val = m * G[n - 1] + (n - 1) * s2 * (G[n - 2] if n >= 2 else 0)
        if dl is not None:
            val += s2 * tl ** (n - 1) * dl
        if dh is not None:
            val -= s2 * th ** (n - 1) * dh
        G.append(se.expand(val))
    return G


def _expquad_moments(m, s2, alpha, beta, nmax):
    """E[W^n exp(alpha W^2 + beta W)], n = 0..nmax, W ~ N(m, s2) (needs 1 - 2 alpha s2 > 0)."""
    lam = 1 - 2 * alpha * s2
    s2p = s2 / lam
    mp = (m + beta * s2) / lam
    K = se.exp(mp**2 / (2 * s2p) - m**2 / (2 * s2)) / se.sqrt(lam)
    return [se.expand(K * g) for g in _truncated_moments(mp, s2p, None, None, nmax)]


def _erf_moments(m, s2, a, b, nmax):
    """E[W^n erf(a W + b)], n = 0..nmax, W ~ N(m, s2), by Stein's recursion."""
    E = [se.erf((a * m + b) / se.sqrt(1 + 2 * a**2 * s2))]
    if nmax == 0:
        return E
    # erf'(aw+b) = (2a/sqrt(pi)) exp(-(aw+b)^2) = (2a/sqrt(pi)) e^{-b^2} exp(-a^2 w^2 - 2ab w)
    H = _expquad_moments(m, s2, -(a**2), -2 * a * b, nmax - 1)
    c = 2 * a * se.exp(-(b**2)) / _SQRT_PI
    for n in range(1, nmax + 1):
        val = m * E[n - 1] + (n - 1) * s2 * (E[n - 2] if n >= 2 else 0) + s2 * c * H[n - 1]
        E.append(se.expand(val))
    return E
