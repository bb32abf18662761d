"""Deep NTK: the normalized NTK (float64 against mpmath within its own error bound), NTK Gram
matrices (symmetric, PSD, identical rows for duplicate inputs, the ReLU angle path against
the generic recursion), the empirical NTK against the infinite-width one by Monte Carlo, kernel
gradient flow, and typed errors for bad arguments."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import symscale as ss
from symscale.kernels.numeric import COLLINEAR_ULPS
from symscale.deep_ntk import (NTKMLP, PrecisionWarning, model_ntk, gradient_flow_predictor,
                               normalized_ntk, ntk_matrix, train_gd)

from .strategies import (SEEDS, assert_bad_input, assert_duplicate_rows_equal, assert_finite,
                         assert_psd, assert_symmetric, bad_int, bad_matrix, bad_nonnegative,
                         bad_positive, bad_real, correlations, inputs, mc_check,
                         sphere_inputs, without_none)

TWO_SLOPE = ["relu", "abs", "leaky_relu"]
SMOOTH = ["tanh", "erf", "gelu", "sin", "softplus", "sigmoid"]


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionWarning)
        return fn(*args, **kw)


@given(rho=correlations, depth=st.integers(1, 2000), act=st.sampled_from(TWO_SLOPE))
def test_normalized_ntk_is_a_correlation(rho, depth, act):
    v = _quiet(normalized_ntk, rho, depth, act)
    assert math.isfinite(v)
    assert abs(v) <= 1 + 1e-12, (rho, depth, v)
    if rho == 0.0:
        assert v == _quiet(normalized_ntk, -rho, depth, act)  # +0.0 and -0.0
    if rho == 1.0:
        assert v == pytest.approx(1.0, abs=1e-12)


@given(rho=st.lists(correlations, min_size=1, max_size=5), depth=st.integers(1, 300))
@example(rho=[-1.0, 0.998046875], depth=62)  # found by a fresh-machine run
def test_normalized_ntk_vectorized_equals_pointwise(rho, depth):
    vec = _quiet(normalized_ntk, np.array(rho), depth)
    for r, v in zip(rho, vec):
        # the same recursion, but numpy's SIMD arccos may round differently by array length
        # (0.998046875 at depth 62 moved by 4.5 ulps next to -1.0): equal within the
        # function's own round-off bound
        value, err = _quiet(normalized_ntk, r, depth, return_error=True)
        assert abs(value - v) <= err + 4 * np.finfo(float).eps, (r, depth, value, v, err)


@given(rho=st.floats(-1.0, 1.0 - 1e-9), depth=st.integers(1, 150))
def test_float64_normalized_ntk_is_within_its_error_bound_of_mpmath(rho, depth):
    value, err = _quiet(normalized_ntk, rho, depth, return_error=True)
    exact = float(normalized_ntk(rho, depth, dps=30))
    assert abs(value - exact) <= err + 4 * np.finfo(float).eps, (rho, depth, value, exact, err)


@given(rho=correlations, depth=st.integers(1, 12), act=st.sampled_from(SMOOTH))
def test_normalized_ntk_of_smooth_activations_is_finite_and_bounded(rho, depth, act):
    v = _quiet(normalized_ntk, rho, depth, act)
    assert math.isfinite(v)
    assert abs(v) <= 1 + 1e-9, (rho, depth, act, v)


@given(X=sphere_inputs(), depth=st.integers(1, 50),
       act=st.sampled_from(["relu", "relu", "tanh", "erf"]), normalized=st.booleans())
def test_ntk_matrix_is_symmetric_psd_with_identical_duplicate_rows(X, depth, act, normalized):
    K = ntk_matrix(X, depth, act, normalized=normalized)
    assert_finite(K, "ntk")
    assert_symmetric(K, 1e-12, "ntk")
    assert_psd(K, what="ntk")
    assert_duplicate_rows_equal(K, X, rtol=1e-12, what="ntk")
    if normalized:
        assert np.all(np.diag(K) == 1.0)
        assert np.all(np.abs(K) <= 1 + 1e-12)


@given(X=sphere_inputs(), depth=st.integers(1, 30))
@example(X=np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 2e-8]]), depth=7)
def test_relu_angle_path_agrees_with_the_generic_recursion(X, depth):
    fast = ntk_matrix(X, depth, "relu", normalized=False)
    _, generic = ss.mlp_kernels(X * np.sqrt(X.shape[1] / 2.0), depth, "relu", weight_var=2.0)
    # the generic path reads angles off the rounded Gram X X^T: documented "accurate to about
    # 1e-8" in the normalized NTK (rows 1e-8 apart round to correlation 1 there, not in the
    # angle path), i.e. 1e-8 (L + 1) in the raw one. Pairs with 1 - rho^2 <= 16 ulps count as
    # collinear there (as in dual_kernel_numeric), i.e. an angle up to theta_max =
    # sqrt(16 eps) = 6e-8 is read as 0, and dTheta/dtheta at 0 is -L (L + 1)/(2 pi) (each layer's
    # derivative factor is 1 - theta/pi): rows 2e-8 apart at depth 7 differ by 1.78e-7 (found by
    # a fresh-machine run; predicted 8.9 * 2e-8)
    theta_max = math.sqrt(COLLINEAR_ULPS * np.finfo(float).eps)
    collinear = depth * (depth + 1) / (2 * math.pi) * theta_max
    np.testing.assert_allclose(fast, generic, rtol=1e-9, atol=2e-8 * (depth + 1) + collinear)


@given(X=inputs(max_points=3, max_dim=3, scale=st.sampled_from([0.7, 1.0, 1.3]),
                zero_rows=False),
       act=st.sampled_from(["relu", "tanh", "erf", "gelu"]),
       ws=st.sampled_from([1.0, math.sqrt(2.0)]), seed=SEEDS)
@example(X=np.array([[-0.7, 0.0, 8.34465027e-08], [0.0, 0.0, 0.0], [0.7, 0.0, 0.0]]),
         act="relu", ws=1.0, seed=0)  # found by a fresh-machine run
def test_one_layer_empirical_ntk_agrees_with_the_infinite_ntk_by_monte_carlo(X, act, ws, seed):
    """Depth 1: the empirical NTK is an average of iid neuron terms, so its mean is the
    infinite-width NTK at any width."""
    d = X.shape[1]
    rng = np.random.default_rng(seed)
    samples = np.array([model_ntk(NTKMLP.init(1, act, d_in=d, width=8, weight_var=ws ** 2,
                                                    seed=int(s)), X)
                        for s in rng.integers(0, 2**31, size=300)])
    for K in samples[:3]:
        assert_symmetric(K, 1e-12, "empirical NTK")
        assert_psd(K, what="empirical NTK")
        assert_duplicate_rows_equal(K, X, rtol=1e-12, what="empirical NTK")
    _, theta = ss.mlp_kernels(X, 1, act, weight_var=ws ** 2)
    # each draw is PSD, so |K_ij| <= sqrt(K_ii K_jj) bounds draws the sample may not have seen
    # (x and nearly -x: relu'(u) relu'(v) = 1 with probability 4e-8 per neuron, so 300 networks
    # of width 8 all give 0 where the NTK is -3.1e-9; found by a fresh-machine run)
    diag = np.einsum("nii->ni", samples)
    bound = np.sqrt(np.einsum("ni,nj->nij", diag, diag)).max(axis=0)
    mc_check(theta / ws ** 2, samples, what=f"empirical NTK of {act}", bound=bound)


@st.composite
def flows(draw):
    X = draw(sphere_inputs(P_max=5))
    K = ntk_matrix(X, draw(st.integers(1, 10)))
    n = len(X)
    Y = np.array(draw(st.lists(st.floats(-2, 2), min_size=n, max_size=n)))
    return X, K, Y


@given(flow=flows(), lr=st.sampled_from([0.1, 1.0, 3.0]))
def test_gradient_flow_residual_decreases_and_starts_at_the_targets(flow, lr):
    X, K, Y = flow
    t = np.array([0.0, 0.5, 2.0, 10.0, 1e3, 1e300])
    res = gradient_flow_predictor(K, K, Y, t, lr=lr)
    assert_finite(res.f_train, "f_train")
    assert_finite(res.residual, "residual")
    np.testing.assert_allclose(res.residual[0], Y, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.f_train[0], 0.0, atol=1e-12)
    norms = np.linalg.norm(res.residual, axis=1)
    assert np.all(np.diff(norms) <= 1e-12 * (1 + norms[0])), norms
    # train and test predictions coincide when the test points are the training points, up to
    # the conditioning of K (the test path applies K^-1; near-duplicate inputs: cond 1e12)
    # (eigenvalues below n eps lambda_max are documented null directions: not inverted)
    ev = np.linalg.eigvalsh(K)
    kept = ev[ev > len(K) * np.finfo(float).eps * ev[-1]]
    cond = ev[-1] / kept.min()
    tol = 1e-8 + 100 * np.finfo(float).eps * cond * np.abs(Y).max()
    np.testing.assert_allclose(res.f_test, res.f_train, rtol=1e-8, atol=tol)


# ---------------------------------------------------------------------------------------------
# bad input

X_SPHERE = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])


@given(bad=st.one_of(bad_real, st.sampled_from([1.5, -1.0000001, [0.5, 2.0]])))
def test_normalized_ntk_rejects_bad_rho0(bad):
    assert_bad_input("rho0", lambda: normalized_ntk(bad, 3))


@given(bad=bad_int(1), fn=st.sampled_from(["normalized", "matrix"]))
def test_depth_must_be_a_positive_integer(bad, fn):
    call = (lambda: normalized_ntk(0.5, bad)) if fn == "normalized" else \
        (lambda: ntk_matrix(X_SPHERE, bad))
    assert_bad_input("depth", call)


@given(bad=bad_int(5, none_ok=True))
def test_normalized_ntk_rejects_bad_dps(bad):
    assert_bad_input("dps", lambda: normalized_ntk(0.5, 3, dps=bad))


@given(bad=st.one_of(bad_matrix((3, 2)), st.just(np.array([[1.0, 1.0], [0.6, 0.8]]))))
def test_ntk_matrix_rejects_bad_inputs(bad):
    assert_bad_input("X", lambda: ntk_matrix(bad, 2))


@given(name=st.sampled_from(["lr", "t"]), data=st.data())
def test_gradient_flow_rejects_bad_arguments(name, data):
    bad = data.draw(bad_positive if name == "lr" else bad_nonnegative)
    K = ntk_matrix(X_SPHERE, 2)
    kw = {"lr": 1.0, "t": 1.0, name: bad}
    assert_bad_input(name, lambda: gradient_flow_predictor(K, K, np.ones(3), **kw))


@given(bad=st.sampled_from([np.array([[1.0, 0.5], [0.2, 1.0]]), np.array([[1.0, 3.0],
                                                                          [3.0, 1.0]]),
                            np.array([[np.nan, 0.0], [0.0, 1.0]]), np.ones(2)]))
def test_gradient_flow_rejects_bad_kernels(bad):
    assert_bad_input("K_train", lambda: gradient_flow_predictor(bad, None, np.ones(2), 1.0))


@given(name=st.sampled_from(["d_in", "width", "depth", "weight_var", "weight_std"]),
       data=st.data())
def test_ntkmlp_init_rejects_bad_arguments(name, data):
    # weight_var=None is the default and weight_std=None "not given": not bad values
    bad = data.draw(without_none(bad_positive) if name.startswith("weight") else bad_int(1))
    kw = {"d_in": 2, "width": 4, "depth": 1, name: bad}
    assert_bad_input(name, lambda: NTKMLP.init(**kw))


@given(name=st.sampled_from(["lr", "steps", "record_every"]), data=st.data())
def test_train_gd_rejects_bad_arguments(name, data):
    bad = data.draw({"lr": bad_positive, "steps": bad_int(0),
                     "record_every": bad_int(1)}[name])
    kw = {"lr": 0.1, "steps": 2, name: bad}
    model = NTKMLP.init(1, d_in=2, width=4)
    assert_bad_input(name, lambda: train_gd(model, X_SPHERE, np.ones(3), **kw))


@given(bad=bad_matrix((3, 2)))
def test_empirical_ntk_rejects_bad_inputs(bad):
    assert_bad_input("X", lambda: model_ntk(NTKMLP.init(1, d_in=2, width=4), bad))
