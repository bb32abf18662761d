"""The deep linear network is the zero-drift NSDE (symscale.nsde.linear_link).

References: the Meijer-G evidence of Hanin & Zlokapa (deep_linear_evidence, exact), the exact
finite-width chain with the identity activation (the same network), and the Euler-Maruyama
simulation of dV = Sigma(V)^1/2 dB. Rule for the SDE check at finite (N, L): the Meijer-G
value differs from the N -> oo limit by bias ~ 2 |Z(N, L) - Z(2N, 2L)| (Z = Z_oo + C/N + ...);
the number of paths is chosen so that the standard error exceeds that bias, and the SDE must
also agree with the Richardson limit 2 Z(2N, 2L) - Z(N, L) at 5 SE.
"""

import math

import numpy as np
import pytest

from symscale.metrics import fit_loglog_slope

from symscale.nsde import (deep_linear_chain_evidence, deep_linear_evidence, deep_linear_link,
                           partition_function, zero_drift_evidence)

SETTINGS = [(20, 6, 2), (40, 4, 3), (64, 16, 3)]  # (N, L, P)


def _data(P, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, 5)), 0.7 * rng.standard_normal(P)


@pytest.mark.parametrize("N, L, P", SETTINGS)
def test_zero_drift_nsde_and_chain_match_meijer_g(N, L, P):
    X, Y = _data(P)
    link = deep_linear_link(X, Y, N, L, n_paths=4000, seed=10)
    assert link.t == L / N and link.P == P
    assert link.bias < link.sde[1], link  # the rule: SE above the O(1/N) bias
    assert abs(link.z_sde) < 5 and abs(link.z_sde_limit) < 5, link
    assert abs(link.z_chain) < 5, link


@pytest.mark.parametrize("N, L, P", SETTINGS)
def test_wrong_variants_are_refuted(N, L, P):
    """The NSDE with the tanh drift, or at the wrong time t = L/(2N), misses Meijer-G."""
    X, Y = _data(P)
    t = L / N
    z = deep_linear_evidence(X, Y, [N] * L).value
    m, se = partition_function(X, Y, "tanh", math.inf, t * P, n_samples=4000, seed=11,
                               method="sde", dt=t / 100, a=1.0)
    assert abs(m - z) > 5 * se
    m, se = zero_drift_evidence(X, Y, t / 2, n_paths=4000, seed=11)
    assert abs(m - z) > 5 * se


def test_chain_is_exact_at_small_width():
    """At N = 4, L = 8 (t = 2) the chain is still the network: no width is too small."""
    X, Y = _data(2, seed=3)
    z = deep_linear_evidence(X, Y, [4] * 8).value
    m, se = deep_linear_chain_evidence(X, Y, 4, 8, n_chains=20000, seed=5)
    assert abs(m - z) < 5 * se, (m, se, z)
    # half the depth is refuted with the same draws
    m4, se4 = deep_linear_chain_evidence(X, Y, 4, 4, n_chains=20000, seed=5)
    assert abs(m4 - z) > 5 * se4


@pytest.mark.parametrize("P, t", [(3, 0.25), (2, 1.0)])
def test_meijer_g_converges_at_rate_one_over_n(P, t):
    """Z(N, tN) = Z_oo(t) + C/N + O(N^-2) (Edgeworth: the cumulants of log V beyond the second
    are O(1/N)), so |Z(N) - Z(2N)| = (C/2N)(1 + e/N + ...): slope -1 in N (deterministic,
    N = 64 ... 2048)."""
    X, Y = _data(P)
    Ns = np.array([64, 128, 256, 512, 1024, 2048])
    Z = np.array([deep_linear_evidence(X, Y, [n] * int(t * n)).value for n in Ns])
    d = np.abs(np.diff(Z))
    fit = fit_loglog_slope(Ns[:-1].astype(float), d, correction=-1.0)
    slope, ci = fit.slope, fit.ci
    assert ci[0] <= -1 <= ci[1], (slope, ci)
    assert not ci[0] <= -0.5 <= ci[1]  # an O(N^-1/2) rate is refuted


def test_bad_inputs():
    X, Y = _data(2)
    with pytest.raises(ValueError, match="t must be >= 0"):
        zero_drift_evidence(X, Y, -1.0)
    with pytest.raises(ValueError, match="X must be P x N0"):
        zero_drift_evidence(X, Y[:1], 0.1)
    with pytest.raises(ValueError, match="width must be >= 1"):
        deep_linear_chain_evidence(X, Y, 0, 2)
    with pytest.raises(TypeError, match="n_paths"):
        deep_linear_link(X, Y, 4, 2, n_paths=2.5)
