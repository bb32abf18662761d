"""Metrics: Wasserstein distances (against scipy, symmetry, zero on equal laws, translation and
scale, invariance to sample order and duplication), Gaussian W2 (closed form for commuting
covariances, triangle inequality), Gaussian samples against their moments by Monte Carlo
(identical columns for duplicate inputs), rate fits, and typed errors for bad arguments."""

import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import example, given
from hypothesis import strategies as st

from symscale.kernels import input_kernel
from symscale.metrics import (fit_rate, gaussian_w2, noise_floor, projections,
                              relative_frobenius, sample_gaussian, sliced_wasserstein,
                              wasserstein_1d)

from .strategies import (SEEDS, assert_bad_input, assert_finite, bad_int, bad_matrix,
                         bad_nonnegative, duplicate_pairs, inputs, mc_check, without_none)

values = st.floats(-1e3, 1e3).map(lambda v: 0.0 if abs(v) < 1e-100 else v)
samples_1d = st.lists(values, min_size=1, max_size=30).map(np.array)
weights_1d = st.floats(0.0, 10.0)
orders = st.sampled_from([1, 1.5, 2, 3])


def _scale(*arrays):
    return max(max(np.abs(a).max() for a in arrays), 1e-300)


@given(x=samples_1d, y=samples_1d, data=st.data())
def test_wasserstein_1d_matches_scipy(x, y, data):
    wx = np.array(data.draw(st.lists(weights_1d, min_size=len(x), max_size=len(x))))
    wy = np.array(data.draw(st.lists(weights_1d, min_size=len(y), max_size=len(y))))
    ours = wasserstein_1d(x, y)
    ref = scipy.stats.wasserstein_distance(x, y)
    assert ours == pytest.approx(ref, rel=1e-9, abs=1e-12 * _scale(x, y))
    if wx.sum() > 0 and wy.sum() > 0:
        ours_w = wasserstein_1d(x, y, x_weights=wx, y_weights=wy)
        ref_w = scipy.stats.wasserstein_distance(x, y, wx, wy)
        assert ours_w == pytest.approx(ref_w, rel=1e-9, abs=1e-12 * _scale(x, y))


@given(x=samples_1d, y=samples_1d, p=orders, data=st.data(),
       c=st.floats(-100, 100), a=st.sampled_from([-3.0, 0.5, 2.0, 1e-3, 1e3]))
def test_wasserstein_1d_is_a_metric_with_translation_and_scale(x, y, p, data, c, a):
    d = wasserstein_1d(x, y, p=p)
    tol = 1e-9 * _scale(x, y)
    assert np.isfinite(d) and d >= 0
    assert wasserstein_1d(y, x, p=p) == pytest.approx(d, rel=1e-12, abs=tol)
    assert wasserstein_1d(x, x, p=p) == 0.0
    assert wasserstein_1d(x, x + c, p=p) == pytest.approx(abs(c), rel=1e-9, abs=tol)
    assert wasserstein_1d(a * x, a * y, p=p) == pytest.approx(abs(a) * d, rel=1e-9,
                                                              abs=abs(a) * tol)
    perm = np.array(data.draw(st.permutations(range(len(x)))))
    assert wasserstein_1d(x[perm], y, p=p) == pytest.approx(d, rel=1e-12, abs=tol)
    # an empirical law does not change when every sample is duplicated
    assert wasserstein_1d(np.concatenate([x, x]), y, p=p) == pytest.approx(d, rel=1e-9,
                                                                           abs=tol)
    z = data.draw(samples_1d)
    assert d <= wasserstein_1d(x, z, p=p) + wasserstein_1d(z, y, p=p) + tol


@given(n=st.integers(1, 20), p=orders, seed=SEEDS)
def test_wasserstein_1d_of_equal_sizes_is_the_sorted_coupling(n, p, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n), 3 * rng.standard_normal(n) + 1
    expected = np.mean(np.abs(np.sort(x) - np.sort(y)) ** p) ** (1 / p)
    assert wasserstein_1d(x, y, p=p) == pytest.approx(expected, rel=1e-12)


@st.composite
def clouds(draw):
    d = draw(st.integers(1, 4))
    n, m = draw(st.integers(1, 15)), draw(st.integers(1, 15))
    rng = np.random.default_rng(draw(SEEDS))
    return rng.standard_normal((n, d)), rng.standard_normal((m, d)) * 2 + 0.5


@given(xy=clouds(), p=orders, seed=SEEDS, data=st.data())
def test_sliced_wasserstein_symmetry_zero_and_invariances(xy, p, seed, data):
    X, Y = xy
    d = sliced_wasserstein(X, Y, n_projections=20, seed=seed, p=p)
    assert np.isfinite(d) and d >= 0
    assert sliced_wasserstein(Y, X, n_projections=20, seed=seed, p=p) == pytest.approx(
        d, rel=1e-12, abs=1e-14)
    assert sliced_wasserstein(X, X, n_projections=20, seed=seed, p=p) == 0.0
    assert sliced_wasserstein(np.vstack([X, X]), X, n_projections=20, seed=seed,
                              p=p) == pytest.approx(0.0, abs=1e-12)
    perm = np.array(data.draw(st.permutations(range(len(X)))))
    assert sliced_wasserstein(X[perm], Y, n_projections=20, seed=seed, p=p) == pytest.approx(
        d, rel=1e-12, abs=1e-14)
    # the definition: (mean over directions of W_p^p of the projections)^(1/p)
    theta = projections(X.shape[1], 20, seed=seed)
    theta = theta if theta.shape[0] == X.shape[1] else theta.T
    per = [wasserstein_1d(X @ t, Y @ t, p=p) ** p for t in theta.T]
    assert d == pytest.approx(np.mean(per) ** (1 / p), rel=1e-9, abs=1e-12)


@st.composite
def gaussians(draw, P=None):
    P = P or draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(SEEDS))
    A = rng.standard_normal((P, draw(st.integers(1, P + 1))))
    return rng.standard_normal(P), A @ A.T * draw(st.sampled_from([1.0, 1e-4, 1e4]))


@given(data=st.data())
def test_gaussian_w2_is_a_metric(data):
    P = data.draw(st.integers(1, 4))
    (m1, c1), (m2, c2), (m3, c3) = (data.draw(gaussians(P)) for _ in range(3))
    d12 = gaussian_w2(m1, c1, m2, c2)
    scale = math.sqrt(max(np.trace(c1), np.trace(c2), np.trace(c3), 1.0)) + np.abs(
        np.concatenate([m1, m2, m3])).max()
    assert np.isfinite(d12) and d12 >= 0
    assert gaussian_w2(m2, c2, m1, c1) == pytest.approx(d12, rel=1e-8, abs=1e-7 * scale)
    assert gaussian_w2(m1, c1, m1, c1) == pytest.approx(0.0, abs=1e-6 * scale)
    assert d12 <= gaussian_w2(m1, c1, m3, c3) + gaussian_w2(m3, c3, m2, c2) + 1e-7 * scale


@given(P=st.integers(1, 5), seed=SEEDS)
def test_gaussian_w2_closed_form_for_diagonal_covariances(P, seed):
    rng = np.random.default_rng(seed)
    m1, m2 = rng.standard_normal(P), rng.standard_normal(P)
    a, b = rng.exponential(size=P) * (rng.random(P) > 0.2), rng.exponential(size=P)
    expected = math.sqrt(np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2))
    assert gaussian_w2(m1, np.diag(a), m2, np.diag(b)) == pytest.approx(expected, rel=1e-8,
                                                                        abs=1e-10)


@given(K=st.builds(lambda g: g[1], gaussians()), c=st.sampled_from([1e-6, 0.5, 3.0, 1e6]),
       E=st.builds(lambda g: g[1], gaussians()))
def test_relative_frobenius_is_scale_invariant(K, c, E):
    if not np.abs(K).max() > 0 or E.shape != K.shape:
        return
    assert relative_frobenius(K, K) == 0.0
    r = relative_frobenius(E, K)
    assert np.isfinite(r) and r >= 0
    assert relative_frobenius(c * E, c * K) == pytest.approx(r, rel=1e-12, abs=1e-15)


@given(X=inputs(max_points=4, max_dim=3, zero_rows=True, scale=st.sampled_from([0.5, 1.0, 2.0])),
       seed=SEEDS, with_mean=st.booleans(), jitter=st.sampled_from([None, 0.0]))
@example(X=np.array([[0.0], [0.0], [6.0], [0.0]]), seed=0, with_mean=False,
         jitter=0.0)  # round-off eigenvalues were square-rooted (found by a random run)
def test_gaussian_samples_agree_with_their_moments(X, seed, with_mean, jitter):
    """A GP drawn from a (possibly singular) kernel: mean and covariance within 5 SE, and
    identical columns for duplicate inputs (their difference has variance 0)."""
    K = input_kernel(X, 1.0, 0.1)
    P = len(K)
    mean = X.sum(axis=1) if with_mean else None  # a function of the input, as a GP mean is
    out = sample_gaussian(K, 4000, seed=seed, mean=mean, jitter=jitter)
    s = out.samples
    assert s.shape == (4000, P)
    assert_finite(s, "samples")
    m = np.zeros(P) if mean is None else mean
    mc_check(m, s, what="mean")
    c = s - m
    mc_check(K, c[:, :, None] * c[:, None, :], what="covariance")
    # a documented diagonal jitter j makes the columns differ by N(0, 2 j): allow 8 sd of it
    slack = 8 * math.sqrt(2 * out.jitter_used)
    for i, j in duplicate_pairs(X):
        diff = np.abs(s[:, i] - s[:, j]).max()
        assert diff <= 1e-6 * math.sqrt(K[i, i]) + slack, \
            f"columns of duplicate inputs {i}, {j} differ by {diff:.3g} ({out.method}, " \
            f"jitter {out.jitter_used:.3g})"


@given(alpha=st.floats(-3, 3), C=st.floats(1e-3, 1e3),
       widths=st.lists(st.integers(1, 10_000), min_size=3, max_size=8, unique=True),
       seed=SEEDS)
def test_fit_rate_recovers_an_exact_power_law(alpha, C, widths, seed):
    w = np.array(widths, dtype=float)
    fit = fit_rate(w, C * w ** alpha, n_boot=50, seed=seed)
    assert fit.slope == pytest.approx(alpha, abs=1e-9)
    assert fit.intercept == pytest.approx(math.log(C), abs=1e-8 * (1 + abs(math.log(C))))
    assert fit.ci[0] - 1e-9 <= alpha <= fit.ci[1] + 1e-9


@given(n=st.integers(2, 200), seed=SEEDS)
def test_noise_floor_is_finite_and_nonnegative(n, seed):
    floor = noise_floor(lambda k, rng: rng.standard_normal((k, 2)), n, n_projections=10,
                        seed=seed, n_repeats=3)
    assert np.all(np.isfinite(floor.values)) and np.all(floor.values >= 0)
    assert np.isfinite(floor.stderr) and floor.stderr >= 0


# ---------------------------------------------------------------------------------------------
# bad input

bad_orders = st.sampled_from([0.5, 0, -1, float("nan"), float("inf"), "1", None, True, 1j])


@given(name=st.sampled_from(["x", "y", "p", "x_weights"]), data=st.data())
def test_wasserstein_1d_rejects_bad_arguments(name, data):
    bad = data.draw({"x": bad_matrix((3,)), "y": bad_matrix((3,)), "p": bad_orders,
                     "x_weights": st.sampled_from([np.array([1.0, -1.0, 1.0]), np.zeros(3),
                                                   np.ones(2), np.array([1.0, np.nan, 1.0]),
                                                   "w"])}[name])
    kw = {"x": np.arange(3.0), "y": np.ones(3), name: bad}
    assert_bad_input(name, lambda: wasserstein_1d(**kw))


@given(name=st.sampled_from(["X", "Y", "n_projections", "seed", "p", "n_jobs"]),
       data=st.data())
def test_sliced_wasserstein_rejects_bad_arguments(name, data):
    bad = data.draw({"X": bad_matrix((4, 2)), "Y": st.one_of(bad_matrix((4, 2)),
                                                             st.just(np.ones((4, 3)))),
                     "n_projections": bad_int(1), "seed": st.sampled_from([-1, 2.5, "0",
                                                                          True]),
                     "p": bad_orders, "n_jobs": bad_int(1)}[name])
    kw = {"X": np.ones((4, 2)), "Y": np.zeros((4, 2)), "n_projections": 5, name: bad}
    assert_bad_input(name, lambda: sliced_wasserstein(**kw))


@given(name=st.sampled_from(["mean1", "cov1", "mean2", "cov2"]), data=st.data())
def test_gaussian_w2_rejects_bad_arguments(name, data):
    if name.startswith("mean"):
        bad = data.draw(st.one_of(bad_matrix((2,)), st.just(np.ones(3))))
    else:
        bad = data.draw(st.one_of(bad_matrix((2, 2)), st.sampled_from(
            [np.array([[1.0, 0.5], [0.2, 1.0]]), np.array([[1.0, 2.0], [2.0, 1.0]]),
             np.eye(3)])))
    kw = {"mean1": np.zeros(2), "cov1": np.eye(2), "mean2": np.ones(2), "cov2": np.eye(2),
          name: bad}
    assert_bad_input(name, lambda: gaussian_w2(**kw))


@given(name=st.sampled_from(["K_est", "K_ref"]), bad=bad_matrix((2, 2)))
def test_relative_frobenius_rejects_bad_arguments(name, bad):
    kw = {"K_est": np.eye(2), "K_ref": np.ones((2, 2)), name: bad}
    assert_bad_input(name, lambda: relative_frobenius(**kw))


@given(name=st.sampled_from(["cov", "n", "seed", "mean", "jitter"]), data=st.data())
def test_sample_gaussian_rejects_bad_arguments(name, data):
    bad = data.draw({"cov": st.one_of(bad_matrix((2, 2)), st.just(np.array([[1.0, 2.0],
                                                                             [2.0, 1.0]]))),
                     "n": bad_int(1), "seed": st.sampled_from([-1, 2.5, "0", True]),
                     "mean": without_none(st.one_of(bad_matrix((2,)), st.just(np.ones(3)))),
                     "jitter": without_none(bad_nonnegative)}[name])
    kw = {"cov": np.eye(2), "n": 5, name: bad}
    assert_bad_input(name, lambda: sample_gaussian(**kw))


@given(name=st.sampled_from(["widths", "values", "n_boot", "seed", "level"]), data=st.data())
def test_fit_rate_rejects_bad_arguments(name, data):
    bad = data.draw({"widths": st.sampled_from([np.array([1.0, -2.0, 4.0]),
                                                np.array([1.0, np.nan, 4.0]),
                                                np.array([2.0, 2.0, 4.0]), "w", None]),
                     "values": st.sampled_from([np.array([1.0, 0.0, 2.0]), np.ones(4),
                                                np.array([1.0, np.inf, 1.0]), None]),
                     "n_boot": bad_int(2), "seed": st.sampled_from([-1, 2.5, "0", True]),
                     "level": st.sampled_from([0.0, 1.0, 1.5, float("nan"), "0.9", None,
                                               True])}[name])
    kw = {"widths": np.array([1.0, 2.0, 4.0]), "values": np.array([1.0, 0.5, 0.25]),
          "n_boot": 10, name: bad}
    assert_bad_input(name, lambda: fit_rate(**kw))


@given(name=st.sampled_from(["sampler", "n_samples", "n_projections", "n_repeats", "p"]),
       data=st.data())
def test_noise_floor_rejects_bad_arguments(name, data):
    bad = data.draw({"sampler": st.sampled_from([None, 3, "normal"]),
                     "n_samples": bad_int(1), "n_projections": bad_int(1),
                     "n_repeats": bad_int(2), "p": bad_orders}[name])
    kw = {"sampler": lambda k, rng: rng.standard_normal((k, 2)), "n_samples": 10,
          "n_projections": 4, "n_repeats": 2, name: bad}
    assert_bad_input(name, lambda: noise_floor(**kw))
