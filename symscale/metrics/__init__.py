"""Convergence diagnostics: Wasserstein distances, Gaussian comparisons and rate fits.

Measuring how fast a finite-width network approaches its Gaussian-process limit takes three
pieces: a distance between samples (:func:`sliced_wasserstein`, :func:`wasserstein_1d`) or
between Gaussians (:func:`gaussian_w2`, :func:`relative_frobenius` for kernels); samples of the
limit (:func:`sample_gaussian` from its kernel) with the distance such samples show by chance
(:func:`noise_floor`); and a power-law fit in width with a bootstrap interval (:func:`fit_rate`).
Everything is float64 numpy; POT is never required (it serves as a test oracle when installed).

Examples
--------
>>> import numpy as np
>>> from symscale import metrics
>>> K = np.array([[1.0, 0.5], [0.5, 1.0]])
>>> gp = metrics.sample_gaussian(K, 2000, seed=0).samples
>>> shifted = gp + np.array([1.0, 0.0])
>>> sw = metrics.sliced_wasserstein(gp, shifted, n_projections=100, seed=0)
>>> bool(0.5 < sw < 0.8)       # E|theta_1| = 2/pi for directions on the circle
True
"""

from .gaussian import GaussianSample, gaussian_w2, relative_frobenius, sample_gaussian
from .rates import NoiseFloor, RateFit, SlopeFit, fit_loglog_slope, fit_rate, noise_floor
from .wasserstein import (projections, sliced_wasserstein, sliced_wasserstein_bootstrap,
                          wasserstein_1d)

__all__ = [
    "wasserstein_1d",
    "projections",
    "sliced_wasserstein",
    "sliced_wasserstein_bootstrap",
    "gaussian_w2",
    "relative_frobenius",
    "sample_gaussian",
    "GaussianSample",
    "fit_rate",
    "RateFit",
    "fit_loglog_slope",
    "SlopeFit",
    "noise_floor",
    "NoiseFloor",
]
