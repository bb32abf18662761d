"""Function families whose Gaussian integrals have closed forms.

An :class:`~symscale.activations.Activation` may name the family it belongs to. The family is a
statement about the *function* (``relu`` is the two-slope function with slopes 0 and 1); what
follows from it (the dual kernel in :mod:`symscale.kernels.dual`) lives with the kernels. Each
family knows its own sympy expression (the registry tests compare it with the activation's) and
the family of its almost-everywhere derivative, so the NTK factor :math:`V_{\\phi'}` is found by
the same lookup as :math:`V_\\phi`.

Examples
--------
>>> from symscale.families import TwoSlope, Scaled
>>> TwoSlope(0, 1).derivative()
TwoLevel(a=0, b=1)
>>> Scaled(TwoSlope(0, 1), 2, 3).derivative()
Scaled(base=TwoLevel(a=0, b=1), A=6, B=3)
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ._symbolic import X

__all__ = [
    "Family",
    "TwoSlope",
    "TwoLevel",
    "Erf",
    "GaussBump",
    "Gelu",
    "GeluPrime",
    "Sinusoid",
    "Exponential",
    "Polynomial",
    "Scaled",
    "is_relu",
]


class Family:
    """Base class: a parametric function with a closed-form Gaussian dual kernel."""

    #: k when phi(c x) = c**k phi(x) for every c > 0 (then V(c q) = c**k V(q)), else None.
    degree: int | None = None

    def expr(self, x: sp.Symbol = X) -> sp.Expr:  # pragma: no cover - abstract
        raise NotImplementedError

    def derivative(self) -> "Family | None":
        """Family of the almost-everywhere derivative, or ``None`` if it has no closed form."""
        return None


@dataclass(frozen=True)
class _TwoSided(Family):
    """A family given by its coefficient ``a`` on x < 0 and ``b`` on x > 0."""

    a: sp.Expr
    b: sp.Expr


@dataclass(frozen=True)
class TwoSlope(_TwoSided):
    """``a*min(x, 0) + b*max(x, 0)``: ReLU (0, 1), leaky ReLU (alpha, 1), abs (-1, 1)."""

    degree = 1

    def expr(self, x=X):
        return self.a * sp.Min(x, 0) + self.b * sp.Max(x, 0)

    def derivative(self):
        return TwoLevel(self.a, self.b)


@dataclass(frozen=True)
class TwoLevel(_TwoSided):
    """``a*1[x<0] + b*1[x>0]``: step (0, 1), sign (-1, 1)."""

    degree = 0

    def expr(self, x=X):
        return self.a * sp.Heaviside(-x) + self.b * sp.Heaviside(x)

    def derivative(self):
        # Zero almost everywhere: backpropagation through a jump carries no gradient.
        return Polynomial(())


@dataclass(frozen=True)
class Erf(Family):
    """``erf(x)``."""

    def expr(self, x=X):
        return sp.erf(x)

    def derivative(self):
        return Scaled(GaussBump(sp.Integer(-1)), 2 / sp.sqrt(sp.pi), sp.Integer(1))


@dataclass(frozen=True)
class GaussBump(Family):
    """``exp(beta*x**2)``; its kernel needs ``1 - 2*beta*Sigma`` positive definite."""

    beta: sp.Expr

    def expr(self, x=X):
        return sp.exp(self.beta * x**2)


@dataclass(frozen=True)
class Gelu(Family):
    """``x*Phi(x)`` with ``Phi`` the standard normal CDF (the exact, erf-form GELU)."""

    def expr(self, x=X):
        return x * (1 + sp.erf(x / sp.sqrt(2))) / 2

    def derivative(self):
        return GeluPrime()


@dataclass(frozen=True)
class GeluPrime(Family):
    """``Phi(x) + x*phi(x)``, the derivative of GELU."""

    def expr(self, x=X):
        return (1 + sp.erf(x / sp.sqrt(2))) / 2 + x * sp.exp(-(x**2) / 2) / sp.sqrt(2 * sp.pi)


@dataclass(frozen=True)
class Sinusoid(Family):
    """``sin(x + phase)``; ``cos`` is ``phase = pi/2``."""

    phase: sp.Expr

    def expr(self, x=X):
        return sp.sin(x + self.phase)

    def derivative(self):
        return Sinusoid(self.phase + sp.pi / 2)


@dataclass(frozen=True)
class Exponential(Family):
    """``exp(x)``."""

    def expr(self, x=X):
        return sp.exp(x)

    def derivative(self):
        return self


@dataclass(frozen=True)
class Polynomial(Family):
    """``sum_m coefficients[m] * x**m`` (the empty tuple is the zero function)."""

    coefficients: tuple

    def expr(self, x=X):
        return sp.Add(*[c * x**m for m, c in enumerate(self.coefficients)])

    def derivative(self):
        return Polynomial(tuple(m * c for m, c in enumerate(self.coefficients))[1:])


@dataclass(frozen=True)
class Scaled(Family):
    """``A * base(B*x)`` with ``B > 0``; ``shaped(base, s)`` is ``A = s``, ``B = 1/s``."""

    base: Family
    A: sp.Expr
    B: sp.Expr

    @property
    def degree(self):
        return self.base.degree

    def expr(self, x=X):
        return self.A * self.base.expr(x).xreplace({x: self.B * x})

    def derivative(self):
        d = self.base.derivative()
        return None if d is None else Scaled(d, self.A * self.B, self.B)


def is_relu(family: Family | None) -> bool:
    """Whether ``family`` is exactly ``max(x, 0)``, however the activation was registered.

    Fast paths specific to ReLU dispatch on this, not on the activation's name, so a
    user-registered ``Max(x, 0)`` or ``Piecewise((x, x > 0), (0, True))`` takes them too.

    >>> is_relu(TwoSlope(0, 1)), is_relu(TwoSlope(sp.Rational(1, 100), 1)), is_relu(None)
    (True, False, False)
    """
    return isinstance(family, TwoSlope) and family.a == 0 and family.b == 1
