"""NNGP/NTK recursions (mlp_kernels, resnet_kernels, input_kernel): symmetric PSD kernels,
identical rows for duplicate inputs, permutation equivariance, one layer against Monte Carlo,
the layer map against the dual kernels, and typed errors for bad arguments."""

import math

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import symscale as ss
from symscale.kernels import input_kernel

from .strategies import (ACTS, SEEDS, activations, assert_bad_input, assert_duplicate_rows_equal,
                         assert_finite, assert_psd, assert_symmetric, bad_int, bad_matrix,
                         bad_nonnegative, bad_real, bulk_max, inputs, is_exp_like, is_heavy, label,
                         mc_check)

weight_vars = st.sampled_from([0.5, 1.0, 2.0, 3.0])
bias_vars = st.sampled_from([0.0, 0.0, 0.1, 1.0])
depths = st.integers(0, 4)


def _grows_superlinearly(act) -> bool:
    """Kernels that can genuinely leave float64 after a few layers (an OverflowError is fine)."""
    return is_exp_like(act) or act.name in ("monomial", "polynomial") or (
        act.name == "shaped" and act.params["base"].name in ("exp",))


def _run(fn, act, *args, **kw):
    try:
        return fn(*args, **kw)
    except (OverflowError, FloatingPointError):
        if _grows_superlinearly(act):
            return None
        raise


def _check_kernel(K, X, what):
    assert_finite(K, what)
    assert_symmetric(K, 1e-12, what)
    assert_psd(K, what=what)
    assert_duplicate_rows_equal(K, X, rtol=1e-12, what=what)


@given(act=activations, X=inputs(), depth=depths, w=weight_vars, b=bias_vars)
def test_mlp_kernels_are_symmetric_psd_with_identical_duplicate_rows(act, X, depth, w, b):
    act = ACTS[act]
    out = _run(ss.mlp_kernels, act, X, depth, act, weight_var=w, bias_var=b)
    if out is None:
        return
    nngp, ntk = out
    _check_kernel(nngp, X, f"NNGP[{label(act)}, depth {depth}]")
    _check_kernel(ntk, X, f"NTK[{label(act)}, depth {depth}]")
    # the NTK dominates the NNGP: Theta - Sigma is a sum of PSD terms
    assert_psd(ntk - nngp, rtol=1e-9, what=f"NTK - NNGP [{label(act)}]")


@given(act=activations, X=inputs(), depth=depths, w=weight_vars, b=bias_vars,
       branch=st.sampled_from([0.0, -0.0, 0.1, 0.5, 1.0, -1.0]))
def test_resnet_kernels_are_symmetric_psd_with_identical_duplicate_rows(act, X, depth, w, b,
                                                                         branch):
    act = ACTS[act]
    out = _run(ss.resnet_kernels, act, X, depth, act, branch_scale=branch, weight_var=w,
               bias_var=b)
    if out is None:
        return
    nngp, ntk = out
    _check_kernel(nngp, X, f"ResNet NNGP[{label(act)}, depth {depth}]")
    _check_kernel(ntk, X, f"ResNet NTK[{label(act)}, depth {depth}]")
    if branch == 0.0:  # no branch: the readout of the input kernel
        K0 = input_kernel(X, w, b)
        np.testing.assert_allclose(nngp, w * K0 + b, rtol=1e-14, atol=0)
        np.testing.assert_allclose(ntk, w * K0 + b + w * K0, rtol=1e-14, atol=0)


@given(act=activations, X=inputs(max_points=5), depth=depths, w=weight_vars, b=bias_vars,
       data=st.data())
def test_kernels_are_permutation_equivariant(act, X, depth, w, b, data):
    act = ACTS[act]
    perm = np.array(data.draw(st.permutations(range(len(X)))))
    out = _run(ss.mlp_kernels, act, X, depth, act, weight_var=w, bias_var=b)
    if out is None:
        return
    out_p = ss.mlp_kernels(X[perm], depth, act, weight_var=w, bias_var=b)
    for K, Kp in zip(out, out_p):
        scale = np.abs(K).max()
        np.testing.assert_allclose(Kp, K[np.ix_(perm, perm)], rtol=1e-12, atol=1e-14 * scale)


@given(act=activations, X=inputs(max_points=4), w=weight_vars, b=bias_vars)
@example(act="abs", X=np.array([[0.0, 0.0, 0.0], [-1.23499135, 0.0, 0.0], [0.0, 0.0, 0.0],
                                [2.68359375, 0.0, 0.0]]), w=1.0, b=1.0)  # found by a random run
def test_depth_zero_is_the_input_kernel(act, X, w, b):
    act = ACTS[act]
    nngp, ntk = ss.mlp_kernels(X, 0, act, weight_var=w, bias_var=b)
    K0 = input_kernel(X, w, b)
    assert np.array_equal(nngp, K0) and np.array_equal(ntk, K0)
    # w x.x'/d + b in another order of operations: rounding of the d-term dot product and the
    # sum, relative to the size of the terms (b + w x.x'/d may cancel: 1 - 1.1047 = -0.1047)
    d = X.shape[1]
    terms = w * (np.abs(X) @ np.abs(X).T) / d + b
    assert np.all(np.abs(K0 - (w * (X @ X.T) / d + b)) <= (d + 4) * np.finfo(float).eps * terms)


@given(act=activations, X=inputs(max_points=4, scale=st.sampled_from([0.3, 1.0, 2.0])),
       depth=st.integers(0, 3), w=weight_vars, b=bias_vars)
def test_one_more_layer_is_the_dual_kernel_map(act, X, depth, w, b):
    """Sigma_{L+1} = w V(Sigma_L) + b and Theta_{L+1} = Sigma_{L+1} + w V'(Sigma_L) Theta_L:
    the fused ReLU-type path against the generic dual kernels."""
    act = ACTS[act]
    out = _run(ss.mlp_kernels, act, X, depth, act, weight_var=w, bias_var=b)
    nxt = _run(ss.mlp_kernels, act, X, depth + 1, act, weight_var=w, bias_var=b)
    if out is None or nxt is None:
        return
    (S, T), (S1, T1) = out, nxt
    d = np.diag(S).copy()
    try:
        V = ss.dual_kernel_numeric(act, d[:, None], S, d[None, :])
        Vd = ss.dual_kernel_numeric(act, d[:, None], S, d[None, :], derivative=True)
    except OverflowError:
        return
    scale = np.abs(S1).max() + np.abs(T1).max()
    np.testing.assert_allclose(S1, w * V + b, rtol=1e-9, atol=1e-12 * scale)
    np.testing.assert_allclose(T1, w * V + b + w * Vd * T, rtol=1e-9, atol=1e-12 * scale)


@given(act=activations, tiny=st.floats(1e-200, 1e-150), big=st.floats(0.1, 3.0),
       depth=st.integers(1, 3))
def test_kernels_accept_inputs_whose_squares_underflow(act, tiny, big, depth):
    """A finite input with an entry of 1e-170 is valid: its Gram entries underflow to 0 (or a
    subnormal), which must not be refused as a non-PSD covariance or overflow 1/sqrt(q)."""
    act = ACTS[act]
    X = np.array([[big], [tiny], [0.0]])
    for fn in (ss.mlp_kernels, ss.resnet_kernels):
        out = _run(fn, act, X, depth, act)
        if out is None:
            continue
        for K in out:
            assert_finite(K, fn.__name__)
            assert_psd(K, what=fn.__name__)


@given(act=activations, X=inputs(max_points=4, max_dim=3, scale=st.sampled_from([0.5, 1.0]),
                                 zero_rows=False),
       w=weight_vars, b=bias_vars, seed=SEEDS)
def test_one_layer_nngp_and_ntk_agree_with_monte_carlo(act, X, w, b, seed):
    """Depth 1: Sigma = E[w phi(g) phi(g)^T + b], Theta = Sigma + w E[phi'(g) phi'(g)^T] * K0
    with g = sqrt(w/d) U x + sqrt(b) beta sampled directly."""
    act = ACTS[act]
    if is_heavy(act):
        X = X / 4
    P, d = X.shape
    n = 20_000
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, d)) @ X.T * math.sqrt(w / d)
    g += math.sqrt(b) * rng.standard_normal((n, 1))
    h, hd = act(g), act.derivative()(g)
    K0 = input_kernel(X, w, b)
    nngp_s = w * h[:, :, None] * h[:, None, :] + b
    ntk_s = nngp_s + w * hd[:, :, None] * hd[:, None, :] * K0
    nngp, ntk = ss.mlp_kernels(X, 1, act, weight_var=w, bias_var=b)
    # bounds of the draws on the bulk of each coordinate (rare draws are never seen)
    sd = np.sqrt(np.diag(K0))
    m, md = bulk_max(act, 0.0, sd), bulk_max(act.derivative(), 0.0, sd)
    mc_check(nngp, nngp_s, what=f"NNGP[{label(act)}] depth 1", bound=w * np.outer(m, m))
    mc_check(ntk, ntk_s, what=f"NTK[{label(act)}] depth 1",
             bound=w * np.outer(m, m) + w * np.outer(md, md) * np.abs(K0))


# ---------------------------------------------------------------------------------------------
# bad input

X_GOOD = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])


@given(bad=bad_matrix((3, 2)), fn=st.sampled_from(["mlp", "resnet", "input"]))
def test_kernels_reject_bad_inputs(bad, fn):
    call = {"mlp": lambda: ss.mlp_kernels(bad, 2, "relu"),
            "resnet": lambda: ss.resnet_kernels(bad, 2, "tanh"),
            "input": lambda: input_kernel(bad)}[fn]
    assert_bad_input("X", call)


@given(bad=bad_int(0), fn=st.sampled_from(["mlp", "resnet"]))
def test_kernels_reject_bad_depth(bad, fn):
    f = ss.mlp_kernels if fn == "mlp" else ss.resnet_kernels
    assert_bad_input("depth", lambda: f(X_GOOD, bad, "relu"))


@given(name=st.sampled_from(["weight_var", "bias_var"]), bad=bad_nonnegative,
       fn=st.sampled_from(["mlp", "resnet", "input"]))
def test_kernels_reject_bad_variances(name, bad, fn):
    call = {"mlp": lambda: ss.mlp_kernels(X_GOOD, 2, "erf", **{name: bad}),
            "resnet": lambda: ss.resnet_kernels(X_GOOD, 2, "erf", **{name: bad}),
            "input": lambda: input_kernel(X_GOOD, **{name: bad})}[fn]
    assert_bad_input(name, call)


@given(bad=bad_real)
def test_resnet_kernels_reject_bad_branch_scale(bad):
    assert_bad_input("branch_scale", lambda: ss.resnet_kernels(X_GOOD, 2, "relu",
                                                               branch_scale=bad))


@given(bad=st.sampled_from([3, None, 1.5, ["relu"]]))
def test_kernels_reject_non_activation(bad):
    assert_bad_input("activation", lambda: ss.mlp_kernels(X_GOOD, 1, bad))
