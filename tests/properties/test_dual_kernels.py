"""Dual kernels of every registered activation: finiteness, symmetry, Cauchy-Schwarz, PSD Gram
matrices, Monte Carlo agreement, and typed errors for bad arguments."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import symscale as ss
from symscale.kernels import cross_kernel_numeric, input_kernel

from .strategies import (ACTS, BOUNDED, SEEDS, activations, assert_bad_input,
                         assert_duplicate_rows_equal, assert_finite, assert_psd,
                         assert_symmetric, bad_int, bad_nonnegative, bad_real, bulk_max, covariances,
                         inputs, is_exp_like, is_heavy, label, log_uniform, mc_check,
                         moderate_variances)

N_MC = 20_000


def _kernel(act, q11, q12, q22, derivative=False):
    """The numeric dual kernel, or None where float64 genuinely overflows (exp-like only)."""
    try:
        return ss.dual_kernel_numeric(act, q11, q12, q22, derivative=derivative)
    except OverflowError:
        if is_exp_like(act):
            return None
        raise


@given(act=activations, cov=covariances(), derivative=st.booleans())
def test_dual_kernel_is_finite_symmetric_and_obeys_cauchy_schwarz(act, cov, derivative):
    act = ACTS[act]
    q11, q12, q22 = cov
    v = _kernel(act, q11, q12, q22, derivative)
    if v is None:
        return
    assert math.isfinite(v), f"{label(act)} at {cov}: {v}"
    v11 = _kernel(act, q11, q11, q11, derivative)
    v22 = _kernel(act, q22, q22, q22, derivative)
    if v11 is None or v22 is None:
        return
    assert v11 >= 0 and v22 >= 0, (label(act), cov, v11, v22)
    bound = math.sqrt(v11 * v22)
    swapped = ss.dual_kernel_numeric(act, q22, q12, q11, derivative=derivative)
    assert swapped == pytest.approx(v, rel=1e-12, abs=1e-15 * bound + 1e-300), (label(act), cov)
    assert abs(v) <= bound * (1 + 1e-8) + 1e-300, \
        f"{label(act)} at {cov}: |V12| = {abs(v)!r} > sqrt(V11 V22) = {bound!r}"
    if act.name in BOUNDED and not derivative:  # |phi| <= 1
        assert abs(v) <= 1 + 1e-12, (label(act), cov, v)


@given(act=activations, q11=st.one_of(moderate_variances, st.sampled_from([0.0, 1e-12, 1e8])),
       q22=st.one_of(moderate_variances, st.sampled_from([0.0, 1e-12, 1e8])),
       derivative=st.booleans())
def test_signed_zero_covariance_gives_the_same_kernel(act, q11, q22, derivative):
    act = ACTS[act]
    plus = _kernel(act, q11, 0.0, q22, derivative)
    if plus is None:
        return
    minus = ss.dual_kernel_numeric(act, q11, -0.0, q22, derivative=derivative)
    assert plus == minus, (label(act), q11, q22, plus, minus)


@given(act=activations, covs=st.lists(covariances(var=log_uniform(1e-4, 1e4)), min_size=2,
                                      max_size=5), derivative=st.booleans())
def test_vectorized_evaluation_equals_pointwise(act, covs, derivative):
    act = ACTS[act]
    q11, q12, q22 = (np.array(c) for c in zip(*covs))
    vec = _kernel(act, q11, q12, q22, derivative)
    if vec is None:
        return
    v11 = _kernel(act, q11, q11, q11, derivative)
    v22 = _kernel(act, q22, q22, q22, derivative)
    scale = np.sqrt(v11 * v22) if v11 is not None and v22 is not None else np.abs(vec)
    for i, (a, b, c) in enumerate(covs):
        one = ss.dual_kernel_numeric(act, a, b, c, derivative=derivative)
        # round-off of the scale sqrt(V11 V22): an exact zero may come out as 1e-17 either way
        assert one == pytest.approx(vec[i], rel=1e-13, abs=1e-15 * scale[i] + 1e-300), \
            (label(act), covs[i])


@given(act=activations, X=inputs(), weight_var=st.sampled_from([0.5, 1.0, 2.0]),
       derivative=st.booleans())
def test_gram_matrices_are_psd_with_identical_rows_for_duplicate_inputs(act, X, weight_var,
                                                                        derivative):
    act = ACTS[act]
    S = input_kernel(X, weight_var)
    d = np.diag(S).copy()
    K = _kernel(act, d[:, None], S, d[None, :], derivative)
    if K is None:
        return
    what = f"{'dV' if derivative else 'V'}[{label(act)}]"
    assert_finite(K, what)
    assert_symmetric(K, 1e-12, what)
    assert_psd(K, what=what)
    assert_duplicate_rows_equal(K, X, what=what)


def _pairs(q11, q12, q22, n, seed):
    rng = np.random.default_rng(seed)
    z1, z2 = rng.standard_normal((2, n))
    rho = float(np.clip(q12 / math.sqrt(q11 * q22), -1.0, 1.0))
    u = math.sqrt(q11) * z1
    v = math.sqrt(q22) * (rho * z1 + math.sqrt(max(1.0 - rho * rho, 0.0)) * z2)
    return u, v


@given(act=activations, cov=covariances(var=moderate_variances), derivative=st.booleans(),
       seed=SEEDS)
def test_dual_kernel_agrees_with_monte_carlo(act, cov, derivative, seed):
    act = ACTS[act]
    q11, q12, q22 = cov
    if is_heavy(act):  # the sample SE of heavy-tailed products is itself unreliable
        q11, q12, q22 = q11 / 16, q12 / 16, q22 / 16
    target = act.derivative() if derivative else act
    u, v = _pairs(q11, q12, q22, N_MC, seed)
    value = ss.dual_kernel_numeric(act, q11, q12, q22, derivative=derivative)
    bound = bulk_max(target, 0.0, math.sqrt(q11)) * bulk_max(target, 0.0, math.sqrt(q22))
    mc_check(value, target(u) * target(v), what=f"V[{target.label}] at {(q11, q12, q22)}",
             bound=bound)


@given(act=activations, phi2=activations, cov=covariances(var=moderate_variances), seed=SEEDS)
def test_cross_kernel_is_swap_symmetric_and_agrees_with_monte_carlo(act, phi2, cov, seed):
    act = ACTS[act]
    phi2 = ACTS[phi2]
    q11, q12, q22 = cov
    if is_heavy(act) or is_heavy(phi2):
        q11, q12, q22 = q11 / 16, q12 / 16, q22 / 16
    value = cross_kernel_numeric(act, phi2, q11, q12, q22)
    swapped = cross_kernel_numeric(phi2, act, q22, q12, q11)
    assert swapped == pytest.approx(value, rel=1e-10, abs=1e-14), (label(act), label(phi2), cov)
    u, v = _pairs(q11, q12, q22, N_MC, seed)
    bound = bulk_max(act, 0.0, math.sqrt(q11)) * bulk_max(phi2, 0.0, math.sqrt(q22))
    mc_check(value, act(u) * phi2(v), what=f"E[{label(act)}(u) {label(phi2)}(v)] at {cov}",
             bound=bound)


@given(act=activations, mean=st.floats(-2.0, 2.0), var=moderate_variances,
       power=st.integers(1, 3), seed=SEEDS)
def test_gaussian_moment_agrees_with_monte_carlo(act, mean, var, power, seed):
    act = ACTS[act]
    if is_heavy(act):
        var, mean = var / 16, mean / 4
    value = ss.gaussian_moment_numeric(act, mean, var, power)
    assert math.isfinite(value)
    u = mean + math.sqrt(var) * np.random.default_rng(seed).standard_normal(N_MC)
    # relu(u) is 0 in every draw when P(u > 0) = 3e-8: bound the rare draws on the bulk
    bound = bulk_max(act, mean, math.sqrt(var)) ** power
    mc_check(value, act(u) ** power, what=f"E[{label(act)}(u)^{power}], u~N({mean}, {var})",
             bound=bound)


@given(act=activations, mean=st.sampled_from([0.0, -0.0, 1.5, -3.0]), power=st.integers(1, 3))
def test_gaussian_moment_at_zero_variance_is_the_point_value(act, mean, power):
    act = ACTS[act]
    value = ss.gaussian_moment_numeric(act, mean, 0.0, power)
    exact = float(act(np.array(mean))) ** power
    assert value == pytest.approx(exact, rel=1e-14, abs=1e-300), (label(act), mean, power)
    tiny = ss.gaussian_moment_numeric(act, mean, 1e-300, power)
    assert math.isfinite(tiny)


@given(act=activations, var=st.one_of(moderate_variances, st.sampled_from([0.0, 1e-12, 1e6])),
       power=st.integers(1, 3))
def test_gaussian_moment_signed_zero_mean(act, var, power):
    act = ACTS[act]
    try:
        plus = ss.gaussian_moment_numeric(act, 0.0, var, power)
    except OverflowError:
        if is_exp_like(act) or act.name in ("monomial", "polynomial"):
            return
        raise
    assert plus == ss.gaussian_moment_numeric(act, -0.0, var, power), (label(act), var)


# ---------------------------------------------------------------------------------------------
# bad input: a typed error naming the argument

GOOD = dict(q11=1.0, q12=0.5, q22=2.0)


@given(name=st.sampled_from(["q11", "q22"]), bad=bad_nonnegative)
def test_dual_kernel_numeric_rejects_bad_variances(name, bad):
    args = dict(GOOD, **{name: bad})
    assert_bad_input(name, lambda: ss.dual_kernel_numeric("tanh", **args))


@given(bad=st.one_of(bad_real, st.sampled_from([1.5, -1.5, 1e300])))
def test_dual_kernel_numeric_rejects_bad_covariance(bad):
    args = dict(GOOD, q12=bad)
    assert_bad_input("q12", lambda: ss.dual_kernel_numeric("relu", **args))


@given(bad=bad_int(8, none_ok=True))
def test_dual_kernel_numeric_rejects_bad_deg(bad):
    assert_bad_input("deg", lambda: ss.dual_kernel_numeric("tanh", 1.0, 0.5, 1.0, deg=bad))


@given(bad=st.sampled_from(["gauss", None, 3, ""]))
def test_dual_kernel_numeric_rejects_bad_method(bad):
    assert_bad_input("method", lambda: ss.dual_kernel_numeric("tanh", 1.0, 0.5, 1.0,
                                                              method=bad))


@given(bad=st.sampled_from([np.array([1.0, 2.0, 3.0]), np.ones((2, 3))]))
def test_dual_kernel_numeric_rejects_unbroadcastable_shapes(bad):
    assert_bad_input("q12", lambda: ss.dual_kernel_numeric("relu", np.ones(2), bad, np.ones(2)))


@given(name=st.sampled_from(["mean", "var"]), data=st.data())
def test_gaussian_moment_numeric_rejects_bad_moments(name, data):
    bad = data.draw(bad_nonnegative if name == "var" else bad_real)
    args = {"mean": 0.5, "var": 1.0, name: bad}
    assert_bad_input(name, lambda: ss.gaussian_moment_numeric("tanh", args["mean"], args["var"]))


@given(bad=bad_int(1))
def test_gaussian_moment_rejects_bad_power(bad):
    assert_bad_input("power", lambda: ss.gaussian_moment_numeric("relu", 0.0, 1.0, power=bad))
    assert_bad_input("power", lambda: ss.gaussian_moment("relu", power=bad))


@given(name=st.sampled_from(["n_samples", "n_points"]), data=st.data())
def test_check_dual_kernel_rejects_bad_counts(name, data):
    bad = data.draw(bad_int(2 if name == "n_samples" else 1))
    assert_bad_input(name, lambda: ss.check_dual_kernel("tanh", **{name: bad}))
