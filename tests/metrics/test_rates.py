"""fit_rate (log-log least squares with bootstrap intervals) and noise_floor."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from symscale.metrics import NoiseFloor, RateFit, fit_rate, noise_floor


def floor_constant():
    """(2 / sqrt(pi)) * int sqrt(Phi (1 - Phi)) dx: sqrt(n) E SW_1 for unit Gaussian projections."""
    val, err = integrate.quad(lambda x: math.sqrt(stats.norm.cdf(x) * stats.norm.sf(x)),
                              -np.inf, np.inf, epsabs=1e-12, epsrel=1e-12)
    assert err < 1e-8
    return 2.0 / math.sqrt(math.pi) * val


# ----------------------------------------------------------------------------------------- fit_rate


def test_exact_power_law_is_recovered():
    w = np.array([16, 32, 64, 128, 256, 512])
    fit = fit_rate(w, 3.0 * w ** -0.75, n_boot=300)
    assert isinstance(fit, RateFit)
    assert fit.slope == pytest.approx(-0.75, abs=1e-12)
    assert fit.intercept == pytest.approx(math.log(3.0), abs=1e-12)
    assert fit.ci[0] - 1e-12 <= -0.75 <= fit.ci[1] + 1e-12
    assert fit.ci[1] - fit.ci[0] < 1e-12 and fit.stderr < 1e-12
    assert (fit.n_boot, fit.level) == (300, 0.95)


def test_point_estimate_is_ordinary_least_squares():
    rng = np.random.default_rng(0)
    w = np.array([10, 20, 20, 50, 100, 300])                    # repeated widths are allowed
    v = 5 * w ** -1.0 * np.exp(0.3 * rng.standard_normal(6))
    slope, intercept = np.polyfit(np.log(w), np.log(v), 1)
    fit = fit_rate(w, v, n_boot=200)
    assert fit.slope == pytest.approx(slope, abs=1e-12)
    assert fit.intercept == pytest.approx(intercept, abs=1e-12)


def test_bootstrap_interval_covers_the_true_slope():
    """95% percentile intervals on noisy power laws cover -0.5 at a binomially plausible rate."""
    w = 2.0 ** np.arange(4, 16)
    lx = np.log(w)
    sigma, reps = 0.2, 50
    ols_se = sigma / math.sqrt(np.sum((lx - lx.mean()) ** 2))
    covered, widths = 0, []
    for s in range(reps):
        rng = np.random.default_rng(1000 + s)
        v = 2.0 * w ** -0.5 * np.exp(sigma * rng.standard_normal(w.size))
        fit = fit_rate(w, v, n_boot=1000, seed=s)
        covered += fit.ci[0] <= -0.5 <= fit.ci[1]
        widths.append(fit.ci[1] - fit.ci[0])
    assert covered / reps >= 0.95 - 4 * math.sqrt(0.95 * 0.05 / reps), covered
    # and the interval is not trivially wide: about 2 * 1.96 * (OLS standard error)
    assert np.median(widths) < 2 * (2 * 1.96 * ols_se)


def test_two_dimensional_values_fit_the_mean_and_bootstrap_repeats():
    rng = np.random.default_rng(3)
    w = np.array([32, 64, 128, 256, 512, 1024])
    v = 1.5 * w[:, None] ** -0.5 * np.exp(0.1 * rng.standard_normal((6, 25)))
    fit = fit_rate(w, v, n_boot=800, seed=1)
    slope, intercept = np.polyfit(np.log(w), np.log(v.mean(axis=1)), 1)
    assert fit.slope == pytest.approx(slope, abs=1e-12)
    assert fit.intercept == pytest.approx(intercept, abs=1e-12)
    assert fit.ci[0] < -0.5 < fit.ci[1]
    # the stratified bootstrap s.e. is close to the delta-method s.e. of the fitted slope:
    # Var log(mean_i) ~ sigma^2 / R for lognormal noise with small sigma
    lx = np.log(w)
    delta_se = 0.1 / math.sqrt(25) / math.sqrt(np.sum((lx - lx.mean()) ** 2))
    assert 0.5 * delta_se < fit.stderr < 2 * delta_se
    assert fit_rate(w, v, n_boot=800, seed=1) == fit                # reproducible


def test_degenerate_resamples_are_redrawn():
    # 3 distinct widths: a resample with all widths equal has probability 1/9; all are redrawn
    w = np.array([10.0, 100.0, 1000.0])
    v = np.array([1.0, 0.3, 0.1])
    fit = fit_rate(w, v, n_boot=500, seed=4)
    assert fit.n_boot == 500
    assert np.isfinite([fit.stderr, *fit.ci]).all()
    assert fit.ci[0] <= fit.slope <= fit.ci[1]


def test_seed_controls_the_bootstrap():
    rng = np.random.default_rng(5)
    w = np.array([8, 16, 32, 64, 128])
    v = w ** -0.5 * np.exp(0.2 * rng.standard_normal(5))
    assert fit_rate(w, v, seed=1) == fit_rate(w, v, seed=1)
    assert fit_rate(w, v, seed=1).ci != fit_rate(w, v, seed=2).ci


@pytest.mark.parametrize("args, kwargs, name", [
    (([1, 2, -4], [1, 2, 3]), {}, "widths"),
    (([1, 2, 4], [1, 0, 3]), {}, "values"),
    (([1, 2, 4], [1, np.nan, 3]), {}, "values"),
    (([1, 2, np.inf], [1, 2, 3]), {}, "widths"),
    (([1, 2, 2, 1], [1, 2, 3, 4]), {}, "widths"),                  # 2 distinct widths
    (([1, 2, 4], [1, 2]), {}, "values"),
    (([1, 2, 4], np.ones((3, 1))), {}, "values"),
    (([1, 2, 4], np.ones((3, 2, 2))), {}, "values"),
    (([1, 2, 4], [1, 2, 3]), {"n_boot": 1}, "n_boot"),
    (([1, 2, 4], [1, 2, 3]), {"level": 1.0}, "level"),
    (([1, 2, 4], [1, 2, 3]), {"seed": -3}, "seed"),
])
def test_fit_rate_invalid_inputs(args, kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        fit_rate(*args, **kwargs)


# -------------------------------------------------------------------------------------- noise_floor


def _std_normal_3d(n, rng):
    return rng.standard_normal((n, 3))


def test_noise_floor_matches_the_sampling_theory():
    n = 2000
    floor = noise_floor(_std_normal_3d, n, n_projections=200, seed=0, n_repeats=10)
    assert isinstance(floor, NoiseFloor)
    assert floor.values.shape == (10,) and floor.stderr > 0
    assert floor.mean == pytest.approx(floor.values.mean(), rel=1e-15)
    assert floor.stderr == pytest.approx(floor.values.std(ddof=1) / math.sqrt(10), rel=1e-12)
    c = floor_constant()
    z = (floor.mean * math.sqrt(n) - c) / (floor.stderr * math.sqrt(n))
    assert abs(z) <= 5, z


def test_noise_floor_is_reproducible_and_uses_fresh_samples():
    a = noise_floor(_std_normal_3d, 300, n_projections=20, seed=3, n_repeats=4)
    b = noise_floor(_std_normal_3d, 300, n_projections=20, seed=3, n_repeats=4)
    c = noise_floor(_std_normal_3d, 300, n_projections=20, seed=4, n_repeats=4)
    assert np.array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)
    assert np.unique(a.values).size == 4                   # each repeat draws new samples


def test_noise_floor_shrinks_like_one_over_sqrt_n():
    small = noise_floor(_std_normal_3d, 250, n_projections=100, seed=1, n_repeats=8)
    large = noise_floor(_std_normal_3d, 4000, n_projections=100, seed=1, n_repeats=8)
    ratio = small.mean / large.mean                         # sqrt(4000 / 250) = 4
    se = ratio * math.hypot(small.stderr / small.mean, large.stderr / large.mean)
    assert abs(ratio - 4.0) <= 5 * se, (ratio, se)


def test_noise_floor_one_dimensional_sampler_and_p2():
    floor = noise_floor(lambda n, rng: rng.standard_normal(n), 500, n_projections=5, p=2)
    assert floor.values.shape == (5,) and np.all(floor.values > 0)


@pytest.mark.parametrize("sampler, kwargs, name", [
    (lambda n, rng: rng.standard_normal((n + 1, 2)), {}, "sampler"),
    (lambda n, rng: np.full((n, 2), np.nan), {}, "sampler"),
    (_std_normal_3d, {"n_repeats": 1}, "n_repeats"),
    (_std_normal_3d, {"p": 0}, "p"),
])
def test_noise_floor_invalid_inputs(sampler, kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        noise_floor(sampler, 100, **kwargs)


@pytest.mark.parametrize("sampler, kwargs, name", [
    ("not callable", {}, "sampler"),
    (lambda n, rng: np.full((n, 2), "x"), {}, "sampler"),
    (_std_normal_3d, {"seed": True}, "seed"),
    (_std_normal_3d, {"seed": 1.5}, "seed"),
    (_std_normal_3d, {"p": "2"}, "p"),
    (_std_normal_3d, {"n_repeats": np.True_}, "n_repeats"),
])
def test_noise_floor_wrong_types(sampler, kwargs, name):
    with pytest.raises(TypeError, match=f"^{name} "):
        noise_floor(sampler, 100, **kwargs)
