"""The layer steps and estimators of cumulant propagation (exactness, sampling, bad input)."""

import numpy as np
import pytest

import symscale as ss
from symscale.testing import fit_loglog_slope
from symscale.cumulants import RandomMLP, monte_carlo, propagate
from symscale.cumulants.nonlinear import nonlinear_step
from symscale.cumulants.state import Cumulants, Tracking, linear_step
from symscale.cumulants.wick import (relu_derivative_mean, relu_gaussian_mean,
                                     relu_gaussian_second_moment)


def _symmetrize(T):
    import itertools
    import math

    perms = list(itertools.permutations(range(T.ndim)))
    return sum(T.transpose(p) for p in perms) / math.factorial(T.ndim)


def _source_cumulants(M, orders):
    """Cumulants of Z = M s for iid centred unit exponentials s (kappa_r(s) = (r-1)!)."""
    import math

    out = {}
    for d in orders:
        spec = ",".join(f"{c}z" for c in "abcdef"[:d]) + "->" + "abcdef"[:d]
        out[d] = math.factorial(d - 1) * np.einsum(spec, *([M] * d))
    return out


def test_linear_layers_keep_gaussian_input_gaussian():
    rng = np.random.default_rng(0)
    n = 6
    Ws = [rng.normal(size=(n, n)) / np.sqrt(n) for _ in range(3)]
    mlp = RandomMLP.from_weights(Ws, activation="identity")
    for K in (3, 4):
        est = propagate(mlp, K=K)
        z = est.layers[-1]
        for d in range(3, K + 1):
            assert np.max(np.abs(z.full[d])) < 1e-14
        exact = Ws[1] @ Ws[0] @ Ws[0].T @ Ws[1].T
        np.testing.assert_allclose(z.full[2], exact, atol=1e-13)
    # the slice-tracked kappa_4 of K=3 stays zero too
    z = propagate(mlp, K=3).layers[-1]
    assert all(np.max(np.abs(a)) < 1e-14 for a in z.slices[4].values())


def test_one_relu_layer_matches_the_closed_forms():
    rng = np.random.default_rng(1)
    n = 5
    mu = rng.normal(size=n)
    A = rng.normal(size=(n, n))
    S = A @ A.T / n + 0.2 * np.eye(n)
    t = Tracking.for_estimator(2)
    a, _ = nonlinear_step(Cumulants(mu, {2: S}), "relu", t)
    sd = np.sqrt(np.diag(S))
    mean = relu_gaussian_mean()(mu, sd)
    second = relu_gaussian_second_moment()(mu, sd)
    np.testing.assert_allclose(a.mean, mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.diag(a.full[2]), second - mean**2, rtol=1e-12, atol=1e-14)
    # off-diagonal: the first Mehler term Phi(alpha_i) Phi(alpha_j) S_ij
    d1 = relu_derivative_mean(1)(mu, sd)
    off = np.outer(d1, d1) * S
    mask = ~np.eye(n, dtype=bool)
    np.testing.assert_allclose(a.full[2][mask], off[mask], rtol=1e-12)


@pytest.mark.parametrize("K", [3, 4])
def test_quadratic_activation_is_exact_given_four_cumulants(K):
    """phi = x^2: the truncated sums are exact once kappa_1..kappa_4 are tracked."""
    ss.register_activation("square_cp", "x**2", overwrite=True)
    try:
        rng = np.random.default_rng(2)
        n, N = 3, 2_000_000
        M = rng.normal(size=(n, n)) / np.sqrt(n)
        mu = np.array([0.3, -0.2, 0.1])
        kap = _source_cumulants(M, (2, 3, 4))
        t = Tracking(full=(1, 2, 3, 4), cap=5)
        a, _ = nonlinear_step(Cumulants(mu, kap), "square_cp", t)
        s = rng.exponential(size=(N, n)) - 1.0
        y = (mu + s @ M.T) ** 2
        m = y.mean(0)
        se = y.std(0) / np.sqrt(N)
        assert np.all(np.abs(a.mean - m) < 5 * se)
        yc = y - m
        prod = yc[:, :, None] * yc[:, None, :]
        cov = prod.mean(0)
        se_cov = prod.std(0) / np.sqrt(N)
        assert np.all(np.abs(a.full[2] - cov) < 5 * se_cov + 1e-12)
    finally:
        ss.unregister_activation("square_cp")


def test_slice_linear_step_equals_the_dense_map():
    """kappa_4 supported on the (2,2) and (4) patterns: slices of W^{x4} kappa vs the slice step."""
    rng = np.random.default_rng(3)
    n = 5
    S = rng.normal(size=(n, n))
    S = S + S.T
    D = rng.normal(size=n)
    T = np.zeros((n,) * 4)
    for i in range(n):
        for k in range(n):
            if i != k:
                for idx in ((i, i, k, k), (i, k, i, k), (i, k, k, i)):
                    T[idx] = S[i, k]
        T[i, i, i, i] = D[i]
    W = rng.normal(size=(4, n))
    dense = np.einsum("ijkl,ai,bj,ck,dl->abcd", T, W, W, W, W)
    t = Tracking(full=(1,), slices=((4, ((2, 2), (4,))),), cap=3)
    c = Cumulants(np.zeros(n), slices={4: {(2, 2): S, (4,): D}})
    out, flops = linear_step(c, W, None, t)
    a = np.arange(4)
    np.testing.assert_allclose(out.slices[4][(4,)], dense[a, a, a, a], rtol=1e-12)
    off = ~np.eye(4, dtype=bool)
    want = np.einsum("aabb->ab", dense)
    np.testing.assert_allclose(out.slices[4][(2, 2)][off], want[off], rtol=1e-12)
    assert flops > 0


def test_dense_linear_step_equals_einsum():
    rng = np.random.default_rng(4)
    n = 4
    T = _symmetrize(rng.normal(size=(n, n, n)))
    W = rng.normal(size=(3, n))
    t = Tracking(full=(1, 2, 3), cap=3)
    c = Cumulants(np.zeros(n), {2: np.eye(n), 3: T})
    out, _ = linear_step(c, W, None, t)
    np.testing.assert_allclose(out.full[3], np.einsum("ijk,ai,bj,ck->abc", T, W, W, W),
                               atol=1e-12)


def test_factored_equals_unfactored_with_the_same_slice_map():
    mlp = RandomMLP.random(3, width=10, seed=5, bias_var=0.1)
    f = propagate(mlp, K=3, factored=True)
    u = propagate(mlp, K=3, coherent_only=True)
    np.testing.assert_allclose(f.estimate, u.estimate, atol=1e-12)
    assert f.flops < u.flops


def test_factored_and_unfactored_k3_agree_within_the_truncation_order():
    """The placements the factored step drops change the estimate at O(n^-3) in MSE: below the
    K=3 error and far below the size of the K=3 correction itself."""
    widths = [8, 16, 32, 64]
    diff, corr = [], []
    for n in widths:
        d, c = [], []
        for seed in range(3):
            mlp = RandomMLP.random(3, width=n, seed=seed)
            f = propagate(mlp, K=3, factored=True).estimate
            u = propagate(mlp, K=3).estimate
            k2 = propagate(mlp, K=2).estimate
            d.append(np.mean((f - u) ** 2))
            c.append(np.mean((u - k2) ** 2))
        diff.append(np.mean(d))
        corr.append(np.mean(c))
    slope = fit_loglog_slope(widths, diff).slope
    assert slope < -2.5, slope
    assert all(a < 1e-2 * b for a, b in zip(diff[1:], corr[1:]))


@pytest.mark.parametrize("act", ["tanh", "gelu", "erf", "sigmoid", "leaky_relu", "abs"])
def test_any_registered_activation_beats_the_gaussian_mean_field(act):
    mlp = RandomMLP.random(2, act, width=24, bias_var=0.2, seed=6)
    mc = monte_carlo(mlp, 400_000, seed=7)
    var = np.mean(mc.var)
    floor = np.mean(mc.sem**2) / var
    e1 = np.mean((propagate(mlp, K=1).estimate - mc.mean) ** 2) / var
    e3 = np.mean((propagate(mlp, K=3, variant="augmented").estimate - mc.mean) ** 2) / var
    assert e3 < e1 and e3 < 0.2 * e1 + 5 * floor


@pytest.mark.parametrize("kwargs,error,match", [
    ({"K": 0}, ValueError, "K must"), ({"K": 5}, ValueError, "K must"),
    ({"K": 2.0}, TypeError, "K must"),  # a float is never an integer (symscale.validation)
    ({"variant": "fancy"}, ValueError, "variant"),
    ({"K": 3, "variant": "gaussian"}, ValueError, "gaussian"),
    ({"K": 2, "factored": True}, ValueError, "factored"), ({"upto": 9}, ValueError, "upto"),
])
def test_bad_estimator_arguments(kwargs, error, match):
    mlp = RandomMLP.random(2, width=4, seed=0)
    with pytest.raises(error, match=match):
        propagate(mlp, **kwargs)


def test_non_square_and_non_finite_weights_are_refused():
    with pytest.raises(ValueError, match="weights"):
        RandomMLP.from_weights([np.ones((3, 3)), np.ones((2, 4))])
    with pytest.raises(ValueError, match="weights"):
        RandomMLP.from_weights([np.array([[1.0, np.nan], [0.0, 1.0]])])


def test_factored_third_slices_equal_the_dense_tensor():
    from symscale.cumulants.factored import FactoredThird

    rng = np.random.default_rng(8)
    A, B, C = (rng.standard_normal((5, 7)) for _ in range(3))
    third = FactoredThird(A, B, C)
    T = third.dense()
    S21, S3, flops = third.slices()
    i = np.arange(5)
    np.testing.assert_allclose(S21, T[i[:, None], i[:, None], i[None, :]], atol=1e-12)
    np.testing.assert_allclose(S3, T[i, i, i], atol=1e-12)
    np.testing.assert_allclose(T, T.transpose(1, 0, 2), atol=1e-12)  # symmetric
    W = rng.standard_normal((4, 5))
    mapped, _ = third.mapped(W)
    np.testing.assert_allclose(mapped.dense(), np.einsum("ijk,ai,bj,ck->abc", T, W, W, W),
                               atol=1e-10)
    assert flops > 0
