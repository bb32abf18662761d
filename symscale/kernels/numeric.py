r"""Vectorized float64 dual kernels for every registered activation.

:func:`dual_kernel_numeric` evaluates :math:`V_\phi(q_{11}, q_{12}, q_{22})` on arrays. It uses the
stable closed form of :func:`~symscale.dual_kernel` when there is one, and otherwise quadrature:

``method="polar"`` (default)
    Write :math:`(u, v) = R\,(\sqrt{q_{11}}\cos\alpha,\ \sqrt{q_{22}}\cos(\alpha-\beta))` with
    :math:`\beta = \arccos\rho`. The angle is integrated by tanh-sinh on the two arcs between the
    lines :math:`u = 0` and :math:`v = 0` (where a kink or a saturating activation changes sign),
    and the radius by an exp-sinh rule whose nodes are graded geometrically towards 0 (densest
    at :math:`R = e`, where the Gaussian mass is). Kinks at 0 are integrated exactly. Above a
    standard deviation of 10 the rules grow by 36 nodes per dimension and decade and the radial
    rule reaches one decade further down (features sit at :math:`R \sim 1/\sqrt q`), so the
    accuracy does not degrade with the variance. Measured against independent references over
    variances 1e-300..1e12 and rho in [-1, 1] (``tests/kernels/test_edge_values.py``): at most
    3e-11 relative for tanh, sigmoid, SiLU and softplus (1e-14 for most points), and 2e-10 for
    their derivatives (bumps of width 1/sqrt(q)) at variance 1e12. Cost about ``2*deg**2``
    nodes per entry at the default ``deg=60``. Entries with rho = +-1 (the diagonal, duplicate inputs; also 1 - rho^2 below
    16 ulps, i.e. collinear up to round-off) and rho = 0 are 1-D integrals and use a 1-D graded
    rule; a zero variance is the point mass phi(0) E[phi(v)].
``method="hermite"``
    Tensor Gauss-Hermite in :math:`u = \sqrt{q_{11}}z_1`, :math:`v = \sqrt{q_{22}}(\rho z_1 +
    \sqrt{1-\rho^2} z_2)` with ``deg**2`` nodes. Best for smooth activations at variance below
    about 1; its error grows without bound as the variance grows (tanh at q = 100: 5e-2 at
    deg 48), and the resulting kernel matrices can then fail to be PSD.

Both put the larger variance first, so the result is exactly symmetric in (q11, q22). Tiny and
huge variances are valid: products such as q11 q22 are formed after an exact power-of-2
rescaling, and ``q12 = -0.0`` is ``+0.0``.

Examples
--------
>>> import numpy as np, symscale as ss
>>> ss.dual_kernel_numeric("relu", 1.0, np.array([-1.0, 0.0, 1.0]), 1.0)
array([0.        , 0.15915494, 0.5       ])
>>> v, err = ss.dual_kernel_numeric("tanh", 1.0, 0.5, 1.0, return_error=True)
>>> round(float(v), 8), bool(err < 1e-7)
(0.18632441, True)
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._deprecation import renamed_arguments
from .. import families as fam
from ..activations import Activation, as_activation
from ..errors import NoClosedFormError
from ..formula import CheckReport, CheckRow, sample_mean
from ..validation import _first, check_bool, check_int, check_real, check_seed
from ..linalg import CORRELATION_SLACK, check_covariance  # noqa: F401 (re-exported)
from .dual import _dual_kernel, pair_sampler, random_psd_point
from ..expectations.univariate import _graded_degree, _graded_rule, gauss_hermite
from .moments import gaussian_moment_numeric

__all__ = ["dual_kernel_numeric", "cross_kernel_numeric", "check_dual_kernel", "check_covariance",
           "gauss_hermite"]

_DEFAULT_DEG = {"polar": 60, "hermite": 48}
_CHUNK_ELEMENTS = 4_000_000
_EPS = float(np.finfo(float).eps)
#: homogeneous closed forms are evaluated at 2**-e times the covariance (exact) when q11*q22
#: is outside [2**-64, 2**64]: their stable forms hold products like q12 * D**1.5 ~ q**4
_SCALE_LO, _SCALE_HI = 2.0**-64, 2.0**64
#: 1 - rho^2 <= COLLINEAR_ULPS * eps is collinear up to round-off (see _snap_collinear)
COLLINEAR_ULPS = 16
_SNAP_ANGLE = math.sqrt(COLLINEAR_ULPS * _EPS)  # sin(beta)^2 = 1 - rho^2


@renamed_arguments(act="activation")
def dual_kernel_numeric(activation, q11, q12, q22, *, derivative: bool = False, deg: int | None = None,
                        method: str = "polar", return_error: bool = False):
    """E[phi(u) phi(v)] for (u, v) ~ N(0, [[q11, q12], [q12, q22]]), vectorized in float64.

    Every PSD covariance is valid, from zero variance (a point mass: ``sign`` gives
    ``sign(0) E[sign(v)] = 0``, ``step`` gives ``1/2 E[step(v)]``; the closed forms use
    ``Heaviside(0) = 1/2`` for every jump) through tiny (1e-300) to huge variances.
    Kernels that depend on rho alone (sign, step, the ReLU derivative) take their rho = +-1
    value where ``1 - rho**2`` is below 16 ulps: they move by ``sqrt(1 - rho**2)``, so the
    round-off between collinear inputs would otherwise cost 1e-8 and make Gram matrices of
    collinear inputs indefinite.

    Parameters
    ----------
    activation : str or Activation
        Any registered activation.
    q11, q12, q22 : array_like
        Broadcastable arrays of real variances and covariances.
    derivative : bool
        Use phi' (almost-everywhere derivative): the NTK factor.
    deg : int, optional
        Quadrature size when there is no closed form: nodes per dimension (default 60 for
        ``"polar"``, 48 for ``"hermite"``; the polar rule adds nodes above a standard
        deviation of 10). Ignored when a closed form exists.
    method : {"polar", "hermite"}
        Quadrature rule (see the module docstring).
    return_error : bool
        Also return an error estimate: round-off scale for closed forms; for quadrature
        ``|Q_deg - Q_{2 deg/3}|``, which overestimates the error of ``Q_deg``.

    Returns
    -------
    ndarray or float, (ndarray, ndarray) with ``return_error``
        Finite values of the broadcast shape.

    Raises
    ------
    TypeError
        A non-bool ``derivative``/``return_error`` (``"no"`` is not False), a non-integer
        ``deg``, or non-real covariance arguments.
    DomainError
        Invalid covariance (see :func:`check_covariance`); a ``ValueError``.
    ValueError
        ``deg < 8`` or an unknown ``method``.
    OverflowError
        The kernel exceeds float64 (e.g. ``exp`` at large variance); use the mpmath backend
        of :func:`~symscale.dual_kernel`.
    FloatingPointError
        The activation evaluator produced NaN (never returned silently).
    """
    activation = as_activation(activation)
    derivative = check_bool(derivative, "derivative")
    return_error = check_bool(return_error, "return_error")
    if deg is not None:
        deg = check_int(deg, "deg", low=8)
    if not isinstance(method, str) or method not in _DEFAULT_DEG:
        raise ValueError(f"method must be 'polar' or 'hermite', got {method!r}")
    a11, a12, a22 = check_covariance(q11, q12, q22)
    target = activation.derivative() if derivative else activation
    try:
        formula = _dual_kernel(activation, derivative)
    except NoClosedFormError:
        formula = None
    with np.errstate(all="ignore"):
        if formula is not None:
            fn = formula.numeric("numpy")
            value = np.asarray(fn(a11, a12, a22), dtype=float)
            value = np.broadcast_to(value, a11.shape).copy()
            if target.family.degree is not None:
                _rescale_homogeneous(fn, target.family.degree, a11, a12, a22, value)
            if target.family.degree == 0:
                _snap_collinear(fn, a11, a12, a22, value)
            _anticorrelated(target.family, a11, a12, a22, value)
            err = 16 * np.finfo(float).eps * np.abs(value)
        else:
            rule = _polar if method == "polar" else _hermite
            deg = deg or _DEFAULT_DEG[method]
            value = rule(target, a11, a12, a22, deg)
            err = np.abs(value - rule(target, a11, a12, a22, (2 * deg) // 3)) \
                if return_error else None
            _point_mass(target, a11, a22, value, err)
    _check_finite(value, target, a11, a12, a22)
    if value.ndim == 0:
        value = float(value)
        err = None if err is None else float(err)
    return (value, err) if return_error else value


def _point_mass(act: Activation, a11, a22, value, err):
    """Overwrite, in place, entries with a zero variance by phi(0) E[phi(v)] (u = 0 a.s.).

    The 2-D rules reach this limit too, but only to ~1e-10 when the other variance is huge;
    the 1-D graded rule of :func:`~symscale.gaussian_moment_numeric` is exact to ~1e-13.
    """
    zero = (a11 == 0) | (a22 == 0)
    if not zero.any():
        return

    phi0 = float(act(np.array(0.0)))
    other = np.maximum(a11, a22)[zero]
    value[zero] = phi0 * np.asarray(gaussian_moment_numeric(act, 0.0, other)) if phi0 else 0.0
    if err is not None:
        err[zero] = 16 * _EPS * np.abs(value[zero])


def _snap_collinear(fn, a11, a12, a22, value):
    """Give a kernel that depends on rho alone (sign, step) its exact rho = +-1 value where
    1 - rho^2 is below round-off (16 ulps).

    Such a kernel moves by sqrt(1 - rho^2): the ulp-level gap q11 q22 - q12^2 that rounding
    leaves between collinear inputs (x and 1.6 x) would otherwise become a 1e-8 error, and
    Gram matrices of collinear inputs would have eigenvalues of -1e-9 times their trace.
    """
    pos = (a11 > 0) & (a22 > 0)
    if not pos.any():
        return
    e = (np.frexp(a11)[1] + np.frexp(a22)[1]) // 2
    b11, b12, b22 = np.ldexp(a11, -e), np.ldexp(a12, -e), np.ldexp(a22, -e)
    prod = b11 * b22
    gap = prod - b12 * b12
    near = pos & (gap > 0) & (gap <= COLLINEAR_ULPS * _EPS * prod)
    if near.any():
        sign = np.where(a12[near] < 0, -1.0, 1.0)
        value[near] = np.broadcast_to(np.asarray(fn(1.0, sign, 1.0), dtype=float), sign.shape)


#: t - atan(t) = t**3 * sum_k (-1)**k t**(2k) / (2k + 3); 9 terms are exact for t <= 1/10
_ATAN_SERIES = np.array([(-1.0) ** k / (2 * k + 3) for k in range(9)])


def _t_minus_atan(t):
    """t - atan(t) for 0 <= t <= 1/10 without cancellation (the direct form loses 3/t**2 ulps)."""
    t2 = t * t
    poly = np.zeros_like(t)
    for c in _ATAN_SERIES[::-1]:
        poly = c + t2 * poly
    return t * t2 * poly


def _unscaled(family):
    """(base, factor, scale) with V[family](q) = factor * V[base](scale * q): unwraps Scaled
    (A phi(B x) has V = A**2 V[phi](B**2 q)); None for symbolic parameters."""
    factor, scale = 1.0, 1.0
    try:
        while isinstance(family, fam.Scaled):
            factor *= float(family.A) ** 2
            scale *= float(family.B) ** 2
            family = family.base
    except TypeError:
        return None
    return family, factor, scale


def _anticorrelated(family, a11, a12, a22, value):
    """Re-evaluate, in place, the kernels whose value near rho = -1 is far below their size.

    With x = -q12 > 0 and t = g/x <= 1/10 (the corner), t - atan(t) is summed as a series
    (:func:`_t_minus_atan`):

    * two-slope (ReLU, leaky ReLU, abs): V = (b - a)**2/(2 pi) x (t - atan t) - a b x with
      g = sqrt(D); for ReLU the value is ~q (1 + rho)**1.5 (all digits lost at 1 + rho = 1e-11
      by the compact form). Inputs are scaled by a power of 2 (exact) so D cannot underflow.
    * GELU: 2 pi V = x (t - atan t) - M/g with g = sqrt(1 + q11 + q22 + D) and
      M = 1 + (q22 + D)/(1 + q11) + (q11 + D)/(1 + q22) (a sum of positive terms equal to
      g**2 - D - x**2 (1/(1 + q11) + 1/(1 + q22)), the difference that cancels there); GELU':
      2 pi V' = (M + D)/(x g) - x/g**3 - (t - atan t). The compact forms lose 1e-10 of the value at
      q = 1e12, and GELU's sign.
    """
    parts = _unscaled(family)
    if parts is None or not isinstance(parts[0], (fam.TwoSlope, fam.Gelu, fam.GeluPrime)):
        return
    base, factor, scale = parts
    if isinstance(base, fam.TwoSlope):
        try:
            a, b = float(base.a), float(base.b)
        except TypeError:  # symbolic slopes
            return
    mask = (a12 < 0) & (a11 > 0) & (a22 > 0)
    if not mask.any():
        return
    b11, b12, b22 = a11[mask] * scale, a12[mask] * scale, a22[mask] * scale
    idx = np.flatnonzero(mask)
    if isinstance(base, fam.TwoSlope):
        e = (np.frexp(b11)[1] + np.frexp(b22)[1]) // 2
        b11, b12, b22 = np.ldexp(b11, -e), np.ldexp(b12, -e), np.ldexp(b22, -e)
        x = -b12
        t = np.sqrt(np.maximum(b11 * b22 - b12 * b12, 0.0)) / x
    else:
        x = -b12
        D = np.maximum(b11 * b22 - b12 * b12, 0.0)
        g = np.sqrt(1 + b11 + b22 + D)
        t = g / x
    near = np.flatnonzero(t <= 0.1)  # the corner only: the series is not evaluated elsewhere
    if not near.size:
        return
    x, t, s = x[near], t[near], _t_minus_atan(t[near])
    if isinstance(base, fam.TwoSlope):
        v = (b - a) ** 2 / (2 * math.pi) * x * s - a * b * x
        v = np.ldexp(v, e[near]) / scale  # degree 1: V(q) = V(scale q) / scale
    else:
        b11, b22, D, g = b11[near], b22[near], D[near], g[near]
        M = 1 + (b22 + D) / (1 + b11) + (b11 + D) / (1 + b22)
        if isinstance(base, fam.Gelu):
            v = (x * s - M / g) / (2 * math.pi)
        else:
            v = ((M + D) / (x * g) - x / g**3 - s) / (2 * math.pi)
    value.flat[idx[near]] = factor * v


def _rescale_homogeneous(fn, degree, a11, a12, a22, value):
    """Re-evaluate, in place, entries whose q11*q22 under- or overflows, at 2**-e times the
    covariance (exact): V(q) = 2**(e*degree) V(2**-e q) for a positively homogeneous phi."""
    prod = a11 * a22
    mask = ((prod < _SCALE_LO) | (prod > _SCALE_HI)) & (a11 > 0) & (a22 > 0)
    if not mask.any():
        return
    b11, b12, b22 = a11[mask], a12[mask], a22[mask]
    e = (np.frexp(b11)[1] + np.frexp(b22)[1]) // 2
    scaled = np.asarray(fn(np.ldexp(b11, -e), np.ldexp(b12, -e), np.ldexp(b22, -e)), dtype=float)
    value[mask] = np.ldexp(np.broadcast_to(scaled, b11.shape), degree * e)


def _check_finite(value, act: Activation, a11, a12, a22):
    bad = ~np.isfinite(value)
    if not bad.any():
        return
    idx = _first(bad)
    where = f"q11={float(a11[idx])!r}, q12={float(a12[idx])!r}, q22={float(a22[idx])!r}"
    if np.isnan(value[idx]) and max(float(a11[idx]), float(a22[idx])) < 1e60:
        raise FloatingPointError(f"dual kernel of {act.label} is NaN at {where}")
    if np.isnan(value[idx]):  # inf - inf inside a closed form at a huge variance
        raise OverflowError(
            f"dual kernel of {act.label}: its closed form overflows float64 at {where}; "
            "evaluate symscale.dual_kernel(act).numeric('mpmath') instead"
        )
    raise OverflowError(
        f"dual kernel of {act.label} overflows float64 at {where}; evaluate "
        "symscale.dual_kernel(act).numeric('mpmath') instead"
    )


def _ordered(a11, a12, a22):
    """Flatten, put the larger variance first; return (s1, s2, beta) with beta = acos(rho)."""
    big, small = np.maximum(a11, a22).ravel(), np.minimum(a11, a22).ravel()
    return np.sqrt(big), np.sqrt(small), _beta(big, a12.ravel(), small)


def _beta(a11, a12, a22):
    """beta = acos(rho) as atan2(sqrt(max(q11 q22 - q12^2, 0)), q12), as in the closed forms.

    arccos of a rounded ratio would turn a correlation of 1 - 1e-16 into an angle of 1e-8. The
    covariance is first scaled by a power of 2 (exact) so that q11 q22 neither under- nor
    overflows: otherwise q = 1e-200 would have D = 0, i.e. correlation +-1 whatever q12 is.
    """
    e = (np.frexp(a11)[1] + np.frexp(a22)[1]) // 2
    b11, b12, b22 = np.ldexp(a11, -e), np.ldexp(a12, -e), np.ldexp(a22, -e)
    gap = np.sqrt(np.maximum(b11 * b22 - b12 * b12, 0.0))
    return np.arctan2(gap, b12)


def _hermite(act: Activation, a11, a12, a22, deg):
    z, w = gauss_hermite(deg)
    s1, s2, beta = _ordered(a11, a12, a22)
    rho, r = np.cos(beta), np.sin(beta)
    out = np.empty_like(rho)
    step = max(1, _CHUNK_ELEMENTS // (deg * deg))
    for lo in range(0, rho.size, step):
        sl = slice(lo, lo + step)
        fu = act(s1[sl, None] * z[None, :])  # (n, deg)
        v = s2[sl, None, None] * (rho[sl, None, None] * z[None, :, None]
                                  + r[sl, None, None] * z[None, None, :])
        inner = act(v) @ w  # E over z2, (n, deg)
        out[sl] = (fu * inner) @ w
    return out.reshape(a11.shape)


@lru_cache(maxsize=64)
def _polar_rules(deg, decades=0):
    """tanh-sinh nodes on (-1, 1) and exp-sinh radial nodes with the weight R exp(-R^2/2).

    ``decades`` > 0 extends the radial rule down by that many decades (features of phi(R A) sit
    at R ~ 1/|A|, i.e. at 1e-6 for a standard deviation of 1e6).
    """
    m = deg // 2
    s = np.arange(-m, m + 1) * (3.2 / m)
    u = np.pi / 2 * np.sinh(s)
    x = np.tanh(u)
    wx = (3.2 / m) * np.pi / 2 * np.cosh(s) / np.cosh(u) ** 2
    # radius from 1e-8 (the mass below is ~1e-16) to 14 (beyond the Gaussian tail even for
    # activations that grow like exp(x) at unit variance); log R = 1 + (pi/2) sinh(t) puts the
    # densest nodes at R = e, where R^(2k+1) exp(-R^2/2) has its mass (centring at R = 1 left
    # errors of 1e-9 on E[u^4 v^4]-type integrands)
    lo = math.log(1e-8) - decades * math.log(10)
    smin, smax = np.arcsinh((lo - 1) * 2 / np.pi), np.arcsinh((math.log(14.0) - 1) * 2 / np.pi)
    h = (smax - smin) / deg
    t = smin + h * np.arange(deg + 1)
    R = np.exp(1 + np.pi / 2 * np.sinh(t))
    wr = h * np.pi / 2 * np.cosh(t) * R * R * np.exp(-R * R / 2)
    return x, wx, R, wr


#: Extra nodes per dimension for each decade of standard deviation above 10: at large variance
#: the integrand has features at R ~ 1/s and within ~1/s of the lines u = 0, v = 0.
_DEG_PER_DECADE = 36


def _polar(act: Activation, a11, a12, a22, deg):
    s1, s2, beta = _ordered(a11, a12, a22)
    # rho = +-1 (the diagonal, duplicate inputs) and rho = 0 (orthogonal inputs) are 1-D
    # integrals: E[phi(s1 Z) phi(+-s2 Z)] and E[phi(s1 Z)] E[phi(s2 Z)]. The 2-D rule reaches
    # them too, but at rho = 0 only to ~1e-16 of the kernel's size, not of E[silu]^2 ~ q^2/16
    # (1 - rho^2 below 16 ulps is round-off of a Gram matrix of collinear inputs: as in
    # _snap_collinear for the closed forms, it is rho = +-1)
    line = (beta <= _SNAP_ANGLE) | (beta >= np.pi - _SNAP_ANGLE)
    ortho = beta == np.pi / 2
    if not (line.any() or ortho.any()):
        return _polar_grouped(act, act, s1, s2, beta, deg).reshape(a11.shape)
    out = np.empty_like(beta)
    deg1 = (8 * deg) // 3  # 160 nodes on each side of 0 at the default deg = 60
    if line.any():
        sign = np.where(beta[line] < 1, 1.0, -1.0)
        out[line] = _line_pair(act, act, s1[line], sign * s2[line], deg1)
    if ortho.any():
        ones = np.ones(int(ortho.sum()))
        out[ortho] = _line_pair(act, _ONE, s1[ortho], ones, deg1) * \
            _line_pair(act, _ONE, s2[ortho], ones, deg1)
    rest = ~(line | ortho)
    if rest.any():
        out[rest] = _polar_grouped(act, act, s1[rest], s2[rest], beta[rest], deg)
    return out.reshape(a11.shape)


class _One:
    """The constant 1 as an activation (for E[f(s Z)] through :func:`_line_pair`)."""

    def __call__(self, x):
        return np.ones_like(x)


_ONE = _One()


def _line_pair(f: Activation, g, s1, s2, deg):
    """E[f(s1 Z) g(s2 Z)], Z ~ N(0, 1), for flat arrays (s2 < 0 for rho = -1).

    exp-sinh nodes on each side of z = 0 (where both arguments change sign), refined for each
    decade of max(|s1|, |s2|) above 100 as in :func:`~symscale.gaussian_moment_numeric`.
    """

    decades, degs = _graded_degree(np.maximum(np.abs(s1), np.abs(s2)), deg)
    out = np.empty_like(s1)
    for k in np.unique(decades):
        sel = decades == k
        t, wt = _graded_rule(int(degs[sel][0]))
        dens = wt * np.exp(-t * t / 2) / math.sqrt(2 * math.pi)
        a, b = s1[sel, None] * t, s2[sel, None] * t
        out[sel] = (f(a) * g(b) + f(-a) * g(-b)) @ dens
    return out


def _polar_grouped(f: Activation, g: Activation, s1, s2, beta, deg):
    """:func:`_polar_pair` with the rule refined for each decade of max(s1, s2) above 10."""
    with np.errstate(divide="ignore"):
        decades = np.ceil(np.log10(np.maximum(np.maximum(s1, s2), 1.0))).astype(int)
    if decades.max(initial=0) <= 1:  # the common case: one rule for every entry
        return _polar_pair(f, g, s1, s2, beta, deg)
    out = np.empty_like(beta)
    for k in np.unique(decades):
        sel = decades == k
        out[sel] = _polar_pair(f, g, s1[sel], s2[sel], beta[sel],
                               deg + _DEG_PER_DECADE * max(int(k) - 1, 0), max(int(k), 0))
    return out


def _polar_pair(f: Activation, g: Activation, s1, s2, beta, deg, decades=0):
    """E[f(u) g(v)] for flat arrays of standard deviations s1, s2 and angles beta = acos(rho)."""
    x, wx, R, wr = _polar_rules(deg, decades)
    # the arcs between the lines u = 0 (alpha = pi/2) and v = 0 (alpha = beta + pi/2 mod pi);
    # the angular integrand has period pi (alpha -> alpha + pi is R -> -R)
    cut1 = np.full_like(beta, np.pi / 2)
    cut2 = np.mod(beta + np.pi / 2, np.pi)
    lo, hi = np.minimum(cut1, cut2), np.maximum(cut1, cut2)
    arcs = np.stack([np.stack([lo, hi], -1), np.stack([hi, lo + np.pi], -1)], 1)  # (n, 2, 2)
    parities = (f.parity, g.parity)
    if None not in parities and parities[0] != parities[1]:
        return np.zeros_like(beta)  # odd x even: (u, v) -> (-u, -v) flips the sign
    out = np.empty_like(beta)
    step = max(1, _CHUNK_ELEMENTS // (2 * x.size * R.size))
    for start in range(0, beta.size, step):
        sl = slice(start, start + step)
        a, b = arcs[sl, :, 0], arcs[sl, :, 1]  # (n, 2)
        half = (b - a) / 2
        alpha = (a + b)[..., None] / 2 + half[..., None] * x  # (n, 2, n_ang)
        A = (s1[sl, None, None] * np.cos(alpha))[..., None] * R  # (n, 2, n_ang, n_rad)
        B = (s2[sl, None, None] * np.cos(alpha - beta[sl, None, None]))[..., None] * R
        if None not in parities:  # f(-a) g(-b) = f(a) g(b): half the work
            even = f(A) * g(B)
        else:
            even = (f(A) * g(B) + f(-A) * g(-B)) / 2
        radial = even @ wr  # (n, 2, n_ang)
        out[sl] = np.einsum("nak,k,na->n", radial, wx, half) / np.pi
    return out


def cross_kernel_numeric(phi, psi, q11, q12, q22, *, deg: int | None = None):
    """E[phi(u) psi(v)] for (u, v) ~ N(0, [[q11, q12], [q12, q22]]), vectorized float64.

    The cross moment of two different activations (needed when one A-variable multiplies
    different nonlinearities). Equal activations go to :func:`dual_kernel_numeric` (closed
    forms); an identity on one side uses Stein's lemma ``E[u psi(v)] = q12 E[psi'(v)]`` when psi
    is continuous; otherwise the polar quadrature of :func:`dual_kernel_numeric`.

    Examples
    --------
    >>> import symscale as ss
    >>> from symscale.kernels import cross_kernel_numeric
    >>> float(cross_kernel_numeric("identity", "relu", 1.0, 0.5, 1.0))   # 0.5 * E[step] = 1/4
    0.25

    Raises
    ------
    TypeError, DomainError, ValueError, OverflowError
        As in :func:`dual_kernel_numeric`.
    """

    phi, psi = as_activation(phi), as_activation(psi)
    if deg is not None:
        deg = check_int(deg, "deg", low=8)
    if phi == psi:
        return dual_kernel_numeric(phi, q11, q12, q22, deg=deg)
    a11, a12, a22 = check_covariance(q11, q12, q22)
    with np.errstate(all="ignore"):
        if _is_identity(phi) and psi.is_continuous:
            value = a12 * np.asarray(gaussian_moment_numeric(psi.derivative(), 0.0, a22))
        elif _is_identity(psi) and phi.is_continuous:
            value = a12 * np.asarray(gaussian_moment_numeric(phi.derivative(), 0.0, a11))
        else:
            value = _polar_grouped(phi, psi, np.sqrt(a11).ravel(), np.sqrt(a22).ravel(),
                                   _beta(a11, a12, a22).ravel(), deg or _DEFAULT_DEG["polar"])
            value = value.reshape(a11.shape)
    value = np.asarray(value, dtype=float)
    _check_finite(value, phi, a11, a12, a22)
    return float(value) if value.ndim == 0 else value


def _is_identity(act: Activation) -> bool:
    from ..activations import X

    return act.expr == X


@renamed_arguments(act="activation")
def check_dual_kernel(activation, *, derivative: bool = False, points=None, n_points: int = 3,
                      n_samples: int = 200_000, seed: int = 0, n_sigma: float = 5.0,
                      **quadrature) -> CheckReport:
    """Sampling check of :func:`dual_kernel_numeric` for any activation.

    With a closed form this is ``dual_kernel(activation, derivative).check(...)``; without one it
    compares the quadrature value with the Monte Carlo mean of phi(u) phi(v) at each point.

    Parameters
    ----------
    activation : str or Activation
    derivative : bool
        Check the NTK factor (phi').
    points : list of dict, optional
        ``{"q11": .., "q12": .., "q22": ..}`` points; default ``n_points`` random PSD ones.
    n_samples, seed, n_sigma
        As in :meth:`symscale.Formula.check`.
    **quadrature
        ``deg`` / ``method`` passed to :func:`dual_kernel_numeric`.

    Examples
    --------
    >>> import symscale as ss
    >>> ss.check_dual_kernel("tanh", n_samples=50_000, seed=1).passed
    True
    """
    activation = as_activation(activation)
    derivative = check_bool(derivative, "derivative")
    n_points = check_int(n_points, "n_points", low=1)
    n_samples = check_int(n_samples, "n_samples", low=2)
    seed = check_seed(seed)
    n_sigma = check_real(n_sigma, "n_sigma", low=0, low_open=True)
    try:
        formula = _dual_kernel(activation, derivative)
    except NoClosedFormError:
        formula = None
    if formula is not None:
        return formula.check(points, n_points=n_points, n_samples=n_samples, seed=seed,
                             n_sigma=n_sigma)
    target = activation.derivative() if derivative else activation
    rng = np.random.default_rng(seed)
    if points is None:
        points = [random_psd_point(rng) for _ in range(n_points)]
    sampler = pair_sampler(target)
    rows = []
    for p in points:
        p = {k: float(p[k]) for k in ("q11", "q12", "q22")}
        value = dual_kernel_numeric(activation, p["q11"], p["q12"], p["q22"], derivative=derivative,
                                    **quadrature)
        mean, se = sample_mean(lambda n, r: sampler(p, n, r), n_samples, rng)
        rows.append(CheckRow.make(p, value, mean, se, n_samples, n_sigma))
    return CheckReport(f"V[{target.label}] (quadrature)", tuple(rows), n_sigma)
