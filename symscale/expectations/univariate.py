r"""The one univariate Gaussian-expectation engine: tables of :math:`E[(\phi^p)^{(k)}(G)]`.

For :math:`G = \mu + \sigma Z`, Gaussian integration by parts gives the two normalizations
used in symscale from one array of moments :math:`M_k = E[\phi(G)^p He_k(Z)]`:

* **Wick** (cumulant propagation): :math:`w_k = E[(\phi^p)^{(k)}(G)] = \sigma^{-k} M_k`, with
  derivatives in the distributional sense (``relu'' = delta``);
* **Hermite** (:func:`symscale.hermite_coefficients`): :math:`c_k = M_k / k!`.

So :math:`w_k = k!\,\sigma^{-k} c_k` holds by construction: :func:`symscale.cumulants.wick_table`
and ``hermite_coefficients(exact=False)`` are both clients of :func:`univariate_table`.

Paths (``method``):

* ``"exact"``: piecewise-polynomial activations (relu, leaky_relu, abs, step, sign, polynomials
  and any registered Max/Min/Abs/Heaviside/Piecewise expression with polynomial pieces): partial
  Gaussian moments per piece and the Dirac terms of the jumps, vectorized over neurons in
  float64;
* ``"quadrature"``: composite Gauss-Legendre panels in float64 (vectorized over neurons), or,
  with ``dps``, adaptive mpmath Gauss-Legendre at that many digits (one neuron at a time).

:func:`graded_moment` is the moment path for any variance (exp-sinh nodes graded towards the
sign change of the argument, 1e-300 to 1e12): :func:`symscale.gaussian_moment_numeric` uses it
where no closed form exists, and the bivariate quadrature of :mod:`symscale.kernels.numeric`
builds on its rules.

Examples
--------
>>> from symscale.expectations import univariate_table
>>> t = univariate_table("relu", [0.5], [4.0], 2, 1)
>>> t.method, [round(float(v), 6) for v in t.wick[1, :, 0]]     # E relu, E relu', E relu''
('exact', [1.072689, 0.598706, 0.193334])
>>> bool(np.allclose(t.wick[1, 2, 0], 2 * t.hermite[1, 2, 0] / 4.0))   # w_k = k! s^-k c_k
True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from functools import lru_cache

import mpmath
import numpy as np
import scipy.special as sps
import sympy as sp

from .._deprecation import renamed_arguments
from .._symbolic import X, pieces
from ..activations import Activation, as_activation
from ..errors import NoClosedFormError
from ..validation import check_array, check_finite, check_int

__all__ = ["univariate_table", "GaussianTable", "METHODS", "graded_moment", "gauss_hermite"]

#: The paths of :func:`univariate_table`.
METHODS = ("auto", "exact", "quadrature")
_SQRT_2PI = math.sqrt(2 * math.pi)
#: Quadrature: z in [-Z_MAX, Z_MAX] (phi(12) ~ 1e-32), unit panels of PANEL_NODES Gauss-Legendre
#: nodes, plus panel ends at the kinks and at graded points around x = 0, where activations
#: bend or have their complex singularities (tanh: +-i pi/2), so a large variance stays resolved.
_Z_MAX = 12.0
_PANEL_NODES = 16
_X_BREAKS = np.array([0.0] + [s * 2.0**e for e in range(-2, 5) for s in (-1.0, 1.0)])
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(_PANEL_NODES)


@dataclass(frozen=True, eq=False)
class GaussianTable:
    """Moments of an activation under ``G_i ~ N(mean_i, var_i)``, in both normalizations.

    Attributes
    ----------
    activation : Activation
    mean, var : ndarray (n,)
    wick : ndarray (p_max + 1, k_max + 1, n)
        ``E[(phi^p)^(k)(G_i)]``; float64, or mpmath numbers (object array) when computed with
        ``dps``.
    method : str
        ``"exact"`` or ``"quadrature"``.
    """

    activation: Activation
    mean: np.ndarray
    var: np.ndarray
    wick: np.ndarray
    method: str
    _hermite: np.ndarray | None = field(default=None, repr=False)

    @property
    def hermite(self) -> np.ndarray:
        """``c[p, k, i] = E[phi(G_i)^p He_k(Z)] / k! = sigma^k w[p, k, i] / k!``."""
        if self._hermite is not None:  # the mpmath path normalizes at its working precision
            return self._hermite
        k = np.arange(self.wick.shape[1])
        sd = np.sqrt(self.var)
        fact = np.array([float(math.factorial(j)) for j in k])
        return self.wick * sd[None, None, :] ** k[None, :, None] / fact[None, :, None]


def gauss_hermite(deg: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``deg``-point rule for E[f(Z)], Z ~ N(0, 1) (weights sum to 1).

    Examples
    --------
    >>> z, w = gauss_hermite(3)
    >>> float(np.round(w @ z**2, 12))
    1.0
    """
    deg = check_int(deg, "deg", low=1)
    z, w = np.polynomial.hermite_e.hermegauss(deg)
    return z, w / math.sqrt(2 * math.pi)


@renamed_arguments(act="activation")
def univariate_table(activation, mean, var, k_max: int, p_max: int, *, method: str = "auto",
                     dps: int | None = None) -> GaussianTable:
    r"""``E[(phi^p)^(k)(G_i)]`` for ``G_i ~ N(mean_i, var_i)``, p <= p_max, k <= k_max.

    Parameters
    ----------
    activation : str or Activation
    mean, var : float or 1-D array_like
        Means and variances (> 0) of the n Gaussians; scalars give n = 1.
    k_max, p_max : int
        Highest derivative order k and power p (both >= 0).
    method : {"auto", "exact", "quadrature"}
        ``"exact"``: partial Gaussian moments, piecewise-polynomial phi only (relative error
        1e-14 for ``|mean/sd| <= 8`` for relu). ``"quadrature"``: Gauss-Legendre panels on
        ``z in [-12, 12]`` (error about 2e-15 of the natural scale
        ``sigma^-k sqrt(E[phi^2p] k!)``). ``"auto"``: exact when possible.
    dps : int, optional
        Decimal digits: adaptive mpmath quadrature (the table holds mpmath numbers).

    Returns
    -------
    GaussianTable

    Raises
    ------
    TypeError
        Non-numeric ``mean``/``var``; orders that are not integers.
    ValueError
        Non-finite ``mean``/``var``, ``var <= 0``, mismatched shapes, negative orders, an
        unknown ``method``, ``method="exact"`` for an activation that is not piecewise
        polynomial, or symbolic activation parameters.
    FloatingPointError
        A float64 entry is not finite (names the activation and the neuron).
    """
    activation = as_activation(activation)
    if not activation.is_numeric:
        raise ValueError(f"act={activation.label} has symbolic parameters; give them numbers")
    exact_inputs = (mean, var)  # sympy numbers keep their digits on the mpmath path
    mean, var = _moments(mean, var)
    k_max, p_max = check_int(k_max, "k_max", low=0), check_int(p_max, "p_max", low=0)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if dps is not None:
        dps = check_int(dps, "dps", low=5, high=10_000)
        if method == "exact":
            raise ValueError("method='exact' is float64; dps=... uses mpmath quadrature")
        w = np.empty((p_max + 1, k_max + 1, mean.size), dtype=object)
        c = np.empty_like(w)
        m_in, v_in = (np.atleast_1d(np.asarray(v, dtype=object)).ravel() for v in exact_inputs)
        for i in range(mean.size):
            w[..., i], c[..., i] = _mp_table(activation, m_in[i], v_in[i], k_max, p_max, dps)
        return GaussianTable(activation, mean, var, w, "quadrature", c)
    parts = _polynomial_pieces(activation) if method != "quadrature" else None
    if method == "exact" and parts is None:
        raise ValueError(f"method='exact' needs a piecewise-polynomial activation, not "
                         f"{activation.label}; use method='quadrature' or 'auto'")
    sd = np.sqrt(var)
    with np.errstate(all="ignore"):
        if mean.size == 0:
            w = np.zeros((p_max + 1, k_max + 1, 0))
            used = "exact" if parts is not None else "quadrature"
        elif parts is not None:
            w, used = _exact(parts, mean, sd, k_max, p_max), "exact"
        else:
            w, used = _quadrature(activation, mean, sd, k_max, p_max), "quadrature"
    _check_finite(w, activation, mean, var)
    return GaussianTable(activation, mean, var, w, used)


def _mp_table(act, mean, var, k_max, p_max, dps):
    """``(w[p, k], c[p, k])`` at ``dps`` digits for one Gaussian, from the moments
    ``M_k = E[phi^p He_k(Z)]``: ``w_k = sigma^-k M_k`` and ``c_k = M_k / k!``."""
    f = act.mpmath
    # He_k reaches sqrt(k!) in size while c_k k! may be far smaller: carry those digits too.
    guard = 15 + int(0.5 * math.lgamma(k_max + 1) / math.log(10))
    out = np.empty((p_max + 1, k_max + 1), dtype=object)
    herm = np.empty_like(out)
    with mpmath.workdps(dps + guard):
        mu, s = _mp_number(mean, dps + guard), mpmath.sqrt(_mp_number(var, dps + guard))
        kinks = [(mpmath.mpf(b) - mu) / s for b in act.kinks]
        out[0] = herm[0] = [mpmath.mpf(1)] + [mpmath.mpf(0)] * k_max
        inv_root = 1 / mpmath.sqrt(2 * mpmath.pi)  # npdf's constant, once (npdf: 1/4 of the time)
        for p in range(1, p_max + 1):
            def integrand(z, p=p):
                w = f(mu + s * z) ** p * (mpmath.exp(-z * z / 2) * inv_root)
                he = [mpmath.mpf(1), z]
                for n in range(1, k_max):
                    he.append(z * he[n] - n * he[n - 1])
                return [w * h for h in he[: k_max + 1]]

            moments = _integrate_vector(integrand, kinks, k_max, dps)
            out[p] = [moments[k] / s**k for k in range(k_max + 1)]
            herm[p] = [moments[k] / mpmath.factorial(k) for k in range(k_max + 1)]
    with mpmath.workdps(dps):  # round to the requested precision
        return tuple(np.array([[+v for v in row] for row in a], dtype=object) for a in (out, herm))


def _mp_number(v, digits):
    """An mpmath number with every digit of ``v`` (a sympy number is evaluated at ``digits``)."""
    if isinstance(v, sp.Basic):
        return mpmath.mpf(sp.Float(v, digits))
    return mpmath.mpf(v)


# ---------------------------------------------------------------------------------------------
# float64 paths (validation, exact piecewise polynomials, Gauss-Legendre panels)


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


def _forward_limit(J: int) -> float:
    """Largest t = d/sd for which :func:`_partial_moments` runs the forward recursion: its
    cancellation grows like exp(c t sqrt(J)); 1.7/sqrt(J) keeps the relative error <= 4e-15
    (measured against 40-digit mpmath for J = 1..16 on t in [0.2, 3.2])."""
    return min(2.0, 1.7 / math.sqrt(max(J, 1)))


def _miller_start(t_min: float, J: int) -> int:
    """Steps of the backward (Miller) ratio recursion for t >= t_min: the start is forgotten to
    one ulp after about (14.4/t + sqrt(J))^2 steps (measured for J = 1..32, t = 0.4..200); 16
    and the + J + 4 leave a margin of at least 1.2x."""
    return J + 4 + int(math.ceil((16.0 / t_min + math.sqrt(J)) ** 2))


def _partial_moments(d, sd, J):
    r"""``S[m] = E[(U - d)_+^m]``, m = 0..J, for ``U ~ N(0, sd^2)`` (vectorized).

    With ``t = d / sd``, ``S[m] = sd^m N_m(t)``, ``N_m(t) = \int_t^\infty (z-t)^m \varphi(z) dz``,
    and ``N_{m+1} = m N_{m-1} - t N_m``. That recursion only adds when t <= 0; for t > 0 it
    cancels, the more the larger t sqrt(J), so it is used up to t = :func:`_forward_limit`
    (J) = 1.7/sqrt(J) (relative error <= 4e-15 there, measured against mpmath for J <= 16).
    Beyond it the wanted solution is the minimal one, so the ratios
    ``S[m]/S[m-1] = m sd^2 / (d + S[m+1]/S[m])`` are run backwards (Miller) from the large-m
    fixed point, far enough up that the start is forgotten: :func:`_miller_start` steps.
    Scaling by sd^m inside the recursion keeps huge |t| free of overflow.
    """
    t = d / sd
    S = np.empty((J + 1,) + t.shape)
    S[0] = sps.ndtr(-t)
    fwd = t <= _forward_limit(J)
    if fwd.any():
        df, sf, Sf = d[fwd], sd[fwd], S[:, fwd]
        if J >= 1:
            Sf[1] = sf * np.exp(-0.5 * t[fwd] ** 2) / _SQRT_2PI - df * Sf[0]
        for m in range(1, J):
            Sf[m + 1] = m * sf**2 * Sf[m - 1] - df * Sf[m]
        S[:, fwd] = Sf
    back = ~fwd
    if back.any() and J >= 1:
        tb, sb = t[back], sd[back]
        start = _miller_start(float(tb.min()), J)
        # in units of sd the ratios are u_m = m / (t + u_(m+1)): two in-place operations a
        # step (the loop runs ~(16/t)^2 steps, so its per-call overhead is the cost); the
        # fixed point of u = m/(t + u) is the starting guess
        u = 0.5 * (np.sqrt(tb**2 + 4.0 * (start + 1)) - tb)
        ratios = np.empty((J + 1, tb.size))
        for m in range(start, 0, -1):
            np.add(tb, u, out=u)
            np.divide(float(m), u, out=u)
            if m <= J:
                ratios[m] = u * sb
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


def _moment_order(parts, p_max):
    """Highest partial moment the exact table needs: the degree of phi**p_max."""
    return max(max(poly.degree(), 0) for *_, poly in parts) * p_max


def _jump(lpoly, rpoly, p, c, k_max):
    """Jumps of f = poly**p and its derivatives at the kink c, times j! (the weights of the
    delta^(j) terms of f^(k)); None when f is C^(k_max - 1) there."""
    tl, tr = _taylor(lpoly, p, c), _taylor(rpoly, p, c)
    size = max(tl.size, tr.size, k_max)
    jump = np.pad(tr, (0, size - tr.size)) - np.pad(tl, (0, size - tl.size))
    jump = jump * np.array([math.factorial(j) for j in range(size)], dtype=float)
    return jump if jump[:k_max].any() else None


@functools.lru_cache(maxsize=256)
def _two_piece_plan(parts, k_max, p_max):
    """For phi made of two polynomials meeting at one kink c, every ``w[p, k]`` (p >= 1) is a
    fixed linear combination of the partial moments E[(G - c)_+^m], E[(c - G)_+^m] and of
    E[delta^(s-1)(G - c)]: the matrix C of that combination (one row per (p, k)), so that a
    table is one product C @ moments instead of a Python loop per entry. None for any other
    shape of pieces (they take the loop)."""
    if len(parts) != 2:
        return None
    (_, c, lpoly), (_, _, rpoly) = parts
    J = _moment_order(parts, p_max)
    sign = (-1.0) ** np.arange(J + 1)
    # columns: right moments 0..J, left moments 0..J, Dirac moments Q[0..k_max]
    C = np.zeros((p_max, k_max + 1, 2 * (J + 1) + k_max + 1))
    for p in range(1, p_max + 1):
        for k in range(k_max + 1):
            e = _derivative_weights(_taylor(lpoly, p, c), k)
            C[p - 1, k, J + 1:J + 1 + e.size] += e * sign[:e.size]
            e = _derivative_weights(_taylor(rpoly, p, c), k)
            C[p - 1, k, :e.size] += e
        jump = _jump(lpoly, rpoly, p, c, k_max) if k_max else None
        for k in range(1, k_max + 1 if jump is not None else 1):
            for j in range(k):
                C[p - 1, k, 2 * (J + 1) + k - j] += jump[j]
    return C.reshape(p_max * (k_max + 1), -1), J


def _exact(parts, mean, sd, k_max, p_max):
    n = mean.size
    w = np.zeros((p_max + 1, k_max + 1, n))
    w[0, 0] = 1.0
    plan = _two_piece_plan(parts, k_max, p_max) if p_max else None
    if plan is not None:
        C, J = plan
        c = float(parts[0][1])
        # E[(G - c)_+^m] and E[(c - G)_+^m] in one call: one recursion loop
        S = _partial_moments(np.concatenate([c - mean, mean - c]), np.tile(sd, 2), J)
        Q = _dirac_moments(c, mean, sd, k_max)
        M = np.concatenate([S[:, :n], S[:, n:], Q])
        w[1:] = (C @ M).reshape(p_max, k_max + 1, n)
        return w
    J = _moment_order(parts, p_max)
    ends = sorted({e for lo, hi, _ in parts for e in (lo, hi) if e.is_finite}, key=float)
    # E[(G - c)_+^m] and E[(c - G)_+^m] at every end, in one call: one recursion loop
    d = np.concatenate([s * (float(c) - mean) for c in ends for s in (1.0, -1.0)] or [mean[:0]])
    S = _partial_moments(d, np.tile(sd, 2 * len(ends)), J).reshape(J + 1, len(ends), 2, n)
    right = {c: S[:, k, 0] for k, c in enumerate(ends)}
    left = {c: S[:, k, 1] for k, c in enumerate(ends)}
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
            jump = _jump(lpoly, rpoly, p, c, k_max)
            if jump is None:
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
# mpmath adaptive quadrature


#: Widest first piece of the adaptive quadrature (in sd units). The bisection keeps the accuracy;
#: width 2 halves the evaluations of unit pieces, which the 24-node rule mostly did not need
#: (Hermite coefficients of every registered activation to order 5 at 30 digits: 3.3 -> 1.8 s,
#: the same values to 4e-47).
_PIECE = 2


def _integrate_vector(g, kinks, order, dps, max_depth=40):
    """Integrals over the real line of the vector function g, by adaptive Gauss-Legendre.

    The line is cut where the Gaussian tail is negligible, at the kinks of phi (each piece is then
    smooth) and into pieces of width at most _PIECE; a piece is bisected until the 24- and
    48-node rules agree to about 10^-(dps+3) of the natural scale sqrt(k!) of each entry.
    """
    prec = mpmath.mp.prec
    rules = [_gl_rule(4, prec), _gl_rule(5, prec)]
    scale = [mpmath.sqrt(mpmath.factorial(k)) for k in range(order + 1)]
    tol = mpmath.mpf(10) ** (-(dps + 3))
    # tail: extend the cut until the integrand is negligible at both ends
    zmax = mpmath.sqrt(2 * math.log(10) * (mpmath.mp.dps + 5)) + math.sqrt(order + 1)
    for _ in range(60):
        ends = g(zmax) + g(-zmax)
        if all(abs(v) <= tol * 1e-3 * scale[i % (order + 1)] for i, v in enumerate(ends)):
            break
        zmax *= 1.25
    else:
        raise FloatingPointError("the Gaussian integrand does not decay; is phi^power integrable?")
    cuts = sorted({-zmax, zmax, *[k for k in kinks if -zmax < k < zmax]})
    edges = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        n = max(1, int(mpmath.ceil((b - a) / _PIECE)))
        edges += [a + (b - a) * i / n for i in range(n)]
    edges.append(cuts[-1])
    total = [mpmath.mpf(0)] * (order + 1)
    stack = [(a, b, 0) for a, b in zip(edges[:-1], edges[1:])]
    while stack:
        a, b, depth = stack.pop()
        lo, hi = (_apply_rule(rule, g, a, b, order) for rule in rules)
        if depth < max_depth and any(abs(x - y) > tol * sc for x, y, sc in zip(lo, hi, scale)):
            mid = (a + b) / 2
            stack += [(a, mid, depth + 1), (mid, b, depth + 1)]
            continue
        total = [t + v for t, v in zip(total, hi)]
    return total


@lru_cache(maxsize=32)
def _gl_rule(degree, prec):
    from mpmath.calculus.quadrature import GaussLegendre

    return tuple(GaussLegendre(mpmath.mp).calc_nodes(degree, prec))


def _apply_rule(rule, g, a, b, order):
    half, mid = (b - a) / 2, (a + b) / 2
    acc = [mpmath.mpf(0)] * (order + 1)
    for x, w in rule:
        vals = g(mid + half * x)
        acc = [s + w * v for s, v in zip(acc, vals)]
    return [half * s for s in acc]


# ---------------------------------------------------------------------------------------------
# graded exp-sinh rules: E[phi(u)^p] at any variance (also the bivariate rules' 1-D nodes)


@lru_cache(maxsize=32)
def _graded_rule(deg):
    """exp-sinh nodes t in (1e-20, 40) and weights for integrals over t > 0 of smooth functions
    with features at every scale down to 1e-20 (one side of a split point)."""
    # starting at 1e-10 instead dropped the mass phi(z0) * 1e-10 on each side (5e-11 for the
    # sigmoid mean)
    smin, smax = np.arcsinh(np.log(1e-20) * 2 / np.pi), np.arcsinh(np.log(40.0) * 2 / np.pi)
    h = (smax - smin) / deg
    s = smin + h * np.arange(deg + 1)
    t = np.exp(np.pi / 2 * np.sinh(s))
    return t, h * np.pi / 2 * np.cosh(s) * t


def _graded_degree(sd, deg):
    """(decade index, nodes) per entry: ``deg`` up to sd = 100, then 40 more per decade."""
    decades = np.ceil(np.log10(np.maximum(sd, 1.0))).astype(int)
    return decades, deg + _DEG_PER_DECADE * np.maximum(decades - 2, 0)


#: Extra nodes per decade of standard deviation above 100: a bump phi (tanh', sigmoid') at
#: sd = 1e6 sits at distance 1e-6 from the split point (160 nodes left 1e-7 there, 320 1e-14).
_DEG_PER_DECADE = 40


@renamed_arguments(act="activation")
def graded_moment(activation, m, v, power: int = 1, deg: int = 160):
    """``E[phi(m + sqrt(v) Z)^power]`` (vectorized, unchecked: validated by its callers),
    split at ``z0 = -m/sqrt(v)`` with exp-sinh nodes graded towards it on each side, so the
    accuracy holds from variance 1e-300 to 1e12 (about 1e-13 relative for tanh, sigmoid,
    softplus and SiLU at ``deg = 160``). :func:`symscale.gaussian_moment_numeric` calls it where
    no closed form exists.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.activations import activation
    >>> round(float(graded_moment(activation("tanh"), np.array(0.5), np.array(2.0), 2)), 10)
    0.5415825956
    """
    m, v = np.broadcast_arrays(m, v)
    sd = np.sqrt(np.where(v > 0, v, 1.0))
    decades, degs = _graded_degree(sd, deg)
    if decades.max(initial=0) <= 2:  # the common case: one rule for every entry
        return _graded(activation, m, sd, power, deg)
    out = np.empty(m.shape)
    for k in np.unique(decades):
        sel = decades == k
        out[sel] = _graded(activation, m[sel], sd[sel], power, int(degs[sel][0]))
    return out


def _graded(act, m, sd, power, deg):
    z0 = -m / sd
    z0 = np.where(np.abs(z0) < 12.0, z0, 0.0)  # u keeps one sign over the bulk: no split needed
    t, wt = _graded_rule(deg)
    total = np.zeros(m.shape)
    for sign in (1.0, -1.0):
        z = z0[..., None] + sign * t
        dens = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        total = total + (act(m[..., None] + sd[..., None] * z) ** power * dens) @ wt
    return total
