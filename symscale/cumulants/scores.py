r"""The score of an estimate of :math:`\mathbb E[M(X)]` against a reference: MSE over variance.

:func:`mse_over_var` is the error of an estimate in units of the per-sample variance (``1/N``
on average for a Monte Carlo mean over ``N`` samples); :func:`monte_carlo_mse_over_var` is that
Monte Carlo line at a flop budget. Both are exported by :mod:`symscale.cumulants`.
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import check_array

__all__ = ["mse_over_var", "monte_carlo_mse_over_var"]


def _pow2_scaled(a: np.ndarray) -> tuple[np.ndarray, int]:
    """``(a * 2**-e, e)`` with ``max|a * 2**-e| < 1``: exact (a power of two), so sums and
    squares of the scaled array neither overflow nor round differently."""
    top = float(np.max(np.abs(a))) if a.size else 0.0
    e = int(np.frexp(top)[1])
    return np.ldexp(a, -e), e


def mse_over_var(estimate, truth, var) -> float:
    """Mean over coordinates of ``(estimate - truth)^2`` divided by ``mean(var)``.

    For a Monte Carlo estimate from N samples this is 1/N on average. Computed with power-of-two
    scaling, so huge or tiny inputs give the correctly scaled value (bit-identical to the plain
    formula where that does not overflow).

    Raises
    ------
    TypeError, ValueError
        Non-numeric or non-finite arrays, mismatched shapes, an empty ``estimate``, a negative
        ``var`` or one whose mean is not positive.
    FloatingPointError
        The ratio itself exceeds the float64 range.

    Examples
    --------
    >>> mse_over_var([1.0, 2.0], [0.0, 2.0], [1.0, 3.0])
    0.25
    """
    est, tru, var = (check_array(a, n) for a, n in
                     ((estimate, "estimate"), (truth, "truth"), (var, "var")))
    for name, arr in (("truth", tru), ("var", var)):
        if arr.shape != est.shape:
            raise ValueError(f"{name} has shape {arr.shape} but estimate has shape {est.shape}")
    if est.size == 0:
        raise ValueError("estimate must not be empty")
    if np.any(var < 0) or not np.any(var > 0):
        raise ValueError(f"var must be >= 0 with a positive mean, got "
                         f"{'a negative entry' if np.any(var < 0) else 'all zeros'}")
    # halving is exact, so est/2 - tru/2 == (est - tru)/2 without the overflow
    half, ed = _pow2_scaled(est / 2 - tru / 2)
    v, ev = _pow2_scaled(var)
    with np.errstate(over="ignore"):
        out = float(np.ldexp(np.mean(np.square(half)) / np.mean(v), 2 * ed + 2 - ev))
    if not math.isfinite(out):
        raise FloatingPointError("mse_over_var overflows float64: the squared error is more "
                                 "than 1.8e308 times the variance")
    return out


def monte_carlo_mse_over_var(flops, flops_per_sample):
    """The Monte Carlo line MSE/Var = 1/N at a budget of ``flops``: ``flops_per_sample / flops``.

    Raises
    ------
    TypeError, ValueError
        Non-numeric, non-finite or non-positive arguments.
    FloatingPointError
        The ratio exceeds the float64 range.

    Examples
    --------
    >>> monte_carlo_mse_over_var(1e6, 100)
    0.0001
    """
    f = check_array(flops, "flops")
    fps = check_array(flops_per_sample, "flops_per_sample")
    if np.any(f <= 0):
        raise ValueError(f"flops must be > 0, got {flops!r}")
    if np.any(fps <= 0):
        raise ValueError(f"flops_per_sample must be > 0, got {flops_per_sample!r}")
    with np.errstate(over="ignore"):
        out = fps / f
    if not np.all(np.isfinite(out)):
        raise FloatingPointError("monte_carlo_mse_over_var overflows float64: "
                                 "flops_per_sample / flops exceeds 1.8e308")
    return float(out) if out.ndim == 0 else out
