"""Tests of symscale.testing: z-score assertions, log-log slope fits and seeded generators."""

import math

import numpy as np
import pytest

from symscale.testing import (
    SlopeFit,
    assert_mc_close,
    assert_slope,
    fit_loglog_slope,
    mc_zscore,
    seeded_rng,
)

# ---------------------------------------------------------------------------------------------
# seeded_rng


def test_seeded_rng_reproducible_stream():
    a = seeded_rng(123).standard_normal(1000)
    b = seeded_rng(123).standard_normal(1000)
    c = seeded_rng(124).standard_normal(1000)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # same stream as numpy's default_rng with that seed
    np.testing.assert_array_equal(a, np.random.default_rng(123).standard_normal(1000))


def test_seeded_rng_accepts_numpy_integer():
    np.testing.assert_array_equal(seeded_rng(np.int64(7)).random(10),
                                  np.random.default_rng(7).random(10))


@pytest.mark.parametrize("seed", [1.0, 1.5, "1", None, True, [1]])
def test_seeded_rng_rejects_non_integer_seed(seed):
    with pytest.raises(TypeError, match="integer"):
        seeded_rng(seed)


# ---------------------------------------------------------------------------------------------
# mc_zscore / assert_mc_close


def test_mc_zscore_from_samples_matches_definition():
    x = seeded_rng(0).standard_normal(5000) + 0.3
    z = mc_zscore(x, 0.25)
    expected = (x.mean() - 0.25) / (x.std(ddof=1) / math.sqrt(x.size))
    assert z == pytest.approx(expected, rel=1e-12)


def test_mc_zscore_from_mean_and_stderr():
    assert mc_zscore(mean=1.3, stderr=0.1, expected=1.0) == pytest.approx(3.0, rel=1e-12)
    assert mc_zscore(expected=2.0, mean=1.5, stderr=0.25) == pytest.approx(-2.0, rel=1e-12)


def test_mc_zscore_zero_stderr():
    assert mc_zscore(mean=1.0, stderr=0.0, expected=1.0) == 0.0
    assert mc_zscore(mean=1.1, stderr=0.0, expected=1.0) == math.inf
    assert mc_zscore(mean=0.9, stderr=0.0, expected=1.0) == -math.inf
    # constant samples: standard error exactly 0
    assert mc_zscore(np.full(10, 0.5), 0.5) == 0.0
    assert mc_zscore(np.full(10, 0.5), 0.25) == math.inf


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(samples=[1.0]),                                  # fewer than 2 samples
        dict(samples=[]),
        dict(mean=1.0),                                       # stderr missing
        dict(stderr=1.0),                                     # mean missing
        dict(),                                               # nothing
        dict(mean=1.0, stderr=-0.1),                          # negative stderr
        dict(mean=float("nan"), stderr=0.1),
        dict(mean=1.0, stderr=float("inf")),
        dict(samples=[1.0, float("nan"), 2.0]),
    ],
)
def test_mc_zscore_invalid_inputs(kwargs):
    with pytest.raises(ValueError):
        mc_zscore(expected=0.0, **kwargs)


def test_assert_mc_close_passes_on_correct_mean():
    rng = seeded_rng(0)
    assert_mc_close(rng.standard_normal(20_000) ** 2, 1.0)          # E[Z^2] = 1
    assert_mc_close(np.abs(rng.standard_normal(20_000)), math.sqrt(2 / math.pi))


def test_assert_mc_close_fails_on_wrong_mean():
    x = seeded_rng(0).standard_normal(20_000) ** 2
    # stderr = sqrt(2/20000) ~ 0.01, so 1.2 is ~20 standard errors away
    with pytest.raises(AssertionError, match=r"z = -\d") as info:
        assert_mc_close(x, 1.2, label="second moment")
    assert str(info.value).startswith("second moment: ")
    assert "standard errors" in str(info.value)


def test_assert_mc_close_mean_stderr_form():
    assert_mc_close(mean=1.04, stderr=0.01, expected=1.0)                 # z = 4
    with pytest.raises(AssertionError, match="z = "):
        assert_mc_close(mean=1.06, stderr=0.01, expected=1.0)             # z = 6
    assert_mc_close(mean=1.06, stderr=0.01, expected=1.0, n_sigma=7.0)
    with pytest.raises(AssertionError, match="z = "):
        assert_mc_close(mean=1.04, stderr=0.01, expected=1.0, n_sigma=3.0)


def test_assert_mc_close_zero_stderr():
    assert_mc_close(mean=2.0, stderr=0.0, expected=2.0)
    with pytest.raises(AssertionError):
        assert_mc_close(mean=2.0 + 1e-9, stderr=0.0, expected=2.0)


def test_assert_mc_close_invalid_input():
    with pytest.raises(ValueError):
        assert_mc_close(mean=1.0, expected=1.0)


# ---------------------------------------------------------------------------------------------
# fit_loglog_slope


@pytest.mark.parametrize("slope,const", [(-0.5, 3.0), (1.5, 2.5), (-1.0, 7.0), (2.0, 0.01)])
def test_fit_loglog_slope_exact_power_law(slope, const):
    x = np.array([100.0, 200.0, 400.0, 800.0, 1600.0])
    fit = fit_loglog_slope(x, const * x**slope)
    assert isinstance(fit, SlopeFit)
    assert fit.slope == pytest.approx(slope, abs=1e-12)
    assert fit.intercept == pytest.approx(math.log(const), abs=1e-11)
    assert fit.level == 0.95
    # exact data: the residuals are round-off only, so the interval has zero width up to it
    assert fit.stderr <= 1e-13
    assert 0.0 <= fit.ci[1] - fit.ci[0] <= 1e-12
    assert fit.ci[0] <= fit.slope <= fit.ci[1]


def test_fit_loglog_slope_interval_matches_student_t():
    from scipy import stats

    rng = seeded_rng(3)
    x = np.geomspace(10, 1e4, 8)
    y = 2.0 * x**-0.75 * np.exp(0.1 * rng.standard_normal(x.size))
    fit = fit_loglog_slope(x, y, level=0.9)
    ref = stats.linregress(np.log(x), np.log(y))
    assert fit.slope == pytest.approx(ref.slope, rel=1e-12)
    assert fit.intercept == pytest.approx(ref.intercept, rel=1e-12)
    assert fit.stderr == pytest.approx(ref.stderr, rel=1e-10)
    half = stats.t.ppf(0.95, x.size - 2) * ref.stderr
    assert fit.ci[0] == pytest.approx(ref.slope - half, rel=1e-10)
    assert fit.ci[1] == pytest.approx(ref.slope + half, rel=1e-10)
    assert fit.level == 0.9


def test_fit_loglog_slope_noisy_contains_true_slope():
    rng = seeded_rng(11)
    x = np.geomspace(100, 12800, 8)
    y = 3.0 * x**-0.5 * np.exp(0.05 * rng.standard_normal(x.size))
    fit = fit_loglog_slope(x, y)
    assert fit.ci[0] <= -0.5 <= fit.ci[1]
    assert fit.ci[1] - fit.ci[0] > 0


def test_fit_loglog_slope_interval_coverage():
    """Over many seeded replications the 95% interval covers the true slope ~95% of the time."""
    rng = seeded_rng(2024)
    x = np.geomspace(10, 1e4, 6)
    reps = 2000
    hits = 0
    for _ in range(reps):
        y = 5.0 * x**-1.25 * np.exp(0.2 * rng.standard_normal(x.size))
        lo, hi = fit_loglog_slope(x, y).ci
        hits += lo <= -1.25 <= hi
    cover = hits / reps
    se = math.sqrt(0.95 * 0.05 / reps)
    assert abs(cover - 0.95) <= 5 * se, (cover, se)


@pytest.mark.parametrize(
    "x,y",
    [
        ([1.0, 2.0, 3.0], [1.0, 0.0, 1.0]),          # zero y
        ([1.0, 2.0, 3.0], [1.0, -2.0, 1.0]),         # negative y
        ([0.0, 2.0, 3.0], [1.0, 2.0, 1.0]),          # zero x
        ([-1.0, 2.0, 3.0], [1.0, 2.0, 1.0]),         # negative x
        ([1.0, 2.0, np.inf], [1.0, 2.0, 1.0]),       # non-finite x
        ([1.0, 2.0, 3.0], [1.0, np.nan, 1.0]),       # nan y
        ([1.0, 2.0], [1.0, 2.0]),                    # length < 3
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]),     # shape mismatch
        ([[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]]),      # not 1-D
    ],
)
def test_fit_loglog_slope_invalid_inputs(x, y):
    with pytest.raises(ValueError):
        fit_loglog_slope(x, y)


# ---------------------------------------------------------------------------------------------
# assert_slope


def _noisy_power_law(seed=5, slope=-0.5, sigma=0.03):
    rng = seeded_rng(seed)
    x = np.geomspace(100, 25600, 9)
    return x, 2.0 * x**slope * np.exp(sigma * rng.standard_normal(x.size))


def test_assert_slope_with_margin():
    x = np.array([10.0, 20.0, 40.0, 80.0])
    fit = assert_slope(x, 4.0 / x, -1.0, margin=1e-12)
    assert fit.slope == pytest.approx(-1.0, abs=1e-12)
    assert_slope(x, 4.0 / x, -0.95, margin=0.06)
    with pytest.raises(AssertionError, match="fitted slope"):
        assert_slope(x, 4.0 / x, -0.9, margin=0.05)


def test_assert_slope_with_ci():
    x, y = _noisy_power_law()
    fit = assert_slope(x, y, -0.5)
    assert fit.ci[0] <= -0.5 <= fit.ci[1]
    # a slope well outside the interval fails, and the message states the interval
    far = fit.ci[1] + 10 * (fit.ci[1] - fit.ci[0])
    with pytest.raises(AssertionError, match="95% interval"):
        assert_slope(x, y, far)


def test_assert_slope_level_changes_interval():
    x, y = _noisy_power_law()
    wide = fit_loglog_slope(x, y, level=0.99)
    narrow = fit_loglog_slope(x, y, level=0.5)
    assert wide.ci[0] < narrow.ci[0] <= narrow.ci[1] < wide.ci[1]
    # a value between the two intervals passes at 99% but fails at 50%
    between = (wide.ci[1] + narrow.ci[1]) / 2
    assert_slope(x, y, between, level=0.99)
    with pytest.raises(AssertionError):
        assert_slope(x, y, between, level=0.5)


def test_assert_slope_invalid_input():
    with pytest.raises(ValueError):
        assert_slope([1.0, 2.0], [1.0, 2.0], -1.0)
