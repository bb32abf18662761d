r"""Vectorized float64 dual kernels for every registered activation.

:func:`dual_kernel_numeric` evaluates :math:`V_\phi(q_{11}, q_{12}, q_{22})` on arrays. It uses the
stable closed form of :func:`~symscale.dual_kernel` when there is one, and otherwise quadrature:

``method="polar"`` (default)
    Write :math:`(u, v) = R\,(\sqrt{q_{11}}\cos\alpha,\ \sqrt{q_{22}}\cos(\alpha-\beta))` with
    :math:`\beta = \arccos\rho`. The angle is integrated by tanh-sinh on the two arcs between the
    lines :math:`u = 0` and :math:`v = 0` (where a kink or a saturating activation changes sign),
    and the radius by an exp-sinh rule whose nodes are graded geometrically towards 0. The
    grading makes the error nearly independent of the variance: a saturating activation at
    :math:`q = 10^{12}` is as accurate as at :math:`q = 1` (about 1e-12 relative at the default
    ``deg=60``), and kinks at 0 are integrated exactly. Cost about ``2*deg**2`` nodes per entry.
``method="hermite"``
    Tensor Gauss-Hermite in :math:`u = \sqrt{q_{11}}z_1`, :math:`v = \sqrt{q_{22}}(\rho z_1 +
    \sqrt{1-\rho^2} z_2)` with ``deg**2`` nodes. Best for smooth activations at variance below
    about 1; its error grows without bound as the variance grows (tanh at q = 100: 5e-2 at
    deg 48), and the resulting kernel matrices can then fail to be PSD.

Both put the larger variance first, so the result is exactly symmetric in (q11, q22).

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

from ..activations import Activation, as_activation
from ..errors import NoClosedFormError
from ..formula import CheckReport, CheckRow, sample_mean
from .dual import _dual_kernel, pair_sampler, random_psd_point

__all__ = ["dual_kernel_numeric", "cross_kernel_numeric", "check_dual_kernel", "check_covariance",
           "gauss_hermite"]

_DEFAULT_DEG = {"polar": 60, "hermite": 48}
#: |q12| may exceed sqrt(q11 q22) by this relative amount (round-off in a Gram matrix).
CORRELATION_SLACK = 1e-10
_CHUNK_ELEMENTS = 4_000_000


def gauss_hermite(deg: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``deg``-point rule for E[f(Z)], Z ~ N(0, 1) (weights sum to 1)."""
    z, w = np.polynomial.hermite_e.hermegauss(deg)
    return z, w / math.sqrt(2 * math.pi)


def check_covariance(q11, q12, q22):
    """Validate and broadcast a batch of 2x2 covariances; return float64 arrays with q12 clipped.

    Raises
    ------
    ValueError
        NaN or infinite entries, a negative variance, or ``q12**2 > q11*q22`` beyond round-off;
        the message names the argument, the offending value and its index.
    """
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (q11, q12, q22)))
    for name, a in zip(("q11", "q12", "q22"), arrays):
        bad = ~np.isfinite(a)
        if bad.any():
            idx = _first(bad)
            raise ValueError(f"{name} must be finite, got {float(a[idx])!r}{_at(idx)}")
    a11, a12, a22 = arrays
    for name, a in (("q11", a11), ("q22", a22)):
        if (a < 0).any():
            idx = _first(a < 0)
            raise ValueError(f"{name} must be >= 0 (a variance), got {float(a[idx])!r}{_at(idx)}")
    bound = np.sqrt(a11 * a22)
    over = np.abs(a12) > bound * (1 + CORRELATION_SLACK) + 1e-300
    if over.any():
        idx = _first(over)
        raise ValueError(
            f"q12 must satisfy q12**2 <= q11*q22 (a PSD covariance), got q12={float(a12[idx])!r} with "
            f"q11={float(a11[idx])!r}, q22={float(a22[idx])!r}{_at(idx)}"
        )
    return a11.copy(), np.clip(a12, -bound, bound), a22.copy()


def _first(mask):
    """Index of the first True entry (``()`` for a 0-d mask)."""
    mask = np.asarray(mask)
    if mask.ndim == 0:
        return ()
    idx = tuple(int(i[0]) for i in np.nonzero(mask))
    return idx if len(idx) != 1 else idx[0]


def _at(idx) -> str:
    return "" if idx == () else f" at index {idx}"


def dual_kernel_numeric(act, q11, q12, q22, *, derivative: bool = False, deg: int | None = None,
                        method: str = "polar", return_error: bool = False):
    """E[phi(u) phi(v)] for (u, v) ~ N(0, [[q11, q12], [q12, q22]]), vectorized in float64.

    Parameters
    ----------
    act : str or Activation
        Any registered activation.
    q11, q12, q22 : array_like
        Broadcastable arrays of variances and covariances.
    derivative : bool
        Use phi' (almost-everywhere derivative): the NTK factor.
    deg : int, optional
        Quadrature size when there is no closed form: nodes per dimension (default 60 for
        ``"polar"``, 48 for ``"hermite"``). Ignored when a closed form exists.
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
    ValueError
        Invalid covariance (see :func:`check_covariance`) or ``deg < 2``.
    OverflowError
        The kernel exceeds float64 (e.g. ``exp`` at large variance); use the mpmath backend
        of :func:`~symscale.dual_kernel`.
    FloatingPointError
        The activation evaluator produced NaN (never returned silently).
    """
    act = as_activation(act)
    a11, a12, a22 = check_covariance(q11, q12, q22)
    if deg is not None and (isinstance(deg, bool) or not isinstance(deg, int) or deg < 8):
        raise ValueError(f"deg must be an integer >= 8, got {deg!r}")
    if method not in _DEFAULT_DEG:
        raise ValueError(f"method must be 'polar' or 'hermite', got {method!r}")
    target = act.derivative() if derivative else act
    try:
        formula = _dual_kernel(act, bool(derivative))
    except NoClosedFormError:
        formula = None
    with np.errstate(all="ignore"):
        if formula is not None:
            value = np.asarray(formula.numeric("numpy")(a11, a12, a22), dtype=float)
            value = np.broadcast_to(value, a11.shape).copy()
            err = 16 * np.finfo(float).eps * np.abs(value)
        else:
            rule = _polar if method == "polar" else _hermite
            deg = deg or _DEFAULT_DEG[method]
            value = rule(target, a11, a12, a22, deg)
            err = np.abs(value - rule(target, a11, a12, a22, (2 * deg) // 3)) \
                if return_error else None
    _check_finite(value, target, a11, a12, a22)
    if value.ndim == 0:
        value = float(value)
        err = None if err is None else float(err)
    return (value, err) if return_error else value


def _check_finite(value, act: Activation, a11, a12, a22):
    bad = ~np.isfinite(value)
    if not bad.any():
        return
    idx = _first(bad)
    where = f"q11={float(a11[idx])!r}, q12={float(a12[idx])!r}, q22={float(a22[idx])!r}"
    if np.isnan(value[idx]):
        raise FloatingPointError(f"dual kernel of {act.label} is NaN at {where}")
    raise OverflowError(
        f"dual kernel of {act.label} overflows float64 at {where}; evaluate "
        "symscale.dual_kernel(act).numeric('mpmath') instead"
    )


def _ordered(a11, a12, a22):
    """Flatten, put the larger variance first; return (s1, s2, beta) with beta = acos(rho).

    beta is atan2(sqrt(max(q11 q22 - q12^2, 0)), q12), as in the closed forms: arccos of a
    rounded ratio would turn a correlation of 1 - 1e-16 into an angle of 1e-8.
    """
    big, small = np.maximum(a11, a22).ravel(), np.minimum(a11, a22).ravel()
    c = a12.ravel()
    gap = np.sqrt(np.maximum(big * small - c * c, 0.0))
    return np.sqrt(big), np.sqrt(small), np.arctan2(gap, c)


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


@lru_cache(maxsize=16)
def _polar_rules(deg):
    """tanh-sinh nodes on (-1, 1) and exp-sinh radial nodes with the weight R exp(-R^2/2)."""
    m = deg // 2
    s = np.arange(-m, m + 1) * (3.2 / m)
    u = np.pi / 2 * np.sinh(s)
    x = np.tanh(u)
    wx = (3.2 / m) * np.pi / 2 * np.cosh(s) / np.cosh(u) ** 2
    # radius from 1e-8 (the mass below is ~1e-16) to 14 (beyond the Gaussian tail even for
    # activations that grow like exp(x) at unit variance)
    smin, smax = np.arcsinh(np.log(1e-8) * 2 / np.pi), np.arcsinh(np.log(14.0) * 2 / np.pi)
    h = (smax - smin) / deg
    t = smin + h * np.arange(deg + 1)
    R = np.exp(np.pi / 2 * np.sinh(t))
    wr = h * np.pi / 2 * np.cosh(t) * R * R * np.exp(-R * R / 2)
    return x, wx, R, wr


def _polar(act: Activation, a11, a12, a22, deg):
    s1, s2, beta = _ordered(a11, a12, a22)
    return _polar_pair(act, act, s1, s2, beta, deg).reshape(a11.shape)


def _polar_pair(f: Activation, g: Activation, s1, s2, beta, deg):
    """E[f(u) g(v)] for flat arrays of standard deviations s1, s2 and angles beta = acos(rho)."""
    x, wx, R, wr = _polar_rules(deg)
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
    """
    from .moments import gaussian_moment_numeric

    phi, psi = as_activation(phi), as_activation(psi)
    if phi == psi:
        return dual_kernel_numeric(phi, q11, q12, q22, deg=deg)
    a11, a12, a22 = check_covariance(q11, q12, q22)
    with np.errstate(all="ignore"):
        if _is_identity(phi) and psi.is_continuous:
            value = a12 * np.asarray(gaussian_moment_numeric(psi.derivative(), 0.0, a22))
        elif _is_identity(psi) and phi.is_continuous:
            value = a12 * np.asarray(gaussian_moment_numeric(phi.derivative(), 0.0, a11))
        else:
            gap = np.sqrt(np.maximum(a11 * a22 - a12 * a12, 0.0))
            value = _polar_pair(phi, psi, np.sqrt(a11).ravel(), np.sqrt(a22).ravel(),
                                np.arctan2(gap, a12).ravel(), deg or _DEFAULT_DEG["polar"])
            value = value.reshape(a11.shape)
    value = np.asarray(value, dtype=float)
    _check_finite(value, phi, a11, a12, a22)
    return float(value) if value.ndim == 0 else value


def _is_identity(act: Activation) -> bool:
    from ..activations import X

    return act.expr == X


def check_dual_kernel(act, *, derivative: bool = False, points=None, n_points: int = 3,
                      n_samples: int = 200_000, seed: int = 0, n_sigma: float = 5.0,
                      **quadrature) -> CheckReport:
    """Sampling check of :func:`dual_kernel_numeric` for any activation.

    With a closed form this is ``dual_kernel(act, derivative).check(...)``; without one it
    compares the quadrature value with the Monte Carlo mean of phi(u) phi(v) at each point.

    Parameters
    ----------
    act : str or Activation
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
    act = as_activation(act)
    try:
        formula = _dual_kernel(act, bool(derivative))
    except NoClosedFormError:
        formula = None
    if formula is not None:
        return formula.check(points, n_points=n_points, n_samples=n_samples, seed=seed,
                             n_sigma=n_sigma)
    target = act.derivative() if derivative else act
    rng = np.random.default_rng(seed)
    if points is None:
        points = [random_psd_point(rng) for _ in range(n_points)]
    sampler = pair_sampler(target)
    rows = []
    for p in points:
        p = {k: float(p[k]) for k in ("q11", "q12", "q22")}
        value = dual_kernel_numeric(act, p["q11"], p["q12"], p["q22"], derivative=derivative,
                                    **quadrature)
        mean, se = sample_mean(lambda n, r: sampler(p, n, r), n_samples, rng)
        rows.append(CheckRow.make(p, value, mean, se, n_samples, n_sigma))
    return CheckReport(f"V[{target.label}] (quadrature)", tuple(rows), n_sigma)
