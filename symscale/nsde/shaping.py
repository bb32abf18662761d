r"""Shaped activations: the scalings under which depth L ~ width n gives a non-trivial limit.

* Smooth: :math:`\phi_s(x) = s\,\phi(x/s)` with :math:`s = a\sqrt n`, for a base activation with
  :math:`\phi(0) = 0`, :math:`\phi'(0) = 1`; the weight variance is 1.
* ReLU: slopes :math:`s_\pm = 1 + c_\pm/\sqrt n` on each side of 0 and weight variance
  :math:`c = 2/(s_+^2 + s_-^2)` (without it the drift would be :math:`O(\sqrt n)(c_+ + c_-)`).

:class:`Shaped` carries the activation of the registry that a width-n network uses, its weight
variance and the shaping parameters, and is what the simulators and the drift accept.

Examples
--------
>>> from symscale.nsde import shaped, shaped_relu
>>> s = shaped("tanh", a=1.0, n=256)
>>> s.activation.label, s.weight_var
('shaped(base=tanh, s=16)', 1.0)
>>> r = shaped_relu(0.0, -1.0, n=256)
>>> round(r.weight_var, 6), r.activation.label
(1.064449, 'shaped_relu(s_plus=1, s_minus=15/16)')
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy as sp

from .._deprecation import renamed_arguments
from ..activations import Activation, X, as_activation
from ..activations import activation as make_activation
from ..errors import DomainError
from ..validation import check_int, check_real

__all__ = ["Shaped", "shaped", "shaped_relu", "taylor_at_zero"]


@dataclass(frozen=True)
class Shaped:
    """A shaped activation at width n.

    Attributes
    ----------
    kind : {"smooth", "relu"}
    activation : Activation
        phi_s as a registry activation (what a width-n network applies).
    weight_var : float
        Variance multiplier c of the weights (N(0, c/n) entries).
    n : int
    base : Activation or None
        The smooth base phi (``kind == "smooth"``).
    a : float or None
        Shaping strength of a smooth activation, s = a sqrt(n).
    c_plus, c_minus : float or None
        ReLU slope offsets.
    """

    kind: str
    activation: Activation
    weight_var: float
    n: int
    base: Activation | None = None
    a: float | None = None
    c_plus: float | None = None
    c_minus: float | None = None


def _width(n):
    return check_int(n, "n", low=1)


def _finite(v, name):
    return check_real(v, name)


@renamed_arguments(act="activation")
def taylor_at_zero(activation, order: int = 3) -> list:
    """phi(0), phi'(0), ..., phi^(order)(0) of a smooth activation (exact sympy values).

    Raises
    ------
    DomainError
        phi is not smooth at 0 (a kink or a jump there).
    """
    activation = as_activation(activation)
    order = check_int(order, "order", low=0)
    if any(abs(k) < 1e-12 for k in activation.kinks):
        raise DomainError(f"activation {activation.label} is not smooth at 0 (kink or jump); shaping a "
                          "non-smooth activation needs shaped_relu / the ReLU drift")
    out, e = [], activation.expr
    for _ in range(order + 1):
        out.append(sp.simplify(e.subs(X, 0)))
        e = sp.diff(e, X)
    return out


def _check_base(act):
    coeffs = taylor_at_zero(act, 1)
    if coeffs[0] != 0 or coeffs[1] != 1:
        raise DomainError(f"a shaped activation needs phi(0) = 0 and phi'(0) = 1; {act.label} has "
                          f"phi(0) = {coeffs[0]}, phi'(0) = {coeffs[1]}")


@renamed_arguments(act="activation")
def shaped(activation, a: float, n: int) -> Shaped:
    """phi_s(x) = s phi(x / s) with s = a sqrt(n) (weight variance 1).

    Raises
    ------
    DomainError
        phi is not smooth at 0, or phi(0) != 0 or phi'(0) != 1.
    ValueError
        a <= 0 or n < 1.
    """
    base = as_activation(activation)
    _check_base(base)
    a = _finite(a, "a")
    if a <= 0:
        raise ValueError(f"a must be > 0, got {a!r}")
    n = _width(n)
    if not math.isfinite(a * math.sqrt(n)):
        raise OverflowError(f"s = a sqrt(n) overflows float64 (a={a!r}, n={n})")
    return Shaped("smooth", make_activation("shaped", base=base, s=a * math.sqrt(n)), 1.0, n,
                  base=base, a=a)


def shaped_relu(c_plus: float, c_minus: float, n: int) -> Shaped:
    """Slopes 1 + c_plus/sqrt(n) and 1 + c_minus/sqrt(n), weight variance 2/(s_+^2 + s_-^2).

    Raises
    ------
    TypeError, ValueError
        c_plus or c_minus not a finite real, n not an integer >= 1, or both slopes 0
        (c_plus = c_minus = -sqrt(n): the activation is 0 and the weight variance infinite).
    """
    c_plus, c_minus = _finite(c_plus, "c_plus"), _finite(c_minus, "c_minus")
    n = _width(n)
    sp_, sm = 1 + c_plus / math.sqrt(n), 1 + c_minus / math.sqrt(n)
    if sp_ * sp_ + sm * sm == 0 or not math.isfinite(2.0 / (sp_ * sp_ + sm * sm)):
        raise ValueError(f"c_plus={c_plus!r} and c_minus={c_minus!r} make both slopes "
                         f"1 + c/sqrt(n) zero at n={n}: the weight variance 2/(s+^2 + s-^2) is "
                         "infinite")
    act = make_activation("shaped_relu", s_plus=sp_, s_minus=sm)
    return Shaped("relu", act, 2.0 / (sp_ * sp_ + sm * sm), n, c_plus=c_plus, c_minus=c_minus)
