"""gaussian_w2, relative_frobenius and sample_gaussian."""

import math

import numpy as np
import pytest
from scipy import linalg

from symscale.metrics import GaussianSample, gaussian_w2, relative_frobenius, sample_gaussian


def _spd(rng, P, cond=10.0):
    Q, _ = np.linalg.qr(rng.standard_normal((P, P)))
    return (Q * np.geomspace(1.0, cond, P)) @ Q.T


# -------------------------------------------------------------------------------------- gaussian_w2


def test_equal_covariances_give_the_distance_of_the_means():
    rng = np.random.default_rng(0)
    C = _spd(rng, 5)
    m1, m2 = rng.standard_normal(5), rng.standard_normal(5)
    assert gaussian_w2(m1, C, m2, C) == pytest.approx(np.linalg.norm(m1 - m2), rel=1e-12)
    assert gaussian_w2(m1, C, m1, C) < 1e-6                  # sqrt of round-off in the traces


def test_commuting_covariances_closed_form():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.1, 3, 6), rng.uniform(0.1, 3, 6)
    m1, m2 = rng.standard_normal(6), rng.standard_normal(6)
    expected = math.sqrt(np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2))
    assert gaussian_w2(m1, np.diag(a), m2, np.diag(b)) == pytest.approx(expected, rel=1e-12)
    # the same pair in a rotated basis still commutes
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    got = gaussian_w2(Q @ m1, Q @ np.diag(a) @ Q.T, Q @ m2, Q @ np.diag(b) @ Q.T)
    assert got == pytest.approx(expected, rel=1e-12)


def test_symmetric_in_its_arguments_and_matches_scipy_sqrtm():
    rng = np.random.default_rng(2)
    C1, C2 = _spd(rng, 4, 50.0), _spd(rng, 4, 5.0)
    m1, m2 = rng.standard_normal(4), rng.standard_normal(4)
    d12, d21 = gaussian_w2(m1, C1, m2, C2), gaussian_w2(m2, C2, m1, C1)
    assert d12 == pytest.approx(d21, rel=1e-10)
    S1 = linalg.sqrtm(C1).real
    ref = np.sum((m1 - m2) ** 2) + np.trace(C1 + C2 - 2 * linalg.sqrtm(S1 @ C2 @ S1).real)
    assert d12 == pytest.approx(math.sqrt(ref), rel=1e-10)


@pytest.mark.parametrize("m1, s1, m2, s2", [(0.0, 1.0, 3.0, 2.0), (-1.5, 0.2, 0.5, 0.7),
                                            (2.0, 0.0, 2.0, 1.0)])
def test_one_dimensional_case(m1, s1, m2, s2):
    expected = math.sqrt((m1 - m2) ** 2 + (s1 - s2) ** 2)
    assert gaussian_w2(m1, s1 ** 2, m2, s2 ** 2) == pytest.approx(expected, rel=1e-12)
    assert gaussian_w2([m1], [[s1 ** 2]], [m2], [[s2 ** 2]]) == pytest.approx(expected, rel=1e-12)


def test_rank_deficient_covariances():
    # rank-1 C = u u^T, D = v v^T (unit u, v): W2^2 = |dm|^2 + 2 - 2 |u . v|
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal(4), rng.standard_normal(4)
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    m1, m2 = np.zeros(4), np.full(4, 0.5)
    expected = math.sqrt(1.0 + 2.0 - 2.0 * abs(u @ v))
    assert gaussian_w2(m1, np.outer(u, u), m2, np.outer(v, v)) == pytest.approx(expected,
                                                                                rel=1e-10)
    # rank-deficient against full rank: 1-D marginal check via commuting diagonal matrices
    assert gaussian_w2([0, 0], np.diag([4.0, 0.0]), [0, 0], np.diag([1.0, 9.0])) == \
        pytest.approx(math.sqrt(1.0 + 9.0), rel=1e-12)
    # a zero covariance: the distance to a point mass is sqrt(|dm|^2 + tr C)
    C = _spd(rng, 3)
    assert gaussian_w2(np.zeros(3), np.zeros((3, 3)), np.ones(3), C) == \
        pytest.approx(math.sqrt(3.0 + np.trace(C)), rel=1e-12)


@pytest.mark.parametrize("args, name", [
    ((np.zeros(2), [[1.0, 0.5], [0.0, 1.0]], np.zeros(2), np.eye(2)), "cov1"),
    ((np.zeros(2), np.eye(2), np.zeros(2), [[1.0, 2.0], [2.0, 1.0]]), "cov2"),
    ((np.zeros(2), np.eye(2), np.zeros(3), np.eye(2)), "mean2"),
    ((np.zeros(2), np.eye(2), np.zeros(2), np.eye(3)), "cov2"),
    (([np.nan, 0.0], np.eye(2), np.zeros(2), np.eye(2)), "mean1"),
    ((np.zeros(2), np.ones((2, 3)), np.zeros(2), np.eye(2)), "cov1"),
    ((np.zeros(2), [[1.0, np.inf], [np.inf, 1.0]], np.zeros(2), np.eye(2)), "cov1"),
])
def test_gaussian_w2_invalid_inputs(args, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        gaussian_w2(*args)


# ------------------------------------------------------------------------------- relative_frobenius


def test_relative_frobenius_values():
    K = np.array([[2.0, 1.0], [1.0, 2.0]])
    assert relative_frobenius(K, K) == 0.0
    assert relative_frobenius(2 * K, K) == pytest.approx(1.0, rel=1e-15)
    assert relative_frobenius(K + np.eye(2), K) == pytest.approx(math.sqrt(2 / 10), rel=1e-15)
    assert relative_frobenius([3.0, 4.0], [0.0, 5.0]) == pytest.approx(math.sqrt(10) / 5)


def test_relative_frobenius_of_a_stack_is_the_error_of_each_matrix():
    rng = np.random.default_rng(3)
    K = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]])
    # per-matrix scales from 1e-250 to 1e250: each is rescaled by its own power of two
    g = rng.standard_normal((2, 3, 3, 3)) * np.array([1e-250, 1.0, 1e250])[:, None, None]
    stacked = relative_frobenius(g, K)
    assert stacked.shape == (2, 3)
    alone = np.array([[relative_frobenius(m, K) for m in row] for row in g])
    np.testing.assert_allclose(stacked, alone, rtol=1e-15)
    assert relative_frobenius(np.stack([K, K]), K).tolist() == [0.0, 0.0]
    with pytest.raises(OverflowError, match="exceeds the float64 range"):
        relative_frobenius(np.stack([K, 1e300 * K]), 1e-100 * K)
    with pytest.raises(ValueError, match=r"^K_est .*\(\.\.\., \*\(3, 3\)\)"):
        relative_frobenius(np.ones((4, 3, 2)), K)
    with pytest.raises(ValueError, match="^K_est "):
        relative_frobenius(np.stack([K, np.full((3, 3), np.inf)]), K)
    # a vector reference is never stacked: a matrix against it is a shape mistake
    with pytest.raises(ValueError, match="^K_est must have the shape of K_ref"):
        relative_frobenius(np.ones((2, 2)), np.ones(2))


def test_relative_frobenius_errors():
    with pytest.raises(ValueError, match="^K_ref "):
        relative_frobenius(np.eye(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="^K_est "):
        relative_frobenius(np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match="^K_est "):
        relative_frobenius([[np.nan]], [[1.0]])


# ---------------------------------------------------------------------------------- sample_gaussian


def test_sample_covariance_matches_within_standard_errors():
    C = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
    mean = np.array([1.0, -2.0, 0.5])
    n = 200_000
    draw = sample_gaussian(C, n, seed=0, mean=mean)
    assert isinstance(draw, GaussianSample)
    assert (draw.method, draw.jitter_used) == ("cholesky", 0.0)
    assert draw.samples.shape == (n, 3)
    d = np.diag(C)
    se_cov = np.sqrt((np.outer(d, d) + C ** 2) / n)
    z_cov = (np.cov(draw.samples, rowvar=False) - C) / se_cov
    assert np.abs(z_cov).max() <= 5, z_cov
    z_mean = (draw.samples.mean(axis=0) - mean) / np.sqrt(d / n)
    assert np.abs(z_mean).max() <= 5, z_mean


def test_sampling_is_reproducible():
    C = np.array([[1.0, 0.3], [0.3, 2.0]])
    a, b = sample_gaussian(C, 50, seed=7), sample_gaussian(C, 50, seed=7)
    assert np.array_equal(a.samples, b.samples)
    assert not np.array_equal(a.samples, sample_gaussian(C, 50, seed=8).samples)


def test_rank_one_kernel_uses_jitter_or_eigh():
    v = np.array([1.0, 2.0, -1.0])
    K = np.outer(v, v)                                    # exactly singular: Cholesky fails
    n = 20_000
    draw = sample_gaussian(K, n, seed=1)
    assert (draw.method == "cholesky" and draw.jitter_used > 0) or draw.method == "eigh"
    assert draw.jitter_used <= 1e-6 * np.trace(K) / 3
    # the draws lie on the line spanned by v, up to the jitter
    along = draw.samples @ v / (v @ v)
    resid = draw.samples - np.outer(along, v)
    roundoff = 3 * np.finfo(float).eps * np.abs(np.linalg.eigvalsh(K)).max()   # P eps |K|
    assert np.abs(resid).max() <= 10 * math.sqrt(draw.jitter_used + roundoff)
    # samples = z v with z ~ N(0, 1): the coefficient along v has unit variance
    assert abs(along.var() - 1.0) <= 5 * math.sqrt(2 / n)

    eig = sample_gaussian(K, n, seed=1, jitter=0.0)      # jitter disabled: eigendecomposition
    assert (eig.method, eig.jitter_used) == ("eigh", 0.0)
    along = eig.samples @ v / (v @ v)
    assert np.abs(eig.samples - np.outer(along, v)).max() <= 10 * math.sqrt(roundoff)
    assert abs(along.var() - 1.0) <= 5 * math.sqrt(2 / n)


def test_explicit_jitter_is_reported():
    draw = sample_gaussian(np.eye(2), 10, seed=0, jitter=1e-3)
    assert (draw.method, draw.jitter_used) == ("cholesky", 1e-3)


def test_slightly_negative_round_off_is_accepted():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((6, 2))
    K = A @ A.T                                           # rank 2, eigenvalues ~ -1e-16
    K[0, 0] -= 1e-12 * np.abs(K).max()                    # still within 1e-8 relative
    draw = sample_gaussian((K + K.T) / 2, 100, seed=0)
    assert draw.samples.shape == (100, 6) and np.isfinite(draw.samples).all()


@pytest.mark.parametrize("cov, kwargs, name", [
    ([[1.0, 2.0], [2.0, 1.0]], {}, "cov"),                # eigenvalues 3, -1
    ([[1.0, 0.5], [0.0, 1.0]], {}, "cov"),                # not symmetric
    (np.ones((2, 3)), {}, "cov"),
    ([[1.0, np.nan], [np.nan, 1.0]], {}, "cov"),
    (np.eye(2), {"mean": [1.0, 2.0, 3.0]}, "mean"),
    (np.eye(2), {"n": 0}, "n"),
    (np.eye(2), {"jitter": -1e-3}, "jitter"),
    (np.eye(2), {"seed": -1}, "seed"),
])
def test_sample_gaussian_invalid_inputs(cov, kwargs, name):
    kwargs = {"n": 5, **kwargs}
    with pytest.raises(ValueError, match=f"^{name} "):
        sample_gaussian(cov, **kwargs)


@pytest.mark.parametrize("cov, kwargs, name", [
    (np.eye(2), {"seed": "a"}, "seed"),
    (np.eye(2), {"n": True}, "n"),
    (np.eye(2), {"n": 2.5}, "n"),  # a float is never truncated to an integer
    (np.eye(2), {"jitter": True}, "jitter"),
    ([["a", "b"], ["c", "d"]], {}, "cov"),
])
def test_sample_gaussian_wrong_types(cov, kwargs, name):
    kwargs = {"n": 5, **kwargs}
    with pytest.raises(TypeError, match=f"^{name} "):
        sample_gaussian(cov, **kwargs)
