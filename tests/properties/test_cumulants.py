"""Cumulant propagation: finite estimates for every estimator, exactness where the layer input
is Gaussian (depth 0 and 1) checked against Monte Carlo, Wick coefficients against Monte Carlo
and across methods, Monte Carlo batching, tail probabilities, and typed errors for bad
arguments."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import ndtr

from symscale.cumulants import (monte_carlo, mse_over_var, propagate, random_mlp,
                                tail_probability, wick_table)

from .strategies import (SEEDS, assert_bad_input, assert_finite, bad_int, bad_nonnegative,
                         bad_positive, bad_real, bulk_max, mc_check, without_none)

ACTS = ["relu", "tanh", "erf", "abs", "gelu", "sin", "leaky_relu", "identity", "step",
        "softplus"]
ESTIMATORS = [(1, "basic", False), (2, "basic", False), (2, "gaussian", False),
              (3, "basic", False), (2, "augmented", False), (3, "augmented", False),
              (3, "basic", True), (4, "basic", True), (4, "basic", False)]


@st.composite
def mlps(draw, depth=st.integers(0, 3), width=st.integers(1, 6)):
    return random_mlp(draw(depth), draw(st.sampled_from(ACTS)), width=draw(width),
                      weight_var=draw(st.sampled_from([None, 1.0, 2.5])),
                      bias_var=draw(st.sampled_from([0.0, 0.1, 1.0])), seed=draw(SEEDS),
                      input_dim=draw(st.integers(1, 4)), output_dim=draw(st.integers(1, 3)))


@given(mlp=mlps(), est=st.sampled_from(ESTIMATORS))
def test_every_estimator_gives_a_finite_estimate_of_the_output_shape(mlp, est):
    K, variant, factored = est
    if K == 4 and not factored and mlp.width > 5:
        return  # O(n^5): keep the example fast
    try:
        run = propagate(mlp, K=K, variant=variant, factored=factored)
    except FloatingPointError as exc:  # a typed error naming the cause is allowed (truncated
        assert "variance" in str(exc) or "cumulant" in str(exc)  # cumulants can go invalid)
        return
    assert run.estimate.shape == (mlp.output_dim,)
    assert_finite(run.estimate, run.name)
    assert run.flops > 0 or mlp.depth == 0


@given(mlp=mlps(depth=st.just(0)), est=st.sampled_from(ESTIMATORS))
def test_an_affine_network_is_propagated_exactly(mlp, est):
    K, variant, factored = est
    run = propagate(mlp, K=K, variant=variant, factored=factored)
    np.testing.assert_allclose(run.estimate, mlp.biases[0], rtol=1e-14, atol=1e-15)


@given(mlp=mlps(depth=st.just(1)), est=st.sampled_from(ESTIMATORS), seed=SEEDS)
def test_one_hidden_layer_is_exact_and_agrees_with_monte_carlo(mlp, est, seed):
    """The first pre-activations are exactly Gaussian, so every estimator gives the exact mean
    output; Monte Carlo must agree within 5 standard errors."""
    K, variant, factored = est
    run = propagate(mlp, K=K, variant=variant, factored=factored)
    x = np.random.default_rng(seed).standard_normal((20_000, mlp.input_dim))
    # a ReLU neuron with P(z > 0) = 3e-5 may never fire in 20000 draws: bound the output on
    # the bulk of the (exactly Gaussian) hidden pre-activations
    sd = np.sqrt(np.sum(mlp.weights[0] ** 2, axis=1))
    hidden = bulk_max(mlp.activations[0], mlp.biases[0], sd)
    bound = np.abs(mlp.weights[1]) @ hidden
    mc_check(run.estimate, mlp.forward(x), what=run.name, bound=bound)


@given(mlp=mlps(width=st.integers(1, 4)))
def test_factored_k4_equals_dense_k4(mlp):
    try:
        dense = propagate(mlp, K=4).estimate
        fact = propagate(mlp, K=4, factored=True).estimate
    except FloatingPointError as exc:  # truncated cumulants left the valid region (typed,
        assert "variance" in str(exc)  # and round-off decides it near a variance of 0)
        return
    scale = np.abs(dense).max() + 1.0
    np.testing.assert_allclose(fact, dense, rtol=1e-9, atol=1e-12 * scale)


@given(mlp=mlps(), n=st.integers(2, 300), batch=st.integers(1, 64), seed=SEEDS)
def test_monte_carlo_does_not_depend_on_the_batch_size(mlp, n, batch, seed):
    res = monte_carlo(mlp, n, seed=seed, batch=batch)
    x = np.random.default_rng(seed).standard_normal((n, mlp.input_dim))
    y = mlp.forward(x)
    scale = np.abs(y).max() + 1e-300
    np.testing.assert_allclose(res.mean, y.mean(0), rtol=1e-11, atol=1e-13 * scale)
    np.testing.assert_allclose(res.var, y.var(0, ddof=1), rtol=1e-9, atol=1e-13 * scale ** 2)
    assert np.all(res.sem >= 0) and res.n_samples == n


@given(act=st.sampled_from(ACTS + ["sigmoid", "silu", "sign", "cos"]),
       mean=st.lists(st.floats(-2, 2), min_size=1, max_size=3), data=st.data(),
       k_max=st.integers(0, 3), p_max=st.integers(0, 2), seed=SEEDS)
def test_wick_coefficients_agree_with_monte_carlo(act, mean, data, k_max, p_max, seed):
    """w[p, k] = sigma^-k E[phi(mu + sigma Z)^p He_k(Z)] (Gaussian integration by parts)."""
    var = data.draw(st.lists(st.floats(0.1, 4.0), min_size=len(mean), max_size=len(mean)))
    w = wick_table(act, mean, var, k_max, p_max)
    assert w.shape == (p_max + 1, k_max + 1, len(mean))
    assert_finite(w, act)
    np.testing.assert_array_equal(w[0, 0], 1.0)
    if k_max:
        np.testing.assert_array_equal(w[0, 1:], 0.0)
    from symscale.activations import activation
    phi = activation(act)
    z = np.random.default_rng(seed).standard_normal(20_000)
    for i, (m, v) in enumerate(zip(mean, var)):
        s = math.sqrt(v)
        f = phi(m + s * z)
        for p in range(1, p_max + 1):
            for k in range(k_max + 1):
                coef = [0] * k + [1]
                he = np.polynomial.hermite_e.hermeval(z, coef)
                # sign(m + s z) is 1 in every draw when P(< 0) = 1e-8: bound on the bulk
                bound = bulk_max(lambda t: phi(m + s * t) ** p
                                 * np.polynomial.hermite_e.hermeval(t, coef)) / s ** k
                mc_check(w[p, k, i], f ** p * he / s ** k, bound=bound,
                         what=f"w[{p},{k}] of {act} at mean {m}, var {v}")


@given(act=st.sampled_from(["relu", "abs", "step", "sign", "leaky_relu", "identity"]),
       mean=st.floats(-3, 3), var=st.floats(0.05, 9.0), k_max=st.integers(0, 3),
       p_max=st.integers(0, 3))
def test_wick_exact_and_quadrature_agree(act, mean, var, k_max, p_max):
    exact = wick_table(act, [mean], [var], k_max, p_max, method="exact")
    quad = wick_table(act, [mean], [var], k_max, p_max, method="quadrature")
    sd = math.sqrt(var)
    for p in range(p_max + 1):
        for k in range(k_max + 1):
            natural = sd ** -k * math.sqrt(math.factorial(k)) * max(
                1.0, (abs(mean) + 3 * sd) ** p)
            assert abs(exact[p, k, 0] - quad[p, k, 0]) <= 1e-9 * natural, \
                (act, mean, var, p, k, exact[p, k, 0], quad[p, k, 0])


@given(mlp=mlps(depth=st.just(0)), theta=st.floats(-3, 3), K=st.sampled_from([2, 3]))
def test_tail_probability_of_a_gaussian_layer_is_exact(mlp, theta, K):
    """Output of an affine map of N(0, I): P(z_i > theta) = Phi((b_i - theta) / sd_i)."""
    est = tail_probability(mlp, 1, theta, K=K)
    W, b = mlp.weights[0], mlp.biases[0]
    sd = np.sqrt(np.sum(W * W, axis=1))
    expected = ndtr((b - theta) / sd)
    p = np.asarray(est.probability)
    assert np.all((p >= 0) & (p <= 1))
    np.testing.assert_allclose(p, expected, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# bad input

MLP = random_mlp(2, "relu", width=4, seed=0)


@given(name=st.sampled_from(["width", "depth", "input_dim", "output_dim", "bias_var",
                             "weight_var", "init"]), data=st.data())
def test_random_mlp_rejects_bad_arguments(name, data):
    bad = data.draw({"width": bad_int(1), "depth": bad_int(0),
                     "input_dim": bad_int(1, none_ok=True),
                     "output_dim": bad_int(1, none_ok=True), "bias_var": bad_nonnegative,
                     "weight_var": without_none(bad_positive),
                     "init": st.sampled_from(["glorot", 1])}[name])
    kw = {"width": 4, "depth": 1, name: bad}
    assert_bad_input(name, lambda: random_mlp(**kw))


@given(name=st.sampled_from(["K", "variant"]), data=st.data())
def test_propagate_rejects_bad_estimators(name, data):
    bad = data.draw(st.one_of(bad_int(1), st.just(5)) if name == "K"
                    else st.sampled_from(["fancy", None, 2]))
    assert_bad_input(name, lambda: propagate(MLP, **{name: bad}))


@given(bad=st.sampled_from([0, -1, 1.5, True, "1", 99]))
def test_propagate_rejects_bad_upto(bad):
    assert_bad_input("upto", lambda: propagate(MLP, upto=bad))


@given(name=st.sampled_from(["n_samples", "batch", "seed"]), data=st.data())
def test_monte_carlo_rejects_bad_arguments(name, data):
    bad = data.draw({"n_samples": bad_int(2), "batch": bad_int(1),
                     "seed": st.sampled_from([-1, 2.5, "0", True])}[name])
    kw = {"n_samples": 10, name: bad}
    assert_bad_input(name, lambda: monte_carlo(MLP, **kw))


def test_monte_carlo_rejects_a_non_network():
    assert_bad_input("mlp", lambda: monte_carlo("relu", 10))


@given(name=st.sampled_from(["mean", "var", "k_max", "p_max", "method"]), data=st.data())
def test_wick_table_rejects_bad_arguments(name, data):
    bad = data.draw({"mean": st.one_of(bad_real, st.just(np.ones((2, 2)))),
                     "var": st.sampled_from([0.0, -1.0, float("nan"), "1", None, True]),
                     "k_max": bad_int(0), "p_max": bad_int(0),
                     "method": st.sampled_from(["exactly", None])}[name])
    kw = {"mean": [0.0], "var": [1.0], "k_max": 1, "p_max": 1, name: bad}
    assert_bad_input(name, lambda: wick_table("relu", kw.pop("mean"), kw.pop("var"), **kw))


@given(name=st.sampled_from(["theta", "layer"]), data=st.data())
def test_tail_probability_rejects_bad_arguments(name, data):
    bad = data.draw(bad_real if name == "theta" else st.one_of(bad_int(1), st.just(99)))
    kw = {"layer": 1, "theta": 0.5, name: bad}
    assert_bad_input(name, lambda: tail_probability(MLP, **kw))


@given(name=st.sampled_from(["estimate", "truth", "var"]), data=st.data())
def test_mse_over_var_rejects_bad_arrays(name, data):
    bad = data.draw(st.sampled_from([np.array([np.nan, 1.0]), np.ones(3), "x", None]))
    kw = {"estimate": np.ones(2), "truth": np.zeros(2), "var": np.ones(2), name: bad}
    assert_bad_input(name, lambda: mse_over_var(**kw))
