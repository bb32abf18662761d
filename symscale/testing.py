"""Assertions for statistical and rate tests, shipped so users can test their own derivations.

Tolerances come from standard errors (z-scores) or from fitted confidence intervals, never from
hand-picked absolute tolerances; randomness comes from seeded ``numpy.random.Generator`` objects.

Examples
--------
>>> import numpy as np
>>> from symscale.testing import assert_mc_close, fit_loglog_slope, seeded_rng
>>> rng = seeded_rng(0)
>>> assert_mc_close(rng.standard_normal(10_000) ** 2, 1.0)        # E[Z^2] = 1
>>> n = np.array([100, 200, 400, 800])
>>> fit = fit_loglog_slope(n, 3.0 / np.sqrt(n))
>>> round(fit.slope, 12)
-0.5
"""

from __future__ import annotations

import math

import numpy as np

from ._deprecation import renamed_arguments
from .metrics.rates import SlopeFit, fit_loglog_slope  # the one log-log fit, re-exported

__all__ = [
    "seeded_rng",
    "assert_mc_close",
    "mc_zscore",
    "fit_loglog_slope",
    "SlopeFit",
    "assert_slope",
    "reference_dual_kernel",
]


def seeded_rng(seed: int) -> np.random.Generator:
    """``numpy.random.default_rng(seed)``; the one way symscale's tests create randomness."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    return np.random.default_rng(int(seed))


def mc_zscore(samples=None, expected=0.0, *, mean=None, stderr=None) -> float:
    """z-score ``(estimate - expected) / standard_error`` from samples or from (mean, stderr)."""
    if samples is not None:
        x = np.asarray(samples, dtype=float).ravel()
        if x.size < 2:
            raise ValueError(f"need at least 2 samples, got {x.size}")
        mean = float(x.mean())
        stderr = float(x.std(ddof=1) / math.sqrt(x.size))
    elif mean is None or stderr is None:
        raise ValueError("give samples, or both mean= and stderr=")
    if not np.isfinite(mean) or not np.isfinite(stderr) or stderr < 0:
        raise ValueError(f"invalid estimate mean={mean!r}, stderr={stderr!r}")
    diff = mean - float(expected)
    if stderr == 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / stderr


def assert_mc_close(samples=None, expected=0.0, *, mean=None, stderr=None,
                    n_sigma: float = 5.0, label: str = "") -> None:
    """Assert that a Monte Carlo estimate is within ``n_sigma`` standard errors of ``expected``.

    Parameters
    ----------
    samples : array_like, optional
        Independent samples whose mean estimates ``expected``.
    expected : float
        The exact value.
    mean, stderr : float, optional
        A precomputed estimate and its standard error (instead of ``samples``).
    n_sigma : float
        Allowed |z|.
    label : str
        Prefix of the failure message.
    """
    z = mc_zscore(samples, expected, mean=mean, stderr=stderr)
    if not abs(z) <= n_sigma:
        est = float(np.mean(samples)) if samples is not None else mean
        raise AssertionError(
            f"{label + ': ' if label else ''}Monte Carlo estimate {est!r} differs from "
            f"{expected!r} by z = {z:+.2f} standard errors (allowed {n_sigma})"
        )


def assert_slope(x, y, expected: float, *, margin: float | None = None,
                 level: float = 0.95) -> SlopeFit:
    """Assert that the fitted log-log slope matches ``expected``.

    With ``margin`` the test is ``|slope - expected| <= margin`` (a stated theoretical margin);
    without it, ``expected`` must lie inside the ``level`` confidence interval.
    """
    fit = fit_loglog_slope(x, y, level=level)
    if margin is not None:
        ok = abs(fit.slope - expected) <= margin
        rule = f"|slope - {expected}| <= {margin}"
    else:
        ok = fit.ci[0] <= expected <= fit.ci[1]
        rule = f"{expected} in the {level:.0%} interval [{fit.ci[0]:.4f}, {fit.ci[1]:.4f}]"
    if not ok:
        raise AssertionError(f"fitted slope {fit.slope:.4f} (s.e. {fit.stderr:.4f}) fails {rule}")
    return fit


@renamed_arguments(act="activation")
def reference_dual_kernel(activation, q11: float, q12: float, q22: float, *, derivative: bool = False,
                          dps: int = 25) -> float:
    """E[phi(u) phi(v)] by adaptive mpmath integration: a slow, independent reference.

    Polar coordinates ``(u, v) = R (sqrt(q11) cos a, sqrt(q22) cos(a - b))``, ``b = acos(rho)``;
    the angle is split where u or v changes sign and both integrals use mpmath's adaptive
    tanh-sinh rule at ``dps`` digits. Seconds per point: for tests and benchmarks only.

    Examples
    --------
    >>> from symscale.testing import reference_dual_kernel
    >>> round(reference_dual_kernel("relu", 1.0, 0.0, 1.0), 12)    # 1/(2 pi)
    0.159154943092
    """
    import mpmath

    from .activations import as_activation

    activation = as_activation(activation)
    f = (activation.derivative() if derivative else activation).mpmath
    with mpmath.workdps(dps):
        s1, s2 = mpmath.sqrt(mpmath.mpf(q11)), mpmath.sqrt(mpmath.mpf(q22))
        gap = mpmath.sqrt(max(mpmath.mpf(q11) * q22 - mpmath.mpf(q12) ** 2, 0))
        beta = mpmath.atan2(gap, q12)
        lo, hi = sorted([mpmath.pi / 2, (beta + mpmath.pi / 2) % mpmath.pi])

        def angular(al):
            A, B = s1 * mpmath.cos(al), s2 * mpmath.cos(al - beta)

            def radial(R):
                return R * mpmath.exp(-R * R / 2) * (f(R * A) * f(R * B)
                                                     + f(-R * A) * f(-R * B)) / 2

            return mpmath.quad(radial, [0, 1 / (1 + abs(A) + abs(B)), 1, mpmath.inf])

        pts = [lo, hi, lo + mpmath.pi] if hi - lo > mpmath.eps else [lo, lo + mpmath.pi]
        return float(mpmath.quad(angular, pts) / mpmath.pi)
