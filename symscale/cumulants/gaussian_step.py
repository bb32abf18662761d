r"""The exact-Gaussian nonlinear step (covariance propagation baseline, ``variant="gaussian"``).

Treat the pre-activations as exactly Gaussian with the tracked mean and covariance and compute
the mean and covariance of :math:`\phi(Z)` without truncating the Mehler series: the diagonal
from the univariate moments, the off-diagonal from the bivariate moment (closed form for ReLU,
tensor Gauss–Hermite quadrature otherwise). Cost :math:`O(n^2)` kernel evaluations per layer on
top of the :math:`O(n^3)` linear step.
"""

from __future__ import annotations

import numpy as np

from .._deprecation import renamed_arguments
from ..activations import as_activation
from ..expectations.bivariate import GH_DEGREE, bivariate_moment
from .nonlinear import _check_cumulants
from .state import Cumulants
from .wick import wick_table

__all__ = ["gaussian_step"]


@renamed_arguments(act="activation")
def gaussian_step(z: Cumulants, activation, layer=None) -> tuple[Cumulants, int]:
    """Mean and covariance of :math:`\\phi(Z)` for Gaussian :math:`Z` (all Mehler orders).

    ``layer`` (1-based) only names the layer in errors: ``FloatingPointError`` where the mean or
    covariance is not finite or a variance is not positive.
    """
    activation = as_activation(activation)
    _check_cumulants(z, layer)
    S = z.full[2]
    mu = z.mean
    var = np.diagonal(S, axis1=-2, axis2=-1).copy()
    sd = np.sqrt(var)
    w = wick_table(activation, mu.reshape(-1), var.reshape(-1), 0, 2).reshape((3, 1) + mu.shape)
    m1, m2 = w[1, 0], w[2, 0]
    # the covariance is symmetric: the bivariate moments of the pairs i < j only (half the
    # work, and an exactly symmetric result)
    n = mu.shape[-1]
    a, b = np.triu_indices(n, 1)
    rho = np.clip(S[..., a, b] / (sd[..., a] * sd[..., b]), -1.0, 1.0)
    joint, how = bivariate_moment(activation, mu[..., a], mu[..., b], sd[..., a], sd[..., b],
                                  rho)
    pairs = rho.size
    flops = 60 * pairs if how == "relu closed form" else 6 * pairs * GH_DEGREE**2
    cov = np.empty(S.shape)
    cov[..., a, b] = cov[..., b, a] = joint - m1[..., a] * m1[..., b]
    i = np.arange(n)
    cov[..., i, i] = m2 - m1**2
    return Cumulants(m1.copy(), {2: cov}), int(flops)
