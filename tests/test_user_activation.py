"""One user activation, registered once, runs through every line of work with no further code.

``x + x**2/2 * exp(-x**2)`` has no closed-form dual kernel, Hermite expansion of the kind the
exact engine knows, or family: every line of work must fall back to its general path, and each
result is checked against an independent computation (sampling, or another code path).
"""

import math

import numpy as np
import pytest

import symscale as ss
from symscale import cumulants, deep_ntk, lofi, netsor, nsde
from symscale.metrics import fit_loglog_slope

NAME = "user_bump"
N_SIGMA = 5.0


@pytest.fixture(scope="module")
def act():
    ss.register_activation(NAME, "x + x**2/2*exp(-x**2)", overwrite=True)
    yield NAME
    ss.unregister_activation(NAME)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 3))
X /= np.linalg.norm(X, axis=1, keepdims=True)


def test_the_activation_has_no_closed_form(act):
    a = ss.activation(act)
    assert a.family is None
    with pytest.raises(ss.NoClosedFormError):
        ss.dual_kernel(a)


def test_netsor_finite_and_infinite_nngp_and_ntk(act):
    p = netsor.mlp(2, act, weight_var=1.2, bias_var=0.1)
    inf = netsor.run_infinite(p, X)
    fin = netsor.run_finite(p, X, width=512, n_networks=32, seed=0)
    h = p.meta["last"]
    mean, se = fin.gram_mean(h)
    assert np.all(np.abs(mean - inf.kernels[h]) <= N_SIGMA * se + 1e-12)
    theta = netsor.infinite_ntk(p, X)
    emp = netsor.empirical_ntk(p, X, width=1024, n_networks=16, seed=1)
    z = np.abs(emp.mean(axis=0) - theta) / (emp.std(axis=0, ddof=1) / 4)
    assert z.max() <= N_SIGMA
    # the chain recursion (mlp_kernels, layer by layer) and the graph engine agree
    k = netsor.kernel_fn(p)(X)
    assert k.path == "layer by layer"
    np.testing.assert_allclose(k.ntk, theta, rtol=1e-12)
    np.testing.assert_allclose(k.nngp, inf.output(), rtol=1e-12)


def test_deep_ntk_depth_recursion(act):
    """normalized_ntk's (q, rho) recursion against mlp_kernels on two unit inputs."""
    rho, depth = 0.3, 6
    w = 1.0 / float(ss.dual_kernel_numeric(act, 1.0, 1.0, 1.0))
    pair = np.array([[1.0, 0.0], [rho, math.sqrt(1 - rho**2)]]) * math.sqrt(2 / w)
    _, theta = ss.mlp_kernels(pair, depth, act, weight_var=w)  # input kernel = x.x'
    want = theta[0, 1] / theta[0, 0]
    got = deep_ntk.normalized_ntk(rho, depth, act)
    assert got == pytest.approx(want, rel=1e-10)


def test_nsde_drift_and_chain(act):
    b = nsde.drift(act)
    assert NAME in b.name
    cs = nsde.correlation_sde(act)
    # the drift and diffusion of the correlation against one sampled chain layer
    assert cs.drift.check(n_points=2, n_samples=3000, seed=1).passed
    assert cs.variance.check(n_points=2, n_samples=3000, seed=2).passed


def test_cumulant_propagation_k1_to_k3(act):
    """K = 2 and 3 are within the Monte Carlo noise of a 2**20-sample reference, K = 1 is not
    (n MSE/Var is a chi-square mean over the outputs: 1 +- sqrt(2 / outputs) by chance)."""
    mlp = cumulants.random_mlp(2, act, width=32, seed=0)
    n = 2**20
    ref = cumulants.monte_carlo(mlp, n, seed=1)
    bound = 1 + N_SIGMA * math.sqrt(2 / ref.mean.size)
    scores = {}
    for K in (1, 2, 3):
        est = cumulants.propagate(mlp, K, factored=(K == 3)).estimate
        scores[K] = n * cumulants.mse_over_var(est, ref.mean, ref.var)
    assert scores[1] > bound, scores
    assert scores[2] <= bound and scores[3] <= bound, scores


def test_lofi_kernel_form_is_the_limit_of_the_finite_form(act):
    """The first-layer spectrum of LoFi at width P approaches LoFiKernel's like P^-1/2."""
    Xl = RNG.standard_normal((30, 5))
    y = np.where(Xl[:, 0] * Xl[:, 1] > 0, 1, -1)
    kernel = lofi.LoFiKernel([3], activation=act, ridge=1e-2).fit(Xl, y)
    spec = np.sort(kernel.spectra_[0])
    widths = np.array([500, 1000, 2000, 4000, 8000])
    errs = []
    for P in widths:
        runs = [np.sum((np.sort(lofi.LoFi([(int(P), 3)], activation=act, seed=s)
                                .fit(Xl, y).spectra_[0]) - spec) ** 2) for s in range(4)]
        errs.append(math.sqrt(np.mean(runs)))
    fit = fit_loglog_slope(widths, errs)
    assert fit.ci[0] <= -0.5 <= fit.ci[1], fit
