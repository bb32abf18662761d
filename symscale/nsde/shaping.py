r"""Shaped activations: the scalings under which depth L ~ width n gives a non-trivial limit.

* Smooth: :math:`\phi_s(x) = s\,\phi(x/s)` with :math:`s = a\sqrt n`, for a base activation with
  :math:`\phi(0) = 0`, :math:`\phi'(0) = 1`; the weight variance is 1. Any other activation smooth
  at 0 with :math:`\phi'(0) \ne 0` (GELU, SiLU, softplus, erf, sigmoid) is first put in standard
  form :math:`\phi_{std}(x) = (\phi(x) - \phi(0))/\phi'(0)` (:func:`standardize`), and the
  network applies :math:`s\,\phi_{std}(x/s)`. The offset matters: a constant
  :math:`s\phi(0)/\phi'(0) = O(\sqrt n)` in every unit would add :math:`a^2 n (\phi(0)/\phi'(0))^2`
  to every entry of the next Gram matrix. The slope alone could instead go into the weight
  variance (:math:`c = \phi'(0)^{-2}`), which gives the same law.
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
>>> g = shaped("gelu", a=1.0, n=256)   # GELU: phi(0) = 0, phi'(0) = 1/2, standardized
>>> g.offset, g.slope, g.rescaling
(0, 1/2, '(gelu(x) - 0)/(1/2)')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp

from .._deprecation import renamed_arguments
from ..activations import Activation, X, as_activation
from ..activations import activation as make_activation
from ..errors import DomainError
from ..families import Scaled
from ..validation import check_int, check_real

__all__ = ["Shaped", "shaped", "shaped_relu", "taylor_at_zero", "standardize"]


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
    offset, slope : sympy number or None
        phi(0) and phi'(0) of the smooth base (exact): the network applies
        s phi_std(x / s) with phi_std = (phi - offset) / slope (:func:`standardize`); 0 and 1
        for an activation already in standard form.
    """

    kind: str
    activation: Activation
    weight_var: float
    n: int
    base: Activation | None = None
    a: float | None = None
    c_plus: float | None = None
    c_minus: float | None = None
    offset: sp.Expr | None = None
    slope: sp.Expr | None = None

    @property
    def standardized(self) -> Activation | None:
        """phi_std = (phi - phi(0)) / phi'(0), the base the network scales (smooth kind)."""
        return self.activation.params["base"] if self.kind == "smooth" else None

    @property
    def rescaling(self) -> str | None:
        """The standardization as text, e.g. ``'(gelu(x) - 0)/(1/2)'`` (smooth kind)."""
        if self.kind != "smooth":
            return None
        return _rescaling_text(self.base, self.offset, self.slope)


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
    return list(_taylor(activation, order)[0])


@lru_cache(maxsize=512)
def _taylor(act: Activation, order: int):
    """(phi(0), ..., phi^(order)(0)), phi^(order + 1): each order extends the one below, so
    the standard form, the drift and the callers share one simplification per derivative."""
    if order < 0:
        return (), act.expr
    values, e = _taylor(act, order - 1)
    return values + (sp.simplify(e.subs(X, 0)),), sp.diff(e, X)


def _rescaling_text(act, std_or_offset, slope=None) -> str:
    """'(gelu(x) - 0)/(1/2)': the standardization in words (readable numbers); give
    (phi, phi_std) or (phi, offset, slope)."""
    if isinstance(std_or_offset, Activation):
        offset, slope = std_or_offset.params["offset"], std_or_offset.params["slope"]
    else:
        offset = std_or_offset
    from ..printing import readable_number  # as activation labels print numbers

    def fmt(v):
        return str(readable_number(v) if v.is_number else v)

    return f"({act.label}(x) - {fmt(offset)})/({fmt(slope)})"


def _bad(v):
    return v.has(sp.zoo, sp.oo, -sp.oo, sp.nan)


def _standard_form(act: Activation):
    """(phi_std, phi(0), phi'(0)); phi_std is ``act`` itself when phi(0) = 0 and phi'(0) = 1."""
    std, offset, slope = _cached_standard_form(act)
    return (act if std is None else std), offset, slope


@lru_cache(maxsize=256)
def _cached_standard_form(act: Activation):
    """(phi_std or None when ``act`` is in standard form, phi(0), phi'(0)): the cache returns
    an *equal* earlier Activation, so the identity case hands back the caller's own object."""
    offset, slope = taylor_at_zero(act, 1)  # DomainError when phi is not smooth at 0
    if _bad(offset) or _bad(slope):
        raise DomainError(f"activation {act.label} has phi(0) = {offset}, phi'(0) = {slope}: it is "
                          "not differentiable at 0, so it has no shaped (near-identity) form")
    if slope.is_zero:
        raise DomainError(
            f"activation {act.label} has phi'(0) = 0 (phi(0) = {offset}): s phi(x/s) has no linear "
            "part, so no rescaling (phi - phi(0))/phi'(0) makes it approach the identity; the "
            "shaped limit (covariance SDE) needs phi'(0) != 0")
    if slope.is_zero is None:
        raise DomainError(f"activation {act.label} has phi'(0) = {slope}, not known to be "
                          "nonzero: the rescaling (phi - phi(0))/phi'(0) is undefined; give the "
                          "parameters values")
    if offset == 0 and slope == 1:
        return None, offset, slope
    o_sym, s_sym = sp.Symbol("offset", real=True), sp.Symbol("slope", real=True)
    template = (act.expr - o_sym) / s_sym
    family = None
    if offset == 0 and act.family is not None:  # (phi - 0)/slope = Scaled(phi, 1/slope, 1)
        family = Scaled(act.family, 1 / slope, sp.S.One)
    impl = None
    if offset.is_number and slope.is_number and act.is_numeric:
        off_f, slope_f = float(offset), float(slope)

        def evaluate(x):  # through the base's own (overflow-safe) evaluator
            return (act(np.asarray(x, dtype=float)) - off_f) / slope_f

        impl = evaluate

    std = Activation("standardized", template,
                     (("base", act), ("offset", offset), ("slope", slope)), family, impl)
    return std, offset, slope


@renamed_arguments(act="activation")
def standardize(activation) -> Activation:
    """phi_std(x) = (phi(x) - phi(0)) / phi'(0): the standard form a shaped network applies.

    phi_std(0) = 0 and phi_std'(0) = 1, and its higher derivatives at 0 are those of phi over
    phi'(0). An activation already in standard form (tanh, sin, identity) is returned
    unchanged. :func:`shaped`, the drift and everything built on them use this one rule.

    Parameters
    ----------
    activation : str or Activation
        Smooth at 0 with phi'(0) != 0.

    Returns
    -------
    Activation
        ``activation`` itself, or ``standardized(base=..., offset=phi(0), slope=phi'(0))``.

    Raises
    ------
    DomainError
        phi is not smooth (or not differentiable) at 0, or phi'(0) = 0 (cos, x**2: s phi(x/s)
        has no linear part, so no rescaling makes it approach the identity), or phi'(0) is a
        symbolic parameter not known to be nonzero.

    Examples
    --------
    >>> from symscale.nsde import standardize, taylor_at_zero
    >>> std = standardize("softplus")
    >>> std.label
    'standardized(base=softplus, offset=log(2), slope=1/2)'
    >>> taylor_at_zero(std, 3)
    [0, 1, 1/2, 0]
    >>> standardize("tanh").label
    'tanh'
    """
    return _standard_form(as_activation(activation))[0]


@renamed_arguments(act="activation")
def shaped(activation, a: float, n: int) -> Shaped:
    """phi_s(x) = s phi_std(x / s) with s = a sqrt(n) (weight variance 1).

    phi_std = (phi - phi(0)) / phi'(0) (:func:`standardize`; phi itself when phi(0) = 0,
    phi'(0) = 1); ``offset``, ``slope`` and ``rescaling`` of the result record it.

    Raises
    ------
    DomainError
        phi is not smooth at 0, or phi'(0) = 0.
    ValueError
        a <= 0 or n < 1.
    """
    base = as_activation(activation)
    std, offset, slope = _standard_form(base)
    a = _finite(a, "a")
    if a <= 0:
        raise ValueError(f"a must be > 0, got {a!r}")
    n = _width(n)
    if not math.isfinite(a * math.sqrt(n)):
        raise OverflowError(f"s = a sqrt(n) overflows float64 (a={a!r}, n={n})")
    return Shaped("smooth", make_activation("shaped", base=std, s=a * math.sqrt(n)), 1.0, n,
                  base=base, a=a, offset=offset, slope=slope)


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
