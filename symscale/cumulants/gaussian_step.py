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
from ..families import is_relu
from .nonlinear import _check_cumulants
from .state import Cumulants
from .wick import relu_bivariate_moment_numeric, wick_table

__all__ = ["gaussian_step"]

_GH_DEG = 32


def _bivariate_quadrature(act, mu, sd, rho):
    """E[phi(Z_i) phi(Z_j)] for all pairs by a tensor Gauss-Hermite rule (smooth activations)."""
    x, wts = np.polynomial.hermite_e.hermegauss(_GH_DEG)
    wts = wts / wts.sum()
    f1 = act.numpy(mu[:, None] + sd[:, None] * x[None, :])            # (n, q): phi at z1 nodes
    out = np.empty((mu.size, mu.size))
    r = np.sqrt(np.clip(1.0 - rho**2, 0.0, None))
    for a, (xa, wa) in enumerate(zip(x, wts)):
        # Z_j = mu_j + sd_j (rho_ij xa + r_ij y): the inner rule integrates y for every pair
        inner = act.numpy(mu[None, :, None] + sd[None, :, None] *
                          (rho[:, :, None] * xa + r[:, :, None] * x[None, None, :])) @ wts
        out += wa * f1[:, a][:, None] * inner
    return out


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
    var = np.diagonal(S).copy()
    sd = np.sqrt(var)
    w = wick_table(activation, mu, var, 0, 2)
    m1, m2 = w[1, 0], w[2, 0]
    rho = np.clip(S / np.outer(sd, sd), -1.0, 1.0)
    if is_relu(activation.family):  # any registration of max(x, 0), not only the name "relu"
        joint = relu_bivariate_moment_numeric(mu[:, None], mu[None, :], sd[:, None],
                                              sd[None, :], rho)
        flops = 60 * S.size
    else:
        joint = _bivariate_quadrature(activation, mu, sd, rho)
        flops = 6 * S.size * _GH_DEG**2
    cov = joint - np.outer(m1, m1)
    np.fill_diagonal(cov, m2 - m1**2)
    return Cumulants(m1.copy(), {2: cov}), int(flops)
