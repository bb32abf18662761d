"""Exact ReLU/step/delta products of a centred Gaussian (symscale.expectations.orthant)."""

import itertools

import numpy as np
import pytest

from symscale.expectations import orthant_probability, relu_product_expectation

FUNCS = {"relu": lambda g: np.maximum(g, 0.0), "step": lambda g: (g > 0) * 1.0,
         "relu2": lambda g: np.maximum(g, 0.0) ** 2}


def _random_cov(seed, m=4, extra=2):
    A = np.random.default_rng(seed).standard_normal((m, m + extra))
    return A @ A.T / (m + extra)


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_equicorrelated_half_is_one_over_m_plus_one(m):
    R = np.full((m, m), 0.5) + 0.5 * np.eye(m)
    assert orthant_probability(R) == pytest.approx(1 / (m + 1), abs=1e-13)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sixteen_orthants_sum_to_one(seed):
    # P(s_1 g_1 > 0, ..., s_4 g_4 > 0) over every sign pattern covers the space once
    K = _random_cov(seed)
    total = sum(orthant_probability(np.outer(s, s) * K)
                for s in itertools.product([1.0, -1.0], repeat=4))
    assert total == pytest.approx(1.0, abs=1e-12)


def test_orthant_four_matches_genz_and_block_product():
    from scipy.stats import multivariate_normal

    for seed in range(3):
        K = _random_cov(seed)
        genz = multivariate_normal(np.zeros(4), K, abseps=1e-10, releps=1e-10,
                                   maxpts=10**7).cdf(np.zeros(4))
        assert orthant_probability(K) == pytest.approx(genz, abs=2e-8)
    R = np.eye(4)
    R[0, 1] = R[1, 0] = 0.3
    R[2, 3] = R[3, 2] = -0.7
    assert orthant_probability(R) == pytest.approx(
        orthant_probability(R[:2, :2]) * orthant_probability(R[2:, 2:]), abs=1e-15)


def test_near_coincident_pair_stays_accurate():
    # a correlation of 0.9999 makes the Plackett integrand peak at the end of the path
    K = _random_cov(4)
    s = np.sqrt(np.diag(K))
    K[0, 1] = K[1, 0] = 0.9999 * s[0] * s[1]
    K = K + 1e-9 * np.eye(4)
    total = sum(orthant_probability(np.outer(sg, sg) * K)
                for sg in itertools.product([1.0, -1.0], repeat=4))
    assert total == pytest.approx(1.0, abs=1e-7)


def test_batched_equals_one_by_one():
    Ks = np.stack([_random_cov(s) for s in range(5)])
    kinds = ("relu", "step", "delta", "relu2")
    batch = relu_product_expectation(Ks, kinds)
    assert batch.shape == (5,)
    assert np.allclose(batch, [relu_product_expectation(K, kinds) for K in Ks], rtol=1e-14)


def test_two_point_closed_forms():
    K = np.array([[1.3, 0.4], [0.4, 0.8]])
    s1, s2 = np.sqrt(np.diag(K))
    th = np.arccos(0.4 / (s1 * s2))
    E = relu_product_expectation
    assert E(K, ("relu", "relu")) == pytest.approx(
        s1 * s2 * (np.sin(th) + (np.pi - th) * np.cos(th)) / (2 * np.pi), rel=1e-14)
    assert E(K, ("step", "step")) == pytest.approx((np.pi - th) / (2 * np.pi), rel=1e-14)
    assert E(K[:1, :1], ("relu2",)) == pytest.approx(1.3 / 2, rel=1e-15)
    assert E(K[:1, :1], ("relu",)) == pytest.approx(np.sqrt(1.3 / (2 * np.pi)), rel=1e-15)
    # E[delta(g_1) 1(g_2 > 0)] = p_1(0) / 2; E[delta(g_1) relu(g_2)] = p_1(0) sd(g_2 | g_1 = 0) / sqrt(2 pi)
    p0 = 1 / np.sqrt(2 * np.pi * 1.3)
    assert E(K, ("delta", "step")) == pytest.approx(p0 / 2, rel=1e-15)
    assert E(K, ("delta", "relu")) == pytest.approx(
        p0 * np.sqrt(0.8 - 0.4**2 / 1.3) / np.sqrt(2 * np.pi), rel=1e-14)


@pytest.mark.parametrize("kinds", [("relu", "step", "step", "relu"),
                                   ("relu2", "step", "relu", "step"),
                                   ("relu", "relu", "relu", "relu"),
                                   ("step", "relu2", "step", "step")])
def test_four_point_products_match_monte_carlo(kinds):
    K = _random_cov(7)
    g = np.random.default_rng(11).multivariate_normal(np.zeros(4), K, size=1_000_000)
    v = np.prod([FUNCS[k](g[:, i]) for i, k in enumerate(kinds)], axis=0)
    se = v.std() / np.sqrt(len(v))
    assert abs(relu_product_expectation(K, kinds) - v.mean()) < 4 * se


def test_delta_factor_matches_a_shrinking_window():
    # E[delta(g_0) F] = lim E[1(|g_0| < e) F] / (2 e); the window's bias is O(e^2)
    K = _random_cov(3)
    kinds = ("delta", "step", "relu", "step")
    g = np.random.default_rng(5).multivariate_normal(np.zeros(4), K, size=2_000_000)
    e = 0.02
    v = (np.abs(g[:, 0]) < e) / (2 * e) * FUNCS["step"](g[:, 1]) * FUNCS["relu"](g[:, 2]) \
        * FUNCS["step"](g[:, 3])
    se = v.std() / np.sqrt(len(v))
    assert abs(relu_product_expectation(K, kinds) - v.mean()) < 4 * se


@pytest.mark.parametrize("cov, factors, error, match", [
    (np.eye(5), ("step",) * 5, ValueError, "at most 4"),
    ([[1.0, 0.2], [0.3, 1.0]], ("step", "step"), ValueError, "symmetric"),
    ([[1.0, 0.0], [0.0, 0.0]], ("step", "step"), ValueError, "positive variances"),
    ([[1.0, 1.0], [1.0, 1.0]], ("step", "step"), ValueError, "coincident"),
    (np.eye(2), ("step", "tanh"), ValueError, r"factors\[1\]"),
    (np.eye(2), ("step",), ValueError, "1 entries"),
    (np.eye(2), "step", TypeError, "factors"),
    (np.eye(2), (1, 2), TypeError, "factors"),
    ([[1.0, np.nan], [np.nan, 1.0]], ("step", "step"), ValueError, "cov"),
])
def test_bad_input_is_named(cov, factors, error, match):
    with pytest.raises(error, match=match):
        relu_product_expectation(cov, factors)
