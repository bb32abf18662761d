r"""Convergence rates in width: power-law fits with bootstrap intervals, and the sampling floor.

:func:`fit_rate` fits :math:`\log v = c + \alpha\log w` by least squares and attaches a
percentile-bootstrap interval for the slope :math:`\alpha`. :func:`noise_floor` measures the
sliced Wasserstein distance between two independent samples of the *same* law: the value a
perfect finite-width model would show at that sample size (about :math:`1.8/\sqrt n` for
:math:`SW_1` of unit-variance Gaussian projections). A fitted width slope flattens once the
measured distances approach this floor, so fit only widths well above it and report it next to
every slope.

Examples
--------
>>> import numpy as np
>>> from symscale.metrics import fit_rate
>>> widths = np.array([64, 128, 256, 512, 1024])
>>> fit = fit_rate(widths, 3.0 / widths, n_boot=200)
>>> round(fit.slope, 12), round(fit.ci[0], 9), round(fit.ci[1], 9)
(-1.0, -1.0, -1.0)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..validation import check_array, check_int, check_real, check_seed
from .wasserstein import _projections, sliced_wasserstein
from ..display import ResultDisplay

__all__ = ["RateFit", "fit_rate", "SlopeFit", "fit_loglog_slope", "NoiseFloor", "noise_floor"]

_BOOT_BATCH_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class RateFit(ResultDisplay):
    """Power-law fit ``values ~ exp(intercept) * widths**slope`` with a bootstrap interval.

    Attributes
    ----------
    slope, intercept : float
        Least-squares coefficients of ``log(values) = intercept + slope * log(widths)``.
    ci : tuple of float
        Percentile-bootstrap interval ``(lo, hi)`` for the slope at ``level``.
    n_boot : int
        Number of bootstrap fits behind ``ci`` and ``stderr``.
    level : float
        Confidence level of ``ci``.
    stderr : float
        Standard deviation of the bootstrap slopes (a bootstrap standard error).
    """

    slope: float
    intercept: float
    ci: tuple[float, float]
    n_boot: int
    level: float
    stderr: float


@dataclass(frozen=True, eq=False)
class NoiseFloor(ResultDisplay):
    """Sliced Wasserstein distance between independent samples of the same law.

    Attributes
    ----------
    mean : float
        Mean over the repeats.
    stderr : float
        Standard error of ``mean`` (sample standard deviation / sqrt(repeats)).
    values : ndarray
        The distance of each repeat (read-only).
    """

    mean: float
    stderr: float
    values: np.ndarray


def _positive_finite(a, name: str, ndim: tuple[int, ...]) -> np.ndarray:
    arr = check_array(a, name, finite=False)
    if arr.ndim not in ndim:
        want = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name} must be {want}, got an array of shape {arr.shape}")
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        idx = tuple(int(i[0]) for i in np.nonzero(bad))
        idx = idx[0] if len(idx) == 1 else idx
        raise ValueError(f"{name} must be finite and positive for a log-log fit, got "
                         f"{float(arr[idx])!r} at index {idx}")
    return arr


def _slopes(lx: np.ndarray, ly: np.ndarray):
    """Row-wise least-squares slope and intercept of ly on lx (2-D arrays, one fit per row)."""
    mx = lx.mean(axis=-1, keepdims=True)
    my = ly.mean(axis=-1, keepdims=True)
    cx = lx - mx
    sxx = np.einsum("ij,ij->i", cx, cx)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.einsum("ij,ij->i", cx, ly - my) / sxx
    return slope, my[:, 0] - slope * mx[:, 0], sxx


@dataclass(frozen=True)
class SlopeFit(ResultDisplay):
    """Least-squares fit of log(y) = intercept + slope * log(x) with a confidence interval."""

    slope: float
    intercept: float
    stderr: float
    ci: tuple[float, float]
    level: float


def fit_loglog_slope(x, y, *, level: float = 0.95, stderr=None,
                     correction: float | None = None) -> SlopeFit:
    """Fit a power law ``y ~ C x^slope`` by least squares in log-log coordinates.

    Without ``stderr`` the fit is unweighted and the interval Student-t on ``len(x) - k``
    degrees of freedom (k fitted coefficients; zero width when the fit is exact);
    :func:`fit_rate` gives a bootstrap interval instead (repeated measurements). With
    ``stderr`` (Monte Carlo standard errors of ``y``) the fit is weighted by
    ``(y / stderr)^2``, the slope's error is the propagated Monte Carlo error inflated by
    ``sqrt(chi^2 / dof)`` when the points scatter more than their errors, and the interval is
    normal. With ``correction = q`` the model is ``log y = c + slope log x + d x^q``: a leading
    power law with a relative correction of order ``x^q`` (the next order of an expansion), so
    that the slope is the leading rate rather than an average over a pre-asymptotic range.

    Raises
    ------
    TypeError
        Non-numeric ``x``, ``y``, ``stderr``, ``level`` or ``correction``.
    ValueError
        Shapes differ or too few points for the coefficients; non-positive or non-finite values;
        ``level`` outside (0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> fit = fit_loglog_slope([1.0, 2.0, 4.0], [1.0, 0.5, 0.25])
    >>> round(fit.slope, 12), [round(c, 9) for c in fit.ci]   # an exact power law
    (-1.0, [-1.0, -1.0])
    >>> x = np.array([8.0, 16, 32, 64, 128])
    >>> y = x ** -1.0 * (1 + 2 / x)                    # a 1/x correction to the leading rate
    >>> round(fit_loglog_slope(x, y).slope, 3), round(fit_loglog_slope(x, y, correction=-1).slope, 3)
    (-1.072, -1.006)
    >>> w = fit_loglog_slope([1.0, 2.0, 4.0], [1.0, 0.5, 0.25], stderr=[0.01, 0.005, 0.0025])
    >>> round(w.slope, 12), round(w.stderr, 4)
    (-1.0, 0.0102)
    """
    x, y = check_array(x, "x"), check_array(y, "y")
    level = check_real(level, "level", low=0, high=1, low_open=True, high_open=True)
    cols = 2 if correction is None else 3
    if x.shape != y.shape or x.ndim != 1 or x.size < cols + 1:
        raise ValueError(f"x and y must be 1-D of equal length >= {cols + 1}, got shapes "
                         f"{x.shape} and {y.shape}")
    if np.any(x <= 0) or np.any(y <= 0) or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and y must be finite and positive for a log-log fit")
    from scipy import stats  # metrics import only numpy at module level

    lx, ly = np.log(x), np.log(y)
    A = [np.ones_like(lx), lx]
    if correction is not None:
        A.append(x ** check_real(correction, "correction"))
    A = np.vstack(A).T
    dof = x.size - cols
    if stderr is None:
        coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
        resid = ly - A @ coef
        cov = float(resid @ resid) / dof * np.linalg.inv(A.T @ A)
        se = math.sqrt(max(cov[1, 1], 0.0))
        half = stats.t.ppf(0.5 + level / 2, dof) * se
    else:
        se_y = check_array(stderr, "stderr")
        if se_y.shape != x.shape or np.any(se_y <= 0) or not np.all(np.isfinite(se_y)):
            raise ValueError(f"stderr must be positive, finite and shaped like x {x.shape}, got "
                             f"{se_y.shape}")
        w = (y / se_y) ** 2                     # 1 / variance of log y (delta method)
        AtW = A.T * w
        cov = np.linalg.inv(AtW @ A)
        coef = cov @ (AtW @ ly)
        chi2 = float(np.sum(w * (ly - A @ coef) ** 2)) / dof
        se = math.sqrt(cov[1, 1] * max(1.0, chi2))
        half = float(stats.norm.ppf(0.5 + level / 2)) * se
    slope = float(coef[1])
    return SlopeFit(slope, float(coef[0]), se, (float(slope - half), float(slope + half)), level)


def fit_rate(widths, values, n_boot=1000, seed=0, level=0.95) -> RateFit:
    r"""Fit a rate :math:`v \approx C w^{\alpha}` with a bootstrap interval for :math:`\alpha`.

    Parameters
    ----------
    widths : array_like, shape (W,)
        Positive widths; repeats are allowed but at least 3 must be distinct.
    values : array_like, shape (W,) or (W, R)
        Positive measured values (e.g. distances to the limit). 1-D: one value per width.
        2-D: ``R >= 2`` repeated measurements per width (row ``i`` belongs to ``widths[i]``).
    n_boot : int
        Number of bootstrap resamples (>= 2).
    seed : int, SeedSequence or Generator
        Seed of ``numpy.random.default_rng`` for the resampling.
    level : float
        Confidence level of the interval, in (0, 1).

    Returns
    -------
    RateFit
        ``slope`` and ``intercept`` of the least-squares line through
        ``(log(widths), log(values))``; ``ci`` the percentile bootstrap interval for the slope;
        ``stderr`` the standard deviation of the bootstrap slopes.

    Raises
    ------
    TypeError
        Non-numeric arrays; ``n_boot``, ``seed`` or ``level`` of the wrong type (bool
        included).
    ValueError
        Non-positive or non-finite inputs, mismatched shapes, fewer than 3 distinct widths,
        fewer than 2 repeats per width, or invalid ``n_boot``/``level``/``seed``.

    Notes
    -----
    1-D ``values``: the bootstrap resamples the ``W`` pairs ``(width, value)`` with replacement
    and refits; resamples whose widths are all equal (no slope) are discarded and redrawn.

    2-D ``values``: the point estimate fits ``log`` of the per-width mean over the ``R``
    repeats. The bootstrap keeps the widths fixed and, within each width, resamples its ``R``
    repeats with replacement, then refits the log of the resampled means. This is the interval
    to use when the scatter comes from seeds at each width (a stratified bootstrap).

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.metrics import fit_rate
    >>> rng = np.random.default_rng(0)
    >>> w = np.array([32, 64, 128, 256, 512, 1024])
    >>> v = 2.0 * w[:, None] ** -0.5 * np.exp(0.05 * rng.standard_normal((6, 20)))
    >>> fit = fit_rate(w, v, n_boot=500)
    >>> bool(fit.ci[0] < -0.5 < fit.ci[1]), round(fit.slope, 1)
    (True, -0.5)
    """
    w = _positive_finite(widths, "widths", (1,))
    v = _positive_finite(values, "values", (1, 2))
    if v.shape[0] != w.size:
        raise ValueError(f"values must have len(widths) = {w.size} rows, got shape {v.shape}")
    if np.unique(w).size < 3:
        raise ValueError(f"widths must contain at least 3 distinct values, got {w.tolist()!r}")
    if v.ndim == 2 and v.shape[1] < 2:
        raise ValueError("values must have at least 2 repeats per width when 2-D, got shape "
                         f"{v.shape}")
    n_boot = check_int(n_boot, "n_boot", low=2)
    seed = check_seed(seed)
    if isinstance(level, (bool, np.bool_)) or not isinstance(level, numbers.Real):
        raise TypeError(f"level must be a number in (0, 1), got {level!r} "
                        f"({type(level).__name__})")
    if not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")

    lx = np.log(w)
    log_top = np.zeros((w.size, 1))
    if v.ndim == 2 and not 2.0**-900 <= v.min() <= v.max() <= 2.0**900:
        # log of the mean of each row as log(top) + log(mean(v / top)): the sum of R values
        # near the float64 maximum would overflow, and subnormal values would lose digits
        top = v.max(axis=1, keepdims=True)
        log_top = np.log(top)
        v = v / top
    ly = np.log(v) if v.ndim == 1 else log_top[:, 0] + np.log(v.mean(axis=1))
    slope, intercept, _ = _slopes(lx[None, :], ly[None, :])

    rng = np.random.default_rng(seed)
    W = w.size
    boots: list[np.ndarray] = []
    have = 0
    if v.ndim == 1:
        batch = max(1, _BOOT_BATCH_ELEMENTS // W)
        while have < n_boot:
            idx = rng.integers(0, W, size=(min(batch, n_boot - have), W))
            s, _, sxx = _slopes(lx[idx], ly[idx])
            s = s[sxx > 0]                       # all resampled widths equal: no slope
            boots.append(s[: n_boot - have])
            have += boots[-1].size
    else:
        R = v.shape[1]
        rows = np.arange(W)[None, :, None]
        batch = max(1, _BOOT_BATCH_ELEMENTS // (W * R))
        lxb = np.broadcast_to(lx, (batch, W))
        while have < n_boot:
            b = min(batch, n_boot - have)
            idx = rng.integers(0, R, size=(b, W, R))
            s, _, _ = _slopes(lxb[:b], log_top[:, 0] + np.log(v[rows, idx].mean(axis=2)))
            boots.append(s)
            have += b
    slopes = np.concatenate(boots)
    alpha = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile(slopes, [alpha, 1.0 - alpha])
    return RateFit(float(slope[0]), float(intercept[0]), (float(lo), float(hi)), n_boot,
                   float(level), float(slopes.std(ddof=1)))


def noise_floor(sampler, n_samples, n_projections=200, seed=0, n_repeats=5, p=1, *,
                n_jobs=2) -> NoiseFloor:
    r"""Sampling floor of the sliced Wasserstein distance at a given sample size.

    Draws two independent samples of size ``n_samples`` from the same law, ``sampler(n, rng)``,
    and computes their sliced :math:`W_p` distance (:func:`~symscale.metrics.sliced_wasserstein`);
    repeats ``n_repeats`` times with fresh samples and one fixed set of projections. A perfect
    finite-width model compared with its limit on samples of this size shows this distance.

    Parameters
    ----------
    sampler : callable
        ``sampler(n, rng) -> array of shape (n, d)`` (or ``(n,)`` for ``d = 1``), drawing with
        the ``numpy.random.Generator`` it is given, e.g. from the limiting Gaussian process
        (:func:`~symscale.metrics.sample_gaussian` of its kernel).
    n_samples : int
        Size of each of the two samples (>= 1).
    n_projections : int
        Number of random directions, drawn once.
    seed : int, SeedSequence or Generator
        Seed of ``numpy.random.default_rng``; it determines the projections and every sample.
    n_repeats : int
        Number of independent pairs of samples (>= 2).
    p : float
        Order of the distance, ``p >= 1``.
    n_jobs : int
        Threads of :func:`~symscale.metrics.sliced_wasserstein`.

    Returns
    -------
    NoiseFloor
        ``mean`` and ``stderr`` over the repeats and the ``values`` themselves.

    Raises
    ------
    TypeError
        ``sampler`` not callable or returning non-numeric values; counts, ``seed`` or ``p`` of
        the wrong type (bool included).
    ValueError
        Invalid counts, seed or ``p``, or a sampler returning the wrong shape or non-finite
        values.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.metrics import noise_floor
    >>> floor = noise_floor(lambda n, rng: rng.standard_normal((n, 3)), 2000, n_repeats=4)
    >>> floor.values.shape, bool(1.0 < floor.mean * np.sqrt(2000) < 2.5)
    ((4,), True)
    """
    if not callable(sampler):
        raise TypeError(f"sampler must be callable as sampler(n, rng), got {sampler!r}")
    n_samples = check_int(n_samples, "n_samples", low=1)
    n_projections = check_int(n_projections, "n_projections", low=1)
    n_repeats = check_int(n_repeats, "n_repeats", low=2)
    p = check_real(p, "p", low=1)
    seed = check_seed(seed)
    n_jobs = check_int(n_jobs, "n_jobs", low=1)
    rng = np.random.default_rng(seed)
    proj_seed = int(rng.integers(2**63))       # projections: an independent stream of the seed
    theta = None
    values = np.empty(n_repeats)
    for r in range(n_repeats):
        A = _draw(sampler, n_samples, rng)
        B = _draw(sampler, n_samples, rng)
        if theta is None:
            theta = _projections(A.shape[1], n_projections, proj_seed)
        if A.shape[1] != theta.shape[0] or B.shape[1] != theta.shape[0]:
            raise ValueError(f"sampler must return arrays with a fixed number of columns, got "
                             f"{A.shape[1]} and {B.shape[1]} (expected {theta.shape[0]})")
        values[r] = sliced_wasserstein(A, B, p=p, projections=theta, n_jobs=n_jobs)
    values.setflags(write=False)
    top = float(values.max())
    # distances beyond 2**500 would overflow when squared for the standard deviation
    scale = top if top > 2.0**500 else 1.0
    unit = values / scale
    return NoiseFloor(scale * float(unit.mean()),
                      scale * float(unit.std(ddof=1)) / math.sqrt(n_repeats), values)


def _draw(sampler, n: int, rng) -> np.ndarray:
    out = check_array(sampler(n, rng), "sampler", finite=False)
    if out.ndim == 1:
        out = out.reshape(-1, 1)
    if out.ndim != 2 or out.shape[0] != n:
        raise ValueError(f"sampler must return an array of shape ({n}, d), got {out.shape}")
    if not np.isfinite(out).all():
        raise ValueError("sampler must return finite values, got a non-finite entry")
    return out
