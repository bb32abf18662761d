"""The exact-Gaussian step: moments of the pairs i < j only, mirrored (an exactly symmetric
covariance equal to the pairwise bivariate moments), on one network and on a stack."""

import numpy as np
import pytest

from symscale.cumulants.gaussian_step import gaussian_step
from symscale.cumulants.state import Cumulants
from symscale.expectations.bivariate import GH_DEGREE, bivariate_moment


def _gaussian(rng, batch=()):
    n = 5
    A = rng.standard_normal(batch + (n, n))
    S = A @ np.swapaxes(A, -1, -2) / n + 0.2 * np.eye(n)
    return Cumulants(0.3 * rng.standard_normal(batch + (n,)), {2: S})


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_covariance_is_symmetric_and_pairwise(activation, batch):
    z = _gaussian(np.random.default_rng(1), batch)
    out, flops = gaussian_step(z, activation)
    cov = out.full[2]
    np.testing.assert_array_equal(cov, np.swapaxes(cov, -1, -2))
    n = z.n
    pairs = int(np.prod(batch)) * n * (n - 1) // 2
    assert flops == (60 * pairs if activation == "relu" else 6 * pairs * GH_DEGREE**2)
    for b in np.ndindex(*batch):
        mu, S, m1 = z.mean[b], z.full[2][b], out.mean[b]
        sd = np.sqrt(np.diag(S))
        for i in range(n):
            for j in range(i + 1, n):
                joint, _ = bivariate_moment(activation, mu[i], mu[j], sd[i], sd[j],
                                            S[i, j] / (sd[i] * sd[j]))
                np.testing.assert_allclose(cov[b][i, j], joint - m1[i] * m1[j], rtol=1e-12,
                                           atol=1e-14)
