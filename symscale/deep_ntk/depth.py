r"""The normalized NTK at large depth: recursion, depth limit and the :math:`\ln L/L` correction.

On the unit sphere (NTK parameterization, no bias, weight variance :math:`1/\mathbb E[\phi(G)^2]`,
i.e. 2 for ReLU) the correlation of two inputs follows :math:`\rho_h=\kappa_1(\rho_{h-1})` with
:math:`\kappa_1` the normalized dual kernel, and

.. math:: \Theta^{(h)} = \Theta^{(h-1)}\kappa_0(\rho_{h-1}) + \rho_h,\quad \Theta^{(0)}=\rho_0,
          \qquad \bar\Theta^{(L)} = \Theta^{(L)}/(L+1),

with :math:`\kappa_0` the derivative kernel. Near :math:`\rho=1` the subtraction
:math:`1-\rho` loses every digit in double precision, so :func:`normalized_ntk` iterates the
*angle* :math:`\theta_h=\arccos\rho_h` with a cancellation-free update (float64, vectorized) or
runs in mpmath at a chosen precision.

:func:`depth_limit` derives the limit from the activation: with
:math:`\kappa_1(\cos\theta)=1-\theta^2/2+\beta\theta^3+\dots` and
:math:`\kappa_0(\cos\theta)=1-\gamma\theta+\dots` (sympy series of the registry's dual kernels),
the angle obeys :math:`1/\theta_{h+1}=1/\theta_h+\beta+\varepsilon\theta_h+\dots`, so
:math:`\theta_h\approx 1/(\beta h+(\varepsilon/\beta)\ln h)`, the products
:math:`\prod\kappa_0\approx(h/L)^a` with :math:`a=\gamma/\beta`, and

.. math:: \bar\Theta^{(L)} = \frac{1}{1+a} + \frac{\varepsilon}{\beta^2(1+a)}\,\frac{\ln L}{L}
          + O(1/L).

For ReLU :math:`\beta=1/(3\pi)`, :math:`\gamma=1/\pi`, :math:`\varepsilon=1/(6\pi^2)`: the limit is
:math:`1/4` and the correction :math:`\tfrac38\ln L/L` — not a pure :math:`O(1/L)`.

Examples
--------
>>> from symscale.deep_ntk import normalized_ntk, depth_limit
>>> round(float(normalized_ntk(0.5, 10)), 10)
0.3734865024
>>> lim = depth_limit("relu")
>>> lim.value, lim.log_coefficient
(1/4, 3/8)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import mpmath
import numpy as np
import sympy as sp

from .. import fused
from .._deprecation import renamed_arguments
from ..activations import as_activation
from ..errors import NoClosedFormError, PrecisionWarning
from ..families import TwoSlope
from ..formula import Formula
from ..validation import check_bool, check_int, check_real
from ..display import ResultDisplay

__all__ = ["normalized_ntk", "depth_limit", "DepthLimit", "PrecisionWarning",
           "angle_asymptotics", "correction_fit", "CorrectionFit", "phase_limit", "PhaseLimit"]

_EPS = np.finfo(float).eps
# layer variances the (q, rho) recursion accepts: q11 q22 must not overflow in the kernels
_Q_MIN, _Q_MAX = float(np.finfo(float).tiny), 1e150


def _check_depth(depth, name: str = "depth") -> int:
    return check_int(depth, name, low=1)


def _check_rho(rho0) -> np.ndarray:
    raw = np.asarray(rho0)
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"rho0 must be a real number or an array of them, got {rho0!r} "
                        f"(dtype {raw.dtype})")
    r = raw.astype(float)
    if not np.all(np.isfinite(r)):
        raise ValueError(f"rho0 must be finite, got {rho0!r}")
    if np.any(np.abs(r) > 1):
        bad = r[np.abs(r) > 1].flat[0]
        raise ValueError(f"rho0 must lie in [-1, 1] (inputs on the unit sphere); got {bad!r}")
    return r


def _two_slope(act):
    act = as_activation(act)
    f = act.family
    if not (isinstance(f, TwoSlope) and all(sp.sympify(c).is_number for c in (f.a, f.b))):
        return act, None
    return act, (float(f.a), float(f.b))


# ---------------------------------------------------------------------------------------------
# float64: the angle recursion of the two-slope family


def _g_series(theta):
    """sin t - t cos t = t^3/3 - t^5/30 + ... (the direct form cancels for small t)."""
    t2 = theta * theta
    return theta * t2 * (1 / 3 - t2 * (1 / 30 - t2 * (1 / 840 - t2 * (1 / 45360 - t2 / 3991680))))


def _g(theta, half_sin, cos):
    if theta.max() < 0.1:
        return _g_series(theta)
    direct = 2 * half_sin * np.sqrt(1 - half_sin * half_sin) - theta * cos
    if theta.min() >= 0.1:
        return direct
    return np.where(theta < 0.1, _g_series(theta), direct)


def _step(theta, half_sin, w):
    """One layer of the two-slope recursion on the angle.

    The state is the angle and ``sin(theta/2)``: ``1 - cos(theta) = 2 sin^2(theta/2)`` has no
    cancellation, and the next ``sin(theta'/2) = sqrt((1 - rho')/2)`` needs no sine at all, so
    a layer costs one ``arcsin``. ``kappa_1(cos t) = cos t + (w/pi)(sin t - t cos t)`` and
    ``kappa_0(cos t) = 1 - w t / pi`` with ``w = (a - b)^2/(a^2 + b^2)`` (normalized kernels).
    """
    one_minus_c = 2 * half_sin * half_sin
    one_minus = one_minus_c - (w / math.pi) * _g(theta, half_sin, 1 - one_minus_c)
    np.clip(one_minus, 0.0, 2.0, out=one_minus)
    k0 = 1.0 - (w / math.pi) * theta
    half_sin = np.sqrt(0.5 * one_minus)
    theta = 2 * np.arcsin(half_sin)
    return theta, half_sin, one_minus, k0


def _far_step(theta, half_sin, half_cos, w):
    """:func:`_step` for angles beyond pi/2 (rho < 0), carrying ``cos(theta/2)`` as well.

    Near theta = pi, ``sin(theta/2)`` rounds to 1 and keeps no digit of ``d = pi - theta``
    (rho0 = -1 + 1e-16 has d = 1.5e-8, an O(1e-8) change of the NTK), while
    ``sin(d/2) = cos(theta/2) = sqrt((1 + rho)/2)`` keeps them all. With
    ``sin t - t cos t = pi cos d + g(d)`` and ``1 - cos d = 2 cos^2(theta/2)``,

        1 - kappa_1 = (2 - w) + (w - 1)(1 - cos d) - (w/pi) g(d),
        1 + kappa_1 = w + (1 - w)(1 - cos d) + (w/pi) g(d),

    where ``g(d) = O(d^3)`` is the small-angle function of :func:`_g`: no cancellation for
    0 <= w <= 2 (ReLU w = 1, |x| w = 2 maps rho = -1 + delta to 1 - O(delta)). Returns the new
    angle, both half-angle values, ``1 - rho'`` and ``kappa_0``.
    """
    one_cos = 2 * half_cos * half_cos
    d = 2 * np.arcsin(half_cos)
    gd = (w / math.pi) * _g(d, half_cos, 1 - one_cos)
    one_minus = np.clip((2 - w) + (w - 1) * one_cos - gd, 0.0, 2.0)
    one_plus = np.clip(w + (1 - w) * one_cos + gd, 0.0, 2.0)
    k0 = 1.0 - (w / math.pi) * theta
    half_sin, half_cos = np.sqrt(0.5 * one_minus), np.sqrt(0.5 * one_plus)
    # the arcsin of the smaller half-angle value: 2 arcsin(sin(t/2)) near pi loses pi - t
    half = np.arcsin(np.minimum(half_sin, half_cos))
    theta = np.where(half_sin <= half_cos, 2 * half, math.pi - 2 * half)
    return theta, half_sin, half_cos, one_minus, k0


def _initial_angle(r):
    """theta_0, sin(theta_0/2), and (indices, cos(theta_0/2)) of the angles beyond pi/2.

    ``1 - r`` is exact near r = 1 and ``1 + r`` near r = -1 (Sterbenz), so the angle comes
    from ``sin(theta/2)`` for r >= 0 and ``pi - 2 arcsin(cos(theta/2))`` for r < 0; r = -1
    gives theta = pi exactly either way.
    """
    half_sin = np.sqrt(np.clip((1 - r) / 2, 0, 1))
    theta = 2 * np.arcsin(half_sin)
    far = np.flatnonzero(r < 0)
    half_cos = np.sqrt(np.clip((1 + r[far]) / 2, 0, 1))
    theta[far] = math.pi - 2 * np.arcsin(half_cos)
    return theta, half_sin, far, half_cos


# series of sin t - t cos t in t^2 after the leading t^3/3, for the in-place small-angle path
_G_COEFFS = (1 / 3, -1 / 30, 1 / 840, -1 / 45360, 1 / 3991680)


def _series_terms(theta_max: float, c: float) -> int:
    """Terms of the g-series needed at this largest angle: the first dropped term must change
    1 - kappa_1 ~ theta^2/2 by less than 1e-17 relative (c theta^3 coef theta^(2m) / theta^2)."""
    for m in range(1, len(_G_COEFFS)):
        if 2 * c * theta_max ** (2 * m + 1) * abs(_G_COEFFS[m]) < 1e-17:
            return m
    return len(_G_COEFFS)


def _float_ntk_path(r, depths, a, b, half_sin=None, half_cos=None):
    """Yield ``(Theta-bar, theta)`` at each of the increasing ``depths``, in one pass: the
    value at depth L is bit for bit that of a separate run to L (the same operations).

    The recursion with preallocated buffers.

    At 10^4 values a layer is ~15 ufunc calls and memory-bound, so the small-angle path keeps
    ``S = sin^2(theta/2) = (1 - rho)/2`` itself as the state (the next ``S`` is ``S`` minus the
    series term: no square and no halving) and folds the constants into the series. Angles
    beyond pi/2 (rho < 0, for ReLU the first layer only) also carry ``cos(theta/2)``
    (:func:`_far_step`), which keeps the digits of ``pi - theta`` near rho = -1.

    ``half_sin``, if given, is ``sin(theta_0/2)`` computed by the caller without cancellation
    (from ``|x - x'|`` for inputs on the sphere); ``r`` is then ignored. ``half_sin = 0`` (the
    same input twice) keeps ``theta = 0`` and ``Theta-bar = 1`` exactly at every depth.
    ``half_cos``, optional with it, is ``cos(theta_0/2)`` (from ``|x + x'|``), used where
    ``half_sin > half_cos``.
    """
    w = (a - b) ** 2 / (a * a + b * b)
    c = w / math.pi
    shape = np.shape(r if half_sin is None else half_sin)
    if half_sin is None:
        r = np.ravel(r)  # flat: the angles beyond pi/2 are indexed
        theta, half_sin, far, half_cos = _initial_angle(r)
    else:
        half_sin = np.ravel(half_sin)  # flat: the angles beyond pi/2 are indexed
        half_cos = None if half_cos is None else np.ravel(half_cos)
        theta = 2 * np.arcsin(half_sin)
        r = 1.0 - 2.0 * half_sin * half_sin
        if half_cos is None:
            far = np.empty(0, dtype=np.intp)
        else:
            far = np.flatnonzero(half_sin > half_cos)
            half_cos = half_cos[far]
            theta[far] = math.pi - 2 * np.arcsin(half_cos)
    ntk = r.copy()
    t2, acc = np.empty_like(r), np.empty_like(r)
    S = fast = None
    # (1 - kappa_1)/2 = S - (c/2) t^3 (1/3 - t^2/30 + ...): Horner in t^2
    coeffs = 0.5 * c * np.array(_G_COEFFS)
    padded = (*coeffs, c)  # the compiled layer's arguments: always five coefficients
    wanted = iter(depths)
    target = next(wanted)
    halved = False  # whether theta holds half angles (the compiled layer doubles as it reads)
    for h in range(depths[-1] + 1):
        if h == target:  # h layers done
            yield (ntk / (h + 1)).reshape(shape), (2.0 * theta if halved else
                                                    theta.copy()).reshape(shape)
            target = next(wanted, None)
            if target is None:
                return
        if S is None:
            if theta.max() >= 0.1:
                if far.size:
                    state = (theta[far], half_sin[far], half_cos)
                theta, half_sin, om, k0 = _step(theta, half_sin, w)
                if far.size:
                    tf, sf, half_cos, omf, k0f = _far_step(*state, w)
                    theta[far], half_sin[far], om[far], k0[far] = tf, sf, omf, k0f
                    beyond = sf > half_cos  # angles only shrink: the set only shrinks
                    far, half_cos = far[beyond], half_cos[beyond]
                ntk *= k0
                ntk += 1.0 - om
                continue
            S = half_sin * half_sin
            fast = fused.kernel("small_angle_layer")
        if h % 64 == 0:  # the angles only shrink: fewer series terms as the depth grows
            terms = _series_terms(float(theta.max()) * (2.0 if halved else 1.0), c)
            coeffs = 0.5 * c * np.array(_G_COEFFS[:terms])
            fast = fused.kernel("small_angle_layer")  # compiled once the process has repaid it
            padded = (*coeffs, *[0.0] * (len(_G_COEFFS) - terms), c)
        if fast is not None:  # the same operations in one compiled loop
            fast(theta, S, ntk, *padded, 2.0 if halved else 1.0)
            np.arcsin(theta, out=theta)
            halved = True
            continue
        if halved:
            theta *= 2.0
            halved = False
        with fused.charged():
            _small_angle_numpy(theta, S, ntk, t2, acc, coeffs, c)
        np.arcsin(theta, out=theta)
        theta *= 2.0


def _small_angle_numpy(theta, S, ntk, t2, acc, coeffs, c):
    """One small-angle layer of :func:`_float_ntk_path` in numpy, in place: ``S`` less the
    series term, the NTK update, and ``theta <- sqrt(S)`` (the caller takes ``2 arcsin``)."""
    terms = len(coeffs)
    np.multiply(theta, theta, out=t2)
    if terms == 1:
        np.multiply(t2, coeffs[0], out=acc)
    else:
        np.multiply(t2, coeffs[-1], out=acc)
        for coef in coeffs[-2:0:-1]:
            acc += coef
            acc *= t2
        acc += coeffs[0]
        acc *= t2
    acc *= theta
    S -= acc
    # Theta <- Theta (1 - c t) + rho' with rho' = 1 - 2 S'
    np.multiply(theta, -c, out=acc)
    acc += 1.0
    ntk *= acc
    ntk += 1.0
    ntk -= S
    ntk -= S
    np.sqrt(S, out=theta)


def _float_error_bound(depth, value):
    # each layer adds a few roundings of relative size eps to Theta^(h), which the later
    # factors kappa_0 <= 1 do not amplify: |error of Theta-bar| <~ 8 L eps |Theta-bar|
    return 8.0 * depth * _EPS * np.abs(value) + 4 * _EPS


# ---------------------------------------------------------------------------------------------
# mpmath


def _mp_ntk(r, depth, a, b, dps):
    with mpmath.workdps(dps + 20):  # guard digits for sin t - t cos t at small t
        w = mpmath.mpf(a - b) ** 2 / (mpmath.mpf(a) ** 2 + mpmath.mpf(b) ** 2)
        pi = mpmath.pi
        rho = mpmath.mpf(r)
        theta = mpmath.acos(rho)
        ntk = rho
        for _ in range(depth):
            s, c = mpmath.sin(theta), mpmath.cos(theta)
            one_minus = 2 * mpmath.sin(theta / 2) ** 2 - w * (s - theta * c) / pi
            k0 = 1 - w * theta / pi
            theta = 2 * mpmath.asin(mpmath.sqrt(one_minus / 2))
            ntk = ntk * k0 + (1 - one_minus)
        return +(ntk / (depth + 1))


# ---------------------------------------------------------------------------------------------
# general activations: (q, rho) recursion with the registry's numeric dual kernels


def _general_ntk(act, r, depths, weight_var, bias_var):
    """Theta_12 / Theta_11 of the (q, rho) recursion at each of the increasing ``depths`` (a
    list, from one pass), with Theta_11 kept as a log-scale.

    On the sphere every input has the same variance q, so q is a scalar. Theta_11 grows like
    chi_1^L in the chaotic phase (overflow beyond depth ~3000 for erf), so the recursion
    carries u = Theta_12 / Theta_11 and log Theta_11 instead: nothing overflows, and the ratio
    that is returned is never inf/inf.
    """
    from ..kernels.numeric import dual_kernel_numeric

    if weight_var is None:
        second = float(dual_kernel_numeric(act, 1.0, 1.0, 1.0))
        weight_var = 1.0 / second
    q, s12, u12, log_theta11 = 1.0, r.copy(), r.copy(), 0.0
    q_seen, out, depth = None, [], depths[-1]
    for layer in range(1, depth + 1):
        if q != q_seen:  # q reaches its fixed point in float64 within a few layers: reuse
            v11 = float(dual_kernel_numeric(act, q, q, q))
            d11 = float(dual_kernel_numeric(act, q, q, q, derivative=True))
            q_seen = q
        q_new = weight_var * v11 + bias_var
        if not _Q_MIN <= q_new <= _Q_MAX:
            kind = "underflows" if q_new < _Q_MIN else "overflows"
            raise (OverflowError if kind == "overflows" else FloatingPointError)(
                f"the layer variance {kind} float64 at layer {layer} (weight_var={weight_var!r},"
                f" bias_var={bias_var!r}); the normalized NTK of {act.label} cannot be resolved"
                f" at depth {depth}: choose weight_var closer to 1/E[phi(G)^2]")
        v12 = dual_kernel_numeric(act, q, s12, q)
        d12 = dual_kernel_numeric(act, q, s12, q, derivative=True)
        s_new = weight_var * v12 + bias_var
        inv = math.exp(-log_theta11)  # Theta_11 >= q > tiny: at most ~1/tiny
        # Theta' = w V'(.) Theta + Sigma', divided through by the old Theta_11
        a11 = weight_var * d11 + q_new * inv
        u12 = (u12 * (weight_var * d12) + s_new * inv) / a11
        log_theta11 += math.log(a11)
        q, s12 = q_new, s_new
        if layer == depths[len(out)]:
            out.append(u12)  # a fresh array each layer: no copy needed
    return out


@renamed_arguments(act="activation")
def normalized_ntk(rho0, depth, activation="relu", dps: int | None = None, *,
                   weight_var: float | None = None, bias_var: float = 0.0,
                   return_error: bool = False):
    r"""Normalized NTK :math:`\bar\Theta^{(L)}` of two unit inputs with correlation ``rho0``.

    Parameters
    ----------
    rho0 : float or array_like
        Input correlation(s) :math:`x^\top x'` in [-1, 1] (inputs on the unit sphere).
    depth : int or sequence of int
        Number of hidden layers :math:`L \ge 1`, or several: then the values at every depth
        (in the order given), equal bit for bit to separate calls', from one pass of the
        recursion to the deepest (the mpmath path, ``dps``, runs each depth on its own).
    activation : str or Activation
        ReLU-type (two-slope) activations use the exact angle recursion; any other registered
        activation runs the :math:`(q,\rho)` recursion with numeric dual kernels (float64 only).
    dps : int, optional
        Decimal digits for an mpmath evaluation (two-slope activations, ``bias_var = 0``);
        default float64.
    weight_var, bias_var : float
        Weight and bias variance of the :math:`(q,\rho)` recursion: default
        ``1/E[phi(G)^2]`` and 0. A two-slope activation without bias does not depend on
        ``weight_var`` (positive homogeneity); with ``bias_var > 0`` it runs the
        :math:`(q,\rho)` recursion too.
    return_error : bool
        float64 angle recursion (two-slope, no bias): also return a bound on the absolute
        rounding error; ValueError for the other paths.

    Returns
    -------
    ndarray (float64), or mpmath numbers (an object array for array input) when ``dps`` is set.
        The shape of ``rho0``, preceded by one axis over the depths when ``depth`` is a
        sequence (the error bound of ``return_error`` likewise).

    Warns
    -----
    PrecisionWarning
        float64 can no longer resolve the correction :math:`\bar\Theta - \bar\Theta^{(\infty)}`
        to 0.1 % (happens only far beyond depth :math:`10^6`), or ``|rho0|`` is within
        :math:`10^{-12}` of 1 where the input itself carries too few digits of the angle.

    Raises
    ------
    TypeError
        A non-integer ``depth``/``dps``, non-numeric ``rho0``, bool ``weight_var``.
    ValueError
        ``depth < 1`` (any of them), an empty or nested sequence of depths, ``|rho0| > 1`` or
        non-finite, ``dps < 5``, ``weight_var <= 0``, ``bias_var < 0``.
    OverflowError, FloatingPointError
        ``(q, rho)`` recursion: the layer variance leaves float64 (``weight_var`` far from
        ``1/E[phi(G)^2]``, no fixed point); the message names ``weight_var`` and the layer.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(normalized_ntk([0.0, 0.5], 100), 7)
    array([0.2724963, 0.2776677])
    >>> print(mpmath.nstr(normalized_ntk(0.5, 100, dps=30), 12))
    0.277667721912
    >>> np.round(normalized_ntk([0.0, 0.5], [10, 100]), 7)  # rows: depths
    array([[0.316307 , 0.3734865],
           [0.2724963, 0.2776677]])
    """
    depths = _check_depths(depth)
    return _normalized_ntk(rho0, _check_depth(depth) if depths is None else depths,
                           activation, dps, weight_var, bias_var, return_error)


def _check_depths(depth):
    """The depths of a sequence, validated; None for a single depth."""
    if isinstance(depth, (str, bytes)) or not np.iterable(depth):
        return None
    arr = np.asarray(depth, dtype=object)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"depth must be an integer >= 1 or a non-empty flat sequence of them, "
                         f"got {depth!r}")
    return tuple(_check_depth(d, "depth") for d in arr)


def _normalized_ntk(rho0, depth, activation, dps, weight_var, bias_var, return_error):
    """:func:`normalized_ntk` for one depth (an int) or several (a tuple: a leading axis)."""
    several = isinstance(depth, tuple)
    order = sorted(set(depth)) if several else [depth]
    r = _check_rho(rho0)
    if weight_var is not None:
        weight_var = check_real(weight_var, "weight_var", low=0.0, low_open=True)
    bias_var = check_real(bias_var, "bias_var", low=0.0)
    return_error = check_bool(return_error, "return_error")
    activation, slopes = _two_slope(activation)
    if bias_var > 0:
        slopes = None  # the angle recursion is that of the bias-free network
    if dps is not None:
        if slopes is None:
            raise ValueError(f"dps is available for ReLU-type activations without bias only, "
                             f"not {activation.label} with bias_var={bias_var!r}")
        dps = check_int(dps, "dps", low=5)
        per = {L: [_mp_ntk(float(x), L, *slopes, int(dps)) for x in np.atleast_1d(r).ravel()]
               for L in order}
        out = _arrange(per, depth, r.shape, object)
        return out[()] if out.ndim == 0 else out
    if slopes is None:
        if return_error:  # no rounding bound is known for the quadrature recursion
            raise ValueError(f"return_error=True needs the angle recursion of a ReLU-type "
                             f"activation without bias, not {activation.label} with "
                             f"bias_var={bias_var!r}")
        flat = np.atleast_1d(r).astype(float)
        per = dict(zip(order, _general_ntk(activation, flat, order, weight_var, bias_var)))
        return _arrange(per, depth, r.shape)
    path = _float_ntk_path(np.atleast_1d(r).astype(float).ravel(), tuple(order), *slopes)
    per = {L: v for L, (v, _) in zip(order, path)}
    errs = {L: _float_error_bound(L, v) for L, v in per.items()}
    limit = float(_limit_value(*slopes))
    for L in order:
        if np.any(errs[L] > 1e-3 * np.abs(per[L] - limit)):
            warnings.warn(f"float64 rounding (bound {errs[L].max():.1e}) exceeds 0.1% of the "
                          f"distance to the depth limit at depth {L}; use dps=...",
                          PrecisionWarning, stacklevel=4)  # the caller of normalized_ntk
            break
    if np.any((np.abs(r) > 1 - 1e-12) & (np.abs(r) < 1)):
        warnings.warn("|rho0| is within 1e-12 of 1: the float input fixes the angle to only a "
                      "few digits; pass the correlation at higher precision with dps=...",
                      PrecisionWarning, stacklevel=4)
    value = _arrange(per, depth, r.shape)
    value = value if several else value[()]
    return (value, _arrange(errs, depth, r.shape)) if return_error else value


def _arrange(per, depth, shape, dtype=None) -> np.ndarray:
    """The values ``per[L]`` as :func:`normalized_ntk` returns them: ``shape`` (that of rho0),
    after an axis over the depths when ``depth`` is a sequence (a tuple)."""
    if isinstance(depth, tuple):
        return np.array([per[L] for L in depth], dtype=dtype).reshape((len(depth),) + shape)
    return np.array(per[depth], dtype=dtype).reshape(shape)


# ---------------------------------------------------------------------------------------------
# the depth limit, derived


_t = sp.Symbol("theta", positive=True)


@dataclass(frozen=True)
class DepthLimit(ResultDisplay):
    """The derived depth limit of the normalized NTK and its leading correction.

    Attributes
    ----------
    value : sympy.Expr
        :math:`\\lim_L \\bar\\Theta^{(L)}(x, x')`, :math:`x\\ne x'`.
    log_coefficient : sympy.Expr
        :math:`A` in :math:`\\bar\\Theta^{(L)} = \\text{value} + (A\\ln L + c)/L + o(1/L)`.
    beta, gamma, epsilon : sympy.Expr
        Series coefficients (module docstring); ``a = gamma / beta``.
    formula : Formula
        The limit as a Formula in the activation's parameters (a constant for ReLU).
    """

    value: sp.Expr
    log_coefficient: sp.Expr
    beta: sp.Expr
    gamma: sp.Expr
    epsilon: sp.Expr
    exponent: sp.Expr
    formula: Formula
    rate_formula: Formula


def _normalized_kernels(act):
    """kappa_1(cos t) and kappa_0(cos t) of the registry's dual kernels, normalized at t = 0."""
    from ..kernels.dual import dual_kernel

    V = dual_kernel(act)
    Vd = dual_kernel(act, derivative=True)
    q11, q12, q22 = V.symbols
    at = {q11: 1, q22: 1, q12: sp.cos(_t)}
    norm = sp.simplify(V.expr.subs({q11: 1, q22: 1, q12: 1}))
    k1 = sp.simplify(V.expr.subs(at) / norm)
    k0 = sp.simplify(Vd.expr.subs(dict(zip(Vd.symbols, (1, sp.cos(_t), 1)))) / norm)
    # the angle lies in [0, pi]: there acos(cos t) = t and |sin t| = sin t, which sympy's
    # series would otherwise expand through their branch structure (3.2 s against 0.26 s)
    on = {sp.acos(sp.cos(_t)): _t, sp.Abs(sp.sin(_t)): sp.sin(_t),
          sp.sqrt(1 - sp.cos(_t) ** 2): sp.sin(_t)}
    return k1.subs(on), k0.subs(on)


def _series_coefficients(k1, k0):
    s1 = sp.series(k1, _t, 0, 5).removeO()
    s0 = sp.series(k0, _t, 0, 3).removeO()
    c2, c3, c4 = (sp.simplify(s1.coeff(_t, k)) for k in (2, 3, 4))
    if sp.simplify(s1.coeff(_t, 0) - 1) != 0 or sp.simplify(s1.coeff(_t, 1)) != 0 \
            or sp.simplify(c2 + sp.Rational(1, 2)) != 0:
        raise ValueError("the normalized kernel is not 1 - theta^2/2 + O(theta^3) at theta = 0")
    # angle map: cos(t') = k1(cos t)  =>  t' = t - beta t^2 - delta t^3 + ...
    tp = _t + sp.Symbol("b1") * _t**2 + sp.Symbol("b2") * _t**3
    eq = sp.expand(sp.series(sp.cos(tp), _t, 0, 5).removeO() - s1)
    sol = sp.solve([eq.coeff(_t, 3), eq.coeff(_t, 4)], [sp.Symbol("b1"), sp.Symbol("b2")],
                   dict=True)[0]
    beta = sp.simplify(-sol[sp.Symbol("b1")])
    delta = sp.simplify(-sol[sp.Symbol("b2")])
    gamma = sp.simplify(-s0.coeff(_t, 1))
    # 1/t' = 1/t + beta + (beta^2 + delta) t + ...
    epsilon = sp.simplify(beta**2 + delta)
    return beta, gamma, epsilon


def _limit_value(a, b):
    w = (a - b) ** 2 / (a * a + b * b)
    # beta = w/(3 pi), gamma = w/pi for the two-slope family: a = 3 whatever the slopes, as
    # long as they differ; equal slopes (linear) keep the correlation: no decay
    return 0.25 if w > 0 else float("nan")


@renamed_arguments(act="activation")
def depth_limit(activation="relu") -> DepthLimit:
    r"""Derive :math:`\lim_{L\to\infty}\bar\Theta^{(L)}` and its :math:`\ln L/L` correction.

    Works for activations whose dual kernel has a closed form in the registry and whose
    normalized correlation map has :math:`\rho=1` as its fixed point approached algebraically
    (the ReLU family). The derivation: series of the normalized kernels in the angle, the angle
    recursion solved to second order, the product of derivative kernels summed (module
    docstring).

    Raises
    ------
    ValueError
        The activation's kernels have no closed form, or the fixed point is not of this type
        (smooth activations: use :func:`normalized_ntk` numerically).

    Examples
    --------
    >>> lim = depth_limit("relu")
    >>> lim.beta, lim.gamma, lim.epsilon, lim.exponent
    (1/(3*pi), 1/pi, 1/(6*pi**2), 3)
    """
    return _depth_limit(as_activation(activation))


@lru_cache(maxsize=32)  # a few seconds of sympy series; DepthLimit and its Formulas are frozen
def _depth_limit(activation) -> DepthLimit:
    try:
        k1, k0 = _normalized_kernels(activation)
        beta, gamma, epsilon = _series_coefficients(k1, k0)
    except Exception as exc:  # no closed form, or a smooth kernel (no theta^3 term)
        raise ValueError(f"depth_limit needs a ReLU-type activation with closed-form kernels; "
                         f"{activation.label}: {exc}") from exc
    if sp.simplify(beta) == 0:
        raise ValueError(f"{activation.label}: the angle map has no theta^2 term (smooth or linear "
                         "activation); the limit is not of the algebraic ReLU type")
    a = sp.simplify(gamma / beta)
    value = sp.nsimplify(sp.simplify(1 / (1 + a)))
    logc = sp.simplify(epsilon / (beta**2 * (1 + a)))
    params = [s for s in sorted(activation.params, key=str)] if activation.params else []
    syms = [sp.Symbol(str(p)) for p in params]
    f = Formula(value, syms, name="ntk_depth_limit", lhs=r"\lim_{L\to\infty}\bar\Theta^{(L)}",
                description=f"depth limit of the normalized NTK off the diagonal, {activation.label}")
    L = sp.Symbol("L", positive=True)
    rate = Formula(value + logc * sp.log(L) / L, [L], name="ntk_depth_asymptotics",
                   lhs=r"\bar\Theta^{(L)}",
                   description="leading large-depth behaviour (up to c/L)")
    return DepthLimit(value, logc, beta, gamma, epsilon, a, f, rate)


@renamed_arguments(act="activation")
def angle_asymptotics(activation="relu", order: int = 2) -> sp.Expr:
    r"""The large-:math:`h` angle :math:`\theta_h \approx 1/(\beta h + (\varepsilon/\beta)\ln h)`.

    >>> angle_asymptotics("relu")
    6*pi/(2*h + 3*log(h))
    """
    order = check_int(order, "order", low=1)
    lim = depth_limit(activation)
    h = sp.Symbol("h", positive=True)
    den = h + (lim.epsilon / lim.beta**2) * sp.log(h) if order >= 2 else h
    return sp.simplify(1 / (lim.beta * den))


@dataclass(frozen=True)
class CorrectionFit(ResultDisplay):
    """Fit of :math:`L(\\bar\\Theta-\\bar\\Theta^{(\\infty)}) = A\\ln L + c` over depths."""

    A: float
    c: float
    residual: float
    depths: np.ndarray
    scaled: np.ndarray


@renamed_arguments(act="activation")
def correction_fit(rho0: float, depths, activation="relu") -> CorrectionFit:
    """Fit the correction over ``depths`` (float64 angle recursion, one pass to the deepest).

    >>> fit = correction_fit(0.5, [1000, 3000, 10000, 30000, 100000])
    >>> round(fit.A, 2), round(fit.c, 2)      # A -> 3/8; c -> 1.234 as the depths grow
    (0.38, 1.19)
    """
    if not np.iterable(depths):
        raise TypeError(f"depths must be a sequence of integers >= 1, got {depths!r}")
    depths = np.array(sorted({_check_depth(d, "depths") for d in depths}))
    if depths.size < 2:
        raise ValueError(f"depths must hold at least two distinct depths (a line is fitted), "
                         f"got {depths.tolist()}")
    lim = float(depth_limit(activation).value)
    r = float(_check_rho(rho0))
    _, slopes = _two_slope(activation)
    if slopes is None:
        raise ValueError(f"correction_fit needs a ReLU-type activation, got {activation!r}")
    vals = _values_at(r, depths, *slopes)
    scaled = depths * (vals - lim)
    A, c = np.polyfit(np.log(depths), scaled, 1)
    res = float(np.max(np.abs(A * np.log(depths) + c - scaled)))
    return CorrectionFit(float(A), float(c), res, depths, scaled)


def _values_at(r, depths, a, b):
    """Theta-bar at every requested (increasing) depth from one pass of the angle recursion."""
    path = _float_ntk_path(np.array([float(r)]), tuple(int(d) for d in depths), a, b)
    return np.array([float(v[0]) for v, _ in path])


@dataclass(frozen=True)
class PhaseLimit(ResultDisplay):
    """Depth limit of the normalized NTK from the fixed points of the kernel maps.

    Attributes
    ----------
    phase : {"ordered", "critical", "chaotic"}
        From :math:`\\chi_1 = \\sigma_w^2\\,\\mathbb E[\\phi'(G)^2]` at the variance fixed point
        (:math:`<1`, :math:`=1`, :math:`>1`).
    chi1, chi12 : float
        Derivative-kernel gains on the diagonal and at the correlation fixed point.
    rho_star : float
        Fixed point of the correlation map reached from ``rho0``.
    limit : float
        :math:`\\rho^*(1-\\chi_1)/(1-\\chi_{12})` when both gains are below 1 (ordered: 1);
        0 in the chaotic phase, where the diagonal NTK grows like :math:`\\chi_1^L` faster than
        the off-diagonal; for the critical phase the algebraic limit of :func:`depth_limit`.
    rate : float or None
        Per-layer factor of the geometric approach: :math:`\\chi_1` (ordered),
        :math:`1/\\chi_1` (chaotic, :math:`\\rho^*>0`) or :math:`\\chi_{12}/\\chi_1`
        (chaotic, :math:`\\rho^*=0`); None at criticality (algebraic, :math:`\\ln L/L`).
    """

    phase: str
    chi1: float
    chi12: float
    rho_star: float
    limit: float
    rate: float | None


@renamed_arguments(act="activation")
def phase_limit(activation, rho0: float = 0.5, weight_var: float | None = None, tol: float = 1e-6
                ) -> PhaseLimit:
    r"""Classify the depth behaviour of any registered activation and give its NTK limit.

    Inputs on the sphere, no bias, weight variance ``1/E[phi(G)^2]`` by default (so that
    :math:`q^*=1` is the variance fixed point). The NTK recursions
    :math:`\Theta_{11}\leftarrow\chi_1\Theta_{11}+q^*`, :math:`\Theta_{12}\leftarrow\chi_{12}
    \Theta_{12}+\rho^*q^*` have the fixed-point ratio :math:`\rho^*(1-\chi_1)/(1-\chi_{12})`
    when both gains are below one.

    Raises
    ------
    ValueError
        ``weight_var`` without a variance fixed point in :math:`[10^{-12}, 10^{150}]` reached
        from q = 1 (e.g. ReLU with ``weight_var != 2``: q grows or decays geometrically),
        ``tol <= 0``, ``|rho0| > 1``.
    NoClosedFormError
        The activation is critical but :func:`depth_limit` has no closed form for it.

    Examples
    --------
    >>> p = phase_limit("erf")
    >>> p.phase, round(p.chi1, 4), p.limit, round(p.rate, 4)    # Theta-bar ~ chi1^-L
    ('chaotic', 1.2257, 0.0, 0.7454)
    >>> phase_limit("relu").phase, float(phase_limit("relu").limit)
    ('critical', 0.25)
    """
    from ..kernels.numeric import dual_kernel_numeric

    activation = as_activation(activation)
    r = float(_check_rho(rho0))
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    second = float(dual_kernel_numeric(activation, 1.0, 1.0, 1.0))
    w = 1.0 / second if weight_var is None else check_real(weight_var, "weight_var", low=0.0,
                                                               low_open=True)
    q, converged = 1.0, False
    for _ in range(2000):  # variance fixed point (1 by construction for the default)
        q_new = w * float(dual_kernel_numeric(activation, q, q, q))
        if not 1e-12 < q_new <= _Q_MAX:
            break  # no positive finite fixed point: q grows or dies out geometrically
        if abs(q_new - q) < 1e-14 * max(1.0, q):
            converged = True
            break
        q = q_new
    if not converged:
        raise ValueError(f"weight_var={weight_var!r}: the variance map q -> weight_var E[phi("
                         f"sqrt(q) G)^2] of {activation.label} has no fixed point q* in [1e-12, 1e150] "
                         f"reached from q = 1 (the kernels are those of q* and need one); "
                         f"the default weight_var = 1/E[phi(G)^2] has q* = 1")
    chi1 = w * float(dual_kernel_numeric(activation, q, q, q, derivative=True))
    if abs(chi1 - 1) < tol:
        try:
            lim = float(depth_limit(activation).value)
        except ValueError as exc:
            raise NoClosedFormError(f"{activation.label} is critical (chi1 = {chi1:.6g}) but its depth "
                                    f"limit has no closed form ({exc}); evaluate "
                                    f"normalized_ntk(rho0, depth, activation) at large depth "
                                    f"instead") from exc
        return PhaseLimit("critical", chi1, chi1, 1.0, lim, None)
    rho = r
    for _ in range(20000):
        rho_new = w * float(dual_kernel_numeric(activation, q, rho * q, q)) / q
        if abs(rho_new - rho) < 1e-14:
            rho = rho_new
            break
        rho = min(rho_new, 1.0)
    chi12 = w * float(dual_kernel_numeric(activation, q, rho * q, q, derivative=True))
    if chi1 < 1:
        phase, limit = "ordered", rho * (1 - chi1) / (1 - chi12) if chi12 < 1 else float("nan")
        rate = chi1
    else:
        # Theta_11 grows like chi1^L; Theta_12 stays bounded (rho* > 0) or, when the
        # correlation itself dies out (rho* = 0, odd activations), decays like chi12^L
        base = chi12 if abs(rho) < 1e-8 else max(chi12, 1.0)
        phase, limit, rate = "chaotic", 0.0, base / chi1
    return PhaseLimit(phase, float(chi1), float(chi12), float(rho), float(limit), float(rate))
