"""propagate over a stack of networks (issue 17 item 2): equal to separate calls to round-off
for every estimator, the same FLOPs per network, per-network layers, typed errors naming the
stack's argument and the failing network."""

import numpy as np
import pytest

from symscale.cumulants import RandomMLP, propagate
from symscale.cumulants.state import Cumulants, Tracking, linear_step

ESTIMATORS = [(1, "basic", False), (2, "basic", False), (2, "gaussian", False),
              (2, "augmented", False), (3, "basic", False), (3, "augmented", False),
              (4, "basic", False), (3, "basic", True), (4, "basic", True)]


def _stack(width, n=8, depth=3, activation="relu"):
    # every other network has biases: a stack mixes zero and nonzero biases
    return [RandomMLP.random(depth, activation, width=width, seed=s,
                             bias_var=0.1 if s % 2 else 0.0) for s in range(n)]


@pytest.mark.parametrize("K, variant, factored", ESTIMATORS,
                         ids=lambda v: str(v))
def test_stack_of_8_equals_8_separate_calls(K, variant, factored):
    nets = _stack(8 if (K == 4 and not factored) else 12)
    stacked = propagate(nets, K=K, variant=variant, factored=factored)
    assert stacked.batch == (8,) and stacked.estimate.shape == (8, nets[0].output_dim)
    for b, net in enumerate(nets):
        one = propagate(net, K=K, variant=variant, factored=factored)
        np.testing.assert_allclose(stacked.estimate[b], one.estimate, rtol=1e-13, atol=1e-15)
        for mine, theirs in zip(stacked.layers, one.layers):
            got = mine.network(b)
            np.testing.assert_allclose(got.mean, theirs.mean, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(got.variances(), theirs.variances(), rtol=1e-13,
                                       atol=1e-15)
            for d in theirs.full:
                np.testing.assert_allclose(got.full[d], theirs.full[d], rtol=1e-12, atol=1e-14)
            for d in theirs.slices:
                for p in theirs.slices[d]:
                    np.testing.assert_allclose(got.slices[d][p], theirs.slices[d][p],
                                               rtol=1e-12, atol=1e-14)
    # the networks differ, so the stack is not one network repeated
    assert not np.allclose(stacked.estimate[0], stacked.estimate[1])


@pytest.mark.parametrize("K", [1, 2, 3])
def test_stack_flops_are_the_sum_of_the_single_calls(K):
    nets = _stack(12, n=4, activation="tanh")
    stacked = propagate(nets, K=K)
    single = sum(propagate(m, K=K).flops for m in nets)
    # equal up to the zero biases a stack adds and numpy's count of batched einsum paths
    assert abs(stacked.flops - single) <= 0.01 * single


@pytest.mark.parametrize("K, step, calls", [(3, "_nonlinear", 2), (4, "_nonlinear4", 3)])
def test_factored_runs_a_stack_in_batched_products(monkeypatch, K, step, calls):
    """One factored nonlinear step per layer for the whole stack (not one per network), with
    the per-network FLOPs, the upto path (tails read its slices) and the overflow message."""
    from symscale.cumulants import factored, factored_fourth

    module = factored if K == 3 else factored_fourth
    seen = []
    real = getattr(module, step)
    monkeypatch.setattr(module, step,
                        lambda z, *a, **k: seen.append(z.batch) or real(z, *a, **k))
    nets = _stack(10 if K == 3 else 6, n=4, depth=3, activation="tanh")
    stacked = propagate(nets, K=K, factored=True)
    # K = 3 skips the step before the mean-only output (its mean needs only the diagonal)
    assert seen == [(4,)] * calls
    single = [propagate(m, K=K, factored=True) for m in nets]
    assert abs(stacked.flops - sum(r.flops for r in single)) <= 0.01 * stacked.flops
    upto = propagate(nets, K=K, factored=True, upto=2)
    for b, net in enumerate(nets):
        one = propagate(net, K=K, factored=True, upto=2)
        for a, c in zip(upto.layers[-1].network(b).arrays(), one.layers[-1].arrays()):
            np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-14)
    W = [w * (1e200 if i == 0 else 1.0) for i, w in enumerate(nets[1].weights)]
    nets[1] = RandomMLP.from_weights(W, None, "tanh")
    with pytest.raises(FloatingPointError, match="network 1"):
        propagate(nets, K=K, factored=True)


@pytest.mark.parametrize("K, variant", [(2, "augmented"), (3, "basic"), (3, "augmented")])
def test_stack_slice_contractions_run_as_batched_matmuls(monkeypatch, K, variant):
    """Every slice contraction of a stack's linear step is planned as batched matmuls: numpy's
    einsum runs a stack in its generic loop (the batch axes are kept on both operands), which
    made 8 networks of width 64 cost 13x one (K = 2 augmented)."""
    from symscale.cumulants import state

    plans = []
    real = state._stack_plan
    monkeypatch.setattr(state, "_stack_plan", lambda *a: plans.append(real(*a)) or plans[-1])
    propagate(_stack(6, n=3), K=K, variant=variant)
    assert plans and all(p is not None for p in plans)


@pytest.mark.parametrize("spec, shapes, planned", [
    ("...cd,...ac,...bd->...ab", [(3, 5, 5), (3, 4, 5), (3, 2, 5)], True),
    ("...c,...ac,...bc->...ab", [(3, 5), (3, 4, 5), (3, 2, 5)], True),
    ("...cd,...ac,...ad,...bc->...ab", [(3, 5, 6), (3, 4, 5), (3, 4, 6), (3, 2, 5)], True),
    ("...bc,...ab,...ac->...a", [(3, 5, 6), (3, 4, 5), (3, 4, 6)], True),
    ("...abc,...ad,...be,...cf->...fed", [(2, 3, 4, 5, 6), (2, 3, 4, 3), (2, 3, 5, 2),
                                          (2, 3, 6, 4)], True),
    ("...ab,...bc,...cd->...", [(3, 2, 4), (3, 4, 5), (3, 5, 2)], True),
    ("...ab,...cd->...abcd", [(3, 2, 4), (3, 5, 6)], True),
    ("...abc,...ab->...c", [(3, 4, 5, 6), (3, 4, 5)], True),  # 'a', 'b' summed in a product
    ("...aab,...b->...a", [(3, 4, 4, 5), (3, 5)], False),  # a repeated index: einsum's loop
    ("...ab,...b->...a", [(3, 4, 5), (5,)], False),  # batch shapes differ: einsum's loop
])
def test_stack_einsum_equals_numpy_einsum(spec, shapes, planned):
    from symscale.cumulants.state import _stack_einsum, _stack_plan

    rng = np.random.default_rng(7)
    ops = [rng.standard_normal(s) for s in shapes]
    got = _stack_einsum(spec, *ops)
    want = np.einsum(spec, *ops)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    assert (_stack_plan(spec, tuple(shapes)) is not None) == planned


def test_upto_and_tanh_work_on_a_stack():
    nets = _stack(10, n=3, activation="tanh")
    stacked = propagate(nets, K=3, upto=2)
    for b, net in enumerate(nets):
        np.testing.assert_allclose(stacked.estimate[b], propagate(net, K=3, upto=2).estimate,
                                   rtol=1e-13, atol=1e-15)


def test_a_stack_of_one_equals_the_single_call():
    net = RandomMLP.random(2, "relu", width=16, seed=3)
    np.testing.assert_allclose(propagate([net], K=2).estimate[0], propagate(net, K=2).estimate,
                               rtol=1e-13, atol=1e-15)


def test_bad_stacks_are_typed_errors_naming_the_argument():
    nets = _stack(8, n=2)
    with pytest.raises(ValueError, match="empty"):
        propagate([], K=2)
    with pytest.raises(TypeError, match=r"mlp\[1\]"):
        propagate([nets[0], "relu"], K=2)
    with pytest.raises(ValueError, match=r"mlp\[1\].*widths"):
        propagate([nets[0], RandomMLP.random(3, "relu", width=9, seed=0)], K=2)
    with pytest.raises(ValueError, match=r"mlp\[1\].*activations"):
        propagate([nets[0], RandomMLP.random(3, "tanh", width=8, seed=0)], K=2)
    with pytest.raises(TypeError, match="mlp must be a RandomMLP"):
        propagate("relu", K=2)


def test_overflow_names_the_network_of_the_stack():
    nets = _stack(8, n=3)
    W = [w * (1e200 if i == 0 else 1.0) for i, w in enumerate(nets[2].weights)]
    nets[2] = RandomMLP.from_weights(W, None, "relu")
    with pytest.raises(FloatingPointError, match="network 2"):
        propagate(nets, K=2)


def test_cumulants_of_a_stack_and_their_linear_step():
    t = Tracking.for_estimator(3)
    c = Cumulants.standard_gaussian(4, t, batch=3)
    assert c.batch == (3,) and c.full[2].shape == (3, 4, 4) and c.network(2).batch == ()
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 5, 4))
    out, _ = linear_step(c, W, None, t)
    for b in range(3):
        one, _ = linear_step(c.network(b), W[b], None, t)
        np.testing.assert_allclose(out.network(b).full[3], one.full[3], atol=1e-14)
        np.testing.assert_allclose(out.network(b).slices[4][(2, 2)], one.slices[4][(2, 2)],
                                   atol=1e-13)
    with pytest.raises(ValueError, match=r"W must have shape \(3, n_out, 4\)"):
        linear_step(c, W[0], None, t)
    with pytest.raises(ValueError, match="b must have shape"):
        linear_step(c, W, np.zeros(5), t)
    with pytest.raises(ValueError, match="stack"):
        c.network(0).network(0)
    with pytest.raises(ValueError, match="b must be"):
        c.network(3)
