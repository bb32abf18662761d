r"""Closed-form dual kernels :math:`V_\phi(q_{11}, q_{12}, q_{22}) = \mathbb E[\phi(u)\phi(v)]`.

:math:`(u, v)\sim\mathcal N\big(0, \left(\begin{smallmatrix}q_{11}&q_{12}\\ q_{12}&q_{22}
\end{smallmatrix}\right)\big)`. The closed form is chosen by the activation's family
(:mod:`symscale.families`); ``derivative=True`` gives :math:`V_{\phi'}`, the NTK factor, through
the family of :math:`\phi'` (almost-everywhere derivative). Polynomials go through the
Hermite/Mehler route, so their kernels are *derived* from :func:`symscale.hermite_coefficients`
rather than typed in.

Each kernel is a :class:`~symscale.Formula` with two expressions: ``expr`` in textbook form
(``acos``, ``asin``) for LaTeX, and ``stable_expr`` for evaluation, written with
:math:`D = \max(q_{11}q_{22} - q_{12}^2, 0)` and ``atan2`` so that it is finite at
:math:`\rho = \pm1` and at zero variance (``acos`` of a ratio loses all digits near
:math:`\rho = 1` and is 0/0 at the origin), accurate to round-off of the kernel's size, and
compact, because :func:`symscale.netsor.symbolic_kernel` substitutes them into each other.
:func:`~symscale.dual_kernel_numeric` adds what a compact form cannot: it rescales homogeneous
kernels by a power of 2 (tiny and huge variances), and re-evaluates the corners where the value
is far below its size (ReLU-type kernels and GELU near :math:`\rho = -1`) with a series, so it is
accurate relative to the value itself.

Examples
--------
>>> import symscale as ss
>>> V = ss.dual_kernel("relu")
>>> V.expr
q12/2 + (-q12*acos(q12/(sqrt(q11)*sqrt(q22))) + sqrt(q11*q22 - q12**2))/(2*pi)
>>> float(V(1.0, 1.0, 1.0))      # q/2 on the diagonal
0.5
>>> ss.dual_kernel("relu", derivative=True).expr
(pi - acos(q12/(sqrt(q11)*sqrt(q22))))/(2*pi)
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import sympy as sp
from sympy.codegen.cfunctions import expm1

from .._deprecation import renamed_arguments
from .. import families as fam
from ..activations import Activation, as_activation
from ..errors import DomainError, NoClosedFormError
from ..formula import Formula, Variable, _canonical
from ..hermite import expansion_coefficients
from ..linalg import check_covariance
from ..linalg import random_psd_point as _random_psd_point
from ..validation import check_bool

__all__ = ["dual_kernel", "q11", "q12", "q22", "KERNEL_VARIABLES", "pair_sampler",
           "variance_score_sampler",
           "correlated_pair", "random_psd_point"]

q11 = sp.Symbol("q11", positive=True)
q12 = sp.Symbol("q12", real=True)
q22 = sp.Symbol("q22", positive=True)

KERNEL_VARIABLES = (
    Variable(q11, "variance of u"),
    Variable(q12, "covariance of u and v"),
    Variable(q22, "variance of v"),
)


@renamed_arguments(act="activation")
def dual_kernel(activation, derivative: bool = False) -> Formula:
    """The dual kernel of ``activation`` (or of its derivative) as a :class:`~symscale.Formula`.

    Parameters
    ----------
    activation : str or Activation
        A registered activation.
    derivative : bool
        If True return :math:`V_{\\phi'}` (the NTK factor), using the almost-everywhere
        derivative; for jumps (step, sign) it is 0.

    Returns
    -------
    Formula
        In the variables ``q11, q12, q22``, with a Monte Carlo sampler of phi(u) phi(v) and a
        sampler of random PSD points, so ``.check()`` works out of the box.

    Raises
    ------
    NoClosedFormError
        The activation has no closed-form family (tanh, sigmoid, ...); the message names
        :func:`~symscale.dual_kernel_numeric`, the quadrature fallback.
    TypeError
        ``derivative`` is not a bool (``"no"`` would otherwise count as True).

    Examples
    --------
    >>> import symscale as ss
    >>> ss.dual_kernel("sin").expr
    -exp(-q11/2 - q12 - q22/2)/2 + exp(-q11/2 + q12 - q22/2)/2
    >>> ss.dual_kernel("tanh")
    Traceback (most recent call last):
    ...
    symscale.errors.NoClosedFormError: no closed-form dual kernel for tanh; use symscale.dual_kernel_numeric(activation, q11, q12, q22) (quadrature, deg=...)
    """
    return _dual_kernel(as_activation(activation), check_bool(derivative, "derivative"))


@lru_cache(maxsize=256)
def _dual_kernel(act: Activation, derivative: bool) -> Formula:
    target = act.derivative() if derivative else act
    if target.family is None:
        raise NoClosedFormError(
            f"no closed-form dual kernel for {target.label}; use "
            "symscale.dual_kernel_numeric(activation, q11, q12, q22) (quadrature, deg=...)"
        )
    display, stable = closed_form(target.family)
    tag = target.label.replace("_", r"\_").replace("'", "")
    head = r"\dot V" if derivative else "V"
    # symbolic activation parameters become variables; sampling needs numbers
    params = sorted(display.free_symbols - {q11, q12, q22}, key=str)
    numeric = not params
    return Formula(
        display,
        KERNEL_VARIABLES + tuple(Variable(p_, "activation parameter") for p_ in params),
        name=f"V[{target.label}]",
        lhs=r"%s_{\mathrm{%s}}(q_{11}, q_{12}, q_{22})" % (head, tag),
        description=f"E[phi(u) phi(v)] for phi = {target.label}, (u, v) ~ N(0, [[q11, q12], "
        "[q12, q22]])",
        stable_expr=stable,
        sampler=pair_sampler(target) if numeric else None,
        point_sampler=random_psd_point if numeric else None,
        domain=_covariance_domain,
        # Price's theorem: d/dq12 E[phi(u) phi(v)] = E[phi'(u) phi'(v)]
        # Price's theorem with the a.e. derivative holds only for continuous phi (a jump's
        # Dirac mass is not in phi'): step and sign differentiate the expression instead
        derivatives={**({} if derivative or _has_jump(act) else
                        {"q12": lambda: _dual_kernel(act, True)}),
                     "q11": lambda: _variance_derivative(act, derivative, "q11"),
                     "q22": lambda: _variance_derivative(act, derivative, "q22")},
        recipe=(_dual_kernel, (act, derivative)),
    )


def _has_jump(act: Activation) -> bool:
    return act.expr.has(sp.Heaviside, sp.sign)


@lru_cache(maxsize=256)
def _variance_derivative(act: Activation, derivative: bool, name: str) -> Formula:
    """d/dq11 (or d/dq22) of a dual kernel: the simplified derivative of its closed form, with a
    score-function sampler (Gaussian integration by parts needs no phi'')."""
    V = _dual_kernel(act, derivative)
    expr = _canonical(sp.diff(V.expr, V.symbol(name)))
    # q11 q22 - q12^2 rounds below 0 at rho = +-1: clamp the bases of fractional powers
    stable = expr.replace(lambda e: e.is_Pow and e.exp.is_Rational and not e.exp.is_Integer,
                          lambda e: sp.Pow(sp.Max(e.base, 0), e.exp))
    target = act.derivative() if derivative else act
    return Formula(
        expr, V.variables, name=f"d{V.name}/d{name}",
        lhs=r"\frac{\partial}{\partial q_{%s}} %s" % (name[1:], V.lhs.split("(")[0]),
        description=f"derivative of {V.name} in the variance {name}",
        stable_expr=stable,
        sampler=variance_score_sampler(target, name) if V.sampler is not None else None,
        point_sampler=V.point_sampler, domain=_covariance_domain,
        recipe=(_variance_derivative, (act, derivative, name)),
    )


def variance_score_sampler(activation: Activation, name: str):
    """Sampler of d/dq11 (``name="q11"``) or d/dq22 of E[phi(u) phi(v)] by the score function.

    For z ~ N(0, S), dE[f(z)]/dS_ii = E[f(z) ((S^-1 z)_i^2 - (S^-1)_ii)] / 2: an unbiased
    sample for any phi, also where phi'' is a Dirac mass (ReLU). Needs a nonsingular S.

    Examples
    --------
    >>> import numpy as np, symscale as ss
    >>> draw = variance_score_sampler(ss.activation("identity"), "q11")
    >>> # d/dq11 E[u v] = d q12 / dq11 = 0
    >>> bool(abs(draw({"q11": 1.0, "q12": 0.5, "q22": 1.0}, 200_000, np.random.default_rng(0)).mean()) < 0.02)
    True
    """
    if name not in ("q11", "q22"):
        raise ValueError(f"name must be 'q11' or 'q22', got {name!r}")

    def sampler(point, n, rng):
        q11_, q12_, q22_ = point["q11"], point["q12"], point["q22"]
        det = q11_ * q22_ - q12_ * q12_
        if not det > 0:
            raise DomainError(f"the score-function sampler needs a nonsingular covariance: "
                              f"q11={q11_!r}, q12={q12_!r}, q22={q22_!r}")
        u, v = correlated_pair(point, n, rng)
        if name == "q11":
            a, inv = (q22_ * u - q12_ * v) / det, q22_ / det
        else:
            a, inv = (q11_ * v - q12_ * u) / det, q11_ / det
        return 0.5 * activation(u) * activation(v) * (a * a - inv)

    return sampler


def _covariance_domain(values):
    """DomainError naming q11, q12 or q22 outside the PSD cone (as dual_kernel_numeric)."""
    check_covariance(values["q11"], values["q12"], values["q22"])


# ---------------------------------------------------------------------------------------------
# closed forms: (display, stable) per family


def closed_form(family: fam.Family) -> tuple[sp.Expr, sp.Expr]:
    """(textbook expression, floating-point-stable expression) of the family's dual kernel."""
    builder = _BUILDERS.get(type(family))
    if builder is None:  # pragma: no cover - every Family subclass has a builder
        raise NoClosedFormError(f"no closed form for family {family}")
    return builder(family)


def _angle():
    """theta = acos(rho) for display; D and atan2 theta for evaluation."""
    rho = q12 / (sp.sqrt(q11) * sp.sqrt(q22))
    D = sp.Max(q11 * q22 - q12**2, 0)
    return sp.acos(rho), D, sp.atan2(sp.sqrt(D), q12)


def _two_slope(f):
    a, b = f.a, f.b
    theta, D, th = _angle()
    lin = (a**2 + b**2) / 2 * q12
    display = (b - a) ** 2 / (2 * sp.pi) * (sp.sqrt(q11 * q22 - q12**2) - q12 * theta) + lin
    # Finite everywhere and accurate to round-off of its size (q); kept this simple because it
    # is the hot path of every lambdified ReLU kernel. Near rho = -1 the ReLU value itself is
    # ~q (1 + rho)**1.5 and this form keeps only its absolute accuracy there: dual_kernel_numeric
    # re-evaluates that corner with the series of t - atan(t) (see numeric._anticorrelated).
    stable = (b - a) ** 2 / (2 * sp.pi) * (sp.sqrt(D) - q12 * th) + lin
    return display, stable


def _two_level(f):
    a, b = f.a, f.b
    theta, D, _ = _angle()

    def form(t):
        return (a**2 + b**2) * (sp.pi - t) / (2 * sp.pi) + a * b * t / sp.pi

    # the same with theta = pi/2 - asin(rho), asin(rho) = atan2(q12, sqrt(D)): accurate at
    # small rho, and at zero variance it is phi(0)**2 = ((a + b)/2)**2 (Heaviside(0) = 1/2)
    # for q12 = +0.0 and -0.0 alike (atan2(0, -0.0) would be pi)
    stable = (a + b) ** 2 / 4 + (b - a) ** 2 / (2 * sp.pi) * sp.atan2(q12, sp.sqrt(D))
    return form(theta), stable


def _erf(f):
    display = 2 / sp.pi * sp.asin(2 * q12 / sp.sqrt((1 + 2 * q11) * (1 + 2 * q22)))
    _, D, _ = _angle()
    stable = 2 / sp.pi * sp.atan2(2 * q12, sp.sqrt(1 + 2 * q11 + 2 * q22 + 4 * D))
    return display, stable


def _gauss_bump(f):
    beta = f.beta
    display = ((1 - 2 * beta * q11) * (1 - 2 * beta * q22) - 4 * beta**2 * q12**2) ** sp.Rational(
        -1, 2)
    _, D, _ = _angle()
    stable = (1 - 2 * beta * (q11 + q22) + 4 * beta**2 * D) ** sp.Rational(-1, 2)
    return display, stable


def _gelu_parts(stable: bool):
    if stable:
        _, D, _ = _angle()
        dg = sp.sqrt(1 + q11 + q22 + D)  # = sqrt((1+q11)(1+q22) - q12^2) >= 1
        alpha = sp.atan2(q12, dg)
        gap = D
    else:
        dg = sp.sqrt((1 + q11) * (1 + q22) - q12**2)
        alpha = sp.asin(q12 / sp.sqrt((1 + q11) * (1 + q22)))
        gap = q11 * q22 - q12**2
    return dg, alpha, gap


def _gelu(f):
    # At large variance near rho = -1 the value is far below the size of these terms (and of
    # the wrong sign at q = 1e12); dual_kernel_numeric re-evaluates that corner with a
    # cancellation-free form (numeric._anticorrelated).
    out = []
    for stable in (False, True):
        dg, alpha, gap = _gelu_parts(stable)
        out.append(q12 / 4 + q12 * alpha / (2 * sp.pi) + (
            gap + q12**2 / (1 + q11) + q12**2 / (1 + q22)) / (2 * sp.pi * dg))
    return tuple(out)


def _gelu_prime(f):
    out = []
    for stable in (False, True):
        dg, alpha, _ = _gelu_parts(stable)
        out.append(sp.Rational(1, 4) + alpha / (2 * sp.pi) + q12 / (2 * sp.pi * dg) * (
            1 / (1 + q11) + 1 / (1 + q22) + 1 / dg**2))
    return tuple(out)


def _sinusoid(f):
    half = (q11 + q22) / 2
    display = (sp.exp(q12 - half) - sp.cos(2 * f.phase) * sp.exp(-q12 - half)) / 2
    # = e^{-half} sinh(q12) + sin(phase)^2 e^{-q12-half}, and e^{-half} sinh(q12) =
    # sign(q12) e^{|q12| - half} (1 - e^{-2|q12|})/2 with expm1: E[sin u sin v] = q12 (1 + O(q))
    # at tiny variance (the difference of the two exponentials was 0 at q = 1e-17). Each
    # exponent is <= 0 because |q12| <= (q11 + q22)/2, so nothing overflows.
    a = sp.Abs(q12)
    sinh = -sp.sign(q12) * expm1(-2 * a) * sp.exp(a - half) / 2
    stable = sinh + sp.sin(f.phase) ** 2 * sp.exp(-q12 - half)
    return display, stable


def _exponential(f):
    v = sp.exp((q11 + q22 + 2 * q12) / 2)
    return v, v


def _polynomial(f):
    """Mehler route: V = sum_k k! c_k(q11) c_k(q22) rho^k with exact Hermite coefficients."""
    if not f.coefficients:
        return sp.S.Zero, sp.S.Zero
    expr = f.expr()
    degree = len(f.coefficients) - 1
    c1 = expansion_coefficients(expr, degree, var=q11)
    c2 = expansion_coefficients(expr, degree, var=q22)
    rho = q12 / (sp.sqrt(q11) * sp.sqrt(q22))
    v = sp.expand(sp.Add(*[sp.factorial(k) * a * b * rho**k
                           for k, (a, b) in enumerate(zip(c1, c2))]))
    return v, v


def _scaled(f):
    inner = closed_form(f.base)
    B2 = f.B**2
    sub = {q11: B2 * q11, q12: B2 * q12, q22: B2 * q22}
    # keep B^4 (q11 q22 - q12^2) factored so the gap of a rank-one covariance stays exactly 0
    factored = lambda *args: sp.Max(*[sp.factor_terms(a) for a in args])  # noqa: E731
    return tuple(f.A**2 * e.xreplace(sub).replace(sp.Max, factored) for e in inner)


_BUILDERS = {
    fam.TwoSlope: _two_slope,
    fam.TwoLevel: _two_level,
    fam.Erf: _erf,
    fam.GaussBump: _gauss_bump,
    fam.Gelu: _gelu,
    fam.GeluPrime: _gelu_prime,
    fam.Sinusoid: _sinusoid,
    fam.Exponential: _exponential,
    fam.Polynomial: _polynomial,
    fam.Scaled: _scaled,
}


# ---------------------------------------------------------------------------------------------
# samplers


@renamed_arguments(act="activation")
def correlated_pair(point, n, rng):
    """``n`` draws of (u, v) ~ N(0, [[q11, q12], [q12, q22]]) for a point ``{q11, q12, q22}``:
    the one pair sampler of every Formula check on a 2 x 2 covariance.

    Raises DomainError for a point that is not a PSD covariance.

    Examples
    --------
    >>> u, v = correlated_pair({"q11": 1.0, "q12": 0.5, "q22": 2.0}, 4, np.random.default_rng(0))
    >>> u.shape, v.shape
    ((4,), (4,))
    """
    a11, a12, a22 = point["q11"], point["q12"], point["q22"]
    # |q12| <= sqrt(q11) sqrt(q22): the product q11*q22 would underflow at q ~ 1e-160
    if not (a11 >= 0 and a22 >= 0
            and abs(a12) <= math.sqrt(a11) * math.sqrt(a22) * (1 + 1e-10)):
        raise DomainError(f"not a PSD covariance: q11={a11!r}, q12={a12!r}, q22={a22!r}")
    z1, z2 = rng.standard_normal((2, n))
    s1 = math.sqrt(a11)
    lead = a12 / s1 if s1 > 0 else 0.0
    rest = math.sqrt(max(a22 - lead * lead, 0.0))
    return s1 * z1, lead * z1 + rest * z2


def pair_sampler(activation: Activation):
    """Sampler of phi(u) phi(v) for (u, v) ~ N(0, [[q11, q12], [q12, q22]])."""

    def sampler(point, n, rng):
        u, v = correlated_pair(point, n, rng)
        return activation(u) * activation(v)

    return sampler


def random_psd_point(rng: np.random.Generator) -> dict:
    """A random (q11, q12, q22) with variances in [1/4, 4] and |correlation| <= 0.95."""
    return _random_psd_point(rng)
