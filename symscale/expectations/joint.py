r"""Joint Gaussian expectations in any dimension: quadrature, then Monte Carlo with a seed.

The engine of the Netsor master theorem for nonlinearities of several Gaussian arguments
(:mod:`symscale.netsor.infinite`): tensor Gauss-Hermite quadrature up to
:data:`MAX_QUADRATURE_DIM` joint dimensions, Monte Carlo (with its standard error) beyond.
"""

from __future__ import annotations

import math

import numpy as np

from ..linalg import psd_factor
from ..validation import check_random_state
from .univariate import gauss_hermite

__all__ = ["joint_expectation", "MAX_QUADRATURE_DIM", "MC_SAMPLES"]

#: Largest joint Gaussian dimension integrated by tensor Gauss-Hermite quadrature.
MAX_QUADRATURE_DIM = 4
#: Monte Carlo samples per covariance beyond that dimension.
MC_SAMPLES = 20_000


def joint_expectation(func, C, seed=0):
    """``E[func(z, idx)]`` for ``z ~ N(0, C[idx])`` over a stack of covariances C (..., D, D).

    Tensor Gauss-Hermite for ``D <= MAX_QUADRATURE_DIM`` (degree chosen so that
    ``deg^D <= 40000``), Monte Carlo with ``MC_SAMPLES`` draws beyond, from ``seed`` (any kind
    :func:`~symscale.validation.check_random_state` accepts; a Generator continues its stream).
    Singular covariances are fine (the factor clips round-off eigenvalues).

    Returns
    -------
    (value, stderr)
        Arrays of shape ``C.shape[:-2]``; ``stderr`` is None for quadrature.

    Examples
    --------
    >>> import numpy as np
    >>> C = np.array([[[1.0, 0.5], [0.5, 2.0]]])
    >>> value, se = joint_expectation(lambda z, idx: z[..., 0] * z[..., 1], C)
    >>> float(np.round(value[0], 12)), se
    (0.5, None)
    """
    rng = check_random_state(seed)
    D = C.shape[-1]
    L = psd_factor(C)
    if D <= MAX_QUADRATURE_DIM:
        deg = max(6, min(48, int(40000 ** (1.0 / D))))
        z, w = gauss_hermite(deg)
        grid = np.stack(np.meshgrid(*([z] * D), indexing="ij"), -1).reshape(-1, D)
        weights = np.prod(np.stack(np.meshgrid(*([w] * D), indexing="ij"), -1).reshape(-1, D),
                          axis=-1)
        out = np.empty(C.shape[:-2])
        for idx in np.ndindex(*C.shape[:-2]):
            out[idx] = func(grid @ L[idx].T, idx) @ weights
        return out, None
    xi = rng.standard_normal((MC_SAMPLES, D))
    vals = np.empty(C.shape[:-2])
    ses = np.empty(C.shape[:-2])
    for idx in np.ndindex(*C.shape[:-2]):
        s = func(xi @ L[idx].T, idx)
        vals[idx], ses[idx] = s.mean(), s.std(ddof=1) / math.sqrt(MC_SAMPLES)
    return vals, ses
