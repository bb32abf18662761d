r"""Wick coefficients :math:`w_i(k,p)=\mathbb E[(\phi^p)^{(k)}(G_i)]` and the exact ReLU forms.

The nonlinear step of cumulant propagation (theory note 03, section 2.3) expands every activation
around a local Gaussian reference :math:`G_i\sim\mathcal N(\mu_i,\sigma_i^2)`; the diagram sums need

.. math:: w_i(k,p) = \mathbb E\big[(\phi^p)^{(k)}(G_i)\big]
          = \sigma_i^{-k}\,\mathbb E\big[\phi(\mu_i+\sigma_i Z)^p\,He_k(Z)\big],

with derivatives in the distributional sense (``relu'' = delta``) and :math:`He_k` the
probabilists' Hermite polynomials (Gaussian integration by parts; normalization as in
:mod:`symscale.hermite`). :func:`wick_table` computes them

* exactly for piecewise-polynomial activations (relu, leaky_relu, abs, step, sign, polynomials
  and any registered Max/Min/Abs/Heaviside/Piecewise expression with polynomial pieces): each
  piece contributes partial Gaussian moments :math:`\mathbb E[(G-c)_+^m]`, each breakpoint the
  Dirac terms of the jumps of :math:`\phi^p` and its derivatives;
* by composite Gauss--Legendre quadrature of the integration-by-parts form otherwise.

The :math:`K=2` ReLU closed forms of section 3 are :class:`~symscale.Formula` objects with
Monte Carlo samplers, including the bivariate moment with the bivariate normal cdf
:class:`BivariateNormalCDF` (evaluated through Owen's T function). They write
:math:`\Phi` with ``erf``, so their float evaluation loses relative accuracy below
:math:`\alpha\approx-5` (``1 + erf`` cancels); use ``numeric("mpmath")`` or :func:`wick_table`.

Examples
--------
>>> from symscale.cumulants.wick import wick_table
>>> w = wick_table("relu", [0.0], [1.0], 2, 1)
>>> w[1, :, 0]                  # E relu(Z), E relu'(Z) = 1/2, E relu''(Z) = phi(0)
array([0.39894228, 0.5       , 0.39894228])
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special as sps
import sympy as sp

from .._symbolic import X, pieces
from ..activations import Activation, as_activation
from ..errors import NoClosedFormError
from ..formula import Formula, Variable
from ..hermite import hermite_he
from ..validation import check_array, check_finite, check_int

__all__ = ["wick_table", "relu_gaussian_mean", "relu_gaussian_second_moment",
           "relu_derivative_mean", "relu_bivariate_moment", "relu_bivariate_moment_numeric",
           "BivariateNormalCDF", "bivariate_normal_cdf"]

_METHODS = ("auto", "exact", "quadrature")
_SQRT_2PI = math.sqrt(2 * math.pi)
#: Quadrature: z in [-Z_MAX, Z_MAX] (phi(12) ~ 1e-32), unit panels of PANEL_NODES Gauss-Legendre
#: nodes, plus panel ends at the kinks and at graded points around x = 0, where activations
#: bend or have their complex singularities (tanh: +-i pi/2), so a large variance stays resolved.
_Z_MAX = 12.0
_PANEL_NODES = 16
_X_BREAKS = np.array([0.0] + [s * 2.0**e for e in range(-2, 5) for s in (-1.0, 1.0)])
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(_PANEL_NODES)


def wick_table(act, mean, var, k_max: int, p_max: int, *, method: str = "auto",
               return_method: bool = False):
    r"""Wick coefficients ``w[p, k, i] = E[(phi^p)^(k)(G_i)]``, ``G_i ~ N(mean_i, var_i)``.

    Parameters
    ----------
    act : str or Activation
        The activation phi.
    mean, var : float or 1-D array_like
        Means and variances (> 0) of the n neurons; scalars give n = 1.
    k_max, p_max : int
        Highest derivative order k and power p (both >= 0).
    method : {"auto", "exact", "quadrature"}
        ``"exact"``: partial Gaussian moments, for piecewise-polynomial phi only (measured for
        relu: relative error 1e-14 for ``|mean/sd| <= 8``, 1e-13 at 30; kinks much closer
        together than sd cost up to 1e-11 of the natural scale at k >= 2).
        ``"quadrature"``: composite Gauss-Legendre on ``z in [-12, 12]`` of
        ``sigma^-k E[phi^p He_k(Z)]`` (error about 2e-15 of the natural scale
        ``sigma^-k sqrt(E[phi^2p] k!)``, so relative accuracy degrades as ``sigma^-k`` for small
        sigma; phi^p must be negligible against the Gaussian beyond 12 standard deviations).
        ``"auto"``: exact when possible.
    return_method : bool
        Also return the path used, ``"exact"`` or ``"quadrature"``.

    Returns
    -------
    w : ndarray, shape (p_max + 1, k_max + 1, n)
        float64; ``w[0] = [1, 0, 0, ...]`` for every neuron.
    method : str
        Only with ``return_method=True``.

    Raises
    ------
    TypeError
        Non-numeric ``mean``/``var`` (a string, None, bool or complex data), or an order
        ``k_max``/``p_max`` that is not an integer (a float such as 2.0, or a bool).
    ValueError
        Non-finite ``mean``/``var``, ``var <= 0``, mismatched shapes, negative orders, an
        unknown ``method``, or ``method="exact"`` for an activation that is not piecewise
        polynomial (the message names the argument).
    FloatingPointError
        A coefficient is not finite in float64 (the message names the activation and neuron).

    Examples
    --------
    >>> import numpy as np
    >>> w, how = wick_table("step", [0.5], [4.0], 1, 1, return_method=True)
    >>> how, float(w[1, 0, 0]), float(w[1, 1, 0])    # Phi(1/4) and the density at 0
    ('exact', 0.598706..., 0.193334...)
    >>> w = wick_table("tanh", np.zeros(3), np.ones(3), 1, 2)
    >>> w.shape, round(float(w[2, 0, 0]), 6)          # E tanh(Z)^2
    ((3, 2, 3), 0.394294)
    """
    act = as_activation(act)
    if not act.is_numeric:
        raise ValueError(f"act={act.label} has symbolic parameters; give them numbers")
    mean, var = _moments(mean, var)
    k_max, p_max = check_int(k_max, "k_max", low=0), check_int(p_max, "p_max", low=0)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    parts = _polynomial_pieces(act) if method != "quadrature" else None
    if method == "exact" and parts is None:
        raise ValueError(f"method='exact' needs a piecewise-polynomial activation, not "
                         f"{act.label}; use method='quadrature' or 'auto'")
    sd = np.sqrt(var)
    with np.errstate(all="ignore"):
        if mean.size == 0:
            w = np.zeros((p_max + 1, k_max + 1, 0))
            used = "exact" if parts is not None else "quadrature"
        elif parts is not None:
            w, used = _exact(parts, mean, sd, k_max, p_max), "exact"
        else:
            w, used = _quadrature(act, mean, sd, k_max, p_max), "quadrature"
    _check_finite(w, act, mean, var)
    return (w, used) if return_method else w


# ---------------------------------------------------------------------------------------------
# validation


def _moments(mean, var):
    # check_array, not np.asarray(dtype=float): that would read "1" or True as 1.0
    m, v = check_array(mean, "mean", finite=False), check_array(var, "var", finite=False)
    for name, a in (("mean", m), ("var", v)):
        if a.ndim > 1:
            raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {a.shape}")
    m, v = m.reshape(-1), v.reshape(-1)
    if m.shape != v.shape:
        raise ValueError(f"mean and var must have the same length, got {m.size} and {v.size}")
    check_finite(m, "mean")
    check_finite(v, "var")
    if (v <= 0).any():
        i = int(np.argmax(v <= 0))
        raise ValueError(f"var must be > 0, got {float(v[i])!r} at index {i}")
    return m, v


def _check_finite(w, act, mean, var):
    bad = ~np.isfinite(w)
    if bad.any():
        p, k, i = (int(j[0]) for j in np.nonzero(bad))
        raise FloatingPointError(
            f"E[({act.label}^{p})^({k})(G)] is not finite in float64 at neuron {i} "
            f"(mean={float(mean[i])!r}, var={float(var[i])!r})")


# ---------------------------------------------------------------------------------------------
# exact path: piecewise polynomials


@functools.lru_cache(maxsize=256)
def _polynomial_pieces(act: Activation):
    """``((lo, hi, Poly), ...)`` covering the real line, or None if phi is not of that form."""
    try:
        parts = pieces(act.expr)
    except NoClosedFormError:
        return None
    out = []
    for lo, hi, piece in parts:
        if piece.free_symbols - {X} or not piece.is_polynomial(X):
            return None
        out.append((lo, hi, sp.Poly(piece, X)))
    if not out or out[0][0] != -sp.oo or out[-1][1] != sp.oo:
        return None
    if any(a[1] != b[0] for a, b in zip(out, out[1:])):  # a gap: not a cover of the line
        return None
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _taylor(poly: sp.Poly, p: int, c) -> np.ndarray:
    """Taylor coefficients f^(s)(c)/s! of f = poly**p at x = c, exact then rounded once."""
    f = sp.Poly(sp.expand((poly.as_expr() ** p).xreplace({X: X + c})), X)
    return np.array([float(v) for v in reversed(f.all_coeffs())])


def _partial_moments(d, sd, J):
    r"""``S[m] = E[(U - d)_+^m]``, m = 0..J, for ``U ~ N(0, sd^2)`` (vectorized).

    With ``t = d / sd``, ``S[m] = sd^m N_m(t)``, ``N_m(t) = \int_t^\infty (z-t)^m \varphi(z) dz``,
    and ``N_{m+1} = m N_{m-1} - t N_m``. That recursion only adds when t <= 0 and is mildly
    cancelling up to t = 1 (relative error 4e-15 at J = 8); beyond it the wanted solution is the
    minimal one, so the ratios ``S[m]/S[m-1] = m sd^2 / (d + S[m+1]/S[m])`` are run backwards
    (Miller) from the large-m fixed point, far enough up that the start is forgotten: the
    unwanted solution decays like exp(-2 t sqrt(m)), hence about (22/t)^2 steps for 1e-16.
    Scaling by sd^m inside the recursion keeps huge |t| free of overflow.
    """
    t = d / sd
    S = np.empty((J + 1,) + t.shape)
    S[0] = sps.ndtr(-t)
    fwd = t <= 1.0
    if fwd.any():
        df, sf, Sf = d[fwd], sd[fwd], S[:, fwd]
        if J >= 1:
            Sf[1] = sf * np.exp(-0.5 * t[fwd] ** 2) / _SQRT_2PI - df * Sf[0]
        for m in range(1, J):
            Sf[m + 1] = m * sf**2 * Sf[m - 1] - df * Sf[m]
        S[:, fwd] = Sf
    back = ~fwd
    if back.any() and J >= 1:
        db, s2 = d[back], sd[back] ** 2
        start = J + 10 + int(math.ceil((22.0 / float(t[back].min())) ** 2))
        # fixed point of r = m/(t + r) (in units of sd) as the starting guess
        ratio = 0.5 * (np.sqrt(db**2 + 4 * (start + 1) * s2) - db)
        ratios = np.empty((J + 1, db.size))
        for m in range(start, 0, -1):
            ratio = m * s2 / (db + ratio)
            if m <= J:
                ratios[m] = ratio
        Sb = S[:, back]
        for m in range(1, J + 1):
            Sb[m] = Sb[m - 1] * ratios[m]
        S[:, back] = Sb
    return S


def _dirac_moments(c, mean, sd, k_max):
    """``Q[s] = E[delta^(s-1)(G - c)] = He_{s-1}(t) phi(t) / sd^s``, t = (c - mean)/sd, s >= 1."""
    t = np.clip((c - mean) / sd, -40.0, 40.0)  # phi(40) is 0 in float64: He * phi stays finite
    dens = np.exp(-0.5 * t * t) / _SQRT_2PI
    Q = np.zeros((k_max + 1,) + t.shape)
    h_prev, h = np.zeros_like(t), np.ones_like(t)
    for s in range(1, k_max + 1):
        q = h * dens
        for _ in range(s):  # divide step by step: 0 stays 0 when sd^s would underflow
            q = q / sd
        Q[s] = q
        h_prev, h = h, t * h - (s - 1) * h_prev
    return Q


def _gauss_moment(m: int) -> float:
    return 0.0 if m % 2 else float(sps.factorial2(m - 1, exact=True)) if m else 1.0


def _derivative_weights(T, k):
    """e[m] = T[k+m] (k+m)!/m!: Taylor coefficients of the k-th derivative from those of f."""
    m = np.arange(max(T.size - k, 0))
    return T[k:] * np.array([math.perm(k + j, k) for j in m], dtype=float)


def _exact(parts, mean, sd, k_max, p_max):
    n = mean.size
    w = np.zeros((p_max + 1, k_max + 1, n))
    w[0, 0] = 1.0
    J = max(max(poly.degree(), 0) for *_, poly in parts) * p_max
    ends = sorted({e for lo, hi, _ in parts for e in (lo, hi) if e.is_finite}, key=float)
    right = {c: _partial_moments(float(c) - mean, sd, J) for c in ends}  # E[(G - c)_+^m]
    left = {c: _partial_moments(mean - float(c), sd, J) for c in ends}   # E[(c - G)_+^m]
    sign = (-1.0) ** np.arange(J + 1)
    dirac = {c: _dirac_moments(float(c), mean, sd, k_max) for c in ends} if k_max else {}
    for p in range(1, p_max + 1):
        for lo, hi, poly in parts:
            for k in range(k_max + 1):
                w[p, k] += _piece(poly, p, k, lo, hi, mean, sd, right, left, sign)
        for c, (_, _, lpoly), (_, _, rpoly) in zip(ends, parts, parts[1:]):
            if k_max == 0:
                break
            # f^(k) = piecewise part + sum_j jump_j delta^(k-1-j)(x - c)
            tl, tr = _taylor(lpoly, p, c), _taylor(rpoly, p, c)
            size = max(tl.size, tr.size, k_max)
            jump = np.pad(tr, (0, size - tr.size)) - np.pad(tl, (0, size - tl.size))
            jump = jump * np.array([math.factorial(j) for j in range(size)], dtype=float)
            if not jump[:k_max].any():
                continue
            Q = dirac[c]
            for k in range(1, k_max + 1):
                w[p, k] += sum(jump[j] * Q[k - j] for j in range(k) if jump[j])
    return w


def _piece(poly, p, k, lo, hi, mean, sd, right, left, sign):
    """E[f^(k)(G); lo < G < hi] for the polynomial f = poly**p, expanded at a piece end."""
    if lo == -sp.oo and hi == sp.oo:  # one polynomial: Taylor at the mean, Gaussian moments
        coeffs = _taylor(poly, p, 0)[::-1]  # highest degree first, for polyval
        deg = coeffs.size - 1
        total = np.zeros_like(mean)
        for m in range(0, deg - k + 1, 2):
            dk = np.polyval(np.polyder(coeffs, k + m), mean) if deg >= k + m else 0.0
            total = total + dk / math.factorial(m) * sd**m * _gauss_moment(m)
        return total
    if lo == -sp.oo:
        e = _derivative_weights(_taylor(poly, p, hi), k)
        return (e * sign[: e.size]) @ left[hi][: e.size]
    e = _derivative_weights(_taylor(poly, p, lo), k)
    if hi == sp.oo:
        return e @ right[lo][: e.size]
    # finite piece wider than sd: difference of two tails, expanded at the end nearer the bulk
    # of G so that they barely cancel; (G - lo)^m = sum_l C(m, l) (hi - lo)^(m-l) (G - hi)^l
    lo_f, hi_f = float(lo), float(hi)
    delta = hi_f - lo_f
    B = np.array([[math.comb(m, j) * delta ** (m - j) if j <= m else 0.0
                   for j in range(e.size)] for m in range(e.size)])
    from_lo = e @ (right[lo][: e.size] - B @ right[hi][: e.size])
    e_hi = _derivative_weights(_taylor(poly, p, hi), k) * sign[: e.size]
    from_hi = e_hi @ (left[hi][: e.size] - B @ left[lo][: e.size])
    out = np.where(lo_f + hi_f >= 2 * mean, from_lo, from_hi)
    # narrower than sd the tails cancel badly, but the density is then smooth on the piece:
    # Gauss-Legendre at fixed nodes in x is exact to rounding (polynomial times a slowly
    # varying Gaussian; 20 nodes beyond the degree)
    narrow = sd > delta
    if narrow.any():
        u, wts = np.polynomial.legendre.leggauss(e.size // 2 + 20)
        x = lo_f + 0.5 * delta * (u + 1)
        g = np.polyval(e[::-1], x - lo_f) * wts * (0.5 * delta)
        zn = (x[None, :] - mean[narrow, None]) / sd[narrow, None]
        out[narrow] = (np.exp(-0.5 * zn * zn) / _SQRT_2PI) @ g / sd[narrow]
    return out


# ---------------------------------------------------------------------------------------------
# quadrature path


def _quadrature(act, mean, sd, k_max, p_max):
    n = mean.size
    fixed = np.broadcast_to(np.arange(-_Z_MAX, _Z_MAX + 1.0), (n, int(2 * _Z_MAX) + 1))
    xb = np.concatenate([_X_BREAKS, np.asarray(act.kinks, dtype=float)])
    moving = np.clip((xb[None, :] - mean[:, None]) / sd[:, None], -_Z_MAX, _Z_MAX)
    edges = np.sort(np.concatenate([fixed, moving], axis=1), axis=1)
    half = 0.5 * np.diff(edges, axis=1)[..., None]
    mid = 0.5 * (edges[:, 1:] + edges[:, :-1])[..., None]
    z = (mid + half * _GL_NODES).reshape(n, -1)
    wq = (half * _GL_WEIGHTS).reshape(n, -1) * np.exp(-0.5 * z * z) / _SQRT_2PI
    phi = act(mean[:, None] + sd[:, None] * z)
    F = np.empty((p_max, n, z.shape[1]))  # wq * phi^p, p = 1..p_max
    if p_max:
        F[0] = wq * phi
        for p in range(1, p_max):
            F[p] = F[p - 1] * phi
    H = np.empty((n, z.shape[1], k_max + 1))  # He_k(z)
    H[..., 0] = 1.0
    if k_max >= 1:
        H[..., 1] = z
    for k in range(1, k_max):
        H[..., k + 1] = z * H[..., k] - k * H[..., k - 1]
    w = np.zeros((p_max + 1, k_max + 1, n))
    w[0, 0] = 1.0
    w[1:] = np.matmul(F.transpose(1, 0, 2), H).transpose(1, 2, 0)
    for k in range(1, k_max + 1):
        w[1:, k:] /= sd
    return w


# ---------------------------------------------------------------------------------------------
# bivariate normal cdf


def bivariate_normal_cdf(a, b, rho):
    r"""``Phi_2(a, b; rho) = P(Z_1 < a, Z_2 < b)`` for standard normals with correlation rho.

    Owen's (1956) formula :math:`\Phi_2 = \tfrac12[\Phi(a)+\Phi(b)] - T(a, a_a) - T(b, a_b) -
    \beta` with :math:`a_a = (b-\rho a)/(a\sqrt{1-\rho^2})`, Owen's T from
    :func:`scipy.special.owens_t` (absolute error about 1e-16); ``rho = +-1`` and infinite
    ``a``, ``b`` use their limits. Vectorized with broadcasting.

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
        out = 0.5 * (sps.ndtr(a) + sps.ndtr(b)) - sps.owens_t(a, _owen_arg(a, b, rho, r)) \
            - sps.owens_t(b, _owen_arg(b, a, rho, r)) - 0.5 * ((a < 0) != (b < 0))
        out = np.where(rho == 1, sps.ndtr(np.minimum(a, b)), out)
        out = np.where(rho == -1, np.maximum(sps.ndtr(a) - sps.ndtr(-b), 0.0), out)
        out = np.where(np.isinf(a) | np.isinf(b),
                       np.where((a == -np.inf) | (b == -np.inf), 0.0,
                                sps.ndtr(np.minimum(a, b))), out)
    return out[()]


def _owen_arg(h, k, rho, r):
    """(k - rho h)/(h r) with h = 0 read as +0 (consistent with the beta term above)."""
    arg = (k - rho * h) / (h * r)
    at_zero = np.where(k == 0, (1 - rho) / r, np.copysign(np.inf, k))
    return np.where(h == 0, at_zero, arg)


class BivariateNormalCDF(sp.Function):
    r"""Symbolic :math:`\Phi_2(a, b; \rho)`, the standard bivariate normal cdf.

    Evaluates numerically through :func:`bivariate_normal_cdf` in lambdified code (the
    ``_imp_`` hook, so :class:`~symscale.Formula` evaluators work), to any precision with
    ``evalf`` (mpmath quadrature of :math:`\int_{-\infty}^a\varphi(x)\Phi((b-\rho x)/r)dx`),
    and differentiates in closed form. Generated numpy code calls ``BivariateNormalCDF(...)``:
    bind that name to :func:`bivariate_normal_cdf`.

    Examples
    --------
    >>> import sympy as sp
    >>> a, b, r = sp.symbols("a b rho", real=True)
    >>> BivariateNormalCDF(a, b, 0)
    (erf(sqrt(2)*a/2)/2 + 1/2)*(erf(sqrt(2)*b/2)/2 + 1/2)
    >>> sp.N(BivariateNormalCDF(0, 0, sp.Rational(1, 2)), 20)
    0.33333333333333333333
    """

    nargs = 3
    _imp_ = staticmethod(bivariate_normal_cdf)

    @classmethod
    def eval(cls, a, b, rho):
        if rho.is_zero:
            return _Phi(a) * _Phi(b)
        if a is sp.S.Infinity:
            return _Phi(b)
        if b is sp.S.Infinity:
            return _Phi(a)
        if sp.S.NegativeInfinity in (a, b):
            return sp.S.Zero
        return None

    def fdiff(self, argindex=1):
        a, b, rho = self.args
        r = sp.sqrt(1 - rho**2)
        if argindex == 1:
            return _pdf(a) * _Phi((b - rho * a) / r)
        if argindex == 2:
            return _pdf(b) * _Phi((a - rho * b) / r)
        if argindex == 3:
            return sp.exp(-(a**2 - 2 * rho * a * b + b**2) / (2 * r**2)) / (2 * sp.pi * r)
        raise sp.ArgumentIndexError(self, argindex)

    def _eval_evalf(self, prec):
        if not all(v.is_number for v in self.args):
            return None
        import mpmath

        with mpmath.workprec(prec + 20):
            a, b, rho = (mpmath.mpf(sp.Float(v, prec + 20)) for v in self.args)
            if abs(rho) == 1:
                val = (mpmath.ncdf(min(a, b)) if rho > 0
                       else max(mpmath.ncdf(a) - mpmath.ncdf(-b), 0))
            else:
                r = mpmath.sqrt(1 - rho**2)
                # split where the inner cdf steps (x = b/rho, sharp as |rho| -> 1) and at 0
                cuts = sorted({c for c in (mpmath.mpf(0), b / rho if rho else a) if c < a})
                val = mpmath.quad(lambda x: mpmath.npdf(x) * mpmath.ncdf((b - rho * x) / r),
                                  [-mpmath.inf, *cuts, a])
            return sp.Float(val, mpmath.libmp.prec_to_dps(prec))

    def _pythoncode(self, printer):
        return "BivariateNormalCDF(%s)" % ", ".join(printer._print(v) for v in self.args)

    _numpycode = _pythoncode  # numpy/scipy printers look for this name instead

    def _latex(self, printer):
        a, b, rho = (printer._print(v) for v in self.args)
        return r"\Phi_2\left(%s, %s; %s\right)" % (a, b, rho)


# ---------------------------------------------------------------------------------------------
# K = 2 ReLU closed forms (theory note 03, section 3)

mu, sigma = sp.Symbol("mu", real=True), sp.Symbol("sigma", positive=True)
# sigma_1 rather than sigma1: symscale prints a symbol called sigma2 as a variance
mu1, mu2 = sp.Symbol("mu_1", real=True), sp.Symbol("mu_2", real=True)
sigma1, sigma2 = sp.Symbol("sigma_1", positive=True), sp.Symbol("sigma_2", positive=True)
rho = sp.Symbol("rho", real=True)
_UNI = (Variable(mu, "mean of Z"), Variable(sigma, "standard deviation of Z"))


def _Phi(a):
    return (1 + sp.erf(a / sp.sqrt(2))) / 2


def _pdf(a):
    return sp.exp(-(a**2) / 2) / sp.sqrt(2 * sp.pi)


def _relu_samples(point, n, rng):
    return np.maximum(point["mu"] + point["sigma"] * rng.standard_normal(n), 0.0)


def _uni_point(rng):
    return {"mu": float(rng.uniform(-1.5, 1.5)), "sigma": float(np.exp(rng.uniform(-0.7, 0.7)))}


def _uni_formula(expr, name, lhs, description, sampler):
    return Formula(expr, _UNI, name=name, lhs=lhs, description=description, sampler=sampler,
                   point_sampler=_uni_point)


def relu_gaussian_mean() -> Formula:
    r"""``E relu(Z) = sigma phi(alpha) + mu Phi(alpha)``, ``Z ~ N(mu, sigma^2)``, alpha = mu/sigma.

    Examples
    --------
    >>> f = relu_gaussian_mean()
    >>> round(float(f(0.0, 1.0)), 12)                         # 1/sqrt(2 pi)
    0.398942280401
    """
    a = mu / sigma
    return _uni_formula(sigma * _pdf(a) + mu * _Phi(a), "E[relu(Z)]",
                        r"\mathbb{E}\,\mathrm{relu}(Z)", "mean of relu(Z), Z ~ N(mu, sigma^2)",
                        _relu_samples)


def relu_gaussian_second_moment() -> Formula:
    r"""``E relu(Z)^2 = (mu^2 + sigma^2) Phi(alpha) + mu sigma phi(alpha)``.

    Examples
    --------
    >>> float(relu_gaussian_second_moment()(0.0, 2.0))        # sigma^2 / 2
    2.0
    """
    a = mu / sigma
    return _uni_formula((mu**2 + sigma**2) * _Phi(a) + mu * sigma * _pdf(a), "E[relu(Z)^2]",
                        r"\mathbb{E}\,\mathrm{relu}(Z)^{2}", "second moment of relu(Z)",
                        lambda pt, n, rng: _relu_samples(pt, n, rng) ** 2)


def relu_derivative_mean(k: int) -> Formula:
    r"""``E relu^(k)(Z)``: the mean for k = 0, ``Phi(alpha)`` for k = 1 and
    ``(-1)^k sigma^(1-k) He_{k-2}(alpha) phi(alpha)`` for k >= 2 (derivatives of the delta).

    The sampler for k >= 2 is the integration-by-parts estimator
    ``relu(mu + sigma Z) He_k(Z) / sigma^k``, independent of the closed form.

    Examples
    --------
    >>> relu_derivative_mean(3).expr
    -sqrt(2)*mu*exp(-mu**2/(2*sigma**2))/(2*sqrt(pi)*sigma**3)
    """
    k = check_int(k, "k", low=0)
    if k == 0:
        return relu_gaussian_mean()
    a = mu / sigma
    if k == 1:
        expr = _Phi(a)

        def sampler(pt, n, rng):
            return (pt["mu"] + pt["sigma"] * rng.standard_normal(n) > 0).astype(float)
    else:
        expr = (-1) ** k * sigma ** (1 - k) * hermite_he(k - 2, a) * _pdf(a)

        def sampler(pt, n, rng):
            z = rng.standard_normal(n)
            return np.maximum(pt["mu"] + pt["sigma"] * z, 0.0) * hermite_he(k, z) / pt["sigma"]**k
    return _uni_formula(expr, f"E[relu^({k})(Z)]", r"\mathbb{E}\,\mathrm{relu}^{(%d)}(Z)" % k,
                        f"mean of the {k}-th distributional derivative of relu at Z", sampler)


def relu_bivariate_moment() -> Formula:
    r"""``E[relu(Z_1) relu(Z_2)]`` for a bivariate normal (means mu1, mu2, sds sigma1, sigma2,
    correlation rho), with :class:`BivariateNormalCDF`; valid for ``|rho| < 1``
    (:func:`relu_bivariate_moment_numeric` also takes ``rho = +-1``).

    Examples
    --------
    >>> f = relu_bivariate_moment()
    >>> round(float(f(0.3, -0.5, 1.2, 0.7, 0.6)), 12)
    0.152074043193
    """
    a, b = mu1 / sigma1, mu2 / sigma2
    r = sp.sqrt(1 - rho**2)
    expr = ((mu1 * mu2 + rho * sigma1 * sigma2) * BivariateNormalCDF(a, b, rho)
            + mu1 * sigma2 * _pdf(b) * _Phi((a - rho * b) / r)
            + mu2 * sigma1 * _pdf(a) * _Phi((b - rho * a) / r)
            + sigma1 * sigma2 * r / (2 * sp.pi)
            * sp.exp(-(a**2 - 2 * rho * a * b + b**2) / (2 * r**2)))

    def sampler(pt, n, rng):
        z1 = rng.standard_normal(n)
        z2 = pt["rho"] * z1 + math.sqrt(1 - pt["rho"] ** 2) * rng.standard_normal(n)
        return (np.maximum(pt["mu_1"] + pt["sigma_1"] * z1, 0.0)
                * np.maximum(pt["mu_2"] + pt["sigma_2"] * z2, 0.0))

    def point_sampler(rng):
        s = np.exp(rng.uniform(-0.7, 0.7, 2))
        m = rng.uniform(-1.5, 1.5, 2)
        return {"mu_1": m[0], "mu_2": m[1], "sigma_1": s[0], "sigma_2": s[1],
                "rho": float(rng.uniform(-0.95, 0.95))}

    variables = [Variable(mu1, "mean of Z1"), Variable(mu2, "mean of Z2"),
                 Variable(sigma1, "sd of Z1"), Variable(sigma2, "sd of Z2"),
                 Variable(rho, "correlation of Z1 and Z2")]
    return Formula(expr, variables, name="E[relu(Z1) relu(Z2)]",
                   lhs=r"\mathbb{E}\left[\mathrm{relu}(Z_1)\,\mathrm{relu}(Z_2)\right]",
                   description="joint second moment of relu at a bivariate normal",
                   sampler=sampler, point_sampler=point_sampler)


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
        out = ((m1 * m2 + rho * s1 * s2) * bivariate_normal_cdf(a, b, rho)
               + m1 * s2 * pb * sps.ndtr((a - rho * b) / r)
               + m2 * s1 * pa * sps.ndtr((b - rho * a) / r)
               + s1 * s2 * r / (2 * np.pi) * np.exp(-np.where(r > 0, q, np.inf)))
        out = np.where(rho == 1, _comoving(m1, s1, m2, s2, np.maximum(-a, -b), np.inf), out)
        out = np.where(rho == -1, _comoving(m1, s1, m2, -s2, -a, np.maximum(b, -a)), out)
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
