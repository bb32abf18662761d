"""Edge values of cumulant propagation: overflow is a FloatingPointError everywhere (never a
silent inf/NaN), huge and tiny scales give correctly scaled values, bad input a typed error."""

import math

import mpmath as mp
import numpy as np
import pytest

from symscale.cumulants import (RandomMLP, diagram_counts, diagrams, ground_truth, monte_carlo,
                                monte_carlo_mse_over_var, mse_over_var,
                                pattern_in_power_cumulants, propagate, sweep, tail_probability)
from symscale.cumulants import sampling
from symscale.cumulants.diagrams import integer_partitions
from symscale.cumulants.state import Cumulants, Tracking, linear_step

# the typed error is the whole report: no numpy RuntimeWarning may escape on the way
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

ESTIMATORS = [dict(K=1), dict(K=2), dict(K=2, variant="gaussian"), dict(K=2, variant="augmented"),
              dict(K=3), dict(K=4), dict(K=3, factored=True), dict(K=4, factored=True)]


def _scaled_relu(scale, seed=0, n=4):
    """``(M, M_s)``: a 2-layer ReLU net without readout bias, and the same with its first
    layer (weights and biases) multiplied by ``scale``, so that ``M_s = scale * M``."""
    r = RandomMLP.random(1, width=n, seed=seed, bias_var=0.1)
    biases = [r.biases[0], np.zeros(n)]
    base = RandomMLP.from_weights(r.weights, biases, "relu")
    return base, RandomMLP.from_weights([r.weights[0] * scale, r.weights[1]],
                                        [biases[0] * scale, biases[1]], "relu")


# ---------------------------------------------------------------------------------------------
# overflow: one error type, naming the layer, for sampling and propagation alike


def test_sampling_overflow_raises_naming_the_layer():
    _, hidden = _scaled_relu(1e300)   # |z_1| ~ 1e300 * |x| overflows in layer 1 for some x
    out = RandomMLP.from_weights([np.full((3, 3), 1e200), np.full((2, 3), 1e200)],
                                 activation="relu")
    for run in (lambda m: monte_carlo(m, 1000, seed=0),
                lambda m: ground_truth(m, 1000, seed=0, batch=300, progress=False)):
        with pytest.raises(FloatingPointError, match="output layer overflow"):
            run(out)
        with pytest.raises(FloatingPointError, match="too large"):
            run(hidden)
    with pytest.raises(FloatingPointError, match="output layer overflow"):
        out.forward(np.ones(3))


def test_sampling_variance_overflow_raises():
    """Outputs up to ~1e201 are finite but their variance (~1e402) is not."""
    net = RandomMLP.from_weights([np.full((3, 3), 1e100), np.full((2, 3), 1e100)],
                                 activation="relu")
    with pytest.raises(FloatingPointError, match="mean or variance of the outputs overflows"):
        monte_carlo(net, 100, seed=0)
    # pooling two finite batch summaries whose means differ by 2e200
    a, b = (2, np.array([1e200]), np.zeros(1)), (2, np.array([-1e200]), np.zeros(1))
    with pytest.raises(FloatingPointError, match="variance of output 0 over 4 samples"):
        sampling._checked_merge(a, b)


def test_activation_overflow_names_the_activation():
    net = RandomMLP.from_weights([np.full((2, 2), 300.0), np.ones((1, 2))], activation="exp")
    with pytest.raises(FloatingPointError, match="activation exp of hidden layer 1"):
        monte_carlo(net, 200, seed=0)
    with pytest.raises(FloatingPointError, match="exp.*layer 1"):
        propagate(net, K=2)


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: "-".join(map(str, e.values())))
def test_propagation_overflow_raises_naming_the_layer(est):
    _, net = _scaled_relu(1e150)   # variances 1e300: kappa_4 (1e600) overflows; K=1, 2 too at 1e200
    huge = _scaled_relu(1e200)[1]
    with pytest.raises(FloatingPointError, match="layer 1"):
        propagate(huge, **est)
    if est["K"] >= 3 or est.get("variant") == "augmented":
        with pytest.raises(FloatingPointError, match="layer 1"):
            propagate(net, **est)


@pytest.mark.parametrize("K", [1, 2, 3])
def test_tail_probability_overflow_is_an_error_not_nan(K):
    """Found: at first-layer variance 1e240 the kappa_4 slices became 0 * inf = NaN and the tail
    probability came back NaN for every neuron."""
    _, net = _scaled_relu(1e120)
    if K == 3:
        with pytest.raises(FloatingPointError, match="layer 1"):
            tail_probability(net, 1, 1e120, K=K)
    else:  # no kappa_4 tracked: the probability is that of the unscaled net, exactly
        base = _scaled_relu(1.0)[0]
        p = tail_probability(net, 1, 1e120, K=K).probability
        assert np.all(np.isfinite(p))
        np.testing.assert_allclose(p, tail_probability(base, 1, 1.0, K=K).probability,
                                   rtol=1e-12)


def test_tail_probability_far_thresholds_are_exact_zero_and_one():
    mlp = RandomMLP.random(2, width=6, seed=0)
    for K in (1, 2, 3):
        assert np.all(tail_probability(mlp, 2, 1e300, K=K).probability == 0.0)
        assert np.all(tail_probability(mlp, 2, -1e300, K=K).probability == 1.0)


SCALE = 2.0**240  # a power of two: the scaled network computes exactly SCALE times the outputs


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: "-".join(map(str, e.values())))
def test_huge_but_representable_scale_is_exact(est):
    """ReLU is positively homogeneous: scaling layer 1 by 2^240 scales E[M(X)] by 2^240.
    (K >= 3 track kappa_4 ~ 2^960 * ..., beyond float64: a FloatingPointError, not a value.)"""
    base, net = _scaled_relu(SCALE)
    try:
        got = propagate(net, **est).estimate
    except FloatingPointError as exc:
        assert est["K"] >= 3 or est.get("variant") == "augmented", exc
        assert "layer 1" in str(exc)
        return
    np.testing.assert_allclose(got / SCALE, propagate(base, **est).estimate, rtol=1e-12,
                               atol=0)


@pytest.mark.parametrize("est", ESTIMATORS[:3], ids=lambda e: "-".join(map(str, e.values())))
def test_tiny_scale_is_exact_or_an_error(est):
    """At 2^-500 the variances (~2^-1000 ~ 1e-301) are normal floats: exact scaling. At 2^-525
    they are subnormal (~1e-316) and were silently off by 1e-9 .. 1e-4: now an error."""
    base, net = _scaled_relu(2.0**-500)
    np.testing.assert_allclose(propagate(net, **est).estimate / 2.0**-500,
                               propagate(base, **est).estimate, rtol=1e-12, atol=0)
    _, sub = _scaled_relu(2.0**-525)
    with pytest.raises(FloatingPointError, match="below the float64 normal range.*too small"):
        propagate(sub, **est)


def test_huge_scale_monte_carlo_is_exactly_scaled():
    base, net = _scaled_relu(SCALE)
    a, b = monte_carlo(net, 3000, seed=4), monte_carlo(base, 3000, seed=4)
    np.testing.assert_array_equal(a.mean, SCALE * b.mean)
    np.testing.assert_array_equal(a.var, SCALE**2 * b.var)
    g = ground_truth(net, 3000, seed=4, batch=700, progress=False)
    np.testing.assert_array_equal(g.mean, SCALE * ground_truth(base, 3000, seed=4, batch=700,
                                                               progress=False).mean)


def test_deterministic_neuron_is_a_named_error_in_propagation():
    W1 = np.array([[1.0, 0.5], [0.0, 0.0]])  # neuron 1 has no random input
    net = RandomMLP.from_weights([W1, np.ones((1, 2))], activation="relu")
    for K in (1, 2, 3):
        with pytest.raises(FloatingPointError, match="neuron 1 of layer 1 is 0.*zero incoming"):
            propagate(net, K=K)
    with pytest.raises(FloatingPointError, match="neuron 1 of layer 1"):
        propagate(net, K=2, variant="gaussian")
    # sampling has no such restriction: E[relu(z_0)] = |w_0| / sqrt(2 pi)
    res = monte_carlo(net, 40_000, seed=0)
    exact = math.hypot(1.0, 0.5) / math.sqrt(2 * math.pi)
    assert abs(res.mean[0] - exact) < 4 * res.sem[0]


# ---------------------------------------------------------------------------------------------
# scores at extreme magnitudes (reference: mpmath at 30 digits)


def _mp_ratio(est, tru, var):
    mp.mp.dps = 30
    n = len(est)
    num = mp.fsum((mp.mpf(e) - mp.mpf(t)) ** 2 for e, t in zip(est, tru)) / n
    return num / (mp.fsum(mp.mpf(v) for v in var) / n)


@pytest.mark.parametrize("est, tru, var", [
    ([1e200], [-1e200], [1e300]),                  # (est - tru)^2 = 4e400 overflowed: inf
    ([1.0, 1.0], [0.0, 0.0], [1e308, 1e308]),        # mean(var) overflowed: returned 0
    ([1.0, 1e-200], [1.0, 0.0], [1e-300, 1e-300]),   # 1e-400 underflowed: returned 0
    ([3.0, -2.0, 0.5], [1.0, 1.0, 1.0], [2.0, 0.5, 1.0]),
    ([1e160, 0.0], [-1e160, 0.0], [1e300, 1e300]),  # 4e320 overflowed: inf, not 2e20
])
def test_mse_over_var_at_extreme_magnitudes(est, tru, var):
    got = mse_over_var(est, tru, var)
    ref = _mp_ratio(est, tru, var)
    assert math.isfinite(got) and abs(got - float(ref)) <= 1e-14 * abs(float(ref))


def test_score_overflow_and_signed_zero():
    with pytest.raises(FloatingPointError, match="mse_over_var overflows"):
        mse_over_var([1e200], [-1e200], [1.0])
    with pytest.raises(FloatingPointError, match="monte_carlo_mse_over_var overflows"):
        monte_carlo_mse_over_var(1e-300, 1e300)
    assert mse_over_var([-0.0], [0.0], [1.0]) == mse_over_var([0.0], [0.0], [1.0]) == 0.0
    # the plain formula, bit for bit, where it does not overflow
    rng = np.random.default_rng(3)
    for _ in range(50):
        e, t = rng.normal(size=9) * 1e3, rng.normal(size=9)
        v = rng.random(9) * 1e-3
        assert mse_over_var(e, t, v) == float(np.mean(np.square(e - t)) / v.mean())


# ---------------------------------------------------------------------------------------------
# bad input: a typed error naming the argument


@pytest.mark.parametrize("weights, error, match", [
    ([np.ones((0, 3)), np.ones((2, 0))], ValueError, r"weights\[0\] must have at least one row"),
    ([np.ones((3, 0))], ValueError, r"weights\[0\] must have at least one row"),
    ([np.ones((3, 3)), np.ones((0, 3))], ValueError, r"weights\[1\] must have at least one row"),
    ([np.ones((2, 2), dtype=bool)], TypeError, r"weights\[0\] must be a real numeric array"),
    ([np.ones((2, 2), dtype=complex)], TypeError, r"weights\[0\] must be a real numeric array"),
    ([[["a", "b"]]], TypeError, r"weights\[0\] must be a real numeric array"),
    ([[[1.0, None]]], TypeError, r"weights\[0\] must be a real numeric array"),
    ([[[1.0, 2.0], [3.0]]], ValueError, r"weights\[0\] must be a rectangular"),
    (np.float64(3.0), TypeError, "weights must be a sequence"),
])
def test_from_weights_rejects(weights, error, match):
    with pytest.raises(error, match=match):
        RandomMLP.from_weights(weights, activation="relu")


def test_network_methods_reject():
    mlp = RandomMLP.random(1, width=3, seed=0)
    with pytest.raises(ValueError, match="W must have at least one row"):
        mlp.with_readout(np.ones((0, 3)), activation="relu")
    with pytest.raises(ValueError, match="x contains non-finite"):
        mlp.forward([np.nan, 0.0, 0.0])
    with pytest.raises(TypeError, match="x must be a real numeric array"):
        mlp.forward(["a", "b", "c"])
    with pytest.raises(TypeError, match="theta must be a real number, got str 'high'"):
        mlp.tail_indicator(1, "high")
    with pytest.raises(TypeError, match="biases must be a sequence"):
        RandomMLP.from_weights([np.ones((2, 2))], biases=5.0)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(n_samples=True), TypeError, "n_samples"),
    # a float is never an integer, not even np.float64(8) (symscale.validation)
    (dict(n_samples=50.7), TypeError, "n_samples must be an integer, got float 50.7"),
    (dict(n_samples="100"), TypeError, "n_samples"),
    (dict(batch=np.float64(8)), TypeError, "batch must be an integer, got float64 8.0"),
    (dict(seed=-3), ValueError, "seed must be >= 0, got -3"),
    (dict(seed=2.5), TypeError, "seed"),
    (dict(seed="s"), TypeError, "seed"),
    (dict(progress=None), TypeError, "progress"),
])
def test_monte_carlo_and_ground_truth_reject(kwargs, error, match):
    mlp = RandomMLP.random(1, width=3, seed=0)
    args = dict(n_samples=100) | kwargs
    with pytest.raises(error, match=match):
        monte_carlo(mlp, **args)
    with pytest.raises(error, match=match):
        ground_truth(mlp, **args)


def test_numpy_integers_are_accepted():
    mlp = RandomMLP.random(np.int32(1), width=np.int64(3), seed=np.int64(0))
    a = monte_carlo(mlp, np.int64(500), seed=np.uint16(1), batch=np.int32(128))
    b = monte_carlo(mlp, 500, seed=1, batch=128)
    assert np.array_equal(a.mean, b.mean) and a.n_samples == 500
    g = ground_truth(mlp, np.int64(500), seed=np.int64(1), batch=np.int16(128), progress=False)
    assert g.n_samples == 500
    assert np.array_equal(propagate(mlp, K=np.int64(2), upto=np.int8(1)).estimate,
                          propagate(mlp, K=2, upto=1).estimate)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(K=True), TypeError, "K must be an integer"),
    (dict(K="2"), TypeError, "K must be an integer"),
    (dict(K=2.5), TypeError, "K must be an integer, got float 2.5"),
    (dict(K=5), ValueError, "K must be <= 4, got 5"),
    (dict(upto=True), TypeError, "upto"),
    (dict(upto=1.5), TypeError, "upto"),
    (dict(upto=0), ValueError, "upto"),
    (dict(K=3, factored=1), TypeError, "factored must be True or False"),
    (dict(keep_layers="no"), TypeError, "keep_layers"),
    (dict(coherent_only=0), TypeError, "coherent_only"),
    (dict(variant=["basic"]), ValueError, "variant"),
])
def test_propagate_rejects(kwargs, error, match):
    with pytest.raises(error, match=match):
        propagate(RandomMLP.random(2, width=4, seed=0), **kwargs)


def test_propagate_and_tails_reject_a_non_network():
    with pytest.raises(TypeError, match="mlp must be a RandomMLP"):
        propagate(None)
    with pytest.raises(TypeError, match="mlp must be a RandomMLP"):
        tail_probability([np.eye(2)], 1, 0.0)


@pytest.mark.parametrize("args, error, match", [
    ((2, "high"), TypeError, "theta"),
    ((2, True), TypeError, "theta"),
    ((2, math.inf), ValueError, "theta"),
    ((True, 1.0), TypeError, "layer"),
    ((2.0, 1.0), TypeError, "layer"),
])
def test_tail_probability_rejects(args, error, match):
    with pytest.raises(error, match=match):
        tail_probability(RandomMLP.random(2, width=4, seed=0), *args)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(widths=[0]), ValueError, r"widths\[0\] must be >= 1, got 0"),
    (dict(widths=[50.7]), TypeError, r"widths\[0\] must be an integer, got float 50.7"),
    (dict(widths=8), TypeError, "widths must be a sequence"),
    (dict(depths=[True]), TypeError, r"depths\[0\]"),
    (dict(seeds=[-1]), ValueError, r"seeds\[0\]"),
    (dict(Ks=[5]), ValueError, "Ks must contain integers in 1..4"),
    (dict(variants=["fast"]), ValueError, "variants must contain"),
    (dict(n_truth=1), ValueError, "n_truth must be >= 2, got 1"),
    (dict(factored="yes"), TypeError, "factored"),
])
def test_sweep_rejects(kwargs, error, match):
    args = dict(widths=[4], depths=[1], Ks=[1], seeds=[0], n_truth=100, progress=False) | kwargs
    with pytest.raises(error, match=match):
        sweep(**args)


def test_score_functions_reject_non_numbers():
    with pytest.raises(TypeError, match="estimate must be a real numeric array"):
        mse_over_var([True, False], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(TypeError, match="var must be a real numeric array"):
        mse_over_var([1.0], [0.0], ["one"])
    with pytest.raises(TypeError, match="flops must be a real number, got bool True"):
        monte_carlo_mse_over_var(True, 10)


def test_diagram_functions_reject():
    with pytest.raises(TypeError, match=r"powers\[0\] must be an integer, got float 1.7"):
        diagrams((1.7,), 2)  # was truncated to (1,)
    with pytest.raises(TypeError, match="powers"):
        diagrams((True,), 2)
    with pytest.raises(ValueError, match=r"powers\[1\] must be >= 1, got 0"):
        diagrams((1, 0), 2)
    with pytest.raises(ValueError, match="powers must be a non-empty tuple"):
        diagrams((), 2)
    with pytest.raises(TypeError, match="cap"):
        diagrams((1, 1), True)
    with pytest.raises(TypeError, match="cap must be an integer, got float 2.5"):
        diagrams((1, 1), 2.5)
    assert diagrams([1, 1], 3) == diagrams((1, 1), 3)  # a list works like the tuple
    with pytest.raises(TypeError, match=r"groups\[0\]"):
        pattern_in_power_cumulants((1.5, 1))
    with pytest.raises(ValueError, match="max_slots"):
        diagram_counts(-1, 2)
    with pytest.raises(ValueError, match="d must be >= 0, got -1"):
        integer_partitions(-1)
    with pytest.raises(ValueError, match="K must be >= 1, got 0"):
        Tracking.for_estimator(0)
    with pytest.raises(ValueError, match="K must be <= 4, got 5"):
        Tracking.for_estimator(5)
    with pytest.raises(TypeError, match="K must be an integer"):
        Tracking.for_estimator(True)
    t = Tracking.for_estimator(2)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        Cumulants.standard_gaussian(0, t)
    with pytest.raises(TypeError, match="tracking must be a Tracking"):
        Cumulants.standard_gaussian(2, "K=2")
    with pytest.raises(ValueError, match=r"W must have shape \(n_out, 3\)"):
        linear_step(Cumulants.standard_gaussian(3, t), np.ones((2, 4)), None, t)
