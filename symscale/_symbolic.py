"""Small sympy helpers shared by the registry and the Gaussian-integral engine (private)."""

from __future__ import annotations

import numbers
from fractions import Fraction

import sympy as sp

from .errors import NoClosedFormError
from .expressions import parse_expression  # noqa: F401 - the one parser, re-exported

#: The argument of every activation. Declared real so that ``Abs``, ``sign`` and ``Max`` simplify.
X = sp.Symbol("x", real=True)


def _check_number(value: sp.Expr, name: str, raw) -> sp.Expr:
    """Reject infinite, NaN and complex numbers (symbols pass)."""
    if value.is_number:
        if value.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or value.is_finite is False:
            raise ValueError(f"{name} must be finite, got {raw!r}")
        if value.is_extended_real is False:
            raise ValueError(f"{name} must be real, got {raw!r}")
    return value


def to_sympy(value, name: str):
    """Convert a user parameter to an exact sympy number where possible.

    Python floats are read through their shortest decimal representation, so ``0.2`` becomes
    ``1/5``: exact results are then exact for the number the user typed. Sympy expressions pass
    through (so parameters may stay symbolic); infinite, NaN and complex numbers are refused.
    """
    if isinstance(value, sp.Basic):
        return _check_number(value, name, value)
    if isinstance(value, bool) or not isinstance(value, (numbers.Number, Fraction, str)):
        raise TypeError(f"{name} must be a number or a sympy expression, got {value!r}")
    if isinstance(value, str):
        return _check_number(parse_expression(value, name), name, value)
    if isinstance(value, numbers.Integral):
        return sp.Integer(int(value))
    if isinstance(value, Fraction):
        return sp.Rational(value.numerator, value.denominator)
    if isinstance(value, numbers.Real):
        fv = float(value)
        if fv != fv or fv in (float("inf"), float("-inf")):
            raise ValueError(f"{name} must be finite, got {value!r}")
        return sp.Rational(repr(fv))
    raise TypeError(f"{name} must be real, got {value!r}")


def piecewise_form(expr: sp.Expr, x: sp.Symbol = X) -> sp.Expr:
    """Rewrite Max/Min/Abs/Heaviside/sign as one folded ``Piecewise`` (or return ``expr``)."""
    kinked = (sp.Max, sp.Min, sp.Abs, sp.Heaviside, sp.sign, sp.Piecewise)
    if not expr.has(*kinked):
        return expr
    return sp.piecewise_fold(expr.rewrite(sp.Piecewise))


def pieces(expr: sp.Expr, x: sp.Symbol = X):
    """Split ``expr`` into ``[(lo, hi, piece), ...]`` with ``piece`` smooth on the open ``(lo, hi)``.

    Points (measure zero) are dropped. Raises ``NoClosedFormError`` if a condition cannot be
    reduced to intervals of ``x`` (for example a kink at a symbolic location).
    """
    pw = piecewise_form(expr, x)
    if not isinstance(pw, sp.Piecewise):
        return [(sp.S.NegativeInfinity, sp.S.Infinity, pw)]
    try:
        pairs = pw.as_expr_set_pairs(sp.Interval(-sp.oo, sp.oo))
    except Exception as exc:  # sympy raises several types for unsolvable conditions
        raise NoClosedFormError(
            f"cannot split {expr} into intervals of {x}; use the numeric path (exact=False)"
        ) from exc
    out = []
    for piece, where in pairs:
        for part in (where.args if isinstance(where, sp.Union) else (where,)):
            if isinstance(part, sp.FiniteSet) or part is sp.S.EmptySet:
                continue
            if not isinstance(part, sp.Interval) or not (
                part.start.is_number and part.end.is_number
            ):
                raise NoClosedFormError(
                    f"piece {piece} of {expr} lives on {part}, not an interval with numeric "
                    "ends; use the numeric path (exact=False)"
                )
            out.append((part.start, part.end, piece))
    out.sort(key=lambda p: float(p[0]) if p[0].is_finite else -float("inf"))
    return out


def kinks(expr: sp.Expr, x: sp.Symbol = X) -> tuple[float, ...]:
    """Finite breakpoints of ``expr`` (where a piece ends), as sorted floats."""
    points = set()
    for lo, hi, _ in pieces(expr, x):
        for end in (lo, hi):
            if end.is_finite:
                points.add(float(end))
    return tuple(sorted(points))


def ae_derivative(expr: sp.Expr, x: sp.Symbol = X) -> sp.Expr:
    """The almost-everywhere derivative: what backpropagation computes (Dirac masses dropped)."""
    d = sp.diff(expr, x)
    if d.has(sp.DiracDelta):
        d = d.replace(sp.DiracDelta, lambda *args: sp.S.Zero)
    return d
