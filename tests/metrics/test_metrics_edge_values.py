"""Metrics at the edges of float64: huge and tiny samples, large p, huge weights, and the
argument checks of every public function.

References are independent of the code under test: mpmath at 30 digits on the exact float
inputs (sorted differences, the quantile formula, the closed-form W2 of commuting Gaussians),
closed forms, and the homogeneity W_p(c X, c Y) = c W_p(X, Y) against an unscaled run.
"""

import math

import mpmath as mp
import numpy as np
import pytest

from symscale.metrics import (fit_rate, gaussian_w2, noise_floor, projections,
                              relative_frobenius, sample_gaussian, sliced_wasserstein,
                              wasserstein_1d)

mp.mp.dps = 30
RNG = np.random.default_rng(11)
A = RNG.standard_normal((20, 3))
B = RNG.standard_normal((20, 3)) + np.array([1.0, 0.0, -0.5])
B_UNEQUAL = RNG.standard_normal((13, 3))
THETA = projections(3, 5, seed=4)


# ------------------------------------------------------------------------ mpmath references


def _mp_wpp_sorted(x, y, p):
    """W_p^p of equal-size uniform samples: mean of |x_(i) - y_(i)|^p, in mpmath."""
    xs, ys = sorted(map(mp.mpf, x)), sorted(map(mp.mpf, y))
    return mp.fsum(abs(a - b) ** p for a, b in zip(xs, ys)) / len(xs)


def _mp_wpp_quantile(x, a, y, b, p):
    """W_p^p by the quantile formula sum_k (t_k - t_{k-1}) |F^-1(t_k) - G^-1(t_k)|^p."""
    def cdf(v, w):
        order = sorted(range(len(v)), key=lambda i: v[i])
        w = [mp.mpf(1) if w is None else mp.mpf(w[i]) for i in order]
        total = mp.fsum(w)
        acc, out = mp.mpf(0), []
        for wi in w:
            acc += wi
            out.append(acc / total)
        return [mp.mpf(v[i]) for i in order], out

    xv, xc = cdf(x, a)
    yv, yc = cdf(y, b)
    ts = sorted(set(xc) | set(yc))

    def quantile(vals, cum, t):
        return next((v for v, c in zip(vals, cum) if c >= t), vals[-1])

    prev, total = mp.mpf(0), mp.mpf(0)
    for t in ts:
        total += (t - prev) * abs(quantile(xv, xc, t) - quantile(yv, yc, t)) ** p
        prev = t
    return total


def _mp_sliced(X, Y, theta, p, wpp=None):
    """Per-projection W_p and SW_p with exact projections (mpmath dot products)."""
    wpp = wpp or (lambda x, y: _mp_wpp_sorted(x, y, p))
    per = []
    for k in range(theta.shape[1]):
        t = [mp.mpf(v) for v in theta[:, k]]
        px = [mp.fsum(mp.mpf(v) * tj for v, tj in zip(row, t)) for row in X]
        py = [mp.fsum(mp.mpf(v) * tj for v, tj in zip(row, t)) for row in Y]
        per.append(wpp(px, py))
    return [w ** (mp.mpf(1) / p) for w in per], (mp.fsum(per) / len(per)) ** (mp.mpf(1) / p)


def _close(value, ref, rtol):
    assert abs(mp.mpf(value) - ref) <= rtol * abs(ref), (value, ref)


# ------------------------------------------------------------------- Wasserstein: huge / tiny


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e300, 2.0**-1000])
@pytest.mark.parametrize("p", [1, 2, 3.5])
def test_sliced_wasserstein_is_homogeneous_and_exact_at_extreme_scales(scale, p):
    """SW_p(c A, c B) = c SW_p(A, B); before, 1e200 with p = 2 gave NaN (squares overflow) and
    1e-200 gave 0 (squares underflow)."""
    value, per = sliced_wasserstein(A * scale, B * scale, p=p, projections=THETA,
                                    return_per_projection=True)
    ref_per, ref = _mp_sliced(A * scale, B * scale, THETA, p)
    _close(value, ref, 1e-13)
    for v, r in zip(per, ref_per):
        _close(v, r, 1e-13)
    unscaled = sliced_wasserstein(A, B, p=p, projections=THETA)
    assert value == pytest.approx(unscaled * scale, rel=1e-13)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_sliced_wasserstein_unequal_sizes_and_weights_at_extreme_scales(scale):
    ref_per, ref = _mp_sliced(A * scale, B_UNEQUAL * scale, THETA, 2,
                              lambda x, y: _mp_wpp_quantile(x, None, y, None, 2))
    _close(sliced_wasserstein(A * scale, B_UNEQUAL * scale, p=2, projections=THETA), ref, 1e-13)
    w = np.linspace(1.0, 3.0, 20)
    ref_per, ref = _mp_sliced(A * scale, B * scale, THETA[:, :2], 2,
                              lambda x, y: _mp_wpp_quantile(x, w, y, None, 2))
    value = sliced_wasserstein(A * scale, B * scale, p=2, projections=THETA[:, :2], x_weights=w)
    _close(value, ref, 1e-13)


def test_sliced_wasserstein_with_huge_projections():
    """Directions of size 1e300 times samples of size 10 would overflow the projections."""
    value = sliced_wasserstein(A * 10, B * 10, p=2, projections=THETA * 1e300)
    _close(value, _mp_sliced(A * 10, B * 10, THETA * 1e300, 2)[1], 1e-13)


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e-300])
@pytest.mark.parametrize("p", [1, 2, 7.0])
def test_wasserstein_1d_at_extreme_scales(scale, p):
    x, y = A[:, 0] * scale, B[:, 1] * scale
    _close(wasserstein_1d(x, y, p=p), _mp_wpp_sorted(x, y, p) ** (mp.mpf(1) / p), 1e-13)
    w = np.linspace(0.5, 2.0, 20)
    ref = _mp_wpp_quantile(x, w, B_UNEQUAL[:, 0] * scale, None, p) ** (mp.mpf(1) / p)
    _close(wasserstein_1d(x, B_UNEQUAL[:, 0] * scale, p=p, x_weights=w), ref, 1e-13)


def test_wasserstein_near_the_float64_maximum():
    """Sorted differences of 2.7e308 overflow, yet W_1 = 1.35e308 is a float64 number."""
    x, y = [-1.7e308, 1.7e308], [1.0e308, 1.7e308]
    assert wasserstein_1d(x, y) == pytest.approx(1.35e308, rel=1e-15)
    assert sliced_wasserstein(np.array(x)[:, None], np.array(y)[:, None],
                              projections=[[1.0]]) == pytest.approx(1.35e308, rel=1e-15)
    with pytest.raises(OverflowError, match="Wasserstein distance of x and y"):
        wasserstein_1d([1.7e308], [-1.0e308])          # W = 2.7e308 is not a float64
    with pytest.raises(OverflowError, match="sliced Wasserstein distance of X and Y"):
        sliced_wasserstein([[1.7e308]], [[-1.0e308]], projections=[[1.0]])


@pytest.mark.parametrize("p", [400, 1000, 1e6])
def test_wasserstein_with_large_p(p):
    """|x - y|^p overflows (10^400) or underflows (1e-3^1000) for large p; W_p itself is a
    moderate number (it tends to max |x_(i) - y_(i)| as p grows)."""
    for x, y in ((A[:, 0] * 10, B[:, 0]), (A[:, 0] * 1e-3, B[:, 0] * 1e-3)):
        ref = _mp_wpp_sorted(x, y, p) ** (mp.mpf(1) / p)
        _close(wasserstein_1d(x, y, p=p), ref, 1e-12)
    ref = _mp_sliced(A * 10, B, THETA, p)[1]
    _close(sliced_wasserstein(A * 10, B, p=p, projections=THETA), ref, 1e-12)


def test_huge_and_tiny_weights():
    """Weights 1e308 sum to infinity; subnormal weights lose digits: both are normalized."""
    x, y = np.array([0.0, 1.0, 2.0, 5.0]), np.array([0.0, 1.0, 3.0])
    for w in ([1e308, 1e308, 1e300, 5e307], [4e-320, 4e-320, 4e-328, 2e-320]):
        ref = _mp_wpp_quantile(x, w, y, None, 2) ** mp.mpf(0.5)
        _close(wasserstein_1d(x, y, p=2, x_weights=w), ref, 1e-12)


# --------------------------------------------------------------------------- Gaussian metrics


def _mp_w2_diagonal(m1, v1, m2, v2):
    """W2 of Gaussians with diagonal covariances: |m1 - m2|^2 + sum (sqrt v1 - sqrt v2)^2."""
    return mp.sqrt(mp.fsum((mp.mpf(a) - mp.mpf(b)) ** 2 for a, b in zip(m1, m2))
                   + mp.fsum((mp.sqrt(mp.mpf(a)) - mp.sqrt(mp.mpf(b))) ** 2
                             for a, b in zip(v1, v2)))


@pytest.mark.parametrize("m1, v1, m2, v2", [
    ([1e300, 0.0], [1.0, 2.0], [-1e300, 3e299], [4.0, 1.0]),      # |m1 - m2|^2 overflows
    ([3e-200, 0.0], [0.0, 0.0], [0.0, 4e-200], [0.0, 0.0]),       # |m1 - m2|^2 underflows
    ([0.0, 0.0], [1e-300, 4e-300], [1e-160, 0.0], [9e-300, 0.0]),
    ([1e150, 2e150], [1e300, 1.7e308], [0.0, 0.0], [4e300, 1e307]),
])
def test_gaussian_w2_at_extreme_scales(m1, v1, m2, v2):
    value = gaussian_w2(m1, np.diag(v1), m2, np.diag(v2))
    _close(value, _mp_w2_diagonal(m1, v1, m2, v2), 1e-12)


def test_gaussian_w2_is_homogeneous_for_full_covariances():
    C1 = np.array([[2.0, 0.7], [0.7, 1.0]])
    C2 = np.array([[1.0, -0.3], [-0.3, 3.0]])
    m1, m2 = np.array([1.0, -2.0]), np.array([0.5, 0.5])
    base = gaussian_w2(m1, C1, m2, C2)
    for c in (2.0**500, 2.0**-500, 1e150, 1e-150):
        assert gaussian_w2(c * m1, c * c * C1, c * m2, c * c * C2) == pytest.approx(c * base,
                                                                                    rel=1e-12)


@pytest.mark.parametrize("est, ref, expected", [
    (2e200 * np.eye(2), 1e200 * np.eye(2), 1.0),
    (2e-200 * np.eye(2), 1e-200 * np.eye(2), 1.0),            # was "K_ref must be nonzero"
    (np.full((2, 2), 3e-320), np.full((2, 2), 1e-320), 2.0),
    ([1e-300, 0.0], [1e300, 0.0], 1.0),
    ([1.7e308, -1.7e308], [-1.7e308, 1.7e308], 2.0),          # the difference overflows
])
def test_relative_frobenius_at_extreme_scales(est, ref, expected):
    assert relative_frobenius(est, ref) == pytest.approx(expected, rel=1e-14)


def test_relative_frobenius_beyond_float64_raises():
    with pytest.raises(OverflowError, match="relative Frobenius error"):
        relative_frobenius(1e200 * np.eye(2), 1e-200 * np.eye(2))


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_sample_gaussian_at_extreme_scales(scale):
    """Draws from cov * c are the draws from cov times sqrt(c) (same seed, same method)."""
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    base = sample_gaussian(K, 50, seed=3)
    draw = sample_gaussian(K * scale, 50, seed=3)
    assert draw.method == base.method == "cholesky"
    np.testing.assert_allclose(draw.samples, base.samples * math.sqrt(scale), rtol=1e-13)


@pytest.mark.parametrize("scale", [1e308, 1e-310])
def test_sample_gaussian_jitter_ladder_at_extreme_scales(scale):
    """Rank-1 kernel: the jitter is 1e-12 * trace / P in the user's units (trace 2e308 would
    overflow), and the two coordinates agree to sqrt(jitter)."""
    K = np.array([[1.0, 1.0], [1.0, 1.0]]) * scale
    draw = sample_gaussian(K, 200, seed=0)
    assert draw.method == "cholesky"
    assert draw.jitter_used == pytest.approx(1e-12 * scale, rel=1e-12)
    s = draw.samples / math.sqrt(scale)
    assert np.all(np.isfinite(s)) and 0.5 < s[:, 0].std() < 1.5
    assert np.max(np.abs(s[:, 0] - s[:, 1])) < 1e-4


def test_fit_rate_with_huge_repeated_values():
    """Row sums of values near 1e308 overflow; the fit must equal the unscaled one with the
    intercept shifted by log(c). Deterministic values: the slope is exactly -0.5."""
    w = np.array([16.0, 64.0, 256.0, 1024.0])
    spread = np.array([0.9, 1.0, 1.15, 0.95])
    v = 2.0 * w[:, None] ** -0.5 * spread[None, :] * 8      # row means 16 w^-0.5 * 1.0
    base = fit_rate(w, v, n_boot=300, seed=1)
    huge = fit_rate(w, v * 1e307, n_boot=300, seed=1)
    assert base.slope == pytest.approx(-0.5, abs=1e-13)
    assert huge.slope == pytest.approx(-0.5, abs=1e-13)
    assert huge.intercept == pytest.approx(math.log(16.0 * 1e307), rel=1e-14)
    assert huge.ci == pytest.approx(base.ci, abs=1e-12)
    assert huge.stderr == pytest.approx(base.stderr, rel=1e-9, abs=1e-15)


def test_noise_floor_of_huge_samples():
    """Distances near 1e200 square to infinity in the standard deviation; scaled first."""
    def sampler(c):
        return lambda n, rng: rng.standard_normal((n, 2)) * c

    base = noise_floor(sampler(1.0), 200, n_projections=20, seed=2, p=2)
    huge = noise_floor(sampler(1e200), 200, n_projections=20, seed=2, p=2)
    np.testing.assert_allclose(huge.values, base.values * 1e200, rtol=1e-12)
    assert huge.mean == pytest.approx(base.mean * 1e200, rel=1e-12)
    assert huge.stderr == pytest.approx(base.stderr * 1e200, rel=1e-10)


# --------------------------------------------------------------------------- argument checks

_X2, _Y2 = [[0.0, 1.0], [1.0, 0.0]], [[0.0, 2.0], [1.0, 1.0]]
_C = np.eye(2)


def _with(value, where):
    """``where`` with its first entry replaced by ``value``."""
    arr = np.array(where, dtype=float)
    arr.flat[0] = value
    return arr


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("call, name", [
    (lambda v: wasserstein_1d(_with(v, [0.0, 1.0]), [1.0]), "x"),
    (lambda v: wasserstein_1d([0.0], _with(v, [0.0, 1.0])), "y"),
    (lambda v: wasserstein_1d([0.0, 1.0], [1.0], x_weights=_with(v, [1.0, 1.0])), "x_weights"),
    (lambda v: wasserstein_1d([0.0], [1.0, 2.0], y_weights=_with(v, [1.0, 1.0])), "y_weights"),
    (lambda v: wasserstein_1d([0.0], [1.0], p=v), "p"),
    (lambda v: sliced_wasserstein(_with(v, _X2), _Y2), "X"),
    (lambda v: sliced_wasserstein(_X2, _with(v, _Y2)), "Y"),
    (lambda v: sliced_wasserstein(_X2, _Y2, projections=_with(v, _C)), "projections"),
    (lambda v: sliced_wasserstein(_X2, _Y2, p=v), "p"),
    (lambda v: sliced_wasserstein(_X2, _Y2, x_weights=_with(v, [1.0, 2.0])), "x_weights"),
    (lambda v: gaussian_w2(_with(v, [0.0, 0.0]), _C, [0.0, 0.0], _C), "mean1"),
    (lambda v: gaussian_w2([0.0, 0.0], _C, _with(v, [0.0, 0.0]), _C), "mean2"),
    (lambda v: gaussian_w2([0.0, 0.0], _with(v, _C), [0.0, 0.0], _C), "cov1"),
    (lambda v: gaussian_w2([0.0, 0.0], _C, [0.0, 0.0], _with(v, _C)), "cov2"),
    (lambda v: relative_frobenius(_with(v, _C), _C), "K_est"),
    (lambda v: relative_frobenius(_C, _with(v, _C)), "K_ref"),
    (lambda v: sample_gaussian(_with(v, _C), 3), "cov"),
    (lambda v: sample_gaussian(_C, 3, mean=_with(v, [0.0, 0.0])), "mean"),
    (lambda v: sample_gaussian(_C, 3, jitter=v), "jitter"),
    (lambda v: fit_rate(_with(v, [1.0, 2.0, 4.0]), [1.0, 2.0, 3.0]), "widths"),
    (lambda v: fit_rate([1.0, 2.0, 4.0], _with(v, [1.0, 2.0, 3.0])), "values"),
    (lambda v: fit_rate([1.0, 2.0, 4.0], [1.0, 2.0, 3.0], level=v), "level"),
    (lambda v: noise_floor(lambda n, rng: np.full((n, 2), v), 5), "sampler"),
    (lambda v: noise_floor(lambda n, rng: rng.standard_normal((n, 2)), 5, p=v), "p"),
])
def test_non_finite_arguments_raise_value_error_naming_them(call, name, bad):
    with pytest.raises(ValueError, match=f"^{name} "):
        call(bad)


@pytest.mark.parametrize("call, name", [
    (lambda: wasserstein_1d([0.0], [1.0], p=True), "p"),
    (lambda: wasserstein_1d(["a"], [1.0]), "x"),
    (lambda: wasserstein_1d([0.0], [1.0 + 2.0j]), "y"),
    (lambda: sliced_wasserstein(_X2, _Y2, n_projections=True), "n_projections"),
    (lambda: sliced_wasserstein(_X2, _Y2, seed="0"), "seed"),
    (lambda: sliced_wasserstein(_X2, _Y2, n_jobs=None), "n_jobs"),
    (lambda: sliced_wasserstein(_X2, _Y2, return_per_projection=1), "return_per_projection"),
    (lambda: sliced_wasserstein(_X2, _Y2, chunk_bytes=True), "chunk_bytes"),
    (lambda: sliced_wasserstein(np.array(_X2, dtype=bool), _Y2), "X"),
    (lambda: projections(True, 3), "dim"),
    (lambda: projections(2, 3, seed=np.True_), "seed"),
    (lambda: gaussian_w2("a", _C, [0.0, 0.0], _C), "mean1"),
    (lambda: relative_frobenius([["a"]], [[1.0]]), "K_est"),
    (lambda: sample_gaussian(_C, True), "n"),
    # a float where an integer is expected is a TypeError, even an integral one
    (lambda: sliced_wasserstein(_X2, _Y2, n_projections=2.5), "n_projections"),
    (lambda: sliced_wasserstein(_X2, _Y2, n_projections=3.0), "n_projections"),
    (lambda: sample_gaussian(_C, 50.7), "n"),
    (lambda: fit_rate([1, 2, 4], [1, 2, 3], n_boot=True), "n_boot"),
    (lambda: fit_rate([1, 2, 4], [1, 2, 3], level="0.9"), "level"),
    (lambda: noise_floor(lambda n, rng: rng.standard_normal(n), 5, n_jobs=1.0 + 0j), "n_jobs"),
])
def test_wrong_types_raise_type_error_naming_the_argument(call, name):
    with pytest.raises(TypeError, match=f"^{name} "):
        call()


@pytest.mark.parametrize("call, name", [
    (lambda: wasserstein_1d([0.0], [1.0], p=0.99), "p"),
    (lambda: sliced_wasserstein(_X2, _Y2, seed=-1), "seed"),
    (lambda: sliced_wasserstein(_X2, _Y2, n_jobs=0), "n_jobs"),
    (lambda: sliced_wasserstein([[[0.0]]], _Y2), "X"),
    (lambda: sliced_wasserstein([[0.0, 1.0], [2.0]], _Y2), "X"),
    (lambda: projections(2, 0), "n_projections"),
    (lambda: noise_floor(lambda n, rng: rng.standard_normal(n), 0), "n_samples"),
    (lambda: noise_floor(lambda n, rng: rng.standard_normal(n), 5, n_projections=0),
     "n_projections"),
    (lambda: noise_floor(lambda n, rng: rng.standard_normal(n), 5, n_jobs=0), "n_jobs"),
])
def test_out_of_range_arguments_raise_value_error_naming_them(call, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        call()


def test_numpy_integer_arguments_are_accepted():
    a = sliced_wasserstein(_X2, _Y2, n_projections=np.int64(7), seed=np.uint16(3),
                           n_jobs=np.int32(1), p=np.float32(2.0), chunk_bytes=np.int64(64))
    assert a == sliced_wasserstein(_X2, _Y2, n_projections=7, seed=3, n_jobs=1, p=2.0,
                                   chunk_bytes=64)
    assert np.array_equal(sample_gaussian(_C, np.int64(4), seed=np.int64(1)).samples,
                          sample_gaussian(_C, 4, seed=1).samples)


def test_indefinite_covariances_are_reported_in_the_users_units():
    """Huge covariances are factorized after scaling; the error shows the user's eigenvalues."""
    bad = np.array([[1.0, 2.0], [2.0, 1.0]]) * 1e300           # eigenvalues 3e300, -1e300
    with pytest.raises(ValueError, match=r"^cov must be positive semi-definite, got smallest "
                                         r"eigenvalue -1e\+300"):
        sample_gaussian(bad, 3)
    with pytest.raises(ValueError, match=r"^cov1 must be positive semi-definite, got smallest "
                                         r"eigenvalue -1e\+300 \(largest 3e\+300\)"):
        gaussian_w2([0.0, 0.0], bad, [0.0, 0.0], np.eye(2))
