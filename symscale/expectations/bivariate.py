r"""Bivariate Gaussian expectations with means: :math:`E[\phi(Z_1)\psi(Z_2)]`.

For :math:`Z_i = \mu_i + \sigma_i U_i` with :math:`\mathrm{corr}(U_1, U_2) = \rho`:

* the ReLU closed form (any registration of ``max(x, 0)``, through its family) with the
  bivariate normal cdf :func:`bivariate_normal_cdf` (Owen's T function) and the exact
  :math:`\rho = \pm 1` limits;
* a tensor Gauss-Hermite rule otherwise (smooth activations).

:func:`bivariate_moment` is the entry point; the exact-Gaussian step of cumulant propagation
(:mod:`symscale.cumulants.gaussian_step`) and the ReLU Formulas of
:mod:`symscale.cumulants.wick` use it.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import scipy.special as sps
import sympy as sp

from ..activations import as_activation
from ..families import is_relu
from ..validation import check_int

_S, _T = sp.symbols("s t")

__all__ = ["bivariate_moment", "relu_bivariate_moment_numeric", "bivariate_normal_cdf",
           "polynomial_moment", "polynomial_expectation", "GH_DEGREE"]

_SQRT_2PI = math.sqrt(2 * math.pi)
#: Nodes per dimension of the tensor Gauss-Hermite rule for smooth activations.
GH_DEGREE = 32


def bivariate_moment(activation, mean1, mean2, sd1, sd2, rho, activation2=None, *,
                     deg: int = GH_DEGREE):
    """``E[phi(Z1) psi(Z2)]`` (``psi = phi`` by default), broadcasting over the arguments.

    The Gauss-Hermite path with ``deg`` nodes per dimension is exact for polynomials of degree
    below ``2 deg`` and converges like the analyticity of phi allows: for tanh (poles at
    ``+-i pi/2``) the error at ``deg = 32`` is about 1e-7 for standard deviations near 1 and
    4e-3 at 3 with correlation 0.9 (measured against nested adaptive quadrature); raise
    ``deg`` (cost ``deg^2`` per pair) where that matters.

    Returns
    -------
    (value, method)
        ``method`` is ``"relu closed form"`` or ``"gauss-hermite"``.

    Examples
    --------
    >>> v, how = bivariate_moment("relu", 0.3, -0.2, 1.0, 2.0, 0.5)
    >>> how
    'relu closed form'
    >>> w, _ = bivariate_moment("relu", 0.3, -0.2, 1.0, 2.0, 0.5, activation2="tanh")
    >>> bool(np.isfinite(w))
    True
    """
    f = as_activation(activation)
    g = f if activation2 is None else as_activation(activation2)
    if f == g and is_relu(f.family):  # any registration of max(x, 0), not only "relu"
        return relu_bivariate_moment_numeric(mean1, mean2, sd1, sd2, rho), "relu closed form"
    a1, b1 = (np.asarray(v, dtype=float) for v in (mean1, sd1))  # phi at Z1 on their shape
    m2, s2, r = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (mean2, sd2, rho)))
    x, wts = np.polynomial.hermite_e.hermegauss(check_int(deg, "deg", low=1))
    wts = wts / wts.sum()
    with np.errstate(all="ignore"):
        root = np.sqrt(np.clip(1.0 - r**2, 0.0, None))
        out = 0.0
        for xa, wa in zip(x, wts):
            # Z2 = m2 + s2 (rho xa + sqrt(1 - rho^2) y): the inner rule integrates y
            inner = g.numpy(m2[..., None] + s2[..., None] * (r[..., None] * xa
                                                             + root[..., None] * x)) @ wts
            out = out + wa * f.numpy(a1 + b1 * xa) * inner
    return np.asarray(out)[()], "gauss-hermite"


def bivariate_normal_cdf(a, b, rho):
    r"""``Phi_2(a, b; rho) = P(Z_1 < a, Z_2 < b)`` for standard normals with correlation rho.

    Owen's (1956) formula :math:`\Phi_2 = \tfrac12[\Phi(a)+\Phi(b)] - T(a, a_a) - T(b, a_b) -
    \beta` with :math:`a_a = (b-\rho a)/(a\sqrt{1-\rho^2})`, Owen's T from
    :func:`scipy.special.owens_t` (absolute error about 1e-16); ``rho = +-1`` and infinite
    ``a``, ``b`` use their limits. Vectorized with broadcasting. The result is clipped to
    ``[0, 1]``: in far tails the formula's cancellation can leave ``-3e-17`` where the
    probability is ``1e-52`` (within its absolute error, but not a probability).

    Examples
    --------
    >>> round(float(bivariate_normal_cdf(0.0, 0.0, 0.5)), 12)   # 1/4 + asin(1/2)/(2 pi)
    0.333333333333
    """
    a, b, rho = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, rho)))
    if np.isnan(a).any() or np.isnan(b).any() or not np.all(np.abs(rho) <= 1):
        raise ValueError("a and b must not be NaN and rho must lie in [-1, 1]")
    with np.errstate(all="ignore"):
        r = np.sqrt((1 - rho) * (1 + rho))
        out = np.array(0.5 * (sps.ndtr(a) + sps.ndtr(b)) - sps.owens_t(a, _owen_arg(a, b, rho, r))
                       - sps.owens_t(b, _owen_arg(b, a, rho, r)) - 0.5 * ((a < 0) != (b < 0)))
        # the limits, evaluated only where they apply (usually nowhere); later ones win
        _put(out, rho == 1, lambda a, b: sps.ndtr(np.minimum(a, b)), a, b)
        _put(out, rho == -1, lambda a, b: np.maximum(sps.ndtr(a) - sps.ndtr(-b), 0.0), a, b)
        _put(out, np.isinf(a) | np.isinf(b),
             lambda a, b: np.where((a == -np.inf) | (b == -np.inf), 0.0,
                                   sps.ndtr(np.minimum(a, b))), a, b)
        np.clip(out, 0.0, 1.0, out=out)
    return out[()]


def _put(out, mask, fn, *args):
    """``out[mask] = fn(*(x[mask] for x in args))``, skipping the call when no entry is
    masked (the limits of a formula cost nothing where they do not apply)."""
    if mask.any():
        out[mask] = fn(*(x[mask] for x in args))


def _owen_arg(h, k, rho, r):
    """(k - rho h)/(h r) with h = 0 read as +0 (consistent with the beta term above)."""
    arg = (k - rho * h) / (h * r)
    at_zero = np.where(k == 0, (1 - rho) / r, np.copysign(np.inf, k))
    return np.where(h == 0, at_zero, arg)


def relu_bivariate_moment_numeric(mu1, mu2, s1, s2, rho):
    """:func:`relu_bivariate_moment` in vectorized float64 (broadcasting), ``|rho| <= 1``.

    ``rho = +-1`` (one Gaussian variable) uses the exact limit.

    Examples
    --------
    >>> import numpy as np
    >>> th = np.arccos(0.6)        # zero means: the arc-cosine kernel
    >>> ref = 1.2 * 0.7 / (2 * np.pi) * (np.sin(th) + (np.pi - th) * np.cos(th))
    >>> bool(abs(relu_bivariate_moment_numeric(0.0, 0.0, 1.2, 0.7, 0.6) - ref) < 1e-15)
    True
    """
    m1, m2, s1, s2, rho = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (mu1, mu2, s1, s2, rho)))
    for name, v in (("mu1", m1), ("mu2", m2), ("s1", s1), ("s2", s2), ("rho", rho)):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} must be finite")
    if not (np.all(s1 > 0) and np.all(s2 > 0)):
        raise ValueError("s1 and s2 must be > 0")
    if not np.all(np.abs(rho) <= 1):
        raise ValueError("rho must lie in [-1, 1]")
    with np.errstate(all="ignore"):
        a, b = m1 / s1, m2 / s2
        r = np.sqrt((1 - rho) * (1 + rho))
        pa, pb = np.exp(-0.5 * a * a) / _SQRT_2PI, np.exp(-0.5 * b * b) / _SQRT_2PI
        q = (a * a - 2 * rho * a * b + b * b) / (2 * r * r)
        out = np.array((m1 * m2 + rho * s1 * s2) * bivariate_normal_cdf(a, b, rho)
                       + m1 * s2 * pb * sps.ndtr((a - rho * b) / r)
                       + m2 * s1 * pa * sps.ndtr((b - rho * a) / r)
                       + s1 * s2 * r / (2 * np.pi) * np.exp(-np.where(r > 0, q, np.inf)))
        _put(out, rho == 1, lambda m1, s1, m2, s2, a, b: _comoving(
            m1, s1, m2, s2, np.maximum(-a, -b), np.inf), m1, s1, m2, s2, a, b)
        _put(out, rho == -1, lambda m1, s1, m2, s2, a, b: _comoving(
            m1, s1, m2, -s2, -a, np.maximum(b, -a)), m1, s1, m2, s2, a, b)
    if not np.all(np.isfinite(out)):
        i = np.unravel_index(int(np.argmax(~np.isfinite(out))), out.shape)
        raise FloatingPointError(
            f"E[relu(Z1) relu(Z2)] is not finite in float64 at index {i} (mu1={float(m1[i])!r}, "
            f"mu2={float(m2[i])!r}, s1={float(s1[i])!r}, s2={float(s2[i])!r}, "
            f"rho={float(rho[i])!r})")
    return out[()]


def _comoving(m1, s1, m2, s2, lo, hi):
    """E[(m1 + s1 Z)(m2 + s2 Z); lo < Z < hi], Z ~ N(0, 1) (the rho = +-1 limit)."""
    pl, ph = np.exp(-0.5 * lo * lo) / _SQRT_2PI, np.exp(-0.5 * hi * hi) / _SQRT_2PI
    m0 = sps.ndtr(hi) - sps.ndtr(lo)
    z1 = pl - ph
    z2 = m0 + np.where(np.isfinite(lo), lo * pl, 0.0) - np.where(np.isfinite(hi), hi * ph, 0.0)
    return m1 * m2 * m0 + (m1 * s2 + m2 * s1) * z1 + s1 * s2 * z2


# ---------------------------------------------------------------------------------------------
# exact polynomial moments (Isserlis), symbolic in the covariance q11, q12, q22


def polynomial_moment(i: int, j: int) -> sp.Expr:
    """``E[u^i v^j]`` for ``(u, v) ~ N(0, [[q11, q12], [q12, q22]])``, derived from the moment
    generating function (Isserlis' theorem).

    Examples
    --------
    >>> polynomial_moment(2, 2)
    q11*q22 + 2*q12**2
    """
    return _polynomial_moment(check_int(i, "i", low=0), check_int(j, "j", low=0))


@lru_cache(maxsize=None)
def _polynomial_moment(i: int, j: int) -> sp.Expr:
    from ..kernels.dual import q11, q12, q22  # the covariance symbols (kernels imports us)

    mgf = sp.exp((_S**2 * q11 + 2 * _S * _T * q12 + _T**2 * q22) / 2)
    d = sp.diff(mgf, _S, i, _T, j) if i or j else mgf
    return sp.expand(d.subs({_S: 0, _T: 0}))


def polynomial_expectation(poly: sp.Expr, u: sp.Symbol, v: sp.Symbol) -> sp.Expr:
    """``E[p(u, v)]`` of a polynomial in ``u, v`` (other symbols are coefficients), term by term.

    Examples
    --------
    >>> u, v, c = sp.symbols("u v c")
    >>> polynomial_expectation(u * v + c * u**2, u, v)
    c*q11 + q12
    """
    if not isinstance(poly, sp.Expr):  # never sympify: a string is not an expression here
        raise TypeError(f"poly must be a sympy expression, got {type(poly).__name__}")
    p = sp.Poly(sp.expand(poly), u, v)
    return sp.expand(sum(c * _polynomial_moment(i, j) for (i, j), c in p.terms()))
